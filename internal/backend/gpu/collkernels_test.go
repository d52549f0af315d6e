package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// reduce imitates reduce_bf16/reduce_f32 (kernels/triton/symmem_collectives.py): block
// i sums elements [i*chunk, min((i+1)*chunk, count)) of every rank's send + in_off into
// recv + out_off here, and on every peer too when push is set. It refuses what the
// real kernel could not do right: another rank's number or count, a grid past
// MaxCollBlocks, barrier words outside the sync area, addresses that are not whole
// vectors, a chunk that is not whole steps of the block.
func (g *fakeGPU) reduce(l fakeLaunch) error {
	a := l.args
	send, recv, err := g.sym2(a[0], a[1])
	if err != nil {
		return err
	}
	count, chunk, inOff, outOff, push := int64(a[2]), int64(a[3]), int64(a[4]), int64(a[5]), a[6] != 0
	if err := g.checkColl(l, a[8], a[9], a[10], a[11]); err != nil {
		return err
	}
	dtype, elem := "bf16", int64(2)
	if l.kernel == kReduceF32 {
		dtype, elem = "float32", 4
	}
	if (send+inOff)%collVector != 0 || (recv+outOff)%collVector != 0 {
		return fmt.Errorf("fake: %s: input at %d, output at %d: not %d-byte aligned", l.kernel, send+inOff, recv+outOff, collVector)
	}
	if step := int64(reduceElems * l.warps); chunk%step != 0 {
		return fmt.Errorf("fake: %s: chunk %d is not a multiple of the block's %d elements", l.kernel, chunk, step)
	}
	for i := range int64(l.dim.Grid) {
		lo := i * chunk
		m := min(chunk, count-lo)
		if m <= 0 {
			continue
		}
		var srcs [][]byte
		for r := range g.w.size {
			s, err := g.w.bytes(r, send+inOff+lo*elem, m*elem)
			if err != nil {
				return err
			}
			srcs = append(srcs, s)
		}
		out := make([]byte, m*elem)
		if err := coll.Reduce(ops.Sum, dtype, out, srcs...); err != nil {
			return err
		}
		for r := range g.w.size {
			if r != g.rank && !push {
				continue
			}
			d, err := g.w.bytes(r, recv+outOff+lo*elem, m*elem)
			if err != nil {
				return err
			}
			copy(d, out)
		}
	}
	return nil
}

