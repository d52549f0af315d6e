package gpu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// The fused operations on the fake GPU: cuBLASLt imitated by fakeGemm, triton's fused
// kernels (kernels/triton/symmem_fused.py) by fusedKernel, a user's fused kernels by
// userAGMatmul and userMatmulRS, each reading its arguments by the names in the
// artifact's sidecar and doing, tile by tile, what the kernel does, faults included.

// fakeGemm imitates cuBLASLt: c = a @ b in the rank's heap, each element a float32 sum
// rounded to the element type once.
type fakeGemm struct {
	g         *fakeGPU
	calls     []string
	destroyed bool
}

func (f *fakeGemm) Gemm(dtype string, mm ops.Matmul, a, b, c uint64, st stream) error {
	g := f.g
	f.calls = append(f.calls, fmt.Sprintf("gemm %s %dx%dx%d", dtype, mm.M, mm.N, mm.K))
	return g.enqueue(st.(*fakeStream), call{op: "launch", what: "gemm"}, fakeOp, func() error {
		av, err := g.elemsAt(a, mm.M*mm.K, dtype)
		if err != nil {
			return err
		}
		bv, err := g.elemsAt(b, mm.K*mm.N, dtype)
		if err != nil {
			return err
		}
		return g.putElems(c, product(av, bv, mm.M, mm.N, mm.K, func(int, int) int { return mm.K }), dtype, nil)
	})
}

func (f *fakeGemm) Describe() string { return "13.1.0 (fake)" }
func (f *fakeGemm) Destroy() error   { f.destroyed = true; return nil }

// encodeElem and decodeElem are an element of dtype (bf16 or float16) and its bits.
func encodeElem(dtype string, v float32) uint16 {
	if ops.Canonical(dtype) == "float16" {
		return ops.F16(v)
	}
	return ops.BF16(v)
}

func decodeElem(dtype string, h uint16) float32 {
	if ops.Canonical(dtype) == "float16" {
		return ops.FromF16(h)
	}
	return ops.FromBF16(h)
}

// elemsAt reads n elements of dtype at addr (this rank's heap, or a peer's through
// its mapping).
func (g *fakeGPU) elemsAt(addr uint64, n int, dtype string) ([]float32, error) {
	r, off, err := g.resolve(addr, uint64(2*n))
	if err != nil {
		return nil, err
	}
	raw, err := g.w.bytes(r, off, int64(2*n))
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = decodeElem(dtype, binary.LittleEndian.Uint16(raw[2*i:]))
	}
	return out, nil
}

// putElems writes v, rounded to dtype, at addr; only the elements keep says yes to
// (nil: all of them).
func (g *fakeGPU) putElems(addr uint64, v []float32, dtype string, keep func(i int) bool) error {
	r, off, err := g.resolve(addr, uint64(2*len(v)))
	if err != nil {
		return err
	}
	return putRank(g.w, r, off, v, dtype, keep)
}

func putRank(w *fakeWorld, r int, off int64, v []float32, dtype string, keep func(i int) bool) error {
	raw, err := w.bytes(r, off, int64(2*len(v)))
	if err != nil {
		return err
	}
	for i, x := range v {
		if keep == nil || keep(i) {
			binary.LittleEndian.PutUint16(raw[2*i:], encodeElem(dtype, x))
		}
	}
	return nil
}

// product is the rows x n product of a (rows x k) and b (k x n), float32 sums, element
// (i, j) over the first kend(i, j) columns of a.
func product(a, b []float32, rows, n, k int, kend func(i, j int) int) []float32 {
	c := make([]float32, rows*n)
	for i := range rows {
		for j := range n {
			var acc float32
			for p := range kend(i, j) {
				acc += a[i*k+p] * b[p*n+j]
			}
			c[i*n+j] = acc
		}
	}
	return c
}

// inFaultTile says whether element (i, j) of a rank's rows is in tile 0, which the
// fault (symmem_fused.py: FAULT_*) delivers wrongly: not at all (skip), or before its
// last K step (early); under drop no tile is delivered.
func inFaultTile(i, j int, tile []int) bool { return i < tile[0] && j < tile[1] }

// faultK is how many columns of A element (i, j) accumulates over under fault.
func faultK(fault uint64, tile []int, k int) func(i, j int) int {
	return func(i, j int) int {
		if fault == faultEarly && inFaultTile(i, j, tile) {
			return (k - 1) / tile[2] * tile[2]
		}
		return k
	}
}

// faultKeep says which elements of a rank's rows are delivered under fault.
func faultKeep(fault uint64, tile []int, n int) func(int) bool {
	return func(e int) bool {
		return fault != faultDrop && !(fault == faultSkip && inFaultTile(e/n, e%n, tile))
	}
}

