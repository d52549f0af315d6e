package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// MoE dispatch and combine of the triton implementation (kernels/triton/symmem_moe.py).
// A routing lists every transfer of the job, the same on every rank; each rank turns
// its part into a table of rows, once per routing, and keeps it in device memory of its
// own (outside the symmetric heap): dispatch pushes its rows with putmem_block.
//
// Combine sums every copy of a token in one place, and runs one of two algorithms
// (Collective.Algo). staged: every rank first puts its copies of the peers' tokens into
// their scratch (putmem_block, as dispatch), then each rank sums its tokens from its
// own memory. pull: each rank loads the peers' copies through their mappings and sums
// them as they arrive, which needs no scratch but costs the link more wire bytes per
// payload byte (1.30 at the default layer on two H200s, against 1.24 for the staged
// puts). Pull is the default: once the sums moved 16-byte vectors it beat staged,
// whose link idles while its blocks sum (two H200s, default layer: pull 299.8 GB/s
// busbw, staged 270.3; with 2-byte loads, before, staged 256.5 against pull 242.0).
const (
	kDispatch    = "dispatch"     // send, recv, bounds, rows, pad, state, me, n
	kCombineBF16 = "combine_bf16" // send, recv, bounds, pieces, copies, vec, pad, state, me, n
	kCombineF32  = "combine_f32"
	// send, recv, scratch, bounds, pieces, copies, push_bounds, rows, vec, pad, state,
	// me, n
	kCombineStagedBF16 = "combine_staged_bf16"
	kCombineStagedF32  = "combine_staged_f32"

	// combineWarps is the most warps combine's pull runs with unless --warps says: on
	// two H200s at the default layer 16 warps gave 301.1 GB/s busbw twice, 32 warps
	// 298.3 and 298.2 in the same run (docs/benchmarks.md, MoE).
	combineWarps = 16

	// Combine's algorithms, as Collective.Algo and the result rows name them.
	combineStaged = ops.Staged
	combinePull   = ops.Pull

	// remoteCost is what a byte that crosses to or from another GPU costs a block, in
	// bytes within its own GPU. The tables give every block an equal share of the cost,
	// so that the blocks copying within the GPU (dispatch's copies to this rank) take
	// more bytes each than those driving the links and finish with them, instead of
	// holding the links idle while they copy. An estimate, to be measured: on two H200s
	// at the default layer, 4 gives the ~100 blocks on the link ~3 GB/s each (the
	// link's ~310) and asks ~12 GB/s of each of the ~26 local ones, whose copies are
	// bound by their own loads' latency, not by memory.
	remoteCost = 4
)

// moeTable is a rank's table for one routing, grid and set of buffer sizes.
type moeTable struct {
	blocks []backend.Block // the routing's, kept so that the key's address stays its own
	grid   int
	staged bool     // combine: the staged kernel's table
	mem    uint64   // the device memory holding it
	args   []uint64 // the kernel's arguments after send and recv (and staged's scratch)
	err    error    // a refusal, the same on every rank
}

// moePlan is a table before it is uploaded: its words, and where each of the parts the
// kernel takes starts among them (dispatch: bounds, rows; combine: bounds, pieces,
// copies, then the vec argument; staged combine: bounds, pieces, copies, push_bounds,
// rows, then vec).
type moePlan struct {
	grid  int
	words []int64
	parts []int
	vec   bool
}

// moeKey names a table: the routing by the address of its first block (routings are
// never changed once made) and what else the table depends on.
type moeKey struct {
	op         string
	first      *backend.Block
	n          int
	blocks     int // Launch.Blocks
	warps      int // combine's grid counts whole steps of the block
	send, recv int64
	elem       int64
	// combine: what decides the algorithm (the scratch's size, --algo) and whether this
	// rank drops (it pulls then, whatever the algorithm).
	scratch int64
	algo    string
	drop    bool
}

// combineKernel is the combine kernel for an element type, staged or pulling. NCCL has
// no dispatch or combine to offer instead.
func combineKernel(impl, dtype string, staged bool) (string, error) {
	switch ops.Canonical(dtype) {
	case "bf16":
		if staged {
			return kCombineStagedBF16, nil
		}
		return kCombineBF16, nil
	case "float32":
		if staged {
			return kCombineStagedF32, nil
		}
		return kCombineF32, nil
	}
	return "", setting.Errorf("combine %s %s sums bf16 and float32, not %s: use %s bf16 or float32", setting.Impl, impl, dtype, setting.DType)
}