// push imitates the push kernel: every rank (root only, when root >= 0) puts nbytes
// from send + q*stride into recv + dst_off on every other rank q, block i moving bytes
// [i*chunk, (i+1)*chunk) of each.
func (g *fakeGPU) push(l fakeLaunch) error {
	a := l.args
	send, recv, err := g.sym2(a[0], a[1])
	if err != nil {
		return err
	}
	nbytes, chunk, stride, dstOff, root := int64(a[2]), int64(a[3]), int64(a[4]), int64(a[5]), int32(a[6])
	if err := g.checkColl(l, a[7], a[8], a[9], a[10]); err != nil {
		return err
	}
	if root >= 0 && int(root) != g.rank {
		return nil
	}
	for i := range int64(l.dim.Grid) {
		off := i * chunk
		m := min(chunk, nbytes-off)
		if m <= 0 {
			continue
		}
		for q := range g.w.size {
			if q == g.rank {
				continue // the host copies the rank's own part with the copy engine
			}
			if err := g.move(q, recv+dstOff+off, g.rank, send+int64(q)*stride+off, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// staged imitates reduce_staged_bf16. Its second phase needs what every rank put in
// the first, so launches wait until every rank has made its own (as the kernel's
// barrier does); then all first phases run, then all second ones.
func (g *fakeGPU) staged(l fakeLaunch) error {
	w := g.w
	calls := w.meet(g, l)
	if calls == nil {
		return nil
	}
	type plan struct {
		send, recv, scratch, nelem, shard, chunk, sub int64
	}
	plans := make([]plan, len(calls))
	for i, c := range calls {
		a := c.l.args
		var p plan
		var err error
		if p.send, p.recv, p.scratch, err = c.sym3(); err != nil {
			return err
		}
		p.nelem, p.shard, p.chunk, p.sub = int64(a[3]), int64(a[4]), int64(a[5]), int64(a[6])
		if err := c.g.checkColl(c.l, a[7], a[8], a[9], a[10]); err != nil {
			return err
		}
		step := int64(reduceElems * c.l.warps)
		if c.l.dim.Grid != calls[0].l.dim.Grid || p.shard%64 != 0 || p.chunk%step != 0 || p.sub%step != 0 ||
			p.sub <= 0 || p.sub > p.chunk || p.sub != plans[0].sub && i > 0 {
			return fmt.Errorf("fake: %s: grid %d, shard %d, chunk %d, steps of %d", c.l.kernel, c.l.dim.Grid, p.shard, p.chunk, p.sub)
		}
		plans[i] = p
	}
	span := func(p plan, q int, i int64) (lo, m int64) {
		lo = i * p.chunk
		return lo, min(min(p.shard, p.nelem-int64(q)*p.shard)-lo, p.chunk)
	}
	for i, c := range calls { // put part of shard q into slot me of q's scratch
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			for q := range w.size {
				if lo, m := span(p, q, b); q != me && m > 0 {
					if err := c.g.move(q, p.scratch+(int64(me)*p.shard+lo)*2, me, p.send+(int64(q)*p.shard+lo)*2, m*2); err != nil {
						return err
					}
				}
			}
		}
	}
	for i, c := range calls { // sum shard me, store it everywhere
		p, me := plans[i], c.g.rank
		first := int64(me) * p.shard
		for b := range int64(c.l.dim.Grid) {
			lo, m := span(p, me, b)
			if m <= 0 {
				continue
			}
			srcs := [][]byte{w.heaps[me][p.send+(first+lo)*2 : p.send+(first+lo+m)*2]}
			for q := range w.size {
				if q != me {
					off := p.scratch + (int64(q)*p.shard+lo)*2
					srcs = append(srcs, w.heaps[me][off:off+m*2])
				}
			}
			out := make([]byte, m*2)
			if err := coll.Reduce(ops.Sum, "bf16", out, srcs...); err != nil {
				return err
			}
			for r := range w.size {
				copy(w.heaps[r][p.recv+(first+lo)*2:], out)
			}
		}
	}
	return nil
}

// pushed imitates reduce_push_*: once every rank has launched it, each rank's block b
// puts its part (elements [q*stride + b*chunk, q*stride + (b+1)*chunk) for peer q) into
// slot me of block b's area half (by the block's phase) on every peer q, unless deliver
// is 0; then each rank sums its own part (from me*stride) and the slots in rank order
// into its recv, and counts the block's phase.
func (g *fakeGPU) pushed(l fakeLaunch) error {
	w := g.w
	calls := w.meet(g, l)
	if calls == nil {
		return nil
	}
	n := int64(w.size)
	elem, dtype := int64(2), "bf16"
	if l.kernel == kPushF32 {
		elem, dtype = 4, "float32"
	}
	type plan struct {
		send, recv, area, cap, nelem, chunk, stride, state int64
		deliver                                            bool
	}
	plans := make([]plan, len(calls))
	for i, c := range calls {
		a := c.l.args
		var p plan
		var err error
		if p.send, p.recv, p.area, err = c.sym3(); err != nil {
			return err
		}
		if p.state, err = c.g.sym(a[9]); err != nil {
			return err
		}
		p.cap, p.nelem, p.chunk, p.stride, p.deliver = int64(a[3]), int64(a[4]), int64(a[5]), int64(a[6]), a[7] != 0
		if err := c.g.checkColl(c.l, a[8], a[9], a[10], a[11]); err != nil {
			return err
		}
		sync := backend.Align(w.heap, backend.HeapAlign)
		switch {
		case c.l.kernel != l.kernel || c.l.dim.Grid != calls[0].l.dim.Grid:
			return fmt.Errorf("fake: ranks launched %s with %d blocks and %s with %d", c.l.kernel, c.l.dim.Grid, l.kernel, calls[0].l.dim.Grid)
		case p.area != sync+pushAreaOff(w.size):
			return fmt.Errorf("fake: %s: staging area at %d, not at %d", l.kernel, p.area, sync+pushAreaOff(w.size))
		case p.cap != pushCap(w.size) || p.cap*n*2*pushBlocks > pushArea(w.size):
			return fmt.Errorf("fake: %s: slots of %d bytes, not %d within the area", l.kernel, p.cap, pushCap(w.size))
		case (p.chunk*elem)%collVector != 0 || p.chunk*elem > p.cap || c.l.dim.Grid > pushBlocks:
			return fmt.Errorf("fake: %s: chunk %d elements, %d blocks: past the staging slots", l.kernel, p.chunk, c.l.dim.Grid)
		}
		plans[i] = p
	}
	half := func(c stagedCall, p plan, b int64) (int64, uint64, error) {
		st, err := c.g.w.bytes(c.g.rank, p.state+b*8, 8)
		if err != nil {
			return 0, 0, err
		}
		phase := binary.LittleEndian.Uint64(st) + 1
		return p.area + (b*2+int64(phase%2))*n*p.cap, phase, nil
	}
	for i, c := range calls { // put
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			lo := b * p.chunk
			m := min(p.chunk, p.nelem-lo)
			if m <= 0 || !p.deliver {
				continue
			}
			h, _, err := half(c, p, b)
			if err != nil {
				return err
			}
			for q := range w.size {
				if q != me {
					if err := c.g.move(q, h+int64(me)*p.cap, me, p.send+(int64(q)*p.stride+lo)*elem, m*elem); err != nil {
						return err
					}
				}
			}
		}
	}
	for i, c := range calls { // sum in rank order, count the phase
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			h, phase, err := half(c, p, b)
			if err != nil {
				return err
			}
			if lo, m := b*p.chunk, min(p.chunk, p.nelem-b*p.chunk); m > 0 {
				var srcs [][]byte
				for r := range w.size {
					off := p.send + (int64(me)*p.stride+lo)*elem
					if r != me {
						off = h + int64(r)*p.cap
					}
					srcs = append(srcs, w.heaps[me][off:off+m*elem])
				}
				if err := coll.Reduce(ops.Sum, dtype, w.heaps[me][p.recv+lo*elem:p.recv+(lo+m)*elem], srcs...); err != nil {
					return err
				}
			}
			binary.LittleEndian.PutUint64(w.heaps[me][p.state+b*8:], phase)
		}
	}
	return nil
}

// sym2 is the heap offsets of a kernel's send and recv addresses.
func (g *fakeGPU) sym2(send, recv uint64) (int64, int64, error) {
	s, err := g.sym(send)
	if err != nil {
		return 0, 0, err
	}
	r, err := g.sym(recv)
	return s, r, err
}

// checkPhases fails the test when the ranks' collective kernels so far pass different
// numbers of barrier phases in some block (or LL launches): on the GPU a barrier would
// wait for announcements that never come. A rank that stays away (the absent fault) is
// meant to differ.
func checkPhases(t *testing.T, bs []*Backend) {
	t.Helper()
	var first *fakeGPU
	for r, b := range bs {
		g, ok := b.lib.(*fakeGPU)
		if !ok || b.absent {
			return
		}
		if first == nil {
			first = g
			continue
		}
		if g.phases != first.phases || g.llPhases != first.llPhases {
			for blk := range MaxCollBlocks {
				if g.phases[blk] != first.phases[blk] || g.llPhases[blk] != first.llPhases[blk] {
					t.Errorf("rank %d's block %d passed %d barrier phases and %d LL launches, rank 0's %d and %d: a barrier would wait forever",
						r, blk, g.phases[blk], g.llPhases[blk], first.phases[blk], first.llPhases[blk])
					return
				}
			}
		}
	}
}

// stagedCall is a rank's launch of a kernel whose imitation needs every rank's launch
// (their barriers pair the ranks' blocks), waiting for the others'.
type stagedCall struct {
	g *fakeGPU
	l fakeLaunch
}

// meet keeps g's launch l until every rank has made its own, as the kernel's barrier
// would; then it returns all of them, in the order they came, and nil until then.
func (w *fakeWorld) meet(g *fakeGPU, l fakeLaunch) []stagedCall {
	w.staged = append(w.staged, stagedCall{g, l})
	if len(w.staged) < w.size {
		return nil
	}
	calls := w.staged
	w.staged = nil
	return calls
}

// sym3 is the heap offsets of the symmetric addresses the staging kernels take first:
// send, recv and their scratch or staging area.
func (c stagedCall) sym3() (send, recv, third int64, err error) {
	a := c.l.args
	if send, recv, err = c.g.sym2(a[0], a[1]); err != nil {
		return
	}
	third, err = c.g.sym(a[2])
	return
}

// llArgs reads what both LL kernels take alike: send and recv, the area (argument 2),
// and the launch words (argument st, after pad and before me and n), checked by checkLL.
func (c stagedCall) llArgs(st int) (send, recv, area, state int64, err error) {
	a := c.l.args
	if send, recv, area, err = c.sym3(); err != nil {
		return
	}
	if state, err = c.g.sym(a[st]); err != nil {
		return
	}
	err = c.g.checkLL(c.l, a[st-1], a[st], a[st+1], a[st+2])
	return
}

// checkLL is checkColl for the LL kernels, whose state words count their launches
// apart from the barriers' phases: a kernel that counted its launches in the barrier
// kernels' state words without announcing them would leave every later barrier
// waiting for announcements that never come (seen on the H200s before the split).
func (g *fakeGPU) checkLL(l fakeLaunch, pad, state, me, n uint64) error {
	sync := fakeSym + uint64(backend.Align(g.w.heap, backend.HeapAlign))
	if want := sync + uint64(MaxCollBlocks*g.w.size*8+MaxCollBlocks*8); state != want {
		return fmt.Errorf("fake: %s counts its launches at %#x, not in the LL words at %#x", l.kernel, state, want)
	}
	return g.checkColl(l, pad, state-MaxCollBlocks*8, me, n)
}

// checkColl checks the arguments every collective kernel takes the same way, and that
// every peer is mapped here (the kernels would use a null nvshmem_ptr otherwise).
func (g *fakeGPU) checkColl(l fakeLaunch, pad, state, me, n uint64) error {
	sync := fakeSym + uint64(backend.Align(g.w.heap, backend.HeapAlign))
	for q := range g.w.size {
		if g.w.unmapped[[2]int{g.rank, q}] {
			return fmt.Errorf("fake: %s on rank %d: nvshmem_ptr(…, %d) is null: illegal address", l.kernel, g.rank, q)
		}
	}
	switch {
	case int(me) != g.rank || int(n) != g.w.size:
		return fmt.Errorf("fake: %s on rank %d of %d called as rank %d of %d", l.kernel, g.rank, g.w.size, me, n)
	case pad != sync || state != sync+uint64(MaxCollBlocks*g.w.size*8):
		return fmt.Errorf("fake: %s: barrier words at %#x/%#x, not in the sync area at %#x", l.kernel, pad, state, sync)
	case l.dim.Grid == 0 || l.dim.Grid > MaxCollBlocks:
		return fmt.Errorf("fake: %s launched with %d blocks", l.kernel, l.dim.Grid)
	}
	return nil
}

// collWorld opens n fake ranks with send, recv and scratch buffers of max bytes.
func collWorld(t *testing.T, n int, max int64) ([]*Backend, []*fakeGPU, [3]backend.Buffer) {
	t.Helper()
	w := newWorld(t, n, 3*backend.Align(max, backend.HeapAlign)+4096+backend.HeapAlign)
	var bs []*Backend
	var gs []*fakeGPU
	var bufs [3]backend.Buffer
	for r := 0; r < n; r++ {
		b, g := w.open(t, r, Config{})
		for i := range bufs {
			// Scratch has room past the output, as the bench's does at all but its
			// largest size: the staged all-reduce runs with short and empty shards.
			buf, err := b.Alloc(max + int64(i/2)*4096)
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = buf
		}
		bs, gs = append(bs, b), append(gs, g)
	}
	return bs, gs, bufs
}

// runColl writes every rank's input, runs c everywhere with impl, and returns what each
// rank's Recv holds and what it should hold.
func runColl(t *testing.T, bs []*Backend, bufs [3]backend.Buffer, op ops.Op, dtype, algo string, size int64, l backend.Launch) (got, want [][]byte, err error) {
	t.Helper()
	return runCollSeq(t, bs, bufs, op, dtype, algo, size, l, 3)
}

// runCollSeq is runColl with the inputs of measurement seq (coll.Data's windows), as
// the bench gives every measurement its own.
func runCollSeq(t *testing.T, bs []*Backend, bufs [3]backend.Buffer, op ops.Op, dtype, algo string, size int64, l backend.Launch, seq int) (got, want [][]byte, err error) {
	t.Helper()
	return runCollRed(t, bs, bufs, op, dtype, algo, ops.Sum, size, l, seq)
}

// runCollRed is runCollSeq combining with red (its check data, as bench's).
func runCollRed(t *testing.T, bs []*Backend, bufs [3]backend.Buffer, op ops.Op, dtype, algo string, red ops.RedOp, size int64, l backend.Launch, seq int) (got, want [][]byte, err error) {
	t.Helper()
	return runCollRoot(t, bs, bufs, op, dtype, algo, red, size, l, seq, len(bs)-1)
}

// runCollRoot is runCollRed with root as the root. A rank that op leaves nothing (coll's
// Want is nil: not reduce's root) must hold the poison written before, untouched.
func runCollRoot(t *testing.T, bs []*Backend, bufs [3]backend.Buffer, op ops.Op, dtype, algo string, red ops.RedOp, size int64, l backend.Launch, seq, root int) (got, want [][]byte, err error) {
	t.Helper()
	n := len(bs)
	elem := int64(1)
	if dtype != "" {
		elem = ops.ElemSize(dtype)
	}
	shape, err := ops.Op(op).Shape(size, n, elem)
	if err != nil {
		t.Fatal(err)
	}
	data := coll.NewData(dtype, red, n, shape.Send)
	c := backend.Collective{Op: op, DType: dtype, Bytes: shape.Bytes, Send: bufs[0].Slice(0, shape.Send), Recv: bufs[1].Slice(0, shape.Recv),
		Scratch: bufs[2], Root: root, Algo: algo, RedOp: red}
	poison := bytes.Repeat([]byte{0xEE}, int(shape.Recv))
	for r, b := range bs {
		if err := b.Write(c.Send, data.Input(r, seq, shape.Send)); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(c.Recv, poison); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bs {
		if err := b.Collective(c, l); err != nil {
			return nil, nil, err
		}
	}
	checkPhases(t, bs)
	for r, b := range bs {
		if err := b.Quiet(); err != nil {
			t.Fatal(err)
		}
		w, err := data.Want(shape, r, root, seq)
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			w = poison
		}
		g := make([]byte, shape.Recv)
		if err := b.Read(c.Recv, g); err != nil {
			t.Fatal(err)
		}
		got, want = append(got, g), append(want, w)
	}
	return got, want, nil
}

// The triton and copy-engine collectives hand their kernels and copies the right
// addresses, offsets, counts and grids: checked by what lands in every rank's heap
// (coll's check data, as the bench checks it) on 2 and 3 fake ranks, for sizes that
// split unevenly, in both all-reduce algorithms and both element types; every rank
// launches the same grid (the kernels' barriers pair blocks across ranks).
func TestKernelCollectivesDeliver(t *testing.T) {
	type tc struct {
		op          ops.Op
		dtype, algo string
	}
	cases := []tc{
		{ops.AllReduce, "bf16", ops.OneShot}, {ops.AllReduce, "bf16", ops.TwoShot},
		{ops.AllReduce, "float32", ops.OneShot}, {ops.AllReduce, "float32", ops.TwoShot},
		{ops.ReduceScatter, "bf16", ""}, {ops.ReduceScatter, "float32", ""}, {ops.ReduceScatter, "bf16", ops.Pull},
		{ops.AllGather, "", ""}, {ops.Broadcast, "", ""}, {ops.AllToAll, "", ""},
	}
	for _, n := range []int{2, 3} {
		// One world a rank count, as a bench's sizes share one heap: each measurement
		// has inputs of its own (runCollSeq), so none passes on what one before it left.
		const most = 3 << 20
		bs, gs, bufs := collWorld(t, n, most)
		seq := 0
		for _, size := range []int64{96 * int64(n), 6000 * 16 * int64(n), most} {
			for _, c := range cases {
				for _, impl := range []string{"triton", "copy-engine"} {
					if impl == "copy-engine" && ops.Op(c.op).Reduces() {
						continue
					}
					name := fmt.Sprintf("%d/%s/%s/%s/%s/%d", n, impl, c.op, c.dtype, c.algo, size)
					seq++
					t.Run(name, func(t *testing.T) {
						for _, g := range gs {
							g.launches = nil
						}
						got, want, err := runCollSeq(t, bs, bufs, c.op, c.dtype, c.algo, size, backend.Launch{Impl: impl}, seq)
						if err != nil {
							t.Errorf("%s: %v", name, err)
							return
						}
						for r := range got {
							if !bytes.Equal(got[r], want[r]) {
								t.Errorf("%s: rank %d holds the wrong result", name, r)
							}
						}
						for r := 1; r < n; r++ {
							if fmt.Sprint(grids(gs[r])) != fmt.Sprint(grids(gs[0])) {
								t.Errorf("%s: rank %d launched %v, rank 0 %v", name, r, grids(gs[r]), grids(gs[0]))
							}
						}
						if impl == "triton" && len(grids(gs[0])) != 1 {
							t.Errorf("%s: launched %v, want one kernel", name, grids(gs[0]))
						}
					})
				}
			}
		}
	}
}

// grids lists the kernels g launched that meet peers: the local copies of the
// copy-engine collectives (sm_store, on the ranks that hold data to copy) meet nobody.
func grids(g *fakeGPU) []string {
	var out []string
	for _, l := range g.launches {
		if l.kernel == kStore {
			continue
		}
		out = append(out, fmt.Sprintf("%s w%d x%d", l.kernel, l.warps, l.dim.Grid))
	}
	return out
}

// A rank under the drop fault still runs its part (its peers wait for it at the
// kernels' barriers and NVSHMEM's), but what it delivers lands in Scratch: a result is
// wrong somewhere, for every op and implementation. Reverting the redirection (drop
// ignored) makes this test fail.
func TestKernelCollectivesDrop(t *testing.T) {
	for _, op := range []ops.Op{ops.AllReduce, ops.ReduceScatter, ops.AllGather, ops.Broadcast, ops.AllToAll} {
		for _, impl := range []string{"triton", "copy-engine"} {
			if impl == "copy-engine" && ops.Op(op).Reduces() {
				continue
			}
			for _, algo := range []string{ops.OneShot, ops.TwoShot} {
				if op != ops.AllReduce && algo == ops.TwoShot {
					continue
				}
				if op != ops.AllReduce {
					algo = ""
				}
				dtype := ""
				if ops.Op(op).Reduces() {
					dtype = "bf16"
				}
				bs, gs, bufs := collWorld(t, 2, 1<<16)
				bs[1].SetDrop(true)
				got, want, err := runColl(t, bs, bufs, op, dtype, algo, 1<<16, backend.Launch{Impl: impl})
				if err != nil {
					t.Fatalf("%s %s: %v", impl, op, err)
				}
				if bytes.Equal(got[0], want[0]) && bytes.Equal(got[1], want[1]) {
					t.Errorf("%s %s %s: a dropping rank left every result right", impl, op, algo)
				}
				if len(gs[1].launches) == 0 && impl == "triton" {
					t.Errorf("%s %s: the dropping rank launched nothing: its peers would wait for it forever", impl, op)
				}
			}
		}
	}
}

// The triton all-reduce runs one-shot (the push kernel) up to pushAuto (4 MiB; on more
// than 2 ranks pushAutoMany) and two-shot above, unless --algo says otherwise; rows of nccl name no algorithm.
func TestKernelCollectiveAlgorithm(t *testing.T) {
	bs, _, _ := collWorld(t, 2, 1024)
	b := bs[0]
	for _, tc := range []struct {
		impl, algo string
		bytes      int64
		want       string
	}{
		{"triton", "", 8 << 10, ops.OneShot},
		{"triton", "", 4 << 20, ops.OneShot},
		{"triton", "", 4<<20 + 16, ops.TwoShot},
		{"triton", ops.TwoShot, 8 << 10, ops.TwoShot},
		{"triton", "", 256 << 20, ops.TwoShot},
		{"triton", ops.OneShot, 256 << 20, ops.OneShot},
		{"nccl", "", 8 << 10, ""},
	} {
		c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: tc.bytes, Algo: tc.algo}
		if got := b.Algorithm(c, backend.Launch{Impl: tc.impl}); got != tc.want {
			t.Errorf("%s %s %d: %q, want %q", tc.impl, tc.algo, tc.bytes, got, tc.want)
		}
	}
	// Reduce-scatter stages up to pushAuto a rank's block, and pulls above.
	for _, tc := range []struct {
		algo  string
		bytes int64
		want  string
	}{{"", 1 << 20, ops.Staged}, {"", 8 << 20, ops.Staged}, {"", 8<<20 + 32, ops.Pull}, {ops.Pull, 1 << 20, ops.Pull}} {
		c := backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: tc.bytes, Algo: tc.algo}
		if got := b.Algorithm(c, backend.Launch{Impl: "triton"}); got != tc.want {
			t.Errorf("reduce-scatter %q %d: %q, want %q", tc.algo, tc.bytes, got, tc.want)
		}
	}
	// Too few --blocks for the staging slots: the pull kernel runs, and says so; asked
	// for by name, staged is refused.
	rs := backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: 8 << 20}
	if got := b.Algorithm(rs, backend.Launch{Impl: "triton", Blocks: 2}); got != ops.Pull {
		t.Errorf("reduce-scatter 8 MiB on 2 blocks: %q, want %q", got, ops.Pull)
	}
	if got := b.Algorithm(rs, backend.Launch{Impl: "triton", Blocks: 64}); got != ops.Staged {
		t.Errorf("reduce-scatter 8 MiB on 64 blocks: %q, want %q", got, ops.Staged)
	}
	// On more ranks one-shot sends more than two-shot: it stops at pushAutoMany.
	bs4, _, _ := collWorld(t, 4, 1024)
	for bytes, want := range map[int64]string{512 << 10: ops.OneShot, 512<<10 + 64: ops.TwoShot, 4 << 20: ops.TwoShot} {
		c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: bytes}
		if got := bs4[0].Algorithm(c, backend.Launch{Impl: "triton"}); got != want {
			t.Errorf("4 ranks, %d bytes: %q, want %q", bytes, got, want)
		}
	}
}

