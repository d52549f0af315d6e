package backend

import (
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/ops"
)

// Backend names.
const (
	CPU     = "cpu"
	NVSHMEM = "nvshmem"
)

// Impl is one implementation of the operations: a registry entry. Adding an
// implementation is one entry here plus its code in the backend that runs it.
type Impl struct {
	Name    string
	Backend string // the backend that runs it
	Summary string // one line for help text
	// Kernels maps each operation the implementation serves to the prebuilt kernels it
	// launches (none: the copy engine, or the CPU).
	Kernels map[ops.Op][]string
	// User says it came from a user's directory of kernels (RegisterUser).
	User bool
	// BlockAlign says, by op, what each rank's block of a collective must be a whole
	// multiple of, in bytes (triton's reduce-scatter moves 16-byte vectors); sweeps
	// leave out the sizes whose blocks are not, and run refuses them before it starts.
	BlockAlign map[ops.Op]int64
}

// Holds says whether the implementation can run op with each rank's block (ops.Shape's
// Block) of block bytes.
func (i Impl) Holds(o ops.Op, block int64) bool {
	a := i.BlockAlign[o]
	return a == 0 || block%a == 0
}

// Impls is the registry, in the order tables and help show them. The first entry of a
// backend is its default.
var Impls = []Impl{
	{Name: "triton", Backend: NVSHMEM, Summary: "prebuilt Triton kernels calling NVSHMEM device functions",
		Kernels: map[ops.Op][]string{ops.Put: {"put_block"}, ops.Get: {"get_block"}, ops.PutSignal: {"put_signal_block", "wait_signal"}, ops.Latency: {"pingpong"},
			ops.AllReduce: {"reduce_bf16", "reduce_f32", "reduce_staged_bf16", "reduce_push_bf16", "reduce_push_f32", "reduce_ll_bf16", "reduce_ll_f32", "reduce_ll128_bf16", "reduce_ll128_f32"}, ops.ReduceScatter: {"reduce_bf16", "reduce_f32", "reduce_push_bf16", "reduce_push_f32"},
			ops.AllGather: {"push", "push_ll"}, ops.Broadcast: {"push", "push_ll"}, ops.AllToAll: {"push", "push_ll"},
			ops.Dispatch: {"dispatch"}, ops.Combine: {"combine_bf16", "combine_f32", "combine_staged_bf16", "combine_staged_f32"}},
		BlockAlign: map[ops.Op]int64{ops.ReduceScatter: 16}},
	{Name: "cuda", Backend: NVSHMEM, Summary: "the same operations in CUDA C against the NVSHMEM device library",
		Kernels: map[ops.Op][]string{ops.Put: {"put_block"}, ops.Get: {"get_block"}, ops.PutSignal: {"put_signal_block", "wait_signal"}, ops.Latency: {"pingpong"}}},
	{Name: "copy-engine", Backend: NVSHMEM, Summary: "cuMemcpyDtoDAsync into the peer's mapping (nvshmem_ptr)",
		Kernels: map[ops.Op][]string{ops.Put: nil, ops.Get: nil, ops.AllGather: nil, ops.Broadcast: nil, ops.AllToAll: nil}},
	{Name: "sm-store", Backend: NVSHMEM, Summary: "a kernel storing straight into the peer's mapping",
		Kernels: map[ops.Op][]string{ops.Put: {"sm_store"}, ops.Get: {"sm_store"}}},
	{Name: "nccl", Backend: NVSHMEM, Summary: "NCCL's collectives (libnccl.so.2 opened with dlopen, bootstrapped through symmem's store)",
		Kernels: map[ops.Op][]string{ops.AllReduce: nil, ops.AllGather: nil, ops.ReduceScatter: nil, ops.Broadcast: nil, ops.AllToAll: nil}},
	{Name: "nccl-symm", Backend: NVSHMEM, Summary: "NCCL's symmetric-memory collectives on registered windows (NCCL 2.27+)",
		Kernels: map[ops.Op][]string{ops.AllReduce: nil, ops.AllGather: nil, ops.ReduceScatter: nil}},
	{Name: "nccl-device", Backend: NVSHMEM, Summary: "CUDA kernels calling NCCL's device API: LSA loads, stores and barriers (NCCL 2.28+)",
		Kernels: map[ops.Op][]string{ops.Put: {"put_block"}, ops.Get: {"get_block"}, ops.PutSignal: {"put_signal_block", "wait_signal"}, ops.Latency: {"pingpong"},
			ops.AllReduce: {"allreduce_oneshot_bf16", "allreduce_oneshot_f32", "allreduce_twoshot_bf16", "allreduce_twoshot_f32"}}},
	{Name: "memcpy", Backend: CPU, Summary: "the CPU backend's copies (and sums) over shared memory",
		Kernels: map[ops.Op][]string{ops.Put: nil, ops.Get: nil, ops.PutSignal: nil, ops.Latency: nil,
			ops.AllReduce: nil, ops.AllGather: nil, ops.ReduceScatter: nil, ops.Broadcast: nil, ops.AllToAll: nil, ops.Dispatch: nil, ops.Combine: nil}},
}

