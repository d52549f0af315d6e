package cli

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/examples"
)

// NewCmdKernelsExample builds `symmem kernels example [NAME]`: list the example kernel
// files the binary carries, or print one to start from.
func NewCmdKernelsExample(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:   "example [NAME]",
		Short: "List the example kernel files, or print one to start your own from",
		Long: `kernels example lists the example Triton files symmem carries (the ones in its
examples/ directory), with what each serves; kernels example NAME prints one, to be
saved, changed and built with kernels build.`,
		Example: `  symmem kernels example
  symmem kernels example one_shot_all_reduce > mine.py
  symmem kernels build --check mine.py`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := examples.List()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				for _, e := range list {
					fmt.Fprintf(streams.Out, "%-20s %s\n%-20s %s\n", e.Name, strings.Join(e.Ops, ", "), "", e.Summary)
				}
				return nil
			}
			name := strings.TrimSuffix(path.Base(args[0]), ".py")
			src, err := fs.ReadFile(examples.FS, name+".py")
			if err != nil {
				var have []string
				for _, e := range list {
					have = append(have, e.Name)
				}
				return usage("kernels example %s: no such example; symmem carries %s", args[0], strings.Join(have, ", "))
			}
			_, err = streams.Out.Write(src)
			return err
		},
	}
}