// What the triton collectives cannot do is refused before anything is launched, with
// what to use instead.
func TestKernelCollectiveRefusals(t *testing.T) {
	bs, gs, bufs := collWorld(t, 3, 1<<16)
	b := bs[0]
	for _, tc := range []struct {
		c    backend.Collective
		l    backend.Launch
		want string
	}{
		{backend.Collective{Op: ops.AllReduce, DType: "int32", Bytes: 1024}, backend.Launch{Impl: "triton"}, "sums bf16 and float32, not int32"},
		{backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: 6 * 1001}, backend.Launch{Impl: "triton"}, "(2002 bytes) must be a multiple of 16; use a size that is a multiple of 48"},
		{backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1024, Algo: "ring"}, backend.Launch{Impl: "triton"}, "{algo} ring"},
		{backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: 3072, Algo: ops.TwoShot}, backend.Launch{Impl: "triton"}, "runs reduce-scatter as staged or pull"},
		{backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: 3 * 32 << 20, Algo: ops.Staged}, backend.Launch{Impl: "triton"}, "use {algo} pull"},
		{backend.Collective{Op: ops.ReduceScatter, DType: "bf16", Bytes: 3 << 20, Algo: ops.Staged}, backend.Launch{Impl: "triton", Blocks: 2}, "use more blocks, or {algo} pull"},
		{backend.Collective{Op: ops.AllGather, Bytes: 3 << 10}, backend.Launch{Impl: "triton", Blocks: 129}, "at most 128 blocks"},
		{backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1024}, backend.Launch{Impl: "copy-engine"}, "{impl} copy-engine cannot run all-reduce"},
	} {
		tc.c.Send, tc.c.Recv, tc.c.Scratch = bufs[0].Slice(0, 1<<10), bufs[1].Slice(0, 1<<10), bufs[2]
		err := b.Collective(tc.c, tc.l)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.c.Op, tc.l, err, tc.want)
		}
	}
	if len(gs[0].launches) != 0 {
		t.Errorf("refused collectives launched %v", grids(gs[0]))
	}
	c := backend.Collective{Op: ops.AllGather, Bytes: 3 << 10, Send: bufs[0].Slice(0, 1<<10), Recv: bufs[1].Slice(0, 3<<10), Scratch: bufs[2]}
	if err := b.Lanes(2); err != nil {
		t.Fatal(err)
	}
	if err := b.Collective(c, backend.Launch{Impl: "triton", Lane: 1}); err == nil || !strings.Contains(err.Error(), "one stream only") {
		t.Errorf("lane 1: %v", err)
	}
	// A peer without a mapping (no NVLink or P2P path): the kernels would fault on a
	// null address, the copy engine has nowhere to copy; NCCL still can.
	b.peers[2] = 0
	for _, impl := range []string{"triton", "copy-engine"} {
		if err := b.Collective(c, backend.Launch{Impl: impl}); err == nil || !strings.Contains(err.Error(), "rank 2's memory is not mapped here") || !strings.HasSuffix(err.Error(), "use {impl} nvshmem or nccl or nccl-symm") {
			t.Errorf("%s to an unmapped peer: %v", impl, err)
		}
	}
	// A broadcast's receiver copies nothing, but the copy engine's barrier kernel still
	// adds into every peer's words through their mappings.
	bc := backend.Collective{Op: ops.Broadcast, Bytes: 1 << 10, Send: bufs[0].Slice(0, 1<<10), Recv: bufs[1].Slice(0, 1<<10), Scratch: bufs[2], Root: 1}
	if err := b.Collective(bc, backend.Launch{Impl: "copy-engine"}); err == nil || !strings.Contains(err.Error(), "rank 2's memory is not mapped here") {
		t.Errorf("copy-engine broadcast received from rank 1 with rank 2 unmapped: %v", err)
	}
	if len(gs[0].launches) != 0 {
		t.Errorf("refused collectives launched %v", grids(gs[0]))
	}
}

