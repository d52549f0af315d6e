package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/engine"
)

// Version is set at link time (-ldflags "-X github.com/symmem/symmem/internal/cli.Version=v1.2.3").
var Version = "dev"

// NewCmdVersion prints the version of symmem and of what it embeds.
func NewCmdVersion(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print symmem's version and the versions of its embedded kernels",
		Example: "  symmem version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						rev = " (" + s.Value[:12] + ")"
					}
				}
			}
			fmt.Fprintf(streams.Out, "symmem %s%s %s/%s %s\n", Version, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
			fmt.Fprintf(streams.Out, "kernels: %s\n", engine.KernelSummary())
			return nil
		},
	}
}
