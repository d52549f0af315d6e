package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
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
			fmt.Fprint(streams.Out, versionText())
			return nil
		},
	}
}

// versionText is what `symmem version` and `symmem --version` print. It reads the
// kernel catalogue, so it is made only when asked for: the root command names it in a
// template, not by its text.
func versionText() string {
	in := symmem.Build()
	s := in.Line + "\n"
	if in.Commit == "" {
		s += "(no commit recorded: build in a git clone with go build -buildvcs=true, or make build)\n"
	}
	cat := kernels.Default()
	return s + fmt.Sprintf("kernels: %s (sha256 %s)\n", cat.Summary(), cat.Hash()[:12])
}