// From besideMin on, a push collective's own block goes by the copy engine on a side
// stream while the kernel runs on the main one; below, before the kernel on the main
// stream. Either way it lands: taking the copy out fails the results here.
func TestPushOwnBlockBesideTheKernel(t *testing.T) {
	for _, size := range []int64{2 << 20, 2 * besideMin} {
		bs, gs, bufs := collWorld(t, 2, size)
		got, want, err := runColl(t, bs, bufs, ops.AllGather, "", "", size, backend.Launch{Impl: "triton"})
		if err != nil {
			t.Fatal(err)
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%d: rank %d holds the wrong result", size, r)
			}
		}
		trace := strings.Join(gs[0].trace("copy", "launch"), " ")
		wantTrace := "copy 1048576@s0 launch push@s0"
		if size >= 2*besideMin {
			wantTrace = fmt.Sprintf("copy %d@s1 launch push@s0", size/2)
		}
		if trace != wantTrace {
			t.Errorf("%d: %s, want %s", size, trace, wantTrace)
		}
	}
}

// A scratch buffer smaller than the output is refused on every rank, not only on one
// under the drop fault: a rank that refused alone would leave its peers at a barrier.
func TestScratchTooSmallRefusedEverywhere(t *testing.T) {
	bs, gs, bufs := collWorld(t, 2, 1<<16)
	c := backend.Collective{Op: ops.AllGather, Bytes: 1 << 16, Send: bufs[0].Slice(0, 1<<15), Recv: bufs[1], Scratch: bufs[2].Slice(0, 1<<10)}
	for r, b := range bs {
		for _, impl := range []string{"triton", "copy-engine", "nccl"} {
			if err := b.Collective(c, backend.Launch{Impl: impl}); err == nil || !strings.Contains(err.Error(), "scratch cannot take") {
				t.Errorf("rank %d %s: %v", r, impl, err)
			}
		}
		if len(gs[r].launches) != 0 {
			t.Errorf("rank %d launched %v", r, grids(gs[r]))
		}
	}
}

// A small all-reduce runs the push kernel: one launch per rank with the staging area in
// the sync area, and under the drop fault the dropping rank puts nothing (deliver 0),
// so its peers' sums come out wrong while its own run on.
func TestPushAllReduce(t *testing.T) {
	for _, dtype := range []string{"bf16", "float32"} {
		bs, gs, bufs := collWorld(t, 2, 1<<20)
		got, want, err := runColl(t, bs, bufs, ops.AllReduce, dtype, "", 96<<10, backend.Launch{Impl: "triton"})
		if err != nil {
			t.Fatal(err)
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%s: rank %d holds the wrong sum", dtype, r)
			}
			l := gs[r].launches[len(gs[r].launches)-1]
			if d, _ := l.param("deliver"); !strings.HasPrefix(l.kernel, "reduce_push") || d != 1 {
				t.Errorf("%s: rank %d launched %s (deliver %d)", dtype, r, l.kernel, d)
			}
		}
		// Run it again: the blocks' phases move on, the other half of the areas is used.
		if got, want, err = runCollSeq(t, bs, bufs, ops.AllReduce, dtype, "", 96<<10, backend.Launch{Impl: "triton"}, 5); err != nil ||
			!bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Errorf("%s: a second all-reduce: %v", dtype, err)
		}
		// The next measurement's inputs, as the bench's: what the staging areas still hold
		// from the last must not pass for them.
		bs[1].SetDrop(true)
		got, want, err = runCollSeq(t, bs, bufs, ops.AllReduce, dtype, "", 96<<10, backend.Launch{Impl: "triton"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if l := gs[1].launches[len(gs[1].launches)-1]; !strings.HasPrefix(l.kernel, "reduce_push") {
			t.Errorf("%s: the dropping rank launched %s", dtype, l.kernel)
		} else if d, _ := l.param("deliver"); d != 0 {
			t.Errorf("%s: the dropping rank delivered (deliver %d)", dtype, d)
		}
		if bytes.Equal(got[0], want[0]) {
			t.Errorf("%s: rank 0's sum is right although rank 1 delivered nothing", dtype)
		}
	}
}

// --blocks K splits the copy engine's copies of a collective into K page-aligned pieces
// on streams of their own (one piece: the main stream), and the result is the same.
// The root's own part goes by the sm_store kernel on a stream of its own, queued before
// the first barrier and joined after the last; with EnvCopyOwn=copy by the copy engine
// as one more piece each.
func TestCopyEngineCollectiveSplit(t *testing.T) {
	for _, k := range []int{0, 3} {
		for _, bySM := range []bool{true, false} {
			name := fmt.Sprintf("blocks %d, own part by kernel %v", k, bySM)
			bs, gs, bufs := collWorld(t, 2, 1<<20)
			for _, b := range bs {
				b.ownBlocks = -1
				if bySM {
					b.ownBlocks = defaultOwnBlocks
				}
			}
			got, want, err := runColl(t, bs, bufs, ops.Broadcast, "", "", 1<<20, backend.Launch{Impl: implCopyEngine, Blocks: k})
			if err != nil {
				t.Fatal(err)
			}
			for r := range got {
				if !bytes.Equal(got[r], want[r]) {
					t.Errorf("%s: rank %d holds the wrong result", name, r)
				}
			}
			root := gs[1] // runColl's root is the last rank
			streams := map[int]bool{}
			var sum uint64
			for _, c := range root.copies {
				streams[c.stream] = true
				sum += c.size
			}
			pieces, bytes := max(k, 1), uint64(1<<20)
			if !bySM {
				pieces, bytes = 2*pieces, 2<<20 // to the peer and to itself
			}
			if len(root.copies) != pieces || len(streams) != pieces || sum != bytes {
				t.Errorf("%s: %d copies on %d streams, %d bytes; want %d on as many, %d", name, len(root.copies), len(streams), sum, pieces, bytes)
			}
			if bySM && k == 0 && !streams[0] {
				t.Errorf("%s: the one copy to the peer is not on the main stream", name)
			}
			var own []fakeLaunch
			for _, l := range root.launches {
				if l.kernel == kStore {
					own = append(own, l)
				}
			}
			switch {
			case !bySM && len(own) != 0:
				t.Errorf("%s: sm_store launched", name)
			case !bySM:
			case len(own) != 1 || own[0].dim.Grid != defaultOwnBlocks || own[0].stream == 0 || streams[own[0].stream]:
				t.Errorf("%s: own part launched %+v; want one sm_store of %d blocks on a stream of its own", name, own, defaultOwnBlocks)
			}
			// Its stream forks from main before the first barrier, and main waits for it
			// after the last.
			if bySM && len(own) == 1 {
				s := fmt.Sprintf("s%d", own[0].stream)
				tr := root.trace()
				fork, join := slices.Index(tr, s+" waits s0"), slices.Index(tr, "s0 waits "+s)
				first, last := slices.Index(tr, "launch barrier@s0"), -1
				for i, c := range tr {
					if c == "launch barrier@s0" {
						last = i
					}
				}
				if fork < 0 || fork > first || join < last {
					t.Errorf("%s: calls %q: want %s forked from s0 before the first barrier and joined after the last", name, tr, s)
				}
			}
		}
	}
}

// The two-shot all-reduce splits each block's chunk into whole BLOCKs of steps, as many
// as asked and the chunk has; every rank alike. A rank that drops runs the two-shot
// pull kernel where its peers stage, and meets as many barriers as their steps: one
// per step and the last, extra = steps - 1 empty ones.
func TestStagedSteps(t *testing.T) {
	b := &Backend{steps: 4}
	for _, tc := range []struct{ chunk, step, sub int64 }{
		{2048, 2048, 2048}, {4096, 2048, 2048}, {8192, 2048, 2048}, {65536, 2048, 16384}, {6144, 2048, 2048}, {10240, 2048, 4096},
	} {
		sub, steps := b.stagedSteps(tc.chunk, tc.step)
		if sub != tc.sub || int64(steps) != (tc.chunk+sub-1)/sub || sub%tc.step != 0 || steps > 4 {
			t.Errorf("chunk %d of %d: steps of %d (%d), want %d", tc.chunk, tc.step, sub, steps, tc.sub)
		}
	}
	const size = 4 << 20
	bs, gs, bufs := collWorld(t, 2, size)
	for _, b := range bs {
		b.steps = 4
	}
	l := backend.Launch{Impl: "triton", Warps: 4, Blocks: 16} // 32 BLOCKs a chunk
	if got, want, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", ops.TwoShot, size, l); err != nil {
		t.Fatal(err)
	} else if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Fatal("the staged all-reduce in 4 steps is wrong")
	}
	st := gs[0].launches[len(gs[0].launches)-1]
	chunk, _ := st.param("chunk")
	sub, _ := st.param("sub")
	if st.kernel != kStaged || sub != chunk/4 {
		t.Fatalf("rank 0 launched %s with chunk %d in steps of %d, want %s in 4 steps", st.kernel, chunk, sub, kStaged)
	}
	bs[1].SetDrop(true)
	if _, _, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", ops.TwoShot, size, l); err != nil {
		t.Fatal(err)
	}
	dr := gs[1].launches[len(gs[1].launches)-1]
	if extra, _ := dr.param("extra"); dr.kernel != kReduceBF16 || extra != 3 || dr.dim.Grid != st.dim.Grid {
		t.Errorf("the dropping rank launched %s (%d blocks) with %d extra barriers, want %s (%d blocks) with 3", dr.kernel, dr.dim.Grid, extra, kReduceBF16, st.dim.Grid)
	}
}

