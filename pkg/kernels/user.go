package kernels

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/symmem/symmem/internal/ops"
)

// UserKernel is one kernel a user's file may provide: the key it is declared under
// (SYMMEM_KERNELS in the file, --kernel on the command line), the catalogue's kernel,
// the operation it serves, and the parameters symmem passes it with the Triton types
// the build compiles them as. baseKernels is the one table of them; Signatures,
// OpKernels, CollKernels and the build script's signatures (SignaturesJSON) are read
// off it.
type UserKernel struct {
	Key, Kernel string
	// Op is the operation it serves; "" for a receiver's wait (Receives).
	Op string
	// DType is the element type a kernel of one type takes (a reducing collective's,
	// a fused matrix product's, get-add's: bf16, float32, ...), and RedOp a reducing
	// collective's reduction operator (ops.RedOps' names: sum, max, ...); "" elsewhere.
	DType, RedOp string
	// Variant is the variant of its op it runs (put-flag's ordering, barrier's
	// meeting, as --algo names them); "" for an op without variants.
	Variant string
	// Receives lists the operations whose receiver waits with it.
	Receives []string
	// Coll says it is a collective's; Waits that it waits on a peer and so may take
	// Bounded; OneWarp that it runs as one warp (the build compiles it for one warp
	// count).
	Coll, Waits, OneWarp bool
	// Tile says it is a matrix kernel that takes its tile as the constexprs TileConsts
	// after its parameters: the build gives them TileDefaults and records them in the
	// sidecar (Artifact.Tile), and symmem launches it on a grid of row blocks by column
	// blocks of that tile.
	Tile bool
	// params are "name:type" with Triton's types (*i8, i64, ...).
	params string
}

// collParams are what a user's collective kernel takes: every rank's send, recv and
// scratch (symmetric, of the op's element type), nelem (the elements of one rank's
// share: the whole message of all-reduce and broadcast, each rank's block of
// reduce-scatter's output, of all-gather's input and of all-to-all's exchange; bytes
// for the ops that only move data), sig (n u64 words per block, for up to 128 blocks,
// zero before the job's first user collective and written only by the kernels), seq
// (1, 2, 3, ...: this rank's launches of user collectives, the same on every rank at
// the same launch, so a signal of the value seq is this launch's and no earlier
// one's), this rank and the number of ranks; broadcast's root last. scratch holds 2 x
// n x nelem elements: a slot per rank in two halves that launches can alternate.
func collParams(elem string) string {
	return fmt.Sprintf("send:*%[1]s recv:*%[1]s scratch:*%[1]s nelem:i64 sig:*u64 seq:i64 me:i32 n:i32", elem)
}

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
func moeParams(elem string) string {
	return fmt.Sprintf("send:*%[1]s recv:*%[1]s scratch:*%[1]s slots:*i32 origin:*i32 tokens:i64 nslots:i64 hidden:i64 sig:*u64 seq:i64 me:i32 n:i32", elem)
}

// agMatmulParams are what a user's fused all-gather-matmul kernel takes: PyTorch's own
// test kernels' parameters (my_fused_matmul_allgather_put_kernel), by name and in order.
// a_ptr is this rank's rows of A (m_local x k), b_ptr all of B (k x n), c_ptr all of C
// ((m_local x ranks) x n), every one row-major and symmetric, of the kernel's element
// type; the strides are in elements (stride_ak, stride_bn and stride_cn are 1); rank is
// this rank, peer the rank its rows go to. symmem launches it once per peer (on one
// rank, once, with peer = rank), on a grid of cdiv(m_local, block_m) x cdiv(n, block_n)
// programs (tl.program_id(0) the row block, (1) the column block): each program computes
// its tile of this rank's rows of C (rows rank*m_local ..) with float32 accumulation,
// stores it into C here and puts it into C on peer. Its puts need not be complete when
// the kernel ends: the host's quiet (or barrier) after it completes them.
func agMatmulParams(elem string) string {
	return fmt.Sprintf("a_ptr:*%[1]s b_ptr:*%[1]s c_ptr:*%[1]s m_local:i32 n:i32 k:i32 stride_am:i32 stride_ak:i32 "+
		"stride_bk:i32 stride_bn:i32 stride_cm:i32 stride_cn:i32 rank:i32 peer:i32", elem)
}