// fusedKernel imitates ag_matmul and matmul_rs: the grid and barrier words checked as
// the collective kernels' are; all-gather-matmul writes this rank's rows of C on every
// rank at once; matmul-reduce-scatter puts this rank's product of each owner's rows
// into slot me of that owner's scratch, then, once every rank has launched (the
// kernel's middle barrier), every rank sums its slots into C.
func (g *fakeGPU) fusedKernel(l fakeLaunch) error {
	arg := func(name string) uint64 {
		v, ok := l.param(name)
		if !ok {
			panic(fmt.Sprintf("fake: %s has no parameter %s", l.kernel, name))
		}
		return v
	}
	if err := g.checkColl(l, arg("pad"), arg("state"), arg("me"), arg("nranks")); err != nil {
		return err
	}
	tile := l.a.Tile
	if len(tile) != 3 {
		return fmt.Errorf("fake: %s has no tile", l.kernel)
	}
	dt, n, me := l.a.DType, g.w.size, g.rank // the element type its manifest says
	nn, k, fault := int(arg("n")), int(arg("k")), arg("fault")
	b, err := g.elemsAt(arg("b"), k*nn, dt)
	if err != nil {
		return err
	}
	sym := func(name string) int64 {
		off, err := g.sym(arg(name))
		if err != nil {
			panic(err)
		}
		return off
	}
	if l.kernel == kAGMatmulBF16 || l.kernel == kAGMatmulF16 {
		rows := int(arg("rows"))
		a, err := g.elemsAt(arg("a"), rows*k, dt)
		if err != nil {
			return err
		}
		c := product(a, b, rows, nn, k, faultK(fault, tile, k))
		for q := range n {
			if err := putRank(g.w, q, sym("c")+int64(me*rows*nn*2), c, dt, faultKeep(fault, tile, nn)); err != nil {
				return err
			}
		}
		return nil
	}
	m := int(arg("m"))
	rows := m / n
	a, err := g.elemsAt(arg("a"), m*k, dt)
	if err != nil {
		return err
	}
	for i := range n {
		q := (me + 1 + i) % n
		f := fault
		if i > 0 && fault != faultDrop {
			f = faultNone
		}
		part := product(a[q*rows*k:], b, rows, nn, k, faultK(f, tile, k))
		if err := putRank(g.w, q, sym("scratch")+int64(me*rows*nn*2), part, dt, faultKeep(f, tile, nn)); err != nil {
			return err
		}
	}
	calls := g.w.meet(g, l)
	for _, c := range calls {
		scratch, _ := c.l.param("scratch")
		out, _ := c.l.param("c")
		if err := c.g.fusedSum(scratch, out, rows, nn, dt); err != nil {
			return err
		}
	}
	return nil
}

// fusedSum is the second phase of a matmul-reduce-scatter on this rank: c = the
// float32 sum of the slots (rows x n each) of its scratch in rank order, rounded once.
func (g *fakeGPU) fusedSum(scratch, c uint64, rows, n int, dt string) error {
	sum := make([]float32, rows*n)
	for s := range g.w.size {
		part, err := g.elemsAt(scratch+uint64(s*rows*n*2), rows*n, dt)
		if err != nil {
			return err
		}
		for i, x := range part {
			sum[i] += x
		}
	}
	return g.putElems(c, sum, dt, nil)
}

// userMatmul is a launch of a user's fused kernel (pkg/kernels: agMatmulParams,
// mrsMatmulParams) as its parameters give it: the element type its table entry says,
// the shape, the rank and the peer, the matrices' addresses.
type userMatmul struct {
	dt                     string
	rows, n, k, rank, peer int
	a, b, c                uint64
	arg                    func(name string) int
	ptr                    func(name string) uint64
}

// userMatmulOf reads l's arguments by name and checks what every user's fused kernel
// is given alike: a grid of cdiv(m_local, block_m) x cdiv(n, block_n), row-major
// strides, this rank, a peer of the job.
func (g *fakeGPU) userMatmulOf(l fakeLaunch) (userMatmul, error) {
	ptr := func(name string) uint64 {
		v, ok := l.param(name)
		if !ok {
			panic(fmt.Sprintf("fake: %s has no parameter %s", l.kernel, name))
		}
		return v
	}
	arg := func(name string) int { return int(int32(ptr(name))) }
	k, _ := userTableKernel(l.kernel)
	u := userMatmul{dt: k.DType, rows: arg("m_local"), n: arg("n"), k: arg("k"), rank: arg("rank"), peer: arg("peer"),
		a: ptr("a_ptr"), b: ptr("b_ptr"), c: ptr("c_ptr"), arg: arg, ptr: ptr}
	tile := l.a.Tile
	if int(l.dim.Grid) != cdiv(u.rows, tile[0]) || int(max(l.dim.GridY, 1)) != cdiv(u.n, tile[1]) {
		return u, fmt.Errorf("fake: %s launched on %d x %d programs, its %d x %d tiles of a %d x %d block need %d x %d",
			l.kernel, l.dim.Grid, l.dim.GridY, tile[0], tile[1], u.rows, u.n, cdiv(u.rows, tile[0]), cdiv(u.n, tile[1]))
	}
	if arg("stride_am") != u.k || arg("stride_ak") != 1 || arg("stride_bk") != u.n || arg("stride_bn") != 1 || arg("stride_cm") != u.n || arg("stride_cn") != 1 {
		return u, fmt.Errorf("fake: %s given strides that are not row-major's", l.kernel)
	}
	if u.rank != g.rank || u.peer < 0 || u.peer >= g.w.size {
		return u, fmt.Errorf("fake: %s on rank %d called as rank %d to peer %d", l.kernel, g.rank, u.rank, u.peer)
	}
	return u, nil
}

