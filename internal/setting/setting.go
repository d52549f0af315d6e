// Package setting lets the layers below symmem's command line and its library name a
// setting in what they say (an error's remedy: "raise {heap-size}") without knowing how
// a person sets it. A message marks a setting by its name in braces and keeps the mark
// until whoever presents the message words it with Words of its own: the command line
// names the flag (--heap-size), the library the field of its options
// (JobOptions.HeapSize). Nothing is installed for the whole process: a layer that
// presents (prints a note, records a reason in a result) is handed the Words to use.
// Only the names of Names are marks: other braces in a message stay as they are.
package setting

import (
	"fmt"
	"io"
	"slices"

	"github.com/symmem/symmem/internal/lazyre"
)

// Name is a setting's name: "nproc", "heap-size".
type Name string

// names are the settings the layers below the CLI speak of: in marks, and by Mark (the
// job settings ranks must agree on, named by their keys).
var names = []Name{
	"algo", "alpha", "arch", "backend", "bidir", "blocks", "check", "config", "count", "csv",
	"dry-run", "dtype", "experts", "factor", "format", "graph", "heap-size", "hidden",
	"impl", "iters", "json", "k", "kernel", "kernels", "launcher", "m", "matrix", "max-size", "min-size", "n",
	"name", "nccl-lib", "nproc", "nvshmem-lib", "op", "out", "overlap", "pattern", "peer",
	"plot", "random", "redop", "reps", "root", "runs", "seed", "sizes", "skew", "smoke", "stall-limit", "store-addr",
	"store-iface", "tag-output", "threshold", "timeout", "tokens", "topk", "tune",
	"value", "wait-limit", "warmup", "warps", "wide",
}

// Names lists every setting a message may mark.
func Names() []Name { return slices.Clone(names) }

// Mark is n as a message marks it ("{heap-size}"), for a text that takes the caller's
// name for a setting (launch.TimeoutError's Setting); a name that is none of Names is
// left bare.
func Mark(n Name) string {
	if !slices.Contains(names, n) {
		return string(n)
	}
	return "{" + string(n) + "}"
}

// Errorf is fmt.Errorf for a message that marks the settings it names: the marks stay
// in the message, through every error that wraps it, until its presenter words them
// (Words.Error).
func Errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// Words names each setting as a program's users set it; nil names it bare
// ("heap-size").
type Words func(Name) string

// Word is n in w.
func (w Words) Word(n Name) string {
	if w == nil {
		return string(n)
	}
	return w(n)
}

// mark matches a setting's mark in a message ("{heap-size}").
var mark = lazyre.MustCompile(`\{([a-z][a-z0-9-]*)\}`)

// Say is s with each setting it marks worded.
func (w Words) Say(s string) string {
	return mark().ReplaceAllStringFunc(s, func(m string) string {
		n := Name(m[1 : len(m)-1])
		if !slices.Contains(names, n) {
			return m
		}
		return w.Word(n)
	})
}

// Sprintf is fmt.Sprintf with the settings marked in the result worded.
func (w Words) Sprintf(format string, a ...any) string { return w.Say(fmt.Sprintf(format, a...)) }

// Fprintf is fmt.Fprintf with the settings marked in what it writes worded.
func (w Words) Fprintf(out io.Writer, format string, a ...any) (int, error) {
	return io.WriteString(out, w.Sprintf(format, a...))
}

// Error is err as w presents it: its message with each marked setting worded. It
// unwraps to err, so that its exit status and what it wraps stay; nil stays nil, and
// an error that marks nothing is returned as it is.
func (w Words) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if said := w.Say(msg); said != msg {
		return &worded{said, err}
	}
	return err
}

// worded is an error whose marks are worded.
type worded struct {
	msg string
	err error
}

func (e *worded) Error() string { return e.msg }
func (e *worded) Unwrap() error { return e.err }