// mrsMatmulParams are what a user's fused matmul-reduce-scatter kernel takes, by name
// and in order: agMatmulParams' with scratch_ptr after c_ptr and ranks and step after
// peer. a_ptr is all of this rank's A ((m_local x ranks) x k), b_ptr its B (k x n),
// c_ptr its rows of the result (m_local x n), scratch_ptr a slot of m_local x n per rank
// ((m_local x ranks) x n, C's strides); every one row-major and symmetric, of the
// kernel's element type, the strides in elements (stride_ak, stride_bn and stride_cn
// are 1). symmem launches it on a grid of cdiv(m_local, block_m) x cdiv(n, block_n)
// programs (tl.program_id(0) the row block, (1) the column block), in two steps with a
// barrier of every rank before each (which completes the puts before it). Step 0, once
// per peer (rank+1, rank+2, ... and this rank last): each program computes its tile of
// rows peer*m_local.. of A @ B with float32 accumulation and puts it, rounded to the
// element type, into slot rank of peer's scratch (rows rank*m_local..); its own slot is
// written by its last launch, so a launch before it may stage a tile there. Step 1,
// once, with peer = rank: each program sums its tile of the ranks slots of this rank's
// scratch in rank order in float32 and stores it, rounded once, into C.
func mrsMatmulParams(elem string) string {
	return fmt.Sprintf("a_ptr:*%[1]s b_ptr:*%[1]s c_ptr:*%[1]s scratch_ptr:*%[1]s m_local:i32 n:i32 k:i32 stride_am:i32 "+
		"stride_ak:i32 stride_bk:i32 stride_bn:i32 stride_cm:i32 stride_cn:i32 rank:i32 peer:i32 ranks:i32 step:i32", elem)
}

// getAddParams are what a user's get-add kernel takes, of its element type: dst, this
// rank's output; local, its own operand; src, the peer's operand (symmetric: the same
// offset on every rank); tmp, a symmetric scratch of the message's size the kernel may
// get src into; nelem, the message's elements; peer, the rank src is got from. The
// kernel writes dst[i] = local[i] + src[i] on peer for every i < nelem, in the element
// type, and is complete when it ends (its get waited for). One block runs it.
func getAddParams(elem string) string {
	return fmt.Sprintf("dst:*%[1]s local:*%[1]s src:*%[1]s tmp:*%[1]s nelem:i64 peer:i32", elem)
}

// getAddKernels are get-add's kernels, one per element type it adds in
// (ops.GetAdd's DTypes): key get-add for its default type (ops.DefaultAddDType,
// get_add_f32) first, then get-add:TYPE for the others (get-add:bf16, get_add_bf16).
func getAddKernels() []UserKernel {
	var out []UserKernel
	for _, dt := range ops.Op(ops.GetAdd).DTypes() {
		e, ok := tritonElems[dt]
		if !ok {
			panic("get-add adds in " + dt + ", which no Triton element type of the table names")
		}
		k := UserKernel{Key: ops.GetAdd + ":" + dt, Kernel: "get_add_" + e.suffix, Op: ops.GetAdd, DType: dt, params: getAddParams(e.triton)}
		if dt == ops.DefaultAddDType {
			k.Key = ops.GetAdd
			out = append([]UserKernel{k}, out...)
			continue
		}
		out = append(out, k)
	}
	return out
}

// tritonElems are the Triton names of the element types a kernel of the table takes
// typed pointers to, and the suffix of its kernel's name.
var tritonElems = map[string]struct{ triton, suffix string }{
	"bf16": {"bf16", "bf16"}, "float16": {"fp16", "f16"}, "float32": {"fp32", "f32"}, "float64": {"fp64", "f64"},
	"int32": {"i32", "i32"}, "int64": {"i64", "i64"},
}

// TileConsts are the constexprs a user's matrix kernel (UserKernel.Tile) takes its tile
// as, after its parameters, in this order: rows, columns and K step; TileDefaults the
// values the build gives them, as PyTorch's test launches its fused kernels.
var (
	TileConsts   = []string{"block_m", "block_n", "block_k"}
	TileDefaults = []int{64, 64, 32}
)

// dataParams are what put_block and get_block take: the whole message (nbytes) and
// the chunk the launcher gives each block (program); the grid is ceil(nbytes / chunk)
// blocks. A kernel may ignore chunk and split the message its own way, as long as the
// grid's blocks together move every byte.
const dataParams = "dst:*i8 src:*i8 nbytes:i64 chunk:i64 peer:i32"