// userAGMatmul imitates a user's all-gather-matmul kernel: this rank's rows of C (rows
// rank*m_local..), float32 sums rounded to the element type, into C here and on peer.
func (g *fakeGPU) userAGMatmul(l fakeLaunch) error {
	u, err := g.userMatmulOf(l)
	if err != nil {
		return err
	}
	c, err := g.userProduct(u, 0)
	if err != nil {
		return err
	}
	off, err := g.sym(u.c)
	if err != nil {
		return err
	}
	for _, q := range []int{g.rank, u.peer} {
		if err := putRank(g.w, q, off+int64(u.rank*u.rows*u.n*2), c, u.dt, nil); err != nil {
			return err
		}
	}
	return nil
}

// userProduct is the float32 product of u.rows rows of u's A from row first on
// (2-byte elements, k a row) and all of its B.
func (g *fakeGPU) userProduct(u userMatmul, first int) ([]float32, error) {
	a, err := g.elemsAt(u.a+uint64(first*u.k*2), u.rows*u.k, u.dt)
	if err != nil {
		return nil, err
	}
	b, err := g.elemsAt(u.b, u.k*u.n, u.dt)
	if err != nil {
		return nil, err
	}
	return product(a, b, u.rows, u.n, u.k, func(int, int) int { return u.k }), nil
}

// userMatmulRS imitates a user's matmul-reduce-scatter kernel, one step a launch, as
// examples/tiled_matmul_reduce_scatter.py does it. Step 0: rows peer*m_local.. of this
// rank's A @ B, float32 sums rounded to the element type, into slot rank of peer's
// scratch, staged first in slot rank of its own (which the contract leaves free until
// this rank's own launch, the last). Step 1 (peer = rank): C = the float32 sum of its
// scratch's slots in rank order, rounded once.
func (g *fakeGPU) userMatmulRS(l fakeLaunch) error {
	u, err := g.userMatmulOf(l)
	if err != nil {
		return err
	}
	ranks, step, scratch := u.arg("ranks"), u.arg("step"), u.ptr("scratch_ptr")
	if ranks != g.w.size || step < 0 || step > 1 || step == 1 && u.peer != u.rank {
		return fmt.Errorf("fake: %s on rank %d of %d called with ranks %d, step %d, peer %d", l.kernel, g.rank, g.w.size, ranks, step, u.peer)
	}
	if step == 1 {
		return g.fusedSum(scratch, u.c, u.rows, u.n, u.dt)
	}
	part, err := g.userProduct(u, u.peer*u.rows)
	if err != nil {
		return err
	}
	off, err := g.sym(scratch)
	if err != nil {
		return err
	}
	slot := off + int64(u.rank*u.rows*u.n*2)
	if err := putRank(g.w, g.rank, slot, part, u.dt, nil); err != nil {
		return err
	}
	return g.move(u.peer, slot, g.rank, slot, int64(u.rows*u.n*2))
}

// fusedParams are the parameters symmem_fused.py's kernels take (Triton's hidden
// scratch pointers after them): the stand-ins' sidecars say the same.
var fusedParams = map[string]string{
	"ag":  "a b c rows n k pad state me nranks fault limit_ns mailbox",
	"rs":  "a b c scratch m n k pad state me nranks fault limit_ns mailbox",
	"ptr": "a b c scratch pad state mailbox",
}

// fusedStandIns are triton's fused kernels (kernels/triton/symmem_fused.manifest.json)
// for their stand-ins: the operation and element type each serves.
var fusedStandIns = []struct {
	op            ops.Op
	dtype, kernel string
}{{ops.AllGatherMatmul, "bf16", kAGMatmulBF16}, {ops.AllGatherMatmul, "float16", kAGMatmulF16},
	{ops.MatmulReduceScatter, "bf16", kMatmulRSBF16}, {ops.MatmulReduceScatter, "float16", kMatmulRSF16}}

