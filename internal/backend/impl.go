package backend

import (
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// Backend names.
const (
	CPU     = "cpu"
	NVSHMEM = "nvshmem"
)

// Impl is one implementation of the operations: a registry entry. Adding an
// implementation is one entry of builtin plus its code in the backend that runs it.
type Impl struct {
	Name    string
	Backend string // the backend that runs it
	Summary string // one line for help text
	// Kernels maps each operation the implementation serves to the prebuilt kernels it
	// launches (none: the copy engine, or the CPU).
	Kernels map[ops.Op][]string
	// User says it came from a user's directory of kernels (Registry.WithUser), and
	// Catalog is that directory's catalogue (nil: the one embedded in the binary).
	User    bool
	Catalog *kernels.Catalog
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

// builtin are symmem's own implementations, in the order tables and help show them.
// The first entry of a backend is its default. Nothing changes it: a Registry copies
// it and adds a user's implementations to its copy.
var builtin = []Impl{
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