// flagParams are what a user's put-flag kernels take, meetParams its barrier kernels.
const (
	flagParams = "dst:*i8 src:*i8 nbytes:i64 flag:*u64 flag_src:*u64 value:u64 peer:i32"
	meetParams = "slots:*u64 wrong:*u64 rnd:u64 me:i32 n:i32 meet:i32"
)

// baseKernels is the table, in the order the docs give the operations; a reducing
// collective's bf16 kernel comes before its float32 one, get-add's float32 kernel
// before its others. withRedOps adds the other reduction operators' kernels.
func baseKernels() []UserKernel {
	return append([]UserKernel{
		{Key: "put", Kernel: "put_block", Op: "put", params: dataParams},
		{Key: "get", Kernel: "get_block", Op: "get", params: dataParams},
		{Key: "put-signal", Kernel: "put_signal_block", Op: "put-signal", params: "dst:*i8 src:*i8 nbytes:i64 chunk:i64 sig:*u64 peer:i32"},
		{Key: "latency", Kernel: "pingpong", Op: "latency", Waits: true, OneWarp: true,
			params: "dst:*i8 src:*i8 sig:*u64 nbytes:i64 iters:i32 peer:i32 initiator:i32 stamps:*u64"},
		{Key: "wait-signal", Kernel: "wait_signal", Receives: []string{"put-signal", "signal"}, Waits: true, OneWarp: true, params: "sig:*u64 value:u64"},
		// signal: op (ops.SignalSet or ops.SignalAdd) with value to sig on peer, once, then
		// ordered before the next signal to peer (a fence); the receiver waits with
		// wait_signal.
		{Key: "signal", Kernel: "signal_op", Op: "signal", OneWarp: true, params: "sig:*u64 op:i32 value:u64 peer:i32"},
		// put-flag, a kernel per variant: put src's nbytes into dst on peer, order them
		// before what follows (fence or quiet), then put value into the flag on peer;
		// flag_src is a word of this rank's own to put it from. One block runs it. The
		// receiver waits with wait_flag (flag reaches value or more), else wait_signal.
		{Key: "put-flag", Kernel: "put_flag_fence", Op: "put-flag", Variant: ops.Fence, params: flagParams},
		{Key: "put-flag:quiet", Kernel: "put_flag_quiet", Op: "put-flag", Variant: ops.Quiet, params: flagParams},
		{Key: "wait-flag", Kernel: "wait_flag", Receives: []string{"put-flag"}, Waits: true, OneWarp: true, params: "flag:*u64 value:u64"},
		// barrier, a kernel per variant, with symmem's own barrier kernels' signature: bit
		// 0 of meet writes this rank's stamp (ops.MeetStamp of rnd) into its word
		// (ops.MeetSlot) of every rank's slots (barrier-all) or of its own (sync-all), bit
		// 1 meets every rank; then the stamps of this round it does not see (in its own
		// slots, or fetched from each rank's) are added to wrong. One block.
		{Key: "barrier", Kernel: "barrier_all", Op: "barrier", Variant: ops.BarrierAll, OneWarp: true, params: meetParams},
		{Key: "barrier:sync-all", Kernel: "sync_all", Op: "barrier", Variant: ops.SyncAll, OneWarp: true, params: meetParams},
		{Key: "all-reduce", Kernel: "all_reduce_bf16", Op: "all-reduce", DType: "bf16", RedOp: "sum", Coll: true, Waits: true, params: collParams("bf16")},
		{Key: "all-reduce:float32", Kernel: "all_reduce_f32", Op: "all-reduce", DType: "float32", RedOp: "sum", Coll: true, Waits: true, params: collParams("fp32")},
		{Key: "reduce-scatter", Kernel: "reduce_scatter_bf16", Op: "reduce-scatter", DType: "bf16", RedOp: "sum", Coll: true, Waits: true, params: collParams("bf16")},
		{Key: "reduce-scatter:float32", Kernel: "reduce_scatter_f32", Op: "reduce-scatter", DType: "float32", RedOp: "sum", Coll: true, Waits: true, params: collParams("fp32")},
		{Key: "all-gather", Kernel: "all_gather", Op: "all-gather", Coll: true, Waits: true, params: collParams("i8")},
		{Key: "all-to-all", Kernel: "all_to_all", Op: "all-to-all", Coll: true, Waits: true, params: collParams("i8")},
		{Key: "broadcast", Kernel: "broadcast", Op: "broadcast", Coll: true, Waits: true, params: collParams("i8") + " root:i32"},
		{Key: "dispatch", Kernel: "moe_dispatch", Op: "dispatch", Coll: true, Waits: true, params: moeParams("i8")},
		{Key: "combine", Kernel: "moe_combine_bf16", Op: "combine", DType: "bf16", Coll: true, Waits: true, params: moeParams("bf16")},
		{Key: "combine:float32", Kernel: "moe_combine_f32", Op: "combine", DType: "float32", Coll: true, Waits: true, params: moeParams("fp32")},
		{Key: "all-gather-matmul", Kernel: "all_gather_matmul_bf16", Op: "all-gather-matmul", DType: "bf16", Tile: true, params: agMatmulParams("bf16")},
		{Key: "all-gather-matmul:float16", Kernel: "all_gather_matmul_f16", Op: "all-gather-matmul", DType: "float16", Tile: true, params: agMatmulParams("fp16")},
		{Key: "matmul-reduce-scatter", Kernel: "matmul_reduce_scatter_bf16", Op: "matmul-reduce-scatter", DType: "bf16", Tile: true, params: mrsMatmulParams("bf16")},
		{Key: "matmul-reduce-scatter:float16", Kernel: "matmul_reduce_scatter_f16", Op: "matmul-reduce-scatter", DType: "float16", Tile: true, params: mrsMatmulParams("fp16")},
	}, getAddKernels()...)
}