// llPlan is what the LL all-reduce kernels (reduce_ll_*, reduce_ll128_*) take alike:
// send, recv, area, cap, nwords, chunk, deliver, then the launch words (state).
type llPlan struct {
	send, recv, area, cap, nwords, chunk, state int64
	deliver                                     bool
}

// llMeet keeps g's launch l of an LL all-reduce kernel until every rank has made its
// own (nil calls until then), then reads them all (checked by llArgs), wants the same
// kernel, grid and size on every rank, and says the element type (float32 where the
// kernel is f32, bf16 otherwise).
func (g *fakeGPU) llMeet(l fakeLaunch, f32 string) (calls []stagedCall, plans []llPlan, dtype string, err error) {
	if calls = g.w.meet(g, l); calls == nil {
		return nil, nil, "", nil
	}
	dtype = "bf16"
	if l.kernel == f32 {
		dtype = "float32"
	}
	plans = make([]llPlan, len(calls))
	for i, c := range calls {
		a := c.l.args
		p := &plans[i]
		if p.send, p.recv, p.area, p.state, err = c.llArgs(8); err != nil {
			return nil, nil, "", err
		}
		p.cap, p.nwords, p.chunk, p.deliver = int64(a[3]), int64(a[4]), int64(a[5]), a[6] != 0
		if c.l.kernel != l.kernel || c.l.dim.Grid != calls[0].l.dim.Grid || p.nwords != plans[0].nwords {
			return nil, nil, "", fmt.Errorf("fake: ranks launched %s with %d blocks for %d words and %s with %d for %d", c.l.kernel, c.l.dim.Grid, p.nwords,
				calls[0].l.kernel, calls[0].l.dim.Grid, plans[0].nwords)
		}
	}
	return calls, plans, dtype, nil
}

// phase is the launch count block b of c's rank runs under: its launch word, plus one.
func (p llPlan) phase(c stagedCall, b int64) uint64 {
	return binary.LittleEndian.Uint64(c.g.w.heaps[c.g.rank][p.state+b*8:]) + 1
}

// llReduce imitates reduce_ll_*: once every rank has launched it, each rank's block b
// stores its words [b*chunk, b*chunk+min(chunk, llWords)) as 8-byte packets (the word,
// then the block's phase as the flag; zero data under deliver 0) into slot me of block
// b's area half (by the phase) on every peer; then each rank reads its slots, wants
// every packet's flag to be this launch's (a kernel would wait for it), sums its own
// words and the packets' in rank order into its recv, and counts the phase.
func (g *fakeGPU) llReduce(l fakeLaunch) error {
	w := g.w
	calls, plans, dtype, err := g.llMeet(l, kLLF32)
	if calls == nil || err != nil {
		return err
	}
	n := int64(w.size)
	sync := backend.Align(w.heap, backend.HeapAlign)
	for i, c := range calls {
		switch p := plans[i]; {
		case p.area != sync+llAreaOff(w.size) || p.cap != llWords*8 || p.chunk != llWords:
			return fmt.Errorf("fake: %s: area at %d in slots of %d, blocks of %d words", l.kernel, p.area, p.cap, p.chunk)
		case int64(c.l.dim.Grid) != (p.nwords+p.chunk-1)/p.chunk || c.l.dim.Grid > llBlocks:
			return fmt.Errorf("fake: %s: %d blocks for %d words", l.kernel, c.l.dim.Grid, p.nwords)
		}
	}
	half := func(p llPlan, b int64, phase uint64) int64 { return p.area + (b*2+int64(phase%2))*n*p.cap }
	for i, c := range calls { // send the packets
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			lo, phase := b*p.chunk, p.phase(c, b)
			for k := range min(p.chunk, p.nwords-lo) {
				word := uint64(binary.LittleEndian.Uint32(w.heaps[me][p.send+(lo+k)*4:]))
				if !p.deliver {
					word = 0
				}
				for q := range w.size {
					if q != me {
						binary.LittleEndian.PutUint64(w.heaps[q][half(p, b, phase)+int64(me)*p.cap+k*8:], uint64(uint32(phase))<<32|word)
					}
				}
			}
		}
	}
	for i, c := range calls { // receive, sum in rank order, count the phase
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			lo, phase := b*p.chunk, p.phase(c, b)
			m := min(p.chunk, p.nwords-lo)
			var srcs [][]byte
			for r := range w.size {
				if r == me {
					srcs = append(srcs, w.heaps[me][p.send+lo*4:p.send+(lo+m)*4])
					continue
				}
				words := make([]byte, m*4)
				for k := range m {
					v := binary.LittleEndian.Uint64(w.heaps[me][half(p, b, phase)+int64(r)*p.cap+k*8:])
					if uint32(v>>32) != uint32(phase) {
						return fmt.Errorf("fake: %s: rank %d block %d word %d from rank %d has flag %d, want %d: the kernel would wait", l.kernel, me, b, k, r, v>>32, uint32(phase))
					}
					binary.LittleEndian.PutUint32(words[k*4:], uint32(v))
				}
				srcs = append(srcs, words)
			}
			if err := coll.Reduce(ops.Sum, dtype, w.heaps[me][p.recv+lo*4:p.recv+(lo+m)*4], srcs...); err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(w.heaps[me][p.state+b*8:], phase)
		}
	}
	return nil
}

// ll128Reduce imitates reduce_ll128_*: once every rank has launched it, each rank's
// block b stores its lines [b*chunk, b*chunk+m) (15 words of its input, zero under
// deliver 0, then the block's launch count as the flag) into its slot of block b's
// area half (by the count) on every peer (slot me on a higher rank, me-1 on a lower);
// then each rank reads its slots, wants every line's flag to be this launch's (a
// kernel would wait for it), sums its own words and the lines' in rank order into its
// recv, and counts the launch.
func (g *fakeGPU) ll128Reduce(l fakeLaunch) error {
	w := g.w
	calls, plans, dtype, err := g.llMeet(l, kLL128F32)
	if calls == nil || err != nil {
		return err
	}
	n := int64(w.size)
	sync := backend.Align(w.heap, backend.HeapAlign)
	for i, c := range calls {
		p := plans[i]
		lines := (p.nwords + 14) / 15
		switch {
		case p.area != sync+ll128AreaOff(w.size) || p.cap != ll128Cap(w.size) || p.cap == 0:
			return fmt.Errorf("fake: %s: area at %d in slots of %d", l.kernel, p.area, p.cap)
		case p.chunk*ll128Line > p.cap:
			return fmt.Errorf("fake: %s: blocks of %d lines overrun slots of %d bytes", l.kernel, p.chunk, p.cap)
		case int64(c.l.dim.Grid) != (lines+p.chunk-1)/p.chunk:
			return fmt.Errorf("fake: %s: %d blocks of %d lines for %d words", l.kernel, c.l.dim.Grid, p.chunk, p.nwords)
		}
	}
	half := func(p llPlan, b int64, phase uint64) int64 { return p.area + (b*2+int64(phase%2))*(n-1)*p.cap }
	// slot is where sender s's lines land on receiver r: no rank has a slot for itself.
	slot := func(s, r int) int64 {
		if s > r {
			return int64(s - 1)
		}
		return int64(s)
	}
	// span is the bytes of the block's lines [lo, lo+m) in the input: lines of 15 words.
	span := func(p llPlan, b int64) (lo, m, from, to int64) {
		lo = b * p.chunk
		m = min(p.chunk, (p.nwords+14)/15-lo)
		return lo, m, lo * ll128Data, min((lo+m)*ll128Data, p.nwords*8)
	}
	for i, c := range calls { // a kernel may read its slots before the peers' lines come
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			_, m, _, _ := span(p, b)
			phase := p.phase(c, b)
			for r := range w.size {
				for k := range m {
					if r == me {
						continue
					}
					at := half(p, b, phase) + slot(r, me)*p.cap + k*ll128Line
					if f := binary.LittleEndian.Uint64(w.heaps[me][at+ll128Data:]); f == phase {
						return fmt.Errorf("fake: %s: rank %d block %d line %d from rank %d already carries this launch's flag %d: a kernel could take a stale line", l.kernel, me, b, k, r, f)
					}
				}
			}
		}
	}
	for i, c := range calls { // send the lines
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			lo, m, _, _ := span(p, b)
			phase := p.phase(c, b)
			line := make([]byte, ll128Line)
			for k := range m {
				clear(line)
				if p.deliver { // the line's words of the input, as far as it goes
					from := (lo + k) * ll128Data
					copy(line[:ll128Data], w.heaps[me][p.send+from:p.send+min(from+ll128Data, p.nwords*8)])
				}
				binary.LittleEndian.PutUint64(line[ll128Data:], phase)
				for q := range w.size {
					if q != me {
						copy(w.heaps[q][half(p, b, phase)+slot(me, q)*p.cap+k*ll128Line:], line)
					}
				}
			}
		}
	}
	for i, c := range calls { // receive, sum in rank order, count the launch
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			_, m, from, to := span(p, b)
			phase := p.phase(c, b)
			var srcs [][]byte
			for r := range w.size {
				if r == me {
					srcs = append(srcs, w.heaps[me][p.send+from:p.send+to])
					continue
				}
				data := make([]byte, 0, m*ll128Data)
				for k := range m {
					at := half(p, b, phase) + slot(r, me)*p.cap + k*ll128Line
					if f := binary.LittleEndian.Uint64(w.heaps[me][at+ll128Data:]); f != phase {
						return fmt.Errorf("fake: %s: rank %d block %d line %d from rank %d has flag %d, want %d: the kernel would wait", l.kernel, me, b, k, r, f, phase)
					}
					data = append(data, w.heaps[me][at:at+ll128Data]...)
				}
				srcs = append(srcs, data[:to-from])
			}
			if err := coll.Reduce(ops.Sum, dtype, w.heaps[me][p.recv+from:p.recv+to], srcs...); err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(w.heaps[me][p.state+b*8:], phase)
		}
	}
	return nil
}