// combineAlgorithm is the algorithm combine runs c with: c.Algo, or pull. Staging puts the k-th copy from
// another rank of each output place at k*Recv.Size + the place's offset in the scratch
// of the place's rank, so it needs as many Recv-sized layers as any place of any rank
// has copies from other ranks: one on two ranks, where the bench's scratch (as large as
// Recv) fits it; up to n-1 on n, where it falls back to pull unless the scratch is
// larger. Every rank decides alike from the same blocks.
func combineAlgorithm(impl string, c backend.Collective) (string, error) {
	layers := int64(remoteCopies(c.Blocks))
	fits := c.Scratch.Size >= layers*c.Recv.Size
	switch c.Algo {
	case "", combinePull:
		return combinePull, nil
	case combineStaged:
		if fits {
			return combineStaged, nil
		}
		return "", setting.Errorf("combine %s %s %s %s stages up to %d copies of a token from other ranks: %d bytes of scratch, which has %d; use %s %s",
			setting.Impl, impl, setting.Algo, combineStaged, layers, layers*c.Recv.Size, c.Scratch.Size, setting.Algo, combinePull)
	}
	return "", setting.Errorf("%s %s: %s %s runs combine as %s or %s", setting.Algo, c.Algo, setting.Impl, impl, combineStaged, combinePull)
}

// remoteCopies is the most copies from other ranks that any byte of any rank's output
// sums.
func remoteCopies(blocks []backend.Block) int {
	type edge struct {
		at    int64
		delta int
	}
	edges := map[int][]edge{}
	for _, k := range blocks {
		if k.Src != k.Dst && k.Bytes > 0 {
			edges[k.Dst] = append(edges[k.Dst], edge{k.DstOff, 1}, edge{k.DstOff + k.Bytes, -1})
		}
	}
	most := 0
	for _, es := range edges {
		// A copy that ends where another starts does not overlap it.
		slices.SortFunc(es, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
		now := 0
		for _, e := range es {
			now += e.delta
			most = max(most, now)
		}
	}
	return most
}

// moeCollective queues dispatch or combine; kernelCollective has checked the lane, the
// peers' mappings and the buffers' alignment. out is where this rank's deliveries land:
// c.Recv, or c.Scratch under the drop fault (dispatch's puts then land in the peers'
// scratch, and combine's sums in this rank's).
//
// A rank that drops runs the pull combine even where the job stages: the staged
// kernel sums in the scratch's layers, which its own output would overwrite. It meets
// its peers at the same barriers with the same grid (the phases count alike), puts
// nothing into their scratch, so they sum what an earlier launch left there and their
// tokens that needed its copies come out wrong, and writes only its own scratch, which
// no peer reads.
func (b *Backend) moeCollective(impl string, c backend.Collective, l backend.Launch, st stream, sh Shape, out backend.Buffer, pad, state uint64) error {
	if c.Op == ops.Combine && l.Warps == 0 {
		// By the job's algorithm, not the kernel: a rank that drops pulls where its
		// peers stage, and must launch the same grid.
		if algo, err := combineAlgorithm(impl, c); err == nil && algo == combinePull {
			sh.Warps = launchWarps(kCombineBF16, c.Bytes, sh, l)
		}
	}
	kernel := kDispatch
	if c.Op == ops.Combine {
		var err error
		if kernel, err = combineKernel(impl, c.DType, false); err != nil {
			return err
		}
	}
	t, err := b.moeTable(impl, c, l, sh)
	if err != nil {
		return err
	}
	args := []uint64{b.addr(c.Send), b.addr(out)}
	if t.staged {
		if kernel, err = combineKernel(impl, c.DType, true); err != nil {
			return err
		}
		args = append(args, b.addr(c.Scratch))
	}
	args = append(args, t.args...)
	args = append(args, pad, state, uint64(b.rank), uint64(b.size))
	return b.launch(st, impl, kernel, sh, t.grid, args...)
}

// moeTable returns c's table for this rank, made and uploaded on first use. Refusals are
// kept with it: every rank refuses the same routing alike, before launching anything.
func (b *Backend) moeTable(impl string, c backend.Collective, l backend.Launch, sh Shape) (*moeTable, error) {
	key := moeKey{op: string(c.Op), n: len(c.Blocks), blocks: l.Blocks, send: c.Send.Size, recv: c.Recv.Size, elem: 1}
	if len(c.Blocks) > 0 {
		key.first = &c.Blocks[0]
	}
	if c.Op == ops.Combine {
		key.warps, key.elem = sh.Warps, ops.ElemSize(c.DType)
		key.scratch, key.algo, key.drop = c.Scratch.Size, c.Algo, b.drop
	}
	if t, ok := b.moe[key]; ok {
		return t, t.err
	}
	t := &moeTable{blocks: c.Blocks}
	var p moePlan
	var err error
	if c.Op == ops.Combine {
		var algo string
		if algo, err = combineAlgorithm(impl, c); err == nil {
			t.staged = algo == combineStaged && !b.drop
		}
	}
	if err == nil {
		p, err = planMoE(c, l, sh, key.elem, b.rank, b.size, t.staged)
	}
	if err != nil {
		t.err = err
	} else if t.mem, err = b.upload(string(c.Op), p.words); err != nil {
		return nil, err // not kept: the next call tries again
	}
	t.grid = p.grid
	for _, at := range p.parts {
		t.args = append(t.args, t.mem+8*uint64(at))
	}
	if c.Op == ops.Combine {
		vec := uint64(0)
		if p.vec {
			vec = 1
		}
		t.args = append(t.args, vec)
	}
	if b.moe == nil {
		b.moe = map[moeKey]*moeTable{}
	}
	b.moe[key] = t
	return t, t.err
}

// upload copies words into device memory of this GPU's own.
func (b *Backend) upload(op string, words []int64) (uint64, error) {
	data := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(w))
	}
	return b.uploadBytes(op, data)
}

