package backend

import (
	"slices"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// userServes is what a user's catalogue serves o with, given the kernels it has for
// an implementation (pkg/kernels' table, the one place user kernel names are
// written): o's own kernels it has (a reducing collective's one per element type and
// operator, put-flag's and barrier's one per variant), then the receiver's wait where
// o has one (its own, else symmem's wait_signal, which counts the same signal and
// reaches the same word), with the reduction operators and the variants the kernels
// it has serve. No own kernel: it does not serve o.
func userServes(o ops.Op, have []string) (ks, reds, variants []string) {
	var wait string
	for _, k := range kernels.UserKernels() {
		switch {
		case k.Op == string(o) && slices.Contains(have, k.Kernel):
			ks = append(ks, k.Kernel)
			if k.RedOp != "" && !slices.Contains(reds, k.RedOp) {
				reds = append(reds, k.RedOp)
			}
			if k.Variant != "" && !slices.Contains(variants, k.Variant) {
				variants = append(variants, k.Variant)
			}
		case slices.Contains(k.Receives, string(o)) && (wait == "" || slices.Contains(have, k.Kernel)):
			wait = k.Kernel
		}
	}
	if len(ks) == 0 {
		return nil, nil, nil
	}
	if wait != "" && !slices.Contains(have, wait) {
		wait = kernels.OpKernels()["wait-signal"]
	}
	if wait != "" {
		ks = append(ks, wait)
	}
	// In the table's order of operators.
	slices.SortStableFunc(reds, func(a, b string) int { return redIndex(a) - redIndex(b) })
	return ks, reds, variants
}

// ReachesAll says whether the implementation's kernel of o puts to every other rank
// itself (a user's put whose kernel computes its peers: kernels.Artifact.Peers): a
// sender launches it once for all of them (PutAll), and it is a put to one peer only
// where that peer is the only one, in a job of two ranks.
func (i Impl) ReachesAll(o ops.Op) bool {
	if !i.User || i.Catalog == nil {
		return false
	}
	return slices.ContainsFunc(i.Kernels[o], func(k string) bool { return i.Catalog.ReachesAll(i.Name, k) })
}

// InPlace says whether the implementation's kernel of o puts its buffer in place (a
// user's put written as PyTorch's multi-block puts: kernels.Artifact.InPlace): it
// sends its own dst, so its sender must not receive there (no ring).
func (i Impl) InPlace(o ops.Op) bool {
	if !i.User || i.Catalog == nil {
		return false
	}
	return slices.ContainsFunc(i.Kernels[o], func(k string) bool { return i.Catalog.InPlace(i.Name, k) })
}

// redIndex is r's place in ops.RedOps.
func redIndex(r string) int {
	return slices.IndexFunc(ops.RedOps(), func(x ops.RedOp) bool { return x.Name == r })
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
			ks, reds, variants := userServes(o, have)
			if len(ks) == 0 {
				continue
			}
			im.Kernels[o] = ks
			for _, r := range reds {
				if !slices.Contains(im.RedOps, r) {
					im.RedOps = append(im.RedOps, r)
				}
			}
			if len(variants) > 0 {
				if im.Variants == nil {
					im.Variants = map[ops.Op][]string{}
				}
				im.Variants[o] = variants
			}
		}
		slices.SortStableFunc(im.RedOps, func(a, b string) int { return redIndex(a) - redIndex(b) })
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

func (e *UserImplError) Error() string { return e.Say(setting.Unworded) }

// Say is the error with the settings it names worded by w.
func (e *UserImplError) Say(w setting.Words) string {
	switch {
	case e.Builtin != "":
		return w.Sprintf("%s %s: implementation %q is symmem's own (%s): rebuild with another name (symmem kernels build %s)", setting.Kernels, e.Dir, e.Name, e.Builtin, setting.ImplName)
	case e.Other != "":
		return w.Sprintf("%s %s: implementation %q also comes from %s: give it another name (symmem kernels build %s)", setting.Kernels, e.Dir, e.Name, e.Other, setting.ImplName)
	}
	return w.Sprintf("%s %s: %s has only %v, no kernel for put, get, put-signal, latency or a collective", setting.Kernels, e.Dir, e.Name, e.Has)
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
