package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
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
	return "", fmt.Errorf("combine --impl %s sums bf16 and float32, not %s: use --dtype bf16 or float32", impl, dtype)
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
		return "", fmt.Errorf("combine --impl %s --algo %s stages up to %d copies of a token from other ranks: %d bytes of scratch, which has %d; use --algo %s",
			impl, combineStaged, layers, layers*c.Recv.Size, c.Scratch.Size, combinePull)
	}
	return "", fmt.Errorf("--algo %s: --impl %s runs combine as %s or %s", c.Algo, impl, combineStaged, combinePull)
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

// combinePieces cuts rank s's output places (combinePlaces) into grid parts of equal
// cost, in order: block b sums pieces out[bounds[b]:bounds[b+1]]. A copy on another
// rank costs remoteCost times a local one: the pull kernel loads it across the link,
// and for the staged one block b of the copy's rank puts it across in the same
// launch. Every rank can cut every rank's places: the staged kernel's puts follow the
// cut of the rank they go to.
func combinePieces(blocks []backend.Block, s, grid int) (bounds []int64, out []moePlace) {
	cost := func(pl moePlace) (int64, int64) {
		w := int64(0)
		for _, cp := range pl.copies {
			if cp.rank == int64(s) {
				w++
			} else {
				w += remoteCost
			}
		}
		return pl.n, w
	}
	part := func(pl moePlace, off, m int64) moePlace {
		q := moePlace{off: pl.off + off, n: m, copies: slices.Clone(pl.copies)}
		for i := range q.copies {
			q.copies[i].off += off
		}
		return q
	}
	return share(combinePlaces(blocks, s), grid, collVector, cost, part)
}

// stagedAt is where the staged combine keeps copy k of piece pc of rank me (a copy
// from another rank) in me's scratch: layer j (the copy is the j-th of the piece's
// copies from other ranks) of Recv-sized layers, at the piece's own offset. Pieces of
// one place keep their place's copies in order, so they agree on j.
func stagedAt(pc moePlace, k, me int, layer int64) int64 {
	j := int64(0)
	for _, cp := range pc.copies[:k] {
		if cp.rank != int64(me) {
			j++
		}
	}
	return j*layer + pc.off
}

// stagedRows are the staged combine's puts of rank me, block by block: block b of me
// puts, into every other rank s's scratch (stagedAt), the copies me holds of the
// pieces block b of s sums (combinePieces of s), so that each block of s waits at its
// barrier only for what it sums. Within a block: to the other ranks from the next one
// on, by place, with puts that continue each other at both ends merged (on two ranks
// nearly every token is in both, in token order, and a place's copy runs on).
func stagedRows(blocks []backend.Block, me, n, grid int, layer int64) (bounds []int64, rows []moeRow) {
	type cut struct {
		bounds []int64
		pieces []moePlace
	}
	cuts := make([]cut, n)
	for s := range n {
		if s != me {
			cuts[s].bounds, cuts[s].pieces = combinePieces(blocks, s, grid)
		}
	}
	bounds = make([]int64, grid+1)
	for b := range grid {
		bounds[b] = int64(len(rows))
		var mine []moeRow
		for s := range n {
			if s == me {
				continue
			}
			cs := cuts[s]
			for _, pc := range cs.pieces[cs.bounds[b]:cs.bounds[b+1]] {
				for k, cp := range pc.copies {
					if cp.rank == int64(me) {
						mine = append(mine, moeRow{cp.off, stagedAt(pc, k, s, layer), int64(s), pc.n})
					}
				}
			}
		}
		rows = append(rows, mergeRows(mine, me, n)...)
	}
	bounds[grid] = int64(len(rows))
	return bounds, rows
}

// checkMoE refuses blocks that do not fit the buffers, that land on the same bytes of a
// rank (dispatch: the GPU's copies would race, where the CPU backend lets the later one
// win) or that split elements (combine). Every rank holds the same list and refuses
// alike.
func checkMoE(c backend.Collective, n int, elem int64) error {
	for i, k := range c.Blocks {
		switch {
		case k.Src < 0 || k.Src >= n || k.Dst < 0 || k.Dst >= n:
			return fmt.Errorf("%s block %d goes from rank %d to %d: the job has ranks 0..%d", c.Op, i, k.Src, k.Dst, n-1)
		case k.SrcOff < 0 || k.DstOff < 0 || k.Bytes < 0 || k.SrcOff+k.Bytes > c.Send.Size || k.DstOff+k.Bytes > c.Recv.Size:
			return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) does not fit the %d-byte send and %d-byte receive buffers",
				c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, c.Send.Size, c.Recv.Size)
		case k.SrcOff%elem != 0 || k.DstOff%elem != 0 || k.Bytes%elem != 0:
			return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) splits %d-byte elements of %s", c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, elem, c.DType)
		}
	}
	if c.Op != ops.Dispatch {
		return nil
	}
	order := make([]int, 0, len(c.Blocks))
	for i, k := range c.Blocks {
		if k.Bytes > 0 {
			order = append(order, i)
		}
	}
	at := func(i int) backend.Block { return c.Blocks[i] }
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(at(i).Dst, at(j).Dst), cmp.Compare(at(i).DstOff, at(j).DstOff))
	})
	for x := 1; x < len(order); x++ {
		p, k := at(order[x-1]), at(order[x])
		if p.Dst == k.Dst && p.DstOff+p.Bytes > k.DstOff {
			return fmt.Errorf("dispatch blocks %d and %d both land on bytes %d..%d of rank %d's receive buffer: give every copy a place of its own",
				order[x-1], order[x], k.DstOff, min(p.DstOff+p.Bytes, k.DstOff+k.Bytes), k.Dst)
		}
	}
	return nil
}