// uploadBytes copies data into device memory of this GPU's own.
func (b *Backend) uploadBytes(op string, data []byte) (uint64, error) {
	mem, err := b.dev.Alloc(uint64(len(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: %d bytes of device memory for this rank's table: %w", op, len(data), err)
	}
	if err := b.dev.CopyHtoD(mem, data); err != nil {
		b.dev.FreeMem(mem)
		return 0, fmt.Errorf("%s: uploading this rank's table: %w", op, err)
	}
	return mem, nil
}

// freeMoE frees the tables' device memory (Close).
func (b *Backend) freeMoE() {
	for _, t := range b.moe {
		if t.mem != 0 {
			b.dev.FreeMem(t.mem)
		}
	}
	b.moe = nil
	for _, t := range b.users {
		if t.mem != 0 {
			b.dev.FreeMem(t.mem)
		}
	}
	b.users = nil
}

// planMoE makes rank me's table for c, and the grid: the same on every rank, from the
// busiest rank's bytes. staged: combine's staged table (combineAlgorithm has checked
// that the scratch holds it).
func planMoE(c backend.Collective, l backend.Launch, sh Shape, elem int64, me, n int, staged bool) (moePlan, error) {
	var p moePlan
	if err := checkMoE(c, n, elem); err != nil {
		return p, err
	}
	busiest := make([]int64, n)
	for _, k := range c.Blocks {
		if c.Op == ops.Dispatch {
			busiest[k.Src] += k.Bytes
		} else {
			busiest[k.Dst] += k.Bytes
		}
	}
	span := slices.Max(busiest)
	var err error
	if c.Op == ops.Dispatch {
		if p.grid, _, err = collGrid(span, collVector, pushPerBlock, l); err != nil {
			return p, err
		}
		cost := func(r moeRow) (int64, int64) {
			if r.rank == int64(me) {
				return r.n, 1
			}
			return r.n, remoteCost
		}
		part := func(r moeRow, off, m int64) moeRow { return moeRow{r.src + off, r.dst + off, r.rank, m} }
		bounds, rows := share(dispatchRows(c.Blocks, me, n), p.grid, collVector, cost, part)
		p.words = bounds
		p.parts = []int{0, len(p.words)}
		for _, r := range rows {
			p.words = append(p.words, r.src, r.dst, r.rank, r.n)
		}
		return p, nil
	}
	// The pull and the staged kernel share the grid: a rank that drops pulls while its
	// peers stage, and the barriers pair their blocks.
	step := int64(reduceElems * sh.Warps)
	if p.grid, _, err = collGrid(span/elem, step, step, l); err != nil {
		return p, err
	}
	bounds, pieces := combinePieces(c.Blocks, me, p.grid)
	p.words = bounds
	p.parts = []int{0, len(p.words)}
	var copies []int64
	p.vec = true
	for _, pc := range pieces {
		first := int64(len(copies) / 2)
		p.words = append(p.words, pc.off, pc.n/elem, first, first+int64(len(pc.copies)))
		p.vec = p.vec && pc.off%collVector == 0
		for k, cp := range pc.copies {
			// Staged, the copies from other ranks are read from this rank's scratch,
			// where the peers' puts left them, each in its place in the table: the
			// order of the sum stays the routing's.
			off := cp.off
			if staged && cp.rank != int64(me) {
				off = stagedAt(pc, k, me, c.Recv.Size)
			}
			copies = append(copies, cp.rank, off)
			p.vec = p.vec && off%collVector == 0
		}
	}
	p.parts = append(p.parts, len(p.words))
	p.words = append(p.words, copies...)
	if !staged {
		return p, nil
	}
	at, rows := stagedRows(c.Blocks, me, n, p.grid, c.Recv.Size)
	p.parts = append(p.parts, len(p.words))
	p.words = append(p.words, at...)
	p.parts = append(p.parts, len(p.words))
	for _, r := range rows {
		p.words = append(p.words, r.src, r.dst, r.rank, r.n)
	}
	return p, nil
}
