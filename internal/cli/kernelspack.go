package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/pkg/kernels"
)

// NewCmdKernelsPack builds `symmem kernels pack DIR`, the build's last step
// (kernels/build-kernels.py runs it): the GPU machine that builds the kernels has the
// binary, not Go, and Python's standard library no zstd before 3.14.
func NewCmdKernelsPack(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:   "pack DIR",
		Short: "Compress the kernels a build wrote into DIR, as symmem embeds its own",
		Long: `kernels pack stores every kernel in DIR that a sidecar names compressed (FILE.zst,
zstd) and removes FILE, after checking it against the sidecar's sha256. symmem reads
either; its own kernels (kernels/build) are kept compressed. It also writes DIR/manifests.json,
every kernel's manifest from its sidecars in one file, which symmem reads when it starts.`,
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			done, err := kernels.Pack(args[0])
			if err == nil {
				err = kernels.WriteIndex(args[0]) // the manifests symmem reads when it starts
			}
			var before, after int64
			for _, p := range done {
				before, after = before+p.Size, after+p.After
			}
			fmt.Fprintf(streams.Out, "kernels pack: %d files in %s, %.1f MB compressed to %.1f MB\n", len(done), args[0], float64(before)/1e6, float64(after)/1e6)
			return err
		},
	}
}