// LL128 runs the one-shot all-reduce where it fits (whole 8-byte words, no --blocks)
// with SYMMEM_LL128=1, at no size with 0 or with LL off, and from above the LL
// kernel's sizes up to ll128Auto by default; its sums are right on 2, 3 and 4 ranks,
// at sizes that end mid-line and mid-block.
func TestLL128AllReduce(t *testing.T) {
	cases := []struct {
		bytes  int64
		dtype  string
		blocks int
		mode   ll128Mode
		ll     bool
		want   string // "": anything but LL128
	}{
		{8 << 10, "bf16", 0, ll128On, true, kLL128BF16}, {1 << 20, "bf16", 0, ll128On, true, kLL128BF16},
		{1 << 20, "float32", 0, ll128On, true, kLL128F32}, {1<<20 + 8, "bf16", 0, ll128On, true, kLL128BF16},
		{4104, "float32", 0, ll128On, true, kLL128F32}, {120*ll128MinLines*3 + 8, "bf16", 0, ll128On, true, kLL128BF16},
		{1<<20 + 4, "bf16", 0, ll128On, true, ""}, {1 << 20, "bf16", 2, ll128On, true, ""},
		{1 << 20, "bf16", 0, ll128Off, true, ""}, {1 << 20, "bf16", 0, ll128On, false, ""},
		{8 << 10, "bf16", 0, ll128Default, true, kLLBF16},
	}
	type world struct {
		bs   []*Backend
		gs   []*fakeGPU
		bufs [3]backend.Buffer
	}
	worlds := map[int]world{} // one a rank count: a fake world's heaps are large
	for _, n := range []int{2, 3, 4} {
		bs, gs, bufs := collWorld(t, n, 2<<20)
		worlds[n] = world{bs, gs, bufs}
	}
	for _, tc := range cases {
		for _, n := range []int{2, 3, 4} {
			bs, gs, bufs := worlds[n].bs, worlds[n].gs, worlds[n].bufs
			for _, b := range bs {
				b.ll, b.ll128 = tc.ll, tc.mode
			}
			algo := "" // by size: one-shot on 2 ranks at these sizes
			if n > 2 {
				algo = ops.OneShot
			}
			got, want, err := runColl(t, bs, bufs, ops.AllReduce, tc.dtype, algo, tc.bytes, backend.Launch{Impl: "triton", Blocks: tc.blocks})
			if err != nil {
				t.Fatalf("%+v on %d ranks: %v", tc, n, err)
			}
			for r := range got {
				if !bytes.Equal(got[r], want[r]) {
					t.Errorf("%+v on %d ranks: rank %d's sum is wrong", tc, n, r)
				}
				k := gs[r].launches[len(gs[r].launches)-1].kernel
				if ll128 := k == kLL128BF16 || k == kLL128F32; tc.want == "" && ll128 || tc.want != "" && k != tc.want {
					t.Errorf("%+v on %d ranks: rank %d launched %s, want %s", tc, n, r, k, tc.want)
				}
			}
		}
	}
}

// On 2 ranks LL128 carries up to MaxCollBlocks slots of lines: a size that fills them
// runs it, in several passes a block; a size past the slots does not. At the real
// budget the slots hold more than 16 MiB (the figure docs/collectives.md gives); the
// sums run at the fake's smaller budget, where the same edge is at 3.75 MiB.
func TestLL128Largest(t *testing.T) {
	ll128Most := func() int64 { return MaxCollBlocks * ll128Cap(2) / ll128Line * ll128Data / 8 * 8 }
	withLL128Budget(func() {
		// What the backend decides at the real budget, without the sums: 16 MiB runs
		// LL128, a size past the slots does not.
		b := &Backend{ll: true, ll128: ll128On}
		for _, tc := range []struct {
			bytes int64
			fits  bool
		}{{16 << 20, true}, {ll128Most(), true}, {ll128Most() + 8, false}} {
			c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: tc.bytes}
			if got := b.ll128Fits(c, 2, backend.Launch{}); got != tc.fits {
				t.Errorf("at the real budget, %d bytes on 2 ranks: LL128 fits %v, want %v", tc.bytes, got, tc.fits)
			}
		}
	})
	most := ll128Most()
	if passes := most / MaxCollBlocks / ll128Data / (ll128Warps * 16); passes < 2 {
		t.Fatalf("the largest LL128 message takes %d passes a block: the test wants several", passes)
	}
	bs, gs, bufs := collWorld(t, 2, most+8)
	for _, tc := range []struct {
		bytes int64
		ll128 bool
	}{{most - 1<<20, true}, {most, true}, {most + 8, false}} {
		for _, b := range bs {
			b.ll128 = ll128On
		}
		got, want, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", ops.OneShot, tc.bytes, backend.Launch{Impl: "triton"})
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.bytes, err)
		}
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Errorf("%d bytes: the sums are wrong", tc.bytes)
		}
		if k := gs[0].launches[len(gs[0].launches)-1].kernel; (k == kLL128BF16) != tc.ll128 {
			t.Errorf("%d bytes: launched %s, LL128 wanted: %v", tc.bytes, k, tc.ll128)
		}
	}
}

// LL128 launches in a row, with LL launches between them (they share the launch
// words, so the halves do not simply alternate), stay right; and they do not take what
// an earlier job left in the areas: lines whose flag is the first launch's (its count
// starts again at 1) are cleared by ensureSync (seen failing with the LL128 areas left
// out of its range).
func TestLL128InARow(t *testing.T) {
	bs, gs, bufs := collWorld(t, 2, 1<<20)
	sync := backend.Align(gs[0].w.heap, backend.HeapAlign)
	for r, b := range bs {
		b.ll128 = ll128On
		area := gs[r].w.heaps[r][sync+ll128AreaOff(2) : sync+ll128AreaOff(2)+ll128Area(2)]
		for at := 0; at < len(area); at += ll128Line {
			binary.LittleEndian.PutUint64(area[at+ll128Data:], 1)
		}
	}
	for seq, size := range []int64{1 << 20, 8 << 10, 1 << 20, 1 << 20, 64 << 10, 4 << 10, 1 << 20} {
		got, want, err := runCollSeq(t, bs, bufs, ops.AllReduce, "bf16", "", size, backend.Launch{Impl: "triton"}, seq)
		if err != nil {
			t.Fatalf("all-reduce %d of %d bytes: %v", seq, size, err)
		}
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Fatalf("all-reduce %d of %d bytes: the sums are wrong", seq, size)
		}
	}
	kinds := map[string]bool{}
	for _, l := range gs[0].launches {
		kinds[l.kernel] = true
	}
	if !kinds[kLL128BF16] {
		t.Errorf("no LL128 launch among %v", kinds)
	}
}

// Under the drop fault the LL128 lines carry their flags and zero data: the peers do
// not wait, and their sums lack the dropping rank's part.
func TestLL128Drop(t *testing.T) {
	bs, gs, bufs := collWorld(t, 2, 1<<20)
	for _, b := range bs {
		b.ll128 = ll128On
	}
	bs[1].SetDrop(true)
	got, want, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", "", 1<<20, backend.Launch{Impl: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	if k := gs[0].launches[len(gs[0].launches)-1].kernel; k != kLL128BF16 {
		t.Fatalf("rank 0 launched %s, want %s", k, kLL128BF16)
	}
	if bytes.Equal(got[0], want[0]) {
		t.Error("rank 0's sum is right although rank 1 dropped its part")
	}
}

// The sync area fits the symmetric heap's room on every rank count, with at least 16
// MiB left for NVSHMEM's own objects.
func TestSyncAreaFitsRoom(t *testing.T) {
	withLL128Budget(func() {
		for n := 1; n <= 2*pushRanks; n++ {
			if a := syncArea(n); a+16<<20 > nvshmem.Room {
				t.Errorf("%d ranks: sync area of %d MiB leaves less than 16 of the heap's %d MiB room", n, a>>20, nvshmem.Room>>20)
			}
		}
		if ll128Cap(2)/ll128Line*MaxCollBlocks*ll128Data < 16<<20 {
			t.Errorf("2 ranks: LL128 carries %d bytes, not 16 MiB", ll128Cap(2)/ll128Line*MaxCollBlocks*ll128Data)
		}
	})
}

