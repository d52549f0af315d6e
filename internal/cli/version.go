package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/pkg/kernels"
)

// NewCmdVersion prints the version of symmem and of what it embeds.
func NewCmdVersion(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print symmem's version, the commit it was built from and its time, and its kernels'",
		Example: "  symmem version\n  symmem --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(streams.Out, versionText(streams.Screen.TableColumns()))
			return nil
		},
	}
}

// versionText is what `symmem version` and `symmem --version` print, its lines
// wrapped to width. It reads the kernel catalogue, so it is made only when asked for:
// the root command names it in a template, not by its text.
func versionText(width int) string {
	in := symmem.Build()
	s := in.Line + "\n"
	if in.Commit == "" {
		s += "(no commit recorded: build in a git clone with go build -buildvcs=true, or make build)\n"
	}
	cat := kernels.Default()
	// Two lines, as check-nvshmem says it: one of a single line ran to 131 columns.
	s += fmt.Sprintf("kernels: %d artifacts for %s (sha256 %s)\n  Triton %s, NVSHMEM device library %s\n",
		len(cat.Artifacts), strings.Join(cat.Targets(), ", "), cat.Hash()[:12], cat.TritonVersion(), cat.DeviceVersion())
	return report.Wrap(s, width, "  ")
}
