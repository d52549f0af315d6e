package examples

import (
	"io/fs"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/lazyre"
)

// Example is one example kernel file.
type Example struct {
	Name    string   // its file's name without .py
	Ops     []string // the operations its SYMMEM_KERNELS declares, in its order
	Summary string   // its docstring's first line
}

// exampleKernels is an example file's declaration of which function serves which op,
// and exampleOp one op in it.
var (
	exampleKernels = lazyre.MustCompile(`(?ms)^SYMMEM_KERNELS = \{(.*?)\}`)
	exampleOp      = lazyre.MustCompile(`"([a-z0-9:-]+)":`)
)

// List is the example kernel files, by name.
func List() ([]Example, error) {
	names, err := fs.Glob(FS, "*.py")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Example
	for _, n := range names {
		src, err := fs.ReadFile(FS, n)
		if err != nil {
			return nil, err
		}
		e := Example{Name: strings.TrimSuffix(n, ".py"), Summary: summary(string(src))}
		if m := exampleKernels().FindStringSubmatch(string(src)); m != nil {
			for _, op := range exampleOp().FindAllStringSubmatch(m[1], -1) {
				e.Ops = append(e.Ops, op[1])
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// summary is an example file's first docstring line.
func summary(src string) string {
	s := strings.TrimPrefix(src, `"""`)
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
