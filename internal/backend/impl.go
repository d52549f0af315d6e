package backend

import (
	"fmt"
	"slices"
	"strings"
)

// The operations symmem knows. Run tests all but latency; bench measures them all.
const (
	OpPut       = "put"
	OpGet       = "get"
	OpPutSignal = "put-signal"
	OpLatency   = "latency" // a ping-pong of a put with signal

	// Collectives: every rank takes part (see Collective for each one's buffers).
	OpAllReduce     = "all-reduce"
	OpAllGather     = "all-gather"
	OpReduceScatter = "reduce-scatter"
	OpBroadcast     = "broadcast"
	OpAllToAll      = "all-to-all"
	// MoE all-to-all-v: tokens to the ranks of their experts, and back.
	OpDispatch = "dispatch"
	OpCombine  = "combine"
)

// PointOps are the one-sided operations between two ranks: bench's default sweep.
var PointOps = []string{OpPut, OpGet, OpPutSignal, OpLatency}

// CollectiveOps are the operations every rank takes part in.
var CollectiveOps = []string{OpAllReduce, OpAllGather, OpReduceScatter, OpBroadcast, OpAllToAll, OpDispatch, OpCombine}

// Ops lists every operation, in the order tables show them.
var Ops = append(slices.Clone(PointOps), CollectiveOps...)

// IsMoE says whether op is the MoE all-to-all-v (its sizes come from a routing).
func IsMoE(op string) bool { return op == OpDispatch || op == OpCombine }

// RunOps are the operations `symmem run` can test.
var RunOps = append([]string{OpPut, OpGet, OpPutSignal}, CollectiveOps...)

// IsCollective says whether every rank takes part in op.
func IsCollective(op string) bool { return slices.Contains(CollectiveOps, op) }

// Splits says whether each rank's share of op is its size over the ranks (all-gather's
// input, reduce-scatter's output, all-to-all's block per peer), not the whole of it.
func Splits(op string) bool {
	return op == OpAllGather || op == OpReduceScatter || op == OpAllToAll
}

// Reduces says whether op sums its inputs (its element type matters).
func Reduces(op string) bool { return op == OpAllReduce || op == OpReduceScatter || op == OpCombine }

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
	Kernels map[string][]string
	// User says it came from a user's directory of kernels (RegisterUser).
	User bool
	// BlockAlign says, by op, what each rank's block of a collective must be a whole
	// multiple of, in bytes (triton's reduce-scatter moves 16-byte vectors); sweeps
	// leave out the sizes whose blocks are not, and run refuses them before it starts.
	BlockAlign map[string]int64
}

// Holds says whether the implementation can run op with each rank's block (coll.Shape's
// Block) of block bytes.
func (i Impl) Holds(op string, block int64) bool {
	a := i.BlockAlign[op]
	return a == 0 || block%a == 0
}

// Impls is the registry, in the order tables and help show them. The first entry of a
// backend is its default.
var Impls = []Impl{
	{Name: "triton", Backend: NVSHMEM, Summary: "prebuilt Triton kernels calling NVSHMEM device functions",
		Kernels: map[string][]string{OpPut: {"put_block"}, OpGet: {"get_block"}, OpPutSignal: {"put_signal_block", "wait_signal"}, OpLatency: {"pingpong"},
			OpAllReduce: {"reduce_bf16", "reduce_f32", "reduce_staged_bf16", "reduce_push_bf16", "reduce_push_f32", "reduce_ll_bf16", "reduce_ll_f32", "reduce_ll128_bf16", "reduce_ll128_f32"}, OpReduceScatter: {"reduce_bf16", "reduce_f32", "reduce_push_bf16", "reduce_push_f32"},
			OpAllGather: {"push", "push_ll"}, OpBroadcast: {"push", "push_ll"}, OpAllToAll: {"push", "push_ll"},
			OpDispatch: {"dispatch"}, OpCombine: {"combine_bf16", "combine_f32", "combine_staged_bf16", "combine_staged_f32"}},
		BlockAlign: map[string]int64{OpReduceScatter: 16}},
	{Name: "cuda", Backend: NVSHMEM, Summary: "the same operations in CUDA C against the NVSHMEM device library",
		Kernels: map[string][]string{OpPut: {"put_block"}, OpGet: {"get_block"}, OpPutSignal: {"put_signal_block", "wait_signal"}, OpLatency: {"pingpong"}}},
	{Name: "copy-engine", Backend: NVSHMEM, Summary: "cuMemcpyDtoDAsync into the peer's mapping (nvshmem_ptr)",
		Kernels: map[string][]string{OpPut: nil, OpGet: nil, OpAllGather: nil, OpBroadcast: nil, OpAllToAll: nil}},
	{Name: "sm-store", Backend: NVSHMEM, Summary: "a kernel storing straight into the peer's mapping",
		Kernels: map[string][]string{OpPut: {"sm_store"}, OpGet: {"sm_store"}}},
	{Name: "nccl", Backend: NVSHMEM, Summary: "NCCL's collectives (libnccl.so.2 opened with dlopen, bootstrapped through symmem's store)",
		Kernels: map[string][]string{OpAllReduce: nil, OpAllGather: nil, OpReduceScatter: nil, OpBroadcast: nil, OpAllToAll: nil}},
	{Name: "nccl-symm", Backend: NVSHMEM, Summary: "NCCL's symmetric-memory collectives on registered windows (NCCL 2.27+)",
		Kernels: map[string][]string{OpAllReduce: nil, OpAllGather: nil, OpReduceScatter: nil}},
	{Name: "nccl-device", Backend: NVSHMEM, Summary: "CUDA kernels calling NCCL's device API: LSA loads, stores and barriers (NCCL 2.28+)",
		Kernels: map[string][]string{OpPut: {"put_block"}, OpGet: {"get_block"}, OpPutSignal: {"put_signal_block", "wait_signal"}, OpLatency: {"pingpong"},
			OpAllReduce: {"allreduce_oneshot_bf16", "allreduce_oneshot_f32", "allreduce_twoshot_bf16", "allreduce_twoshot_f32"}}},
	{Name: "memcpy", Backend: CPU, Summary: "the CPU backend's copies (and sums) over shared memory",
		Kernels: map[string][]string{OpPut: nil, OpGet: nil, OpPutSignal: nil, OpLatency: nil,
			OpAllReduce: nil, OpAllGather: nil, OpReduceScatter: nil, OpBroadcast: nil, OpAllToAll: nil, OpDispatch: nil, OpCombine: nil}},
}

// Supports says whether the implementation can carry out op.
func (i Impl) Supports(op string) bool { _, ok := i.Kernels[op]; return ok }

// Ops lists the operations the implementation serves, in Ops order.
func (i Impl) Ops() []string {
	var out []string
	for _, op := range Ops {
		if i.Supports(op) {
			out = append(out, op)
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
func ImplsServing(backend, op string) []string {
	var out []string
	for _, i := range ImplsOf(backend) {
		if i.Supports(op) {
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
func (i Impl) CheckOp(op string) error {
	if !slices.Contains(Ops, op) {
		return fmt.Errorf("unknown op %q: use %s", op, strings.Join(Ops, ", "))
	}
	if !i.Supports(op) {
		var can []string
		for _, j := range ImplsOf(i.Backend) {
			if j.Supports(op) {
				can = append(can, j.Name)
			}
		}
		return fmt.Errorf("--impl %s cannot run %s (it serves %s): use --impl %s", i.Name, op, strings.Join(i.Ops(), ", "), strings.Join(can, " or "))
	}
	return nil
}
