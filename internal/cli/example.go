package cli

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/examples"
	"github.com/symmem/symmem/internal/lazyre"
)

// exampleKernels is an example file's declaration of which function serves which op,
// and exampleOp one op in it.
var (
	exampleKernels = lazyre.MustCompile(`(?ms)^SYMMEM_KERNELS = \{(.*?)\}`)
	exampleOp      = lazyre.MustCompile(`"([a-z0-9:-]+)":`)
)

// exampleSummary is an example file's first docstring line.
func exampleSummary(src string) string {
	s := strings.TrimPrefix(src, `"""`)
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

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
			names, err := fs.Glob(examples.FS, "*.py")
			if err != nil {
				return err
			}
			sort.Strings(names)
			if len(args) == 0 {
				for _, n := range names {
					src, err := fs.ReadFile(examples.FS, n)
					if err != nil {
						return err
					}
					var ops []string
					if m := exampleKernels().FindStringSubmatch(string(src)); m != nil {
						for _, op := range exampleOp().FindAllStringSubmatch(m[1], -1) {
							ops = append(ops, op[1])
						}
					}
					fmt.Fprintf(streams.Out, "%-20s %s\n%-20s %s\n", strings.TrimSuffix(n, ".py"), strings.Join(ops, ", "), "", exampleSummary(string(src)))
				}
				return nil
			}
			name := strings.TrimSuffix(path.Base(args[0]), ".py")
			src, err := fs.ReadFile(examples.FS, name+".py")
			if err != nil {
				var have []string
				for _, n := range names {
					have = append(have, strings.TrimSuffix(n, ".py"))
				}
				return usage("kernels example %s: no such example; symmem carries %s", args[0], strings.Join(have, ", "))
			}
			_, err = streams.Out.Write(src)
			return err
		},
	}
}