// withFusedKernels gives the ranks triton's fused kernels: the binary's where its
// catalogue has them (built on the GPU machine: kernels/build-kernels.py --only
// symmem_fused), else stand-ins whose sidecars have the kernels' parameters, tiles (8
// warps: 128 x 128 x 64, 4 warps: 64 x 128 x 64) and manifests, which the fake GPU
// imitates; the ranks' registry is then read from the catalogue with them, as a
// binary's is from its own.
func withFusedKernels(t *testing.T, w *fakeWorld, bs ...*Backend) {
	t.Helper()
	if !slices.ContainsFunc(kernels.Default().Artifacts, func(a *kernels.Artifact) bool { return a.Impl == implTriton && a.Kernel == kAGMatmulBF16 }) {
		dir := t.TempDir()
		for _, f := range fusedStandIns {
			op, kernel := f.op, f.kernel
			names := fusedParams["ag"]
			if op == ops.MatmulReduceScatter {
				names = fusedParams["rs"]
			}
			var params []kernels.Param
			for _, p := range strings.Fields(names) {
				typ := "i64"
				switch {
				case strings.Contains(" "+fusedParams["ptr"]+" ", " "+p+" "):
					typ = "ptr"
				case p == "me" || p == "nranks" || p == "fault":
					typ = "i32"
				case p == "limit_ns":
					typ = "u64"
				}
				params = append(params, kernels.Param{Name: p, Type: typ})
			}
			params = append(params, kernels.Param{Name: "global_scratch", Type: "ptr", Hidden: true}, kernels.Param{Name: "profile_scratch", Type: "ptr", Hidden: true})
			for _, warps := range []int{4, 8} {
				stem := fmt.Sprintf("triton.%s.w%d.sm90", kernel, warps)
				image := []byte("fake cubin " + stem)
				sum := sha256.Sum256(image)
				tile := []int{64, 128, 64}
				if warps == 8 {
					tile[0] = 128
				}
				meta := map[string]any{"impl": implTriton, "kernel": kernel, "entry": "k_" + kernel, "file": stem + ".cubin", "format": "cubin",
					"target": "sm_90a", "arch": 90, "num_warps": warps, "block_threads": 32 * warps, "shared": 98304, "uses_nvshmem": true,
					"nvshmem_device_version": []int{3, 4, 5}, "sha256": hex.EncodeToString(sum[:]), "params": params, "tile": tile,
					"ops": []string{string(op)}, "dtype": f.dtype, "warps": []int{4, 8}, "manifest": "triton/symmem_fused.manifest.json"}
				js, _ := json.Marshal(meta)
				if err := os.WriteFile(filepath.Join(dir, stem+".cubin"), image, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, stem+".cubin.json"), js, 0o644); err != nil {
					t.Fatal(err)
				}
				w.files[sum] = stem + ".cubin"
			}
		}
		c, err := kernels.Load(os.DirFS(dir)) // symmem's own: no user's signature to check
		if err != nil {
			t.Fatal(err)
		}
		w.user = append(w.user, c.Artifacts...)
		merged := &kernels.Catalog{Artifacts: append(slices.Clone(kernels.Default().Artifacts), c.Artifacts...)}
		w.reg = backend.Builtin(Factory{Catalog: merged})
		for _, b := range bs {
			b.cat, b.reg = merged, w.reg
		}
	}
}

// fusedJob is a fake job of n ranks with a fused operation's buffers on each.
type fusedJob struct {
	w  *fakeWorld
	bs []*Backend
	gs []*fakeGPU
	f  backend.Fused
	// a and b are every rank's inputs (small integers: every product and sum exact).
	a, b [][]float32
}

// newFusedJob opens n ranks and writes their inputs for op of shape mm in dtype.
func newFusedJob(t *testing.T, n int, op ops.Op, dtype string, mm ops.Matmul) *fusedJob {
	t.Helper()
	o, err := op.Operands(mm, n)
	if err != nil {
		t.Fatal(err)
	}
	elem := ops.ElemSize(dtype)
	heap := 4*backend.HeapAlign + (o.A+o.B+o.C+o.Scratch)*elem
	j := &fusedJob{w: newWorld(t, n, heap)}
	for r := range n {
		b, g := j.w.open(t, r, Config{})
		var bufs [4]backend.Buffer
		for i, e := range []int64{o.A, o.B, o.C, o.Scratch} {
			if bufs[i], err = b.Alloc(e * elem); err != nil {
				t.Fatal(err)
			}
		}
		j.f = backend.Fused{Op: op, DType: dtype, Shape: mm, A: bufs[0], B: bufs[1], C: bufs[2], Scratch: bufs[3]}
		rng := rand.New(rand.NewPCG(uint64(r), 55))
		ints := func(k int64) []float32 {
			v := make([]float32, k)
			for i := range v {
				v[i] = float32(rng.IntN(5) - 2)
			}
			return v
		}
		a, bm := ints(o.A), ints(o.B)
		if op == ops.AllGatherMatmul && r > 0 {
			bm = j.b[0] // the same B on every rank
		}
		if err := putRank(j.w, r, bufs[0].Off, a, dtype, nil); err != nil {
			t.Fatal(err)
		}
		if err := putRank(j.w, r, bufs[1].Off, bm, dtype, nil); err != nil {
			t.Fatal(err)
		}
		j.a, j.b = append(j.a, a), append(j.b, bm)
		j.bs, j.gs = append(j.bs, b), append(j.gs, g)
	}
	withFusedKernels(t, j.w, j.bs...)
	j.poison(t)
	return j
}

// poison fills every rank's C and scratch with NaN, so that an element nothing
// delivered cannot pass.
func (j *fusedJob) poison(t *testing.T) { j.poisonOf(t, j.f.C, j.f.Scratch) }

// poisonOf fills bufs with NaN on every rank.
func (j *fusedJob) poisonOf(t *testing.T, bufs ...backend.Buffer) {
	t.Helper()
	for r := range j.bs {
		for _, buf := range bufs {
			raw, err := j.w.bytes(r, buf.Off, buf.Size)
			if err != nil {
				t.Fatal(err)
			}
			for i := range raw {
				raw[i] = 0xFF
			}
		}
	}
}