// Supports says whether the implementation can carry out op.
func (i Impl) Supports(o ops.Op) bool { _, ok := i.Kernels[o]; return ok }

// Ops lists the operations the implementation serves, in table order.
func (i Impl) Ops() []ops.Op {
	var out []ops.Op
	for _, o := range ops.All() {
		if i.Supports(o) {
			out = append(out, o)
		}
	}
	return out
}

// NeedsGPU says whether the implementation runs on GPUs.
func (i Impl) NeedsGPU() bool { return i.Backend != CPU }

// ImplsOf lists the implementations a backend runs.
func ImplsOf(backend string) []Impl {
	var out []Impl
	for _, i := range Impls {
		if i.Backend == backend {
			out = append(out, i)
		}
	}
	return out
}

// ImplsServing lists the names of a backend's implementations that serve op.
func ImplsServing(backend string, o ops.Op) []string {
	var out []string
	for _, i := range ImplsOf(backend) {
		if i.Supports(o) {
			out = append(out, i.Name)
		}
	}
	return out
}

// ImplNames lists the names of a backend's implementations ("" for every backend).
func ImplNames(backend string) []string {
	var out []string
	for _, i := range Impls {
		if backend == "" || i.Backend == backend {
			out = append(out, i.Name)
		}
	}
	return out
}

// ImplByName finds an implementation on any backend.
func ImplByName(name string) (Impl, bool) {
	for _, i := range Impls {
		if i.Name == name {
			return i, true
		}
	}
	return Impl{}, false
}

// LookupImpl finds the implementation name on backend; "" is the backend's default.
// The error says what the backend offers instead.
func LookupImpl(backend, name string) (Impl, error) {
	if name == "" {
		if is := ImplsOf(backend); len(is) > 0 {
			return is[0], nil
		}
		return Impl{}, fmt.Errorf("backend %q has no implementations", backend)
	}
	for _, i := range Impls {
		if i.Name != name {
			continue
		}
		if i.Backend != backend {
			return Impl{}, fmt.Errorf("--impl %s runs on the %s backend, not on %s: use %s", name, i.Backend, backend,
				strings.Join(ImplNames(backend), ", "))
		}
		return i, nil
	}
	return Impl{}, fmt.Errorf("unknown --impl %q: use %s", name, strings.Join(ImplNames(backend), ", "))
}

// CheckOp says whether op is known and the implementation serves it.
func (i Impl) CheckOp(o ops.Op) error {
	if !o.Known() {
		return &ops.UnknownError{Name: string(o), Known: ops.All()}
	}
	if !i.Supports(o) {
		var can []string
		for _, j := range ImplsOf(i.Backend) {
			if j.Supports(o) {
				can = append(can, j.Name)
			}
		}
		return fmt.Errorf("--impl %s cannot run %s (it serves %s): use --impl %s", i.Name, o, ops.Names(i.Ops()), strings.Join(can, " or "))
	}
	return nil
}
