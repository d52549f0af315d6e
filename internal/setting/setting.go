// Package setting lets the layers below the command line name a setting in what they
// say (an error's remedy: "raise {heap-size}") without knowing how a person sets it.
// A message marks a setting by its name in braces; Expand replaces each mark with the
// words the program installed with Use (symmem's CLI: the flag, "--heap-size"), or by
// the bare name where none were. Only the names of Names are marked: other braces in a
// message stay as they are.
package setting

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"sync/atomic"
)

// Name is a setting's name: "nproc", "heap-size".
type Name string

// names are the settings the layers below the CLI speak of: in marks, and by Word (the
// job settings ranks must agree on, named by their keys).
var names = []Name{
	"algo", "alpha", "arch", "backend", "bidir", "blocks", "check", "config", "count", "csv",
	"dry-run", "dtype", "experts", "factor", "format", "graph", "heap-size", "hidden",
	"impl", "iters", "json", "kernel", "kernels", "launcher", "matrix", "max-size", "min-size",
	"name", "nccl-lib", "nproc", "nvshmem-lib", "op", "out", "overlap", "pattern", "peer",
	"plot", "redop", "reps", "root", "runs", "seed", "sizes", "skew", "smoke", "stall-limit", "store-addr",
	"store-iface", "tag-output", "threshold", "timeout", "tokens", "topk", "tune",
	"value", "wait-limit", "warmup", "warps", "wide",
}

// Names lists every setting a message may mark.
func Names() []Name { return slices.Clone(names) }

// words is what Use installed: a setting's name as the program's users write it.
var words atomic.Pointer[func(Name) string]

// Use makes say the words each marked setting is expanded to from now on. A program
// installs them once, before it does any work (symmem's CLI names the flags).
func Use(say func(Name) string) { words.Store(&say) }

// Word is n in the words Use installed, or the bare name where n is none of Names.
func Word(n Name) string {
	if !slices.Contains(names, n) {
		return string(n)
	}
	return Expand("{" + string(n) + "}")
}

var mark = regexp.MustCompile(`\{([a-z][a-z0-9-]*)\}`)

// Expand replaces each marked setting in s by its words.
func Expand(s string) string {
	say := func(n Name) string { return string(n) }
	if w := words.Load(); w != nil {
		say = *w
	}
	return mark.ReplaceAllStringFunc(s, func(m string) string {
		n := Name(m[1 : len(m)-1])
		if !slices.Contains(names, n) {
			return m
		}
		return say(n)
	})
}

// Errorf is fmt.Errorf with the settings marked in its message expanded; the error
// unwraps as fmt.Errorf's does.
func Errorf(format string, a ...any) error { return expanded{fmt.Errorf(format, a...)} }

// expanded is an error whose message has its marked settings expanded.
type expanded struct{ err error }

func (e expanded) Error() string { return Expand(e.err.Error()) }
func (e expanded) Unwrap() error { return e.err }

// Sprintf is fmt.Sprintf with the settings marked in the result expanded.
func Sprintf(format string, a ...any) string { return Expand(fmt.Sprintf(format, a...)) }

// Fprintf is fmt.Fprintf with the settings marked in what it writes expanded.
func Fprintf(w io.Writer, format string, a ...any) (int, error) {
	return io.WriteString(w, Sprintf(format, a...))
}