// EnvLL128 takes 0, 1 or nothing, and says what else it takes.
func TestParseLL128(t *testing.T) {
	for v, want := range map[string]ll128Mode{"": ll128Default, "0": ll128Off, "1": ll128On} {
		if got, err := parseLL128(v); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := parseLL128("on"); err == nil || !strings.Contains(err.Error(), "want 0") {
		t.Errorf(`"on": %v`, err)
	}
}

// The one-shot all-reduce runs the LL kernel up to llAuto (whole 32-bit words, no
// --blocks), the push kernel above and wherever LL is off (SYMMEM_LL=0); both right.
func TestLLAllReduce(t *testing.T) {
	for _, tc := range []struct {
		bytes  int64
		dtype  string
		blocks int
		ll     bool
		want   string
	}{
		{8 << 10, "bf16", 0, true, kLLBF16}, {64 << 10, "bf16", 0, true, kLLBF16}, {64 << 10, "float32", 0, true, kLLF32},
		{4100, "bf16", 0, true, kLLBF16}, {64<<10 + 16, "bf16", 0, true, kPushBF16}, {8 << 10, "bf16", 0, false, kPushBF16},
		{8 << 10, "bf16", 2, true, kPushBF16}, {6, "bf16", 0, true, kPushBF16},
	} {
		for _, n := range []int{2, 3} {
			bs, gs, bufs := collWorld(t, n, 128<<10)
			for _, b := range bs {
				b.ll = tc.ll
			}
			got, want, err := runColl(t, bs, bufs, ops.AllReduce, tc.dtype, "", tc.bytes, backend.Launch{Impl: "triton", Blocks: tc.blocks})
			if err != nil {
				t.Fatalf("%+v on %d ranks: %v", tc, n, err)
			}
			for r := range got {
				if !bytes.Equal(got[r], want[r]) {
					t.Errorf("%+v on %d ranks: rank %d's sum is wrong", tc, n, r)
				}
				if k := gs[r].launches[len(gs[r].launches)-1].kernel; k != tc.want {
					t.Errorf("%+v on %d ranks: rank %d launched %s, want %s", tc, n, r, k, tc.want)
				}
			}
		}
	}
}

// Up to stagedNarrow the two-shot all-reduce runs stagedWarps warps unless --warps
// says, and a dropping rank's pull kernel the same grid; above, the grid's own.
func TestStagedWarps(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		warps int // warps
		want  int
	}{{4 << 20, 0, stagedWarps}, {4 << 20, 32, 32}, {stagedNarrow + 1<<20, 0, 32}} {
		bs, gs, bufs := collWorld(t, 2, tc.bytes)
		bs[1].SetDrop(true)
		if _, _, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", ops.TwoShot, tc.bytes, backend.Launch{Impl: "triton", Warps: tc.warps}); err != nil {
			t.Fatal(err)
		}
		l0, l1 := gs[0].launches[len(gs[0].launches)-1], gs[1].launches[len(gs[1].launches)-1]
		if l0.kernel != kStaged || l1.kernel != kReduceBF16 || l0.warps != tc.want || l1.warps != tc.want || l0.dim.Grid != l1.dim.Grid {
			t.Errorf("%d bytes, warps %d: %s w%d x%d and (dropping) %s w%d x%d, want w%d alike", tc.bytes, tc.warps,
				l0.kernel, l0.warps, l0.dim.Grid, l1.kernel, l1.warps, l1.dim.Grid, tc.want)
		}
	}
}

// llPush imitates push_ll: once every rank has launched it, each sender's block b
// (every rank, or root alone) copies its own part and stores its words [b*chunk, (b+1)*chunk) for rank q (from
// send + q*src_stride) as 8-byte packets with the block's phase as flag (zero data
// under deliver 0) into slot me of block b's area half on q; then each rank reads the
// slots of its senders, wants every flag to be this launch's, stores the words at recv
// + r*dst_stride, and counts the phase.
func (g *fakeGPU) llPush(l fakeLaunch) error {
	w := g.w
	calls := w.meet(g, l)
	if calls == nil {
		return nil
	}
	n := int64(w.size)
	type plan struct {
		send, recv, area, cap, nwords, chunk, srcStride, dstStride, state int64
		root                                                              int32
		deliver                                                           bool
	}
	plans := make([]plan, len(calls))
	sync := backend.Align(w.heap, backend.HeapAlign)
	for i, c := range calls {
		a := c.l.args
		var p plan
		var err error
		if p.send, p.recv, p.area, p.state, err = c.llArgs(11); err != nil {
			return err
		}
		p.cap, p.nwords, p.chunk, p.srcStride, p.dstStride = int64(a[3]), int64(a[4]), int64(a[5]), int64(a[6]), int64(a[7])
		p.root, p.deliver = int32(a[8]), a[9] != 0
		switch {
		case c.l.kernel != l.kernel || c.l.dim.Grid != calls[0].l.dim.Grid || p.nwords != plans[0].nwords && i > 0:
			return fmt.Errorf("fake: ranks launched %s with %d blocks and %s with %d", c.l.kernel, c.l.dim.Grid, l.kernel, calls[0].l.dim.Grid)
		case p.area != sync+llPushAreaOff(w.size) || p.cap != llPushWords*8 || p.chunk%llWords != 0 || p.chunk*8 > p.cap:
			return fmt.Errorf("fake: %s: area at %d in slots of %d, blocks of %d words", l.kernel, p.area, p.cap, p.chunk)
		case int64(c.l.dim.Grid) != (p.nwords+p.chunk-1)/p.chunk || c.l.dim.Grid > MaxCollBlocks:
			return fmt.Errorf("fake: %s: %d blocks for %d words", l.kernel, c.l.dim.Grid, p.nwords)
		}
		plans[i] = p
	}
	phaseOf := func(c stagedCall, p plan, b int64) uint64 {
		return binary.LittleEndian.Uint64(c.g.w.heaps[c.g.rank][p.state+b*8:]) + 1
	}
	half := func(p plan, b int64, phase uint64) int64 { return p.area + (b*2+int64(phase%2))*n*p.cap }
	sends := func(p plan, r int) bool { return p.root < 0 || int(p.root) == r }
	for i, c := range calls { // a broadcast's acks: word 0 of the sender's slot on the root
		p, me := plans[i], c.g.rank
		if p.root >= 0 && int(p.root) != me {
			for b := range int64(c.l.dim.Grid) {
				phase := phaseOf(c, p, b)
				binary.LittleEndian.PutUint64(w.heaps[p.root][half(p, b, phase)+int64(me)*p.cap:], uint64(uint32(phase))<<32)
			}
		}
	}
	for i, c := range calls {
		p, me := plans[i], c.g.rank
		if p.root >= 0 && int(p.root) == me {
			for b := range int64(c.l.dim.Grid) {
				phase := phaseOf(c, p, b)
				for r := range w.size {
					if v := binary.LittleEndian.Uint64(w.heaps[me][half(p, b, phase)+int64(r)*p.cap:]); r != me && uint32(v>>32) != uint32(phase) {
						return fmt.Errorf("fake: %s: the root's block %d has no ack of phase %d from rank %d: it would wait", l.kernel, b, phase, r)
					}
				}
			}
		}
	}
	for i, c := range calls {
		p, me := plans[i], c.g.rank
		if !sends(p, me) {
			continue
		}
		for b := range int64(c.l.dim.Grid) {
			lo, phase := b*p.chunk, phaseOf(c, p, b)
			if m := min(p.chunk, p.nwords-lo); m > 0 { // the own part
				copy(w.heaps[me][p.recv+int64(me)*p.dstStride+lo*4:p.recv+int64(me)*p.dstStride+(lo+m)*4],
					w.heaps[me][p.send+int64(me)*p.srcStride+lo*4:p.send+int64(me)*p.srcStride+(lo+m)*4])
			}
			for q := range w.size {
				if q == me {
					continue
				}
				for k := range min(p.chunk, p.nwords-lo) {
					word := uint64(binary.LittleEndian.Uint32(w.heaps[me][p.send+int64(q)*p.srcStride+(lo+k)*4:]))
					if !p.deliver {
						word = 0
					}
					binary.LittleEndian.PutUint64(w.heaps[q][half(p, b, phase)+int64(me)*p.cap+k*8:], uint64(uint32(phase))<<32|word)
				}
			}
		}
	}
	for i, c := range calls {
		p, me := plans[i], c.g.rank
		for b := range int64(c.l.dim.Grid) {
			lo, phase := b*p.chunk, phaseOf(c, p, b)
			for r := range w.size {
				if r == me || !sends(p, r) {
					continue
				}
				for k := range min(p.chunk, p.nwords-lo) {
					v := binary.LittleEndian.Uint64(w.heaps[me][half(p, b, phase)+int64(r)*p.cap+k*8:])
					if uint32(v>>32) != uint32(phase) {
						return fmt.Errorf("fake: %s: rank %d block %d word %d from rank %d has flag %d, want %d: the kernel would wait", l.kernel, me, b, k, r, v>>32, uint32(phase))
					}
					binary.LittleEndian.PutUint32(w.heaps[me][p.recv+int64(r)*p.dstStride+(lo+k)*4:], uint32(v))
				}
			}
			binary.LittleEndian.PutUint64(w.heaps[me][p.state+b*8:], phase)
		}
	}
	return nil
}

// all-gather, broadcast (root n-1) and all-to-all run push_ll where each peer gets up
// to llPushMax whole words (no --blocks, LL on), the push kernel elsewhere; both right,
// on 2 and 3 ranks; under the drop fault the LL words arrive with zero data.
func TestLLPush(t *testing.T) {
	// One world a rank count; each run has inputs of its own (runCollSeq).
	type world struct {
		bs   []*Backend
		gs   []*fakeGPU
		bufs [3]backend.Buffer
	}
	worlds := map[int]world{}
	for _, n := range []int{2, 3} {
		bs, gs, bufs := collWorld(t, n, 3<<20)
		worlds[n] = world{bs, gs, bufs}
	}
	seq := 0
	for _, op := range []ops.Op{ops.AllGather, ops.Broadcast, ops.AllToAll} {
		for _, tc := range []struct {
			bytes  int64 // each peer gets bytes/n (all-gather, all-to-all) or bytes (broadcast)
			blocks int
			ll     bool
		}{{24 << 10, 0, true}, {768 << 10, 0, true}, {24 << 10, 2, true}, {24 << 10, 0, false}, {3 << 20, 0, true}} {
			for _, n := range []int{2, 3} {
				per := tc.bytes / int64(n)
				if op == ops.Broadcast {
					per = tc.bytes
				}
				want := kPushLL
				if per > llPushMax || tc.blocks > 0 || !tc.ll || per%4 != 0 || op == ops.Broadcast && n > 2 {
					want = kPush
				}
				bs, gs, bufs := worlds[n].bs, worlds[n].gs, worlds[n].bufs
				for _, b := range bs {
					b.ll = tc.ll
					b.SetDrop(false)
				}
				seq++
				got, exp, err := runCollSeq(t, bs, bufs, op, "", "", tc.bytes, backend.Launch{Impl: "triton", Blocks: tc.blocks}, seq)
				if err != nil {
					t.Fatalf("%s %+v on %d ranks: %v", op, tc, n, err)
				}
				for r := range got {
					if !bytes.Equal(got[r], exp[r]) {
						t.Errorf("%s %+v on %d ranks: rank %d's output is wrong", op, tc, n, r)
					}
					if k := gs[r].launches[len(gs[r].launches)-1].kernel; k != want {
						t.Errorf("%s %+v on %d ranks: rank %d launched %s, want %s", op, tc, n, r, k, want)
					}
				}
				if want == kPushLL && n == 2 {
					bs[0].SetDrop(true)
					seq++
					got, exp, err := runCollSeq(t, bs, bufs, op, "", "", tc.bytes, backend.Launch{Impl: "triton"}, seq)
					if err != nil {
						t.Fatalf("%s %+v, rank 0 drops: %v", op, tc, err)
					}
					if bytes.Equal(got[1], exp[1]) && op != ops.Broadcast { // broadcast's root is rank 1
						t.Errorf("%s %+v: rank 1 got everything right from a dropping rank 0", op, tc)
					}
				}
			}
		}
	}
}

