package kernels

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Signatures are the kernels symmem launches and the parameters each takes, in order:
// the contract a user's kernel must follow (docs/kernels.md). Every data kernel gets
// the whole message (nbytes) and the chunk the launcher gives each block (program);
// the grid is ceil(nbytes / chunk) blocks. A kernel may ignore chunk and split the
// message its own way, as long as the grid's blocks together move every byte.
var Signatures = map[string][]Param{
	"put_block":        {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "peer", Type: "i32"}},
	"get_block":        {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "peer", Type: "i32"}},
	"put_signal_block": {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"}, {Name: "chunk", Type: "i64"}, {Name: "sig", Type: "ptr"}, {Name: "peer", Type: "i32"}},
	"wait_signal":      {{Name: "sig", Type: "ptr"}, {Name: "value", Type: "u64"}},
	"pingpong": {{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "sig", Type: "ptr"}, {Name: "nbytes", Type: "i64"},
		{Name: "iters", Type: "i32"}, {Name: "peer", Type: "i32"}, {Name: "initiator", Type: "i32"}, {Name: "stamps", Type: "ptr"}},
	// A user's collectives: see collParams.
	"all_reduce_bf16":     collParams,
	"all_reduce_f32":      collParams,
	"reduce_scatter_bf16": collParams,
	"reduce_scatter_f32":  collParams,
	"all_gather":          collParams,
	"all_to_all":          collParams,
	"broadcast":           append(slices.Clip(collParams), Param{Name: "root", Type: "i32"}),
	// A user's MoE dispatch and combine: see moeParams.
	"moe_dispatch":     moeParams,
	"moe_combine_bf16": moeParams,
	"moe_combine_f32":  moeParams,
}

// collParams are what a user's collective kernel takes: every rank's send, recv and
// scratch (symmetric), nelem (the elements of one rank's share: the whole message of
// all-reduce and broadcast, each rank's block of reduce-scatter's output, of
// all-gather's input and of all-to-all's exchange; bytes for the ops that only move
// data), sig (n u64 words per block, for up to 128 blocks, zero before the job's first
// user collective and written only by the kernels), seq (1, 2, 3, ...: this rank's
// launches of user collectives, the same on every rank at the same launch, so a
// signal of the value seq is this launch's and no earlier one's), this rank and the
// number of ranks; broadcast's root last. scratch holds 2 x n x nelem elements: a slot
// per rank in two halves that launches can alternate.
var collParams = []Param{{Name: "send", Type: "ptr"}, {Name: "recv", Type: "ptr"}, {Name: "scratch", Type: "ptr"}, {Name: "nelem", Type: "i64"},
	{Name: "sig", Type: "ptr"}, {Name: "seq", Type: "i64"}, {Name: "me", Type: "i32"}, {Name: "n", Type: "i32"}}

// moeParams are what a user's MoE dispatch and combine kernels take: every rank's send,
// recv and scratch (symmetric); slots, this rank's routing table (tokens x n int32 in
// device memory of the rank's own: slots[t*n + d] is the slot of this rank's token t on
// rank d, -1 where t does not go to d); origin, the other direction (nslots pairs of
// int32: the rank and token whose copy slot j of this rank holds); tokens per rank;
// nslots, the copies this rank receives; hidden, the elements of a token (bytes for
// dispatch, which only moves data); then sig, seq, me and n as collParams. Dispatch
// puts token t of rank s into slot slots_s[t*n + d] of rank d's recv; combine sums
// into token t of rank s's recv the copy at slot slots_s[t*n + d] of every rank d's
// send. scratch holds 2 x n x tokens x hidden elements.
var moeParams = []Param{{Name: "send", Type: "ptr"}, {Name: "recv", Type: "ptr"}, {Name: "scratch", Type: "ptr"},
	{Name: "slots", Type: "ptr"}, {Name: "origin", Type: "ptr"}, {Name: "tokens", Type: "i64"}, {Name: "nslots", Type: "i64"}, {Name: "hidden", Type: "i64"},
	{Name: "sig", Type: "ptr"}, {Name: "seq", Type: "i64"}, {Name: "me", Type: "i32"}, {Name: "n", Type: "i32"}}

// userOp is what a user's file may declare one kernel under (SYMMEM_KERNELS in the
// file, --op on the command line): an operation, or op:float32 for the float32 kernel
// of one that sums (its bare name is the bf16 one); the catalogue's kernel it names;
// whether it is a collective's; whether it waits on a peer and so may take Bounded.
type userOp struct {
	key, kernel string
	coll, waits bool
}

// userOps is the one table of them, a reducing collective's bf16 kernel before its
// float32 one; OpKernels, CollKernels and waits are read off it. The build script's
// USER_SIGNATURES holds the same keys and kernels (a test compares them).
var userOps = []userOp{
	{key: "put", kernel: "put_block"}, {key: "get", kernel: "get_block"}, {key: "put-signal", kernel: "put_signal_block"},
	{key: "latency", kernel: "pingpong", waits: true}, {key: "wait-signal", kernel: "wait_signal", waits: true},
	{"all-reduce", "all_reduce_bf16", true, true}, {"all-reduce:float32", "all_reduce_f32", true, true},
	{"reduce-scatter", "reduce_scatter_bf16", true, true}, {"reduce-scatter:float32", "reduce_scatter_f32", true, true},
	{"all-gather", "all_gather", true, true}, {"all-to-all", "all_to_all", true, true}, {"broadcast", "broadcast", true, true},
	{"dispatch", "moe_dispatch", true, true}, {"combine", "moe_combine_bf16", true, true}, {"combine:float32", "moe_combine_f32", true, true},
}