// userTable is the table with its reduction operators' kernels, and what is read off
// it.
type userTable struct {
	kernels     []UserKernel
	signatures  map[string][]Param
	opKernels   map[string]string
	collKernels map[string][]string
	waits       map[string]bool // the kernels that may take Bounded
	tiles       map[string]bool // the matrix kernels (UserKernel.Tile)
	oneWarp     map[string]bool // the kernels built for one warp (UserKernel.OneWarp)
}

// table is built on first use: a process that launches no user kernel (help, a CPU
// rank) does not pay for it at start-up.
var table = sync.OnceValue(func() *userTable {
	t := &userTable{kernels: withRedOps(baseKernels()), signatures: map[string][]Param{},
		opKernels: map[string]string{}, collKernels: map[string][]string{}, waits: map[string]bool{}, tiles: map[string]bool{},
		oneWarp: map[string]bool{}}
	for _, k := range t.kernels {
		t.opKernels[k.Key] = k.Kernel
		t.waits[k.Kernel] = k.Waits
		t.tiles[k.Kernel] = k.Tile
		t.oneWarp[k.Kernel] = k.OneWarp
		t.signatures[k.Kernel] = slices.Clip(goParams(k.params))
		if k.Coll {
			t.collKernels[k.Op] = append(t.collKernels[k.Op], k.Kernel)
		}
	}
	for op, ks := range t.collKernels {
		t.collKernels[op] = slices.Clip(ks) // an append by a caller copies
	}
	return t
})

// Signatures are the kernels symmem launches from a user's catalogue and the
// parameters each takes, in order: the contract a user's kernel must follow
// (docs/kernels.md). The map is shared: do not change it.
func Signatures() map[string][]Param { return table().signatures }

// OpKernels maps the keys a user declares kernels under to the kernel names of the
// catalogue. The map is shared: do not change it.
func OpKernels() map[string]string { return table().opKernels }

// CollKernels are the kernels of a user's collectives, by operation: the reducing ones
// one per element type (bf16, float32) and reduction operator, the others one that
// moves bytes. The map is shared: do not change it.
func CollKernels() map[string][]string { return table().collKernels }

// Bounded are the parameters a kernel that waits on a peer (wait_signal, pingpong) may
// take after its signature: symmem then passes the job's wait limit in nanoseconds and
// the address of the rank's mailbox, and the kernel gives up on the device, reporting
// in the mailbox and trapping, rather than wait past the limit (docs/kernels.md).
// Symmem's own wait kernels and collective kernels all take them.
var Bounded = []Param{{Name: "limit_ns", Type: "u64"}, {Name: "mailbox", Type: "ptr"}}

// boundedTriton are Bounded's Triton types, for the build script.
const boundedTriton = "limit_ns:u64 mailbox:*u64"

