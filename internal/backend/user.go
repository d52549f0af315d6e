package backend

import (
	"fmt"
	"slices"

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

// WithUser is a copy of r with an implementation for every impl in c, a catalogue
// read from the user's directory with kernels.LoadDir, whose kernels come from c.
// Adding the same directory again is a no-op; a name that a built-in implementation
// (or another directory's) already has is refused.
func (r *Registry) WithUser(c *kernels.Catalog) (*Registry, []Impl, error) {
	out := &Registry{impls: slices.Clone(r.list())}
	var added []Impl
	for _, name := range c.Impls() {
		if im, ok := out.ByName(name); ok {
			if !im.User {
				return nil, nil, &UserImplError{Dir: c.Dir, Name: name, Builtin: im.Summary}
			}
			if im.Catalog.Dir != c.Dir {
				return nil, nil, &UserImplError{Dir: c.Dir, Name: name, Other: im.Catalog.Dir}
			}
			added = append(added, im)
			continue
		}
		have := c.Kernels(name)
		im := Impl{Name: name, Backend: NVSHMEM, Summary: "user kernels from " + c.Dir, Kernels: map[ops.Op][]string{}, User: true, Catalog: c}
		for _, o := range ops.All() {
			ks := userKernels(o)
			switch {
			case len(ks) == 0:
			case o.IsCollective():
				// One kernel per element type where the op sums: the implementation sums
				// the types it has.
				for _, k := range ks {
					if slices.Contains(have, k) {
						im.Kernels[o] = append(im.Kernels[o], k)
					}
				}
			case slices.Contains(have, ks[0]):
				im.Kernels[o] = ks
			}
		}
		if len(im.Kernels) == 0 {
			return nil, nil, &UserImplError{Dir: c.Dir, Name: name, Has: have}
		}
		out.impls = append(out.impls, im)
		added = append(added, im)
	}
	return out, added, nil
}

// UserImplError is a user's implementation the registry cannot take: its name is
// symmem's own (Builtin: that one's summary) or another directory's (Other), or it
// has no kernel of any operation (Has: the kernels it has).
type UserImplError struct {
	Dir, Name      string
	Builtin, Other string
	Has            []string
}

func (e *UserImplError) Error() string {
	switch {
	case e.Builtin != "":
		return fmt.Sprintf("{kernels} %s: implementation %q is symmem's own (%s): rebuild with another name (symmem kernels build {name})", e.Dir, e.Name, e.Builtin)
	case e.Other != "":
		return fmt.Sprintf("{kernels} %s: implementation %q also comes from %s: give it another name (symmem kernels build {name})", e.Dir, e.Name, e.Other)
	}
	return fmt.Sprintf("{kernels} %s: %s has only %v, no kernel for put, get, put-signal, latency or a collective", e.Dir, e.Name, e.Has)
}

// ScratchBytes is the scratch a collective op of size bytes (as coll.ShapeOf counts
// them; dispatch and combine: a rank's token buffer) takes with impl beside an output
// of recv bytes on n ranks: a user's collective gets a slot per rank in two halves
// (room for a one-shot kernel whose launches alternate them; kernels.Signatures
// promises 2 x n x one rank's share, or 2 x n x its tokens), symmem's own
// implementations the output's size.
func (r *Registry) ScratchBytes(o ops.Op, impl string, size, recv int64, n int) int64 {
	im, ok := r.ByName(impl)
	if !ok || !im.User || !o.IsCollective() || !im.Supports(o) {
		return recv // symmem's own, or an op the sweep does not run with impl
	}
	share := size
	if o.Splits() {
		share = size / int64(n)
	}
	return max(recv, 2*int64(n)*share)
}
