package backend

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// userKernels are the kernels a user's catalogue serves op with (pkg/kernels' table,
// the one place user kernel names are written): the reducing collectives one kernel
// per element type, put-signal its put kernel and optionally wait_signal (the
// receiver waits with symmem's own otherwise: the signal contract is the same, every
// block adds one).
func userKernels(o ops.Op) []string {
	if o.IsCollective() {
		return kernels.CollKernels[string(o)]
	}
	k, ok := kernels.OpKernels[string(o)]
	if !ok {
		return nil
	}
	if o.Signals() && o.Kind() == ops.OneSided {
		return []string{k, kernels.OpKernels["wait-signal"]}
	}
	return []string{k}
}

// registered are the user implementations added to Impls, by name, with the
// directory each came from: registering the same directory again (every rank, every
// job of a test process) is a no-op.
var (
	userMu     sync.Mutex
	registered = map[string]string{}
)

// RegisterUser adds an implementation to the registry for every impl in c, a
// catalogue read from the user's directory with kernels.LoadDir, and makes c the
// catalogue their kernels come from. A name that a built-in implementation (or
// another directory's) already has is refused.
func RegisterUser(c *kernels.Catalog) ([]Impl, error) {
	userMu.Lock()
	defer userMu.Unlock()
	var out []Impl
	for _, name := range c.Impls() {
		if dir, ok := registered[name]; ok {
			if dir != c.Dir {
				return nil, fmt.Errorf("--kernels %s: implementation %q also comes from %s: give it another name (symmem kernels build --name)", c.Dir, name, dir)
			}
			im, _ := ImplByName(name)
			out = append(out, im)
			continue
		}
		if im, ok := ImplByName(name); ok {
			return nil, fmt.Errorf("--kernels %s: implementation %q is symmem's own (%s): rebuild with another name (symmem kernels build --name)", c.Dir, name, im.Summary)
		}
		have := c.Kernels(name)
		im := Impl{Name: name, Backend: NVSHMEM, Summary: "user kernels from " + c.Dir, Kernels: map[ops.Op][]string{}, User: true}
		for _, o := range ops.All() {
			ks := userKernels(o)
			switch {
			case len(ks) == 0:
			case o.IsCollective():
				// One kernel per element type where the op sums: the implementation sums
				// the types it has.
				for _, k := range ks {
					if hasString(have, k) {
						im.Kernels[o] = append(im.Kernels[o], k)
					}
				}
			case hasString(have, ks[0]):
				im.Kernels[o] = ks
			}
		}
		if len(im.Kernels) == 0 {
			return nil, fmt.Errorf("--kernels %s: %s has only %v, no kernel for put, get, put-signal, latency or a collective", c.Dir, name, have)
		}
		Impls = append(Impls, im)
		registered[name] = c.Dir
		out = append(out, im)
	}
	kernels.Use(c)
	return out, nil
}

// IsUser says whether name is an implementation registered from a user's directory.
func IsUser(name string) bool {
	userMu.Lock()
	defer userMu.Unlock()
	_, ok := registered[name]
	return ok
}

func hasString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ScratchBytes is the scratch a collective op of size bytes (as coll.ShapeOf counts
// them; dispatch and combine: a rank's token buffer) takes with impl beside an output
// of recv bytes on n ranks: a user's collective gets a slot per rank in two halves
// (room for a one-shot kernel whose launches alternate them; kernels.Signatures
// promises 2 x n x one rank's share, or 2 x n x its tokens), symmem's own
// implementations the output's size.
func ScratchBytes(o ops.Op, impl string, size, recv int64, n int) int64 {
	im, ok := ImplByName(impl)
	if !ok || !im.User || !o.IsCollective() || !im.Supports(o) {
		return recv // symmem's own, or an op the sweep does not run with impl
	}
	share := size
	if o.Splits() {
		share = size / int64(n)
	}
	return max(recv, 2*int64(n)*share)
}

// SaveRegistry returns what puts the registry back as it is now, users'
// implementations and all: tests that register a user's directory restore it, so that
// other tests (and a second -count) see symmem's own implementations only.
func SaveRegistry() (restore func()) {
	userMu.Lock()
	defer userMu.Unlock()
	impls, reg := slices.Clone(Impls), maps.Clone(registered)
	return func() {
		userMu.Lock()
		defer userMu.Unlock()
		Impls, registered = impls, reg
	}
}