// withRedOps is the table with, after it, a kernel of each reducing collective of it
// (all-reduce, reduce-scatter: those that take --redop) for every other reduction
// operator of ops.RedOps, per element type: key OP[:float32]:RED, kernel KERNEL_RED
// (all-reduce:max, all_reduce_bf16_max). A kernel combines with its one operator.
func withRedOps(base []UserKernel) []UserKernel {
	var more []UserKernel
	for _, r := range ops.RedOps() {
		if r.IsSum() {
			continue
		}
		for _, k := range base {
			if k.RedOp != "sum" || !ops.Op(k.Op).TakesRedOp() {
				continue
			}
			k.Key, k.Kernel, k.RedOp = k.Key+":"+r.Name, k.Kernel+"_"+r.Name, r.Name
			more = append(more, k)
		}
	}
	return append(base, more...)
}

// goParams is params ("name:*i8 ...") as the sidecars type them: ptr for a pointer.
func goParams(params string) []Param {
	var out []Param
	for _, f := range strings.Fields(params) {
		name, typ, _ := strings.Cut(f, ":")
		if strings.HasPrefix(typ, "*") {
			typ = "ptr"
		}
		out = append(out, Param{Name: name, Type: typ})
	}
	return out
}

// UserKernels is the table of the kernels a user's file may provide.
func UserKernels() []UserKernel { return slices.Clone(table().kernels) }

// SignaturesJSON is the table as the build script reads it (kernels build passes it
// in a file): {"kernels": [{"key", "kernel", "op", "params": [[name, Triton type],
// ...], "waits", "one_warp", "tile": [[constexpr, value], ...] (a matrix kernel's:
// TileConsts with TileDefaults)}, ...], "bounded": [[name, type], ...]}.
func SignaturesJSON() []byte {
	pairs := func(params string) [][2]string {
		out := [][2]string{}
		for _, f := range strings.Fields(params) {
			name, typ, _ := strings.Cut(f, ":")
			out = append(out, [2]string{name, typ})
		}
		return out
	}
	type entry struct {
		Key     string      `json:"key"`
		Kernel  string      `json:"kernel"`
		Op      string      `json:"op"`
		Params  [][2]string `json:"params"`
		Waits   bool        `json:"waits"`
		OneWarp bool        `json:"one_warp"`
		Tile    [][2]any    `json:"tile,omitempty"`
	}
	var doc struct {
		Kernels []entry     `json:"kernels"`
		Bounded [][2]string `json:"bounded"`
	}
	for _, k := range table().kernels {
		e := entry{k.Key, k.Kernel, k.Op, pairs(k.params), k.Waits, k.OneWarp, nil}
		if k.Tile {
			for i, c := range TileConsts {
				e.Tile = append(e.Tile, [2]any{c, TileDefaults[i]})
			}
		}
		doc.Kernels = append(doc.Kernels, e)
	}
	doc.Bounded = pairs(boundedTriton)
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // strings and booleans only
	}
	return b
}

// hiddenParams are Triton's trailing scratch pointers, which symmem passes as null.
var hiddenParams = []string{"global_scratch", "profile_scratch"}

// CheckSignature says whether the artifact takes the parameters symmem passes to its
// kernel, naming the first one that does not fit.
func (a *Artifact) CheckSignature() error {
	want, ok := Signatures()[a.Kernel]
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
	if table().waits[a.Kernel] && len(visible) == len(want)+len(Bounded) &&
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
	if table().tiles[a.Kernel] && (len(a.Tile) != len(TileConsts) || slices.Min(a.Tile) < 1) {
		return fmt.Errorf("kernel %s is a matrix kernel whose metadata has no tile (%s: %v): rebuild it with symmem kernels build", a.Name(), strings.Join(TileConsts, ", "), a.Tile)
	}
	return nil
}

// UserOps are the keys a user's file can declare kernels under, in the order the docs
// give them, but for the reduction operators' (KEY:RED of the reducing ones, RedOpKeys).
func UserOps() []string {
	var out []string
	for _, k := range table().kernels {
		if k.RedOp == "" || k.RedOp == ops.Sum.Name {
			out = append(out, k.Key)
		}
	}
	return out
}

// RedOpKeys says how the keys of a reducing kernel's other operators are spelled.
const RedOpKeys = "KEY:RED for another reduction operator than sum, as all-reduce:max, all-reduce:float32:min"

func kernelNames() []string {
	var ks []string
	for k := range Signatures() {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// signatureString is how messages show a kernel's signature: (dst, src, nbytes, chunk, peer).
func signatureString(kernel string) string {
	var names []string
	for _, p := range Signatures()[kernel] {
		names = append(names, p.Name)
	}
	return "(" + strings.Join(names, ", ") + ")"
}
