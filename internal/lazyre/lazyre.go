// Package lazyre compiles a regular expression on its first use rather than at
// start-up: a package-level pattern compiled in its package's init costs every process
// (each rank of a job, `symmem --version`) whether it is used or not.
package lazyre

import (
	"regexp"
	"sync"
)

// MustCompile returns a function that compiles expr on its first call (panicking on a
// bad expression, as regexp.MustCompile) and returns the same Regexp from then on.
func MustCompile(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