// moeRow is a row of dispatch's table: n bytes from send + src here to recv + dst on
// rank.
type moeRow struct{ src, dst, rank, n int64 }

// dispatchRows are rank me's puts: to the other ranks first, from the next one on, then
// to itself; by place, with transfers that continue each other at both ends merged
// (with top-8 routing on two ranks nearly every token goes to both, in token order).
func dispatchRows(blocks []backend.Block, me, n int) []moeRow {
	var rows []moeRow
	for _, k := range blocks {
		if k.Src == me && k.Bytes > 0 {
			rows = append(rows, moeRow{k.SrcOff, k.DstOff, int64(k.Dst), k.Bytes})
		}
	}
	return mergeRows(rows, me, n)
}

// mergeRows orders rank me's puts by destination, from the next rank on (me last), then
// by place, and merges those that continue the one before at both ends.
func mergeRows(rows []moeRow, me, n int) []moeRow {
	turn := func(r moeRow) int64 { return (r.rank - int64(me) - 1 + int64(n)) % int64(n) }
	slices.SortStableFunc(rows, func(a, b moeRow) int { return cmp.Or(cmp.Compare(turn(a), turn(b)), cmp.Compare(a.dst, b.dst)) })
	var out []moeRow
	for _, r := range rows {
		if last := len(out) - 1; last >= 0 && out[last].rank == r.rank && out[last].dst+out[last].n == r.dst && out[last].src+out[last].n == r.src {
			out[last].n += r.n
			continue
		}
		out = append(out, r)
	}
	return out
}

// moePlace is n bytes of rank me's output at recv + off, the sum of its copies in order.
type moePlace struct {
	off, n int64
	copies []moeCopy
}

// moeCopy is a copy combine reads: at send + off on rank.
type moeCopy struct{ rank, off int64 }

// combinePlaces are rank me's output places: the bytes the blocks landing on it cover,
// cut where any of them starts or ends, each with the copies covering it in the blocks'
// order (the order the CPU backend adds them in); neighbours whose copies continue each
// other are merged.
func combinePlaces(blocks []backend.Block, me int) []moePlace {
	var cuts []int64
	for _, k := range blocks {
		if k.Dst == me && k.Bytes > 0 {
			cuts = append(cuts, k.DstOff, k.DstOff+k.Bytes)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	covers := make([][]moeCopy, max(len(cuts)-1, 0))
	for _, k := range blocks {
		if k.Dst != me || k.Bytes == 0 {
			continue
		}
		i, _ := slices.BinarySearch(cuts, k.DstOff)
		for ; cuts[i] < k.DstOff+k.Bytes; i++ {
			covers[i] = append(covers[i], moeCopy{int64(k.Src), k.SrcOff + cuts[i] - k.DstOff})
		}
	}
	var out []moePlace
	for i, cs := range covers {
		if len(cs) == 0 {
			continue
		}
		p := moePlace{cuts[i], cuts[i+1] - cuts[i], cs}
		if last := len(out) - 1; last >= 0 && continues(out[last], p) {
			out[last].n += p.n
			continue
		}
		out = append(out, p)
	}
	return out
}

// continues says whether place p starts where a ends and each of its copies where a's
// copy in the same position ends, on the same rank.
func continues(a, p moePlace) bool {
	if a.off+a.n != p.off || len(a.copies) != len(p.copies) {
		return false
	}
	for i, c := range a.copies {
		if c.rank != p.copies[i].rank || c.off+a.n != p.copies[i].off {
			return false
		}
	}
	return true
}

// share cuts items into blocks parts of about equal cost (bytes times weight, from
// size), in order, splitting an item at multiples of align bytes from its start
// (piece makes the part of an item from off, m bytes long). Part b is
// out[bounds[b]:bounds[b+1]].
func share[T any](items []T, blocks int, align int64, size func(T) (n, weight int64), piece func(it T, off, m int64) T) (bounds []int64, out []T) {
	var total int64
	for _, it := range items {
		n, w := size(it)
		total += n * w
	}
	bounds = make([]int64, blocks+1)
	b, spent := 0, int64(0)
	for _, it := range items {
		n, w := size(it)
		for off := int64(0); off < n; {
			m := n - off
			if b < blocks-1 {
				room := total*int64(b+1)/int64(blocks) - spent
				if room <= 0 {
					b++
					bounds[b] = int64(len(out))
					continue
				}
				m = min(m, backend.Align((room+w-1)/w, align))
			}
			out = append(out, piece(it, off, m))
			off += m
			spent += m * w
		}
	}
	for b++; b <= blocks; b++ {
		bounds[b] = int64(len(out))
	}
	return bounds, out
}
