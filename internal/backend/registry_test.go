package backend

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/ops"
)

// listing is a backend as the registry sees it: its name and its implementations
// (the factory's other methods are not the registry's to call).
type listing struct {
	Factory
	name  string
	impls []Impl
}

func (l listing) Name() string  { return l.name }
func (l listing) Impls() []Impl { return l.impls }

// own is a registry like the binary's: GPU implementations first, then the CPU's.
func own() *Registry {
	return Builtin(
		listing{name: NVSHMEM, impls: []Impl{
			{Name: "triton", Summary: "triton's", Backend: NVSHMEM, Kernels: map[ops.Op][]string{ops.Put: {"put_block"}, ops.AllReduce: {"reduce_bf16"}}},
			{Name: "cuda", Summary: "cuda's", Backend: NVSHMEM, Kernels: map[ops.Op][]string{ops.Put: {"put_block"}, ops.Get: {"get_block"}}},
			{Name: "nccl", Summary: "nccl's", Backend: NVSHMEM, Kernels: map[ops.Op][]string{ops.AllReduce: nil}},
		}},
		listing{name: CPU, impls: []Impl{{Name: "memcpy", Summary: "memcpy's", Backend: CPU, Kernels: map[ops.Op][]string{ops.Put: nil, ops.AllReduce: nil}}}},
	)
}

// The registry lists the backends' implementations in the order given, each
// backend's default first, and looks them up by backend.
func TestBuiltinOrder(t *testing.T) {
	reg := own()
	if got := strings.Join(reg.Names(""), " "); got != "triton cuda nccl memcpy" {
		t.Errorf("names %q, want the backends' in order", got)
	}
	if im, err := reg.Lookup(CPU, ""); err != nil || im.Name != "memcpy" {
		t.Errorf("the cpu default is %q (%v), want memcpy", im.Name, err)
	}
	if got := strings.Join(reg.Serving(NVSHMEM, ops.AllReduce), " "); got != "triton nccl" {
		t.Errorf("all-reduce is served by %q, want triton nccl", got)
	}
	var none *Registry
	if _, err := none.Lookup(NVSHMEM, ""); err == nil {
		t.Error("a nil registry has a default implementation")
	}
}

// A backend that lists another backend's implementation, or one name twice, is a
// programming error caught when the registry is built, with what is wrong.
func TestBuiltinRefusesAMisfiledImpl(t *testing.T) {
	for want, l := range map[string]listing{
		`backend cpu lists implementation x, which runs on "nvshmem"`:        {name: CPU, impls: []Impl{{Name: "x", Backend: NVSHMEM}}},
		"backend cpu lists implementation x, which the registry has already": {name: CPU, impls: []Impl{{Name: "x", Backend: CPU}, {Name: "x", Backend: CPU}}},
	} {
		func() {
			defer func() {
				if got := recover(); got != want {
					t.Errorf("Builtin panicked with %v, want %q", got, want)
				}
			}()
			Builtin(l)
		}()
	}
}