// What Preload loads is what the collective then launches: no kernel is loaded inside
// a timed launch (a reduce-scatter once took the two-shot all-reduce's warps and loaded
// a second variant in its first measurement).
// Preload of a collective by symmem's kernels clears the sync area on every rank, as
// the collective would at its first launch: a timed window must not hold that clearing
// and its barrier. A put's Preload leaves it alone.
func TestPreloadClearsTheSyncArea(t *testing.T) {
	bs, gs, _ := collWorld(t, 2, 1<<20)
	sync := backend.Align(gs[0].w.heap, backend.HeapAlign)
	for r := range bs {
		binary.LittleEndian.PutUint64(gs[r].w.heaps[r][sync:], 99) // a leftover word
	}
	for _, b := range bs {
		if err := b.Preload(ops.Put, 1<<20, backend.Launch{Impl: "triton"}); err != nil {
			t.Fatal(err)
		}
	}
	if bs[0].syncReady || binary.LittleEndian.Uint64(gs[0].w.heaps[0][sync:]) != 99 {
		t.Error("a put's Preload cleared the sync area")
	}
	for _, b := range bs {
		if err := b.Preload(ops.AllReduce, 1<<20, backend.Launch{Impl: "triton"}); err != nil {
			t.Fatal(err)
		}
	}
	for r, b := range bs {
		if w := binary.LittleEndian.Uint64(gs[r].w.heaps[r][sync:]); !b.syncReady || w != 0 {
			t.Errorf("rank %d after an all-reduce's Preload: sync area ready %v, its first word %d", r, b.syncReady, w)
		}
	}
}

func TestPreloadMatchesLaunch(t *testing.T) {
	for _, tc := range []struct {
		op    ops.Op
		dtype string
		bytes int64
	}{
		{ops.AllReduce, "bf16", 8 << 10}, {ops.AllReduce, "bf16", 1 << 20}, {ops.AllReduce, "float32", 1 << 20},
		{ops.AllReduce, "bf16", 8 << 20}, {ops.AllReduce, "bf16", 17 << 20}, {ops.ReduceScatter, "bf16", 4 << 20},
		{ops.AllGather, "", 64 << 10}, {ops.AllGather, "", 4 << 20}, {ops.Broadcast, "", 64 << 10},
	} {
		bs, gs, bufs := collWorld(t, 2, tc.bytes)
		l := backend.Launch{Impl: "triton"}
		for _, b := range bs {
			if err := b.Preload(tc.op, tc.bytes, l); err != nil {
				t.Fatalf("%+v: %v", tc, err)
			}
		}
		before := len(gs[0].loaded)
		if _, _, err := runColl(t, bs, bufs, tc.op, tc.dtype, "", tc.bytes, l); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if extra := gs[0].loaded[before:]; len(extra) > 0 {
			t.Errorf("%s %s %d bytes: the launch loaded %v, which Preload had not", tc.op, tc.dtype, tc.bytes, extra)
		}
	}
}

// SYMMEM_COPY_OWN: unset, copy, sm, sm:K; anything else is refused with what to use.
// Unset, a broadcast's own part goes by the kernel, all-gather's and all-to-all's by the
// copy engine.
func TestOwnBlocks(t *testing.T) {
	b := &Backend{ownBlocks: ownDefault}
	for op, want := range map[ops.Op]int{ops.Broadcast: defaultOwnBlocks, ops.AllGather: -1, ops.AllToAll: -1} {
		if got := b.ownKernel(op); got != want {
			t.Errorf("unset, %s: %d, want %d", op, got, want)
		}
	}
	b.ownBlocks = 8
	if got := b.ownKernel(ops.AllGather); got != 8 {
		t.Errorf("sm:8, all-gather: %d", got)
	}
	for v, want := range map[string]int{"": ownDefault, "copy": -1, "sm": 0, "sm:8": 8, "sm:128": 128} {
		if got, err := ownBlocks(v); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"sm:0", "sm:x", "8", "sm:129", "ce"} {
		if _, err := ownBlocks(v); err == nil || !strings.Contains(err.Error(), "use copy (the copy engine), sm") {
			t.Errorf("%q: %v", v, err)
		}
	}
}

// The NVLink probe (NVML and a round of the job's store) is not part of every job's
// start: collectives that LL128's size range does not take, and LL128 forced on, never
// ask for it (it once ran in ensureSync, before every job's first collective).
func TestNVLinkProbeOnlyWhenAsked(t *testing.T) {
	bs, _, bufs := collWorld(t, 2, 1<<20)
	probes := 0
	for _, b := range bs {
		b.probeLinks = func() (bool, error) { probes++; return true, nil }
	}
	for _, mode := range []ll128Mode{ll128Default, ll128On} {
		for _, b := range bs {
			b.ll128 = mode
		}
		for _, size := range []int64{8 << 10, 1 << 20} {
			if _, _, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", "", size, backend.Launch{Impl: "triton"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if probes != 0 {
		t.Errorf("the NVLink probe ran %d times", probes)
	}
}

// By size, LL128 takes the all-reduces up to ll128Auto, those two-shot would take
// too, where every GPU has NVLink: the algorithm is then one-shot, in the table and in
// the launch; without NVLink, or past ll128Auto, two-shot as before. A probe that
// fails fails the collective, not a silent two-shot.
func TestLL128BySize(t *testing.T) {
	withLL128Budget(func() { testLL128BySize(t) })
}

func testLL128BySize(t *testing.T) {
	old := ll128Auto
	ll128Auto = 5 << 20
	defer func() { ll128Auto = old }()
	bs, gs, bufs := collWorld(t, 2, 6<<20)
	probeErr := errors.New("the job's store is gone")
	for _, tc := range []struct {
		bytes int64
		links bool
		err   error
		algo  string
	}{
		{9 << 19, true, nil, ops.OneShot}, {9 << 19, false, nil, ops.TwoShot},
		{6 << 20, true, nil, ops.TwoShot}, {9 << 19, true, probeErr, ""},
	} {
		for _, b := range bs {
			b.ll128, b.probeErr = ll128Default, nil
			b.probeLinks = func() (bool, error) { return tc.links, tc.err }
		}
		c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: tc.bytes}
		if tc.err == nil {
			for r, b := range bs {
				if got := b.Algorithm(c, backend.Launch{Impl: "triton"}); got != tc.algo {
					t.Errorf("%+v: rank %d's algorithm is %s", tc, r, got)
				}
			}
		}
		got, want, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", "", tc.bytes, backend.Launch{Impl: "triton"})
		if tc.err != nil {
			if err == nil || !errors.Is(err, tc.err) {
				t.Errorf("%+v: the probe's error came back as %v", tc, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%+v: rank %d's sum is wrong", tc, r)
			}
			k := gs[r].launches[len(gs[r].launches)-1].kernel
			if ll128 := k == kLL128BF16; ll128 != (tc.algo == ops.OneShot) {
				t.Errorf("%+v: rank %d launched %s", tc, r, k)
			}
		}
	}
}

// Kernel names the one kernel the last collective ran (the rows' "kernel"), which the
// algorithm does not say: one-shot all-reduce is LL, push or LL128 by size; none for
// implementations that run by the copy engine or NCCL.
func TestKernelNamesWhatRan(t *testing.T) {
	bs, _, bufs := collWorld(t, 2, 8<<20)
	for _, tc := range []struct {
		op    ops.Op
		impl  string
		bytes int64
		ll128 ll128Mode
		want  string
	}{
		{ops.AllReduce, "triton", 8 << 10, ll128Default, kLLBF16},
		{ops.AllReduce, "triton", 1 << 20, ll128Default, kPushBF16},
		{ops.AllReduce, "triton", 1 << 20, ll128On, kLL128BF16},
		{ops.AllReduce, "triton", 8 << 20, ll128Default, kStaged},
		{ops.AllGather, "triton", 1 << 20, ll128Default, kPushLL}, {ops.AllGather, "triton", 8 << 20, ll128Default, kPush},
		{ops.AllGather, "copy-engine", 1 << 20, ll128Default, ""},
	} {
		for _, b := range bs {
			b.ll128 = tc.ll128
		}
		dtype := ""
		if ops.Op(tc.op).Reduces() {
			dtype = "bf16"
		}
		if _, _, err := runColl(t, bs, bufs, tc.op, dtype, "", tc.bytes, backend.Launch{Impl: tc.impl}); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		for r, b := range bs {
			if got := b.Kernel(); got != tc.want {
				t.Errorf("%+v: rank %d says %q ran it", tc, r, got)
			}
		}
	}
}