// run makes every rank's call, then every rank's quiet.
func (j *fusedJob) run(t *testing.T, l backend.Launch) error {
	t.Helper()
	for _, b := range j.bs {
		if err := b.Fused(j.f, l); err != nil {
			return err
		}
	}
	for _, b := range j.bs {
		if err := b.Quiet(); err != nil {
			return err
		}
	}
	checkPhases(t, j.bs)
	return nil
}

// wrong is where rank r's C differs from ops.Product's reference: the element indices.
func (j *fusedJob) wrong(t *testing.T, r int) []int {
	t.Helper()
	n := len(j.bs)
	want, err := j.f.Op.Product(ops.MatmulInputs{Ranks: n, Me: r, Shape: j.f.Shape,
		A: func(s int) []float64 { return f64(j.a[s]) }, B: func(s int) []float64 { return f64(j.b[s]) },
		Round: func(v float64) float64 { return float64(decodeElem(j.f.DType, encodeElem(j.f.DType, float32(v)))) }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.gs[r].elemsAt(j.bs[r].addr(j.f.C), len(want), j.f.DType)
	if err != nil {
		t.Fatal(err)
	}
	var bad []int
	for i, v := range want {
		if float64(got[i]) != v {
			bad = append(bad, i)
		}
	}
	return bad
}

// wrongSlots is the first slot s of rank r's scratch that is not rank s's product of
// r's rows, rounded to the element type, and how many of its elements are not
// (matmul-reduce-scatter; none for all-gather-matmul, whose scratch a user's kernel
// is not given).
func (j *fusedJob) wrongSlots(t *testing.T, r int) (slot, bad int) {
	t.Helper()
	if j.f.Op != ops.MatmulReduceScatter {
		return 0, 0
	}
	mm, n := j.f.Shape, len(j.bs)
	rows := mm.M / n
	for s := range n {
		want := product(j.a[s][r*rows*mm.K:], j.b[s], rows, mm.N, mm.K, func(int, int) int { return mm.K })
		got, err := j.gs[r].elemsAt(j.bs[r].addr(j.f.Scratch)+uint64(s*rows*mm.N*2), rows*mm.N, j.f.DType)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want {
			if got[i] != decodeElem(j.f.DType, encodeElem(j.f.DType, v)) {
				bad++
			}
		}
		if bad > 0 {
			return s, bad
		}
	}
	return 0, 0
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// fusedShapes have a partial last tile in rows and columns, one K step (64) and three.
func fusedShapes(n int) []ops.Matmul {
	return []ops.Matmul{{M: 80 * n, N: 72, K: 40}, {M: 136 * n, N: 200, K: 160}}
}

// Every element of C on every rank is the reference product, for each implementation,
// operation, element type and number of ranks. The fake runs each rank's work as it
// is queued, rank after rank, so a baseline's collective on an early rank finds a
// later rank's part of the first round not there yet (on a GPU the collective waits
// for it): the check is of a second round, with C poisoned before it.
func TestFusedDeliversTheProduct(t *testing.T) {
	for _, impl := range []string{implTriton, implCublasNCCL, implCublasTriton} {
		for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
			for _, dt := range ops.MatmulTypes {
				for _, n := range []int{1, 2, 3} {
					for _, mm := range fusedShapes(n) {
						name := fmt.Sprintf("%s %s %s %d ranks %v", impl, op, dt, n, mm)
						j := newFusedJob(t, n, op, dt, mm)
						l := backend.Launch{Impl: impl}
						err := j.run(t, l)
						if impl == implCublasTriton && op == ops.MatmulReduceScatter && dt == "float16" {
							if err == nil || !strings.Contains(err.Error(), "which sum bf16: use {dtype} bf16, or {impl} cublas+nccl") {
								t.Errorf("%s: %v, want a refusal", name, err)
							}
							continue
						}
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if impl != implTriton {
							for _, g := range j.gs {
								g.launches = nil
							}
							// The scratch keeps the first round's gathered A (or products):
							// what a later rank's collective reads before it is rewritten.
							j.poisonOf(t, j.f.C)
							if err := j.run(t, l); err != nil {
								t.Fatalf("%s, second round: %v", name, err)
							}
						}
						for r := range n {
							if bad := j.wrong(t, r); len(bad) > 0 {
								t.Errorf("%s: rank %d: %d of %d elements wrong, the first at %d", name, r, len(bad), j.f.Shape.M*j.f.Shape.N, bad[0])
							}
						}
						if impl != implCublasNCCL {
							for _, g := range j.gs {
								for _, x := range g.launches {
									if x.impl != implTriton {
										t.Errorf("%s launched %s's %s", name, x.impl, x.kernel)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// The grid: a program per tile of a rank's rows, up to MaxCollBlocks, the same on every
// rank; 8 warps unless --warps says, and --blocks taken as asked.
func TestFusedGrid(t *testing.T) {
	j := newFusedJob(t, 2, ops.AllGatherMatmul, "bf16", ops.Matmul{M: 2 * 300, N: 260, K: 64})
	if err := j.run(t, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	for r, g := range j.gs {
		x := g.launches[len(g.launches)-1]
		// 300 rows in tiles of 128, 260 columns in tiles of 128: 3 x 3.
		if x.kernel != kAGMatmulBF16 || x.warps != 8 || x.dim.Grid != 9 || x.dim.Block != 256 || x.dim.Shared != uint32(x.a.Shared) {
			t.Errorf("rank %d launched %s, %d warps, %+v", r, x.kernel, x.warps, x.dim)
		}
	}
	for _, g := range j.gs {
		g.launches = nil
	}
	if err := j.run(t, backend.Launch{Warps: 4, Blocks: 2}); err != nil {
		t.Fatal(err)
	}
	if x := j.gs[1].launches[0]; x.warps != 4 || x.dim.Grid != 2 {
		t.Errorf("--warps 4 --blocks 2: %d warps, %+v", x.warps, x.dim)
	}
	for r := range 2 {
		if bad := j.wrong(t, r); len(bad) > 0 {
			t.Errorf("rank %d with 2 programs: %d elements wrong", r, len(bad))
		}
	}
	if err := j.bs[0].Fused(j.f, backend.Launch{Blocks: MaxCollBlocks + 1}); err == nil || !strings.Contains(err.Error(), "at most 128 blocks") {
		t.Errorf("--blocks 129: %v", err)
	}
}

// The faults at the point of delivery: rank 1's tile 0 left out (its C keeps the
// poison) or delivered before its last K step, on every rank for all-gather-matmul and
// on the next rank for matmul-reduce-scatter; every wrong element is in that tile, and
// the check sees some. Under the drop fault none of rank 1's tiles is delivered.
func TestFusedFaultsAreCaught(t *testing.T) {
	const n = 3
	for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
		for _, fault := range []backend.FusedFault{backend.FaultSkipTile, backend.FaultEarly, "drop"} {
			mm := ops.Matmul{M: 136 * n, N: 200, K: 160}
			j := newFusedJob(t, n, op, "bf16", mm)
			if fault == "drop" {
				j.bs[1].SetDrop(true)
			} else {
				j.bs[1].SetFusedFault(fault)
			}
			if err := j.run(t, backend.Launch{Impl: implTriton}); err != nil {
				t.Fatal(err)
			}
			rows := mm.M / n
			for r := range n {
				bad := j.wrong(t, r)
				// Where rank 1's faulty delivery lands in rank r's C: rank 1's rows on
				// every rank (all-gather-matmul); the whole C of every rank it sends a
				// slot to (matmul-reduce-scatter: the next rank, 2, for tile 0; every
				// rank under drop).
				lo, hit := rows, true
				if op == ops.MatmulReduceScatter {
					lo, hit = 0, r == 2 || fault == "drop"
				}
				if !hit {
					if len(bad) > 0 {
						t.Errorf("%s %s: rank %d, which rank 1's fault does not reach, has %d wrong elements", op, fault, r, len(bad))
					}
					continue
				}
				if len(bad) == 0 {
					t.Errorf("%s %s: rank %d: no element wrong: the check cannot see the fault", op, fault, r)
				}
				for _, e := range bad {
					i, jj := e/mm.N-lo, e%mm.N
					if fault == "drop" {
						if i < 0 || i >= rows {
							t.Errorf("%s drop: rank %d: element %d wrong, outside rank 1's rows", op, r, e)
							break
						}
						continue
					}
					if i < 0 || i >= 128 || jj >= 128 {
						t.Errorf("%s %s: rank %d: element %d (row %d, column %d of the rows) wrong, outside tile 0", op, fault, r, e, i, jj)
						break
					}
				}
			}
		}
	}
}

// The baselines and a user's kernel cannot reach into their delivery: under a fault
// they refuse, rather than pass with the fault doing nothing.
func TestFusedFaultRefusedWhereItCannotAct(t *testing.T) {
	for _, impl := range []string{implCublasNCCL, implCublasTriton} {
		j := newFusedJob(t, 2, ops.AllGatherMatmul, "bf16", ops.Matmul{M: 64, N: 64, K: 64})
		j.bs[0].SetFusedFault(backend.FaultEarly)
		if err := j.bs[0].Fused(j.f, backend.Launch{Impl: impl}); err == nil || !strings.Contains(err.Error(), "the early fault needs a kernel of symmem's") {
			t.Errorf("%s under early: %v", impl, err)
		}
		j.bs[1].SetDrop(true)
		if err := j.bs[1].Fused(j.f, backend.Launch{Impl: impl}); err == nil || !strings.Contains(err.Error(), "the drop fault") {
			t.Errorf("%s under drop: %v", impl, err)
		}
	}
}

func TestFusedRefusals(t *testing.T) {
	j := newFusedJob(t, 2, ops.AllGatherMatmul, "bf16", ops.Matmul{M: 64, N: 64, K: 64})
	b := j.bs[0]
	for _, tc := range []struct {
		f    func(f backend.Fused) backend.Fused
		l    backend.Launch
		want string
	}{
		{func(f backend.Fused) backend.Fused { f.DType = "float32"; return f }, backend.Launch{}, "takes {dtype} [bf16 float16], not float32"},
		{func(f backend.Fused) backend.Fused { f.Shape.M = 63; return f }, backend.Launch{}, "M 63 does not split over 2 ranks"},
		{func(f backend.Fused) backend.Fused { f.C.Size = 100; return f }, backend.Launch{}, "C is 100 bytes, it takes 8192"},
		{func(f backend.Fused) backend.Fused { return f }, backend.Launch{Impl: "cuda"}, "{impl} cuda cannot run all-gather-matmul"},
		{func(f backend.Fused) backend.Fused { return f }, backend.Launch{Lane: 1}, "lane 1"},
	} {
		if err := b.Fused(tc.f(j.f), tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
	// Without cuBLAS the baselines say so, and say how to install it.
	b.openGemm = nil
	if err := b.Preload(ops.AllGatherMatmul, 1<<20, backend.Launch{Impl: implCublasNCCL}); err == nil || !strings.Contains(err.Error(), "without a way to open cuBLASLt") {
		t.Errorf("no cuBLAS: %v", err)
	}
}

// The baselines' calls: cuBLAS's product on the gathered A (all-gather-matmul) or into
// the scratch (matmul-reduce-scatter), NCCL given the element type and the counts, and
// the libraries named once used.
func TestFusedBaselineCalls(t *testing.T) {
	mm := ops.Matmul{M: 2 * 80, N: 72, K: 40}
	for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
		j := newFusedJob(t, 2, op, "float16", mm)
		if err := j.run(t, backend.Launch{Impl: implCublasNCCL}); err != nil {
			t.Fatal(err)
		}
		gm := j.bs[0].gemm.(*fakeGemm)
		if want := "gemm float16 160x72x40"; len(gm.calls) != 1 || gm.calls[0] != want {
			t.Errorf("%s: cuBLAS calls %q, want %q", op, gm.calls, want)
		}
		call := j.w.hub.calls[0]
		want := "rank 0 all-gather send=" + fmt.Sprint(j.f.A.Off) + " recv=" + fmt.Sprint(j.f.Scratch.Off) + " count=3200 float16"
		if op == ops.MatmulReduceScatter {
			want = "rank 0 reduce-scatter send=" + fmt.Sprint(j.f.Scratch.Off) + " recv=" + fmt.Sprint(j.f.C.Off) + " count=5760 float16"
		}
		if !strings.HasPrefix(call, want) {
			t.Errorf("%s: NCCL call %q, want %q", op, call, want)
		}
		libs := j.bs[0].Libraries()
		if libs["cublas"] != "13.1.0 (fake)" || libs["nccl"] != "2.27.3 (fake)" {
			t.Errorf("Libraries: %v", libs)
		}
		j.bs[0].Close()
		if !gm.destroyed {
			t.Error("Close left cuBLAS's handle")
		}
	}
}

// A user's fused kernels, written to pkg/kernels' signatures, each on a grid of its
// tile with row-major strides: all-gather-matmul launched once per peer;
// matmul-reduce-scatter's step 0 once per peer, this rank last, and step 1 once, with a
// barrier of every rank before each step (userSteps). Every element of every rank's C
// is the reference, and every slot of matmul-reduce-scatter's scratch the product it
// stands for. A kernel of one element type refuses the other, naming what it has; an
// implementation without a kernel of the op refuses it; a fault it cannot reach is
// refused.
func TestUserFusedKernel(t *testing.T) {
	userKernels := map[ops.Op]map[string]string{
		ops.AllGatherMatmul:     {"bf16": kUserAGMatmulBF16, "float16": kUserAGMatmulF16},
		ops.MatmulReduceScatter: {"bf16": kUserMatmulRSBF16, "float16": kUserMatmulRSF16},
	}
	// A rank's launches and barriers, the peers and (matmul-reduce-scatter) the steps
	// it launches to, in order.
	steps := func(op ops.Op, kernel string, r, n int) (trace []string, peers, stepOf []int) {
		launch := "launch " + kernel + "@s0"
		if op == ops.AllGatherMatmul {
			for i := range max(n-1, 1) {
				trace, peers = append(trace, launch), append(peers, (r+1+i)%n)
			}
			return trace, peers, nil
		}
		trace = []string{"barrier@s0"}
		for i := range n {
			trace, peers, stepOf = append(trace, launch), append(peers, (r+1+i)%n), append(stepOf, 0)
		}
		return append(trace, "barrier@s0", launch), append(peers, r), append(stepOf, 1)
	}
	for op, byType := range userKernels {
		for dt, kernel := range byType {
			for _, n := range []int{1, 2, 3} {
				name := fmt.Sprintf("%s %s, %d ranks", op, dt, n)
				j := newFusedJob(t, n, op, dt, ops.Matmul{M: 100 * n, N: 72, K: 40})
				user := addUserWith(t, []*fakeWorld{j.w}, []string{kernel}, false, map[string]any{"tile": []int{64, 64, 32}})
				if err := j.run(t, backend.Launch{Impl: user}); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for r := range n {
					if bad := j.wrong(t, r); len(bad) > 0 {
						t.Errorf("%s: rank %d: %d elements wrong, the first at %d", name, r, len(bad), bad[0])
					}
					if s, bad := j.wrongSlots(t, r); bad > 0 {
						t.Errorf("%s: rank %d: slot %d of its scratch: %d elements are not rank %d's product", name, r, s, bad, s)
					}
					trace, peers, stepOf := steps(op, kernel, r, n)
					if got := j.gs[r].trace("launch", "barrier"); !slices.Equal(got, trace) {
						t.Errorf("%s: rank %d: %q, want %q", name, r, got, trace)
					}
					var gotPeers, gotSteps []int
					for _, x := range j.gs[r].launches {
						p, _ := x.param("peer")
						gotPeers = append(gotPeers, int(p))
						if s, ok := x.param("step"); ok {
							gotSteps = append(gotSteps, int(s))
						}
						if x.dim.Grid != 2 || x.dim.GridY != 2 {
							t.Errorf("%s: rank %d launched on %+v, want 2 x 2 programs", name, r, x.dim)
						}
					}
					if !slices.Equal(gotPeers, peers) || !slices.Equal(gotSteps, stepOf) {
						t.Errorf("%s: rank %d launched to peers %v, steps %v; want %v, %v", name, r, gotPeers, gotSteps, peers, stepOf)
					}
				}
				userFusedRefusals(t, name, j, user, op, userKernels)
			}
		}
	}
}

// userFusedRefusals checks, on rank 0 of j, that a user's fused kernel of op in j's
// element type refuses the other type, that an implementation with only the other op's
// kernel refuses op, and that the fused and drop faults are refused, and the absent
// fault where peers would wait.
func userFusedRefusals(t *testing.T, name string, j *fusedJob, user string, op ops.Op, userKernels map[ops.Op]map[string]string) {
	t.Helper()
	b, f := j.bs[0], j.f
	other := f
	other.DType = "bf16"
	if f.DType == "bf16" {
		other.DType = "float16"
	}
	if err := b.Fused(other, backend.Launch{Impl: user}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("has kernels of [%s], not of %s", f.DType, other.DType)) {
		t.Errorf("%s: %s from a kernel of %s: %v", name, other.DType, f.DType, err)
	}
	for o, byType := range userKernels {
		if o == op {
			continue
		}
		alone := addUserWith(t, []*fakeWorld{j.w}, []string{byType[f.DType]}, false, map[string]any{"tile": []int{64, 64, 32}})
		if err := b.Fused(f, backend.Launch{Impl: alone}); err == nil || !strings.Contains(err.Error(), "cannot run "+string(op)) {
			t.Errorf("%s: from a user's %s kernel alone: %v", name, o, err)
		}
	}
	b.SetFusedFault(backend.FaultSkipTile)
	if err := b.Fused(f, backend.Launch{Impl: user}); err == nil || !strings.Contains(err.Error(), "fault needs a kernel of symmem's") {
		t.Errorf("%s: a user's kernel under skip-tile: %v", name, err)
	}
	b.SetFusedFault("")
	b.SetDrop(true)
	if err := b.Fused(f, backend.Launch{Impl: user}); err == nil || !strings.Contains(err.Error(), "the drop fault cannot reach into a user's kernel") {
		t.Errorf("%s: a user's kernel under drop: %v", name, err)
	}
	b.SetDrop(false)
	// Absent, a rank leaves its peers in the barriers between matmul-reduce-scatter's
	// steps: refused; all-gather-matmul's peers wait for nobody.
	b.SetAbsent(true)
	err := b.Fused(f, backend.Launch{Impl: user})
	if refused := err != nil && strings.Contains(err.Error(), "absent fault would leave the peers waiting"); refused != (op == ops.MatmulReduceScatter) {
		t.Errorf("%s: a user's kernel on an absent rank: %v", name, err)
	}
	b.SetAbsent(false)
}

// A fused kernel whose sidecar has no tile is not launched: its grid is the tile's.
func TestFusedKernelNeedsItsTile(t *testing.T) {
	if _, err := tileOf(&kernels.Artifact{Impl: implTriton, Kernel: kAGMatmulBF16, Tile: []int{128, 128}}); err == nil ||
		!strings.Contains(err.Error(), "has no tile in its metadata") {
		t.Errorf("a tile of two numbers: %v", err)
	}
	if got, err := tileOf(&kernels.Artifact{Tile: []int{64, 32, 16}}); err != nil || got != [3]int{64, 32, 16} {
		t.Errorf("tileOf: %v %v", got, err)
	}
}

// namedArgs orders values by the sidecar's names and refuses a name either side lacks.
func TestNamedArgs(t *testing.T) {
	a := &kernels.Artifact{Impl: "triton", Kernel: "k", Params: []kernels.Param{{Name: "x", Type: "ptr"}, {Name: "y", Type: "i32"},
		{Name: "global_scratch", Type: "ptr", Hidden: true}}}
	if got, err := namedArgs(a, map[string]uint64{"y": 2, "x": 1}); err != nil || !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := namedArgs(a, map[string]uint64{"x": 1}); err == nil || !strings.Contains(err.Error(), `takes "y", which symmem does not pass`) {
		t.Errorf("a missing value: %v", err)
	}
	if _, err := namedArgs(a, map[string]uint64{"x": 1, "y": 2, "z": 3}); err == nil || !strings.Contains(err.Error(), `takes no "z"`) {
		t.Errorf("an extra value: %v", err)
	}
	if math.IsNaN(float64(decodeElem("bf16", 0xFFFF))) == false {
		t.Error("the poison is not NaN")
	}
}
