package backend

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// Registry says which implementations there are, on which backend, and which
// operations each serves. It is a value: a command builds one at start-up from the
// backends its binary runs (Builtin, then WithUser for --kernels DIR) and passes it
// down; every rank builds the same one from the job. A nil *Registry has none.
type Registry struct {
	impls []Impl
}

// Builtin is a registry of the implementations of backends, in the order given, each
// backend's in the order it lists them (its default first).
func Builtin(backends ...Factory) *Registry {
	r := &Registry{}
	for _, f := range backends {
		for _, im := range f.Impls() {
			if im.Backend != f.Name() {
				panic(fmt.Sprintf("backend %s lists implementation %s, which runs on %q", f.Name(), im.Name, im.Backend))
			}
			if _, dup := r.ByName(im.Name); dup {
				panic(fmt.Sprintf("backend %s lists implementation %s, which the registry has already", f.Name(), im.Name))
			}
			r.impls = append(r.impls, im)
		}
	}
	return r
}

func (r *Registry) list() []Impl {
	if r == nil {
		return nil
	}
	return r.impls
}

// All lists every implementation, in the order tables and help show them.
func (r *Registry) All() []Impl { return slices.Clone(r.list()) }

// Of lists the implementations a backend runs.
func (r *Registry) Of(backend string) []Impl {
	var out []Impl
	for _, i := range r.list() {
		if i.Backend == backend {
			out = append(out, i)
		}
	}
	return out
}

// Serving lists the names of a backend's implementations that serve o.
func (r *Registry) Serving(backend string, o ops.Op) []string {
	var out []string
	for _, i := range r.Of(backend) {
		if i.Supports(o) {
			out = append(out, i.Name)
		}
	}
	return out
}

// Names lists the names of a backend's implementations ("" for every backend).
func (r *Registry) Names(backend string) []string {
	var out []string
	for _, i := range r.list() {
		if backend == "" || i.Backend == backend {
			out = append(out, i.Name)
		}
	}
	return out
}

// ByName finds an implementation on any backend.
func (r *Registry) ByName(name string) (Impl, bool) {
	for _, i := range r.list() {
		if i.Name == name {
			return i, true
		}
	}
	return Impl{}, false
}

// IsUser says whether name is an implementation from a user's directory.
func (r *Registry) IsUser(name string) bool { i, ok := r.ByName(name); return ok && i.User }

// Catalog is the catalogue impl's kernels come from, and whether it is a user's.
func (r *Registry) Catalog(impl string) (*kernels.Catalog, bool) {
	if i, ok := r.ByName(impl); ok && i.Catalog != nil {
		return i.Catalog, true
	}
	return kernels.Default(), false
}

// Lookup finds the implementation name on backend; "" is the backend's default.
func (r *Registry) Lookup(backend, name string) (Impl, error) {
	if name == "" {
		if is := r.Of(backend); len(is) > 0 {
			return is[0], nil
		}
		return Impl{}, &NoImplError{Backend: backend}
	}
	i, ok := r.ByName(name)
	if !ok {
		return Impl{}, &UnknownImplError{Name: name, Known: r.Names(backend)}
	}
	if i.Backend != backend {
		return Impl{}, &WrongBackendError{Impl: name, Runs: i.Backend, Backend: backend, Known: r.Names(backend)}
	}
	return i, nil
}

// CheckOp says whether o is known and i serves it.
func (r *Registry) CheckOp(i Impl, o ops.Op) error {
	if !o.Known() {
		return &ops.UnknownError{Name: string(o), Known: ops.All()}
	}
	if !i.Supports(o) {
		e := &CannotRunError{Impl: i.Name, Op: o, Serves: i.Ops(), Can: r.Serving(i.Backend, o), Backend: i.Backend}
		if len(e.Can) == 0 {
			for _, b := range r.list() {
				if b.Supports(o) && !b.User && !slices.Contains(e.Elsewhere, b.Backend) {
					e.Elsewhere = append(e.Elsewhere, b.Backend)
				}
			}
			e.UserKey = userKey(o)
		}
		return e
	}
	return nil
}

// userKey is the key a user's file declares its kernel of o under ("" where users'
// kernels serve no o): the first of pkg/kernels' table.
func userKey(o ops.Op) string {
	for _, k := range kernels.UserKernels() {
		if k.Op == string(o) {
			return k.Key
		}
	}
	return ""
}

// NoImplError is a backend without implementations.
type NoImplError struct{ Backend string }

func (e *NoImplError) Error() string {
	return fmt.Sprintf("backend %q has no implementations", e.Backend)
}

// UnknownImplError is an implementation name the registry does not have.
type UnknownImplError struct {
	Name  string
	Known []string // the backend's implementations
}

func (e *UnknownImplError) Error() string { return e.Say(setting.Unworded) }

// Say is the error with the setting it names worded by w.
func (e *UnknownImplError) Say(w setting.Words) string {
	return w.Sprintf("unknown %s %q: use %s", setting.Impl, e.Name, strings.Join(e.Known, ", "))
}

// WrongBackendError is an implementation of another backend than the job's.
type WrongBackendError struct {
	Impl, Runs, Backend string
	Known               []string // the job's backend's implementations
}

func (e *WrongBackendError) Error() string { return e.Say(setting.Unworded) }

// Say is the error with the setting it names worded by w.
func (e *WrongBackendError) Say(w setting.Words) string {
	return w.Sprintf("%s %s runs on the %s backend, not on %s: use %s", setting.Impl, e.Impl, e.Runs, e.Backend, strings.Join(e.Known, ", "))
}

// CannotRunError is an implementation asked for an operation it does not serve.
type CannotRunError struct {
	Impl   string
	Op     ops.Op
	Serves []ops.Op
	Can    []string // the backend's implementations that serve Op
	// Where none does: the backend, the other backends whose implementations do, and
	// the key a user's kernel of Op is declared under ("" where none can be).
	Backend   string
	Elsewhere []string
	UserKey   string
}

func (e *CannotRunError) Error() string { return e.Say(setting.Unworded) }

// Say is the error with the setting it names worded by w.
func (e *CannotRunError) Say(w setting.Words) string {
	head := w.Sprintf("%s %s cannot run %s (it serves %s)", setting.Impl, e.Impl, e.Op, ops.Names(e.Serves))
	if len(e.Can) > 0 {
		return head + w.Sprintf(": use %s %s", setting.Impl, strings.Join(e.Can, " or "))
	}
	var ways []string
	if e.UserKey != "" {
		ways = append(ways, w.Sprintf("build a user's kernel of it (symmem kernels build; SYMMEM_KERNELS key %q) and run it with %s DIR %s NAME", e.UserKey, setting.Kernels, setting.Impl))
	}
	if len(e.Elsewhere) > 0 {
		ways = append(ways, w.Sprintf("use %s %s", setting.Backend, strings.Join(e.Elsewhere, " or ")))
	}
	head += w.Sprintf(", nor does any of symmem's own on the %s backend", e.Backend)
	if len(ways) == 0 {
		return head
	}
	return head + ": " + strings.Join(ways, ", or ")
}