// OpKernels maps the operation names a user declares kernels under (SYMMEM_KERNELS in
// the file, --op on the command line) to the kernel names of the catalogue.
var OpKernels = map[string]string{}

// CollKernels are the kernels of a user's collectives, by operation: the reducing ones
// one per element type (bf16, float32), the others one that moves bytes.
var CollKernels = map[string][]string{}

// Bounded are the parameters a kernel that waits on a peer (wait_signal, pingpong) may
// take after its signature: symmem then passes the job's wait limit in nanoseconds and
// the address of the rank's mailbox, and the kernel gives up on the device, reporting
// in the mailbox and trapping, rather than wait past the limit (docs/kernels.md).
// Symmem's own wait kernels and collective kernels all take them.
var Bounded = []Param{{Name: "limit_ns", Type: "u64"}, {Name: "mailbox", Type: "ptr"}}

// waits are the kernels that may take Bounded.
var waits = map[string]bool{}

func init() {
	for _, o := range userOps {
		OpKernels[o.key] = o.kernel
		waits[o.kernel] = o.waits
		if op, _, _ := strings.Cut(o.key, ":"); o.coll {
			CollKernels[op] = append(CollKernels[op], o.kernel)
		}
	}
}

// hiddenParams are Triton's trailing scratch pointers, which symmem passes as null.
var hiddenParams = []string{"global_scratch", "profile_scratch"}

// CheckSignature says whether the artifact takes the parameters symmem passes to its
// kernel, naming the first one that does not fit.
func (a *Artifact) CheckSignature() error {
	want, ok := Signatures[a.Kernel]
	if !ok {
		return fmt.Errorf("kernel %s: symmem launches no kernel %q: name it one of %s", a.Name(), a.Kernel, strings.Join(kernelNames(), ", "))
	}
	var visible []Param
	for i, p := range a.Params {
		if p.Hidden {
			// Only Triton's scratch pointers may be hidden, and only at the end.
			if k := i - len(visible); k >= len(hiddenParams) || p.Name != hiddenParams[k] || p.Type != "ptr" {
				return fmt.Errorf("kernel %s: hidden parameter %q (%s) is not one of Triton's trailing scratch pointers %v", a.Name(), p.Name, p.Type, hiddenParams)
			}
			continue
		}
		if len(visible) < i {
			return fmt.Errorf("kernel %s: parameter %q comes after Triton's hidden scratch pointers", a.Name(), p.Name)
		}
		visible = append(visible, p)
	}
	sig := signatureString(a.Kernel)
	for i, w := range want {
		if i >= len(visible) {
			return fmt.Errorf("kernel %s: parameter %q (%s) is missing: %s takes %s", a.Name(), w.Name, w.Type, a.Kernel, sig)
		}
		if p := visible[i]; p.Name != w.Name || p.Type != w.Type {
			return fmt.Errorf("kernel %s: parameter %d is %q (%s), symmem passes %q (%s) there: %s takes %s", a.Name(), i+1, p.Name, p.Type, w.Name, w.Type, a.Kernel, sig)
		}
	}
	if waits[a.Kernel] && len(visible) == len(want)+len(Bounded) &&
		visible[len(want)] == Bounded[0] && visible[len(want)+1] == Bounded[1] {
		visible = visible[:len(want)]
	}
	if len(visible) > len(want) {
		p := visible[len(want)]
		return fmt.Errorf("kernel %s: parameter %q (%s) is one symmem does not pass: %s takes %s", a.Name(), p.Name, p.Type, a.Kernel, sig)
	}
	if a.GlobalScratchSize > 0 || a.ProfileScratchSize > 0 {
		return fmt.Errorf("kernel %s needs %d bytes of global and %d of profile scratch, which symmem does not provide", a.Name(), a.GlobalScratchSize, a.ProfileScratchSize)
	}
	return nil
}

// UserOps are the operations a user's file can declare kernels for, in the order the
// docs give them.
func UserOps() []string {
	return []string{"put", "get", "put-signal", "latency", "wait-signal", "all-reduce", "all-reduce:float32",
		"reduce-scatter", "reduce-scatter:float32", "all-gather", "all-to-all", "broadcast", "dispatch", "combine", "combine:float32"}
}

func kernelNames() []string {
	var ks []string
	for k := range Signatures {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// signatureString is how messages show a kernel's signature: (dst, src, nbytes, chunk, peer).
func signatureString(kernel string) string {
	var names []string
	for _, p := range Signatures[kernel] {
		names = append(names, p.Name)
	}
	return "(" + strings.Join(names, ", ") + ")"
}
