package gpu

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// The fake device's own memory (device.Alloc): a rank's allocations, at fakeDevBase, a
// page apart. No peer reaches it (fakeGPU.resolve knows only the heaps), as no peer
// reaches cuMemAlloc's memory.
const fakeDevBase = 0x4000_0000_0000

type fakeMem struct {
	next          uint64
	live          map[uint64][]byte
	allocs, frees int
}

// fakeMems holds each fake rank's own memory (fakeGPU's fields are fake_test.go's).
var fakeMems = struct {
	sync.Mutex
	m map[*fakeGPU]*fakeMem
}{m: map[*fakeGPU]*fakeMem{}}

func (g *fakeGPU) mem() *fakeMem {
	fakeMems.Lock()
	defer fakeMems.Unlock()
	m := fakeMems.m[g]
	if m == nil {
		m = &fakeMem{live: map[uint64][]byte{}}
		fakeMems.m[g] = m
	}
	return m
}

// forget drops g's own memory from fakeMems when its test ends, so that the world
// it belongs to can be collected.
func (g *fakeGPU) forget() {
	fakeMems.Lock()
	delete(fakeMems.m, g)
	fakeMems.Unlock()
}

func (g *fakeGPU) Alloc(n uint64) (uint64, error) {
	m := g.mem()
	p := fakeDevBase + m.next
	m.live[p] = make([]byte, n)
	m.next += uint64(backend.Align(int64(n), 4096)) + 4096
	m.allocs++
	return p, nil
}

func (g *fakeGPU) FreeMem(p uint64) error {
	m := g.mem()
	if _, ok := m.live[p]; !ok {
		return fmt.Errorf("fake: CUDA_ERROR_INVALID_VALUE: rank %d frees %#x, which it did not allocate", g.rank, p)
	}
	delete(m.live, p)
	m.frees++
	return nil
}

// devBytes is n bytes of this rank's own memory at addr, inside one allocation.
func (g *fakeGPU) devBytes(addr, n uint64) ([]byte, error) {
	// A look-up only: mem() would enter g into fakeMems, which holds it (and its
	// world's heaps) until the test ends.
	fakeMems.Lock()
	m := fakeMems.m[g]
	fakeMems.Unlock()
	if m == nil {
		return nil, fmt.Errorf("fake: rank %d has allocated no memory of its own", g.rank)
	}
	for p, b := range m.live {
		if addr >= p && addr+n <= p+uint64(len(b)) {
			return b[addr-p : addr-p+n], nil
		}
	}
	return nil, fmt.Errorf("fake: rank %d has no %d bytes of its own memory at %#x", g.rank, n, addr)
}

// devWords is n int64 words of this rank's own memory at addr.
func (g *fakeGPU) devWords(addr uint64, n int64) ([]int64, error) {
	b, err := g.devBytes(addr, uint64(8*n))
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		for j := 7; j >= 0; j-- {
			out[i] = out[i]<<8 | int64(b[8*i+j])
		}
	}
	return out, nil
}

// moeDevice is the fake device whose host-to-device copies also reach its own memory
// (fake_test.go's reach the heaps only).
type moeDevice struct{ *fakeGPU }

func (d moeDevice) CopyHtoD(dst uint64, src []byte) error {
	if b, err := d.devBytes(dst, uint64(len(src))); err == nil {
		d.log = append(d.log, call{op: "htod", s: -1})
		copy(b, src)
		return nil
	}
	return d.fakeGPU.CopyHtoD(dst, src)
}

// moe imitates dispatch, combine_bf16/f32 and combine_staged_bf16/f32
// (kernels/triton/symmem_moe.py), reading the arguments by the names in the artifact's
// sidecar and the rows from the rank's own memory: dispatch's block b puts rows
// bounds[b]..bounds[b+1] (src_off, dst_off, dst, nbytes) from send here to recv on dst;
// combine's block b stores each of its pieces (dst_off, count, c0, c1) as the sum of
// copies c0..c1-1 (src, src_off), read at send on src, in that order; the staged
// combine's block b first puts rows push_bounds[b]..push_bounds[b+1] (as dispatch's)
// into scratch on dst, and its sums read a copy of src == me at send here, any other at
// scratch here. With vec set, every address must be a whole 16-byte vector, as the
// kernel tells Triton it is.
//
// A combine runs once every rank has launched one (the kernels' blocks meet at
// barriers; a rank that drops pulls while its peers stage): every staged rank's puts,
// then every rank's sums. A staged sum of block b may only read bytes of the scratch
// that block b of the copy's rank put there in this launch (the barrier pairs only
// those), unless that rank pulled: then it reads what was left there, as the GPU would.
func (g *fakeGPU) moe(l fakeLaunch) error {
	arg, bounds, err := g.moeArgs(l)
	if err != nil {
		return err
	}
	if l.kernel == kDispatch {
		send, recv, err := g.sym2(arg["send"], arg["recv"])
		if err != nil {
			return err
		}
		for i := bounds[0]; i < bounds[len(bounds)-1]; i++ {
			r, err := g.devWords(arg["rows"]+uint64(32*i), 4)
			if err != nil {
				return err
			}
			if r[2] < 0 || r[2] >= int64(g.w.size) {
				return fmt.Errorf("fake: dispatch row %d puts to rank %d", i, r[2])
			}
			if err := g.move(int(r[2]), recv+r[1], g.rank, send+r[0], r[3]); err != nil {
				return err
			}
		}
		return nil
	}
	w := g.w
	calls := w.meet(g, l)
	if calls == nil {
		return nil
	}
	return combineAll(w, calls)
}

// moeArgs reads a launch of an MoE kernel: its arguments by name, checked as every
// collective kernel's, and its bounds (each block's rows in order).
func (g *fakeGPU) moeArgs(l fakeLaunch) (map[string]uint64, []int64, error) {
	a, err := kernels.Default().Select(l.impl, l.kernel, l.warps, fakeCC)
	if err != nil {
		return nil, nil, err
	}
	arg := map[string]uint64{}
	for i, p := range a.Params {
		arg[p.Name] = l.args[i]
	}
	want := []string{"send", "recv", "bounds", "pad", "state", "me", "n", "limit_ns", "mailbox"}
	switch l.kernel {
	case kDispatch:
		want = append(want, "rows")
	case kCombineStagedBF16, kCombineStagedF32:
		want = append(want, "scratch", "pieces", "copies", "push_bounds", "rows", "vec")
	default:
		want = append(want, "pieces", "copies", "vec")
	}
	for _, name := range want {
		if _, ok := arg[name]; !ok {
			return nil, nil, fmt.Errorf("fake: %s has no parameter %q", a.Name(), name)
		}
	}
	if err := g.checkColl(l, arg["pad"], arg["state"], arg["me"], arg["n"]); err != nil {
		return nil, nil, err
	}
	if _, err := g.hostWords(arg["mailbox"], mailboxWords); err != nil {
		return nil, nil, fmt.Errorf("fake: %s: mailbox: %w", l.kernel, err)
	}
	bounds, err := g.blockBounds(l, arg["bounds"])
	return arg, bounds, err
}

// blockBounds are the grid+1 words at addr, which must not go down.
func (g *fakeGPU) blockBounds(l fakeLaunch, addr uint64) ([]int64, error) {
	grid := int64(l.dim.Grid)
	bounds, err := g.devWords(addr, grid+1)
	if err != nil {
		return nil, err
	}
	for b := range grid {
		if bounds[b] > bounds[b+1] {
			return nil, fmt.Errorf("fake: %s: block %d's rows run from %d to %d", l.kernel, b, bounds[b], bounds[b+1])
		}
	}
	return bounds, nil
}

// combineRun is a rank's combine launch, read.
type combineRun struct {
	g                   *fakeGPU
	l                   fakeLaunch
	arg                 map[string]uint64
	bounds              []int64
	send, recv, scratch int64
	staged              bool
}

// combineAll runs every rank's combine launch (moe): the staged ones' puts, then every
// rank's sums.
func combineAll(w *fakeWorld, calls []stagedCall) error {
	runs := make([]*combineRun, w.size)
	for _, c := range calls {
		l := c.l
		switch {
		case l.kernel != kCombineBF16 && l.kernel != kCombineF32 && l.kernel != kCombineStagedBF16 && l.kernel != kCombineStagedF32:
			return fmt.Errorf("fake: rank %d launched %s while the others' combines wait for it", c.g.rank, l.kernel)
		case l.dim.Grid != calls[0].l.dim.Grid:
			return fmt.Errorf("fake: rank %d launched %s with %d blocks, rank %d %s with %d: their barriers pair blocks",
				c.g.rank, l.kernel, l.dim.Grid, calls[0].g.rank, calls[0].l.kernel, calls[0].l.dim.Grid)
		case runs[c.g.rank] != nil:
			return fmt.Errorf("fake: rank %d launched two combines while the others' wait", c.g.rank)
		}
		arg, bounds, err := c.g.moeArgs(l)
		if err != nil {
			return err
		}
		r := &combineRun{g: c.g, l: l, arg: arg, bounds: bounds, staged: l.kernel == kCombineStagedBF16 || l.kernel == kCombineStagedF32}
		if r.send, r.recv, err = c.g.sym2(arg["send"], arg["recv"]); err != nil {
			return err
		}
		if r.staged {
			if r.scratch, err = c.g.sym(arg["scratch"]); err != nil {
				return err
			}
		}
		runs[c.g.rank] = r
	}
	// The staged ranks' puts; by[s][x] names the block that put byte scratch+x of
	// rank s (rank*MaxCollBlocks + block + 1; 0: none in this launch).
	type stagedPut struct {
		d, b int
		row  []int64
	}
	var puts []stagedPut
	extent := make([]int64, w.size)
	for d, r := range runs {
		if !r.staged {
			continue
		}
		pb, err := r.g.blockBounds(r.l, r.arg["push_bounds"])
		if err != nil {
			return err
		}
		for b := range int(r.l.dim.Grid) {
			for i := pb[b]; i < pb[b+1]; i++ {
				row, err := r.g.devWords(r.arg["rows"]+uint64(32*i), 4)
				if err != nil {
					return err
				}
				s := int(row[2])
				if s < 0 || s >= w.size || s == d || row[1] < 0 || row[3] < 0 {
					return fmt.Errorf("fake: %s on rank %d: row %d puts %d bytes to rank %d at %d", r.l.kernel, d, i, row[3], row[2], row[1])
				}
				puts = append(puts, stagedPut{d, b, row})
				extent[s] = max(extent[s], row[1]+row[3])
			}
		}
	}
	by := make([][]int32, w.size)
	for s := range by {
		by[s] = make([]int32, extent[s])
	}
	for _, p := range puts {
		r, s := runs[p.d], int(p.row[2])
		if err := r.g.move(s, r.scratch+p.row[1], p.d, r.send+p.row[0], p.row[3]); err != nil {
			return err
		}
		for x := p.row[1]; x < p.row[1]+p.row[3]; x++ {
			by[s][x] = int32(p.d*MaxCollBlocks + p.b + 1)
		}
	}
	for s, r := range runs {
		dtype, elem := "bf16", int64(2)
		if r.l.kernel == kCombineF32 || r.l.kernel == kCombineStagedF32 {
			dtype, elem = "float32", 4
		}
		vec := r.arg["vec"] != 0
		for b := range int(r.l.dim.Grid) {
			for i := r.bounds[b]; i < r.bounds[b+1]; i++ {
				pc, err := r.g.devWords(r.arg["pieces"]+uint64(32*i), 4)
				if err != nil {
					return err
				}
				at, count := r.recv+pc[0], pc[1]
				if vec && at%collVector != 0 {
					return fmt.Errorf("fake: %s piece %d at %d, with vec set", r.l.kernel, i, at)
				}
				var srcs [][]byte
				for c := pc[2]; c < pc[3]; c++ {
					cp, err := r.g.devWords(r.arg["copies"]+uint64(16*c), 2)
					if err != nil {
						return err
					}
					src, from, off := int(cp[0]), int(cp[0]), r.send+cp[1]
					if r.staged && src != s {
						from, off = s, r.scratch+cp[1]
						if src < 0 || src >= w.size {
							return fmt.Errorf("fake: %s on rank %d: copy %d from rank %d", r.l.kernel, s, c, src)
						}
						if runs[src].staged {
							if err := checkPut(by[s], cp[1], count*elem, src, b); err != nil {
								return fmt.Errorf("fake: %s on rank %d: block %d's copy %d: %w", r.l.kernel, s, b, c, err)
							}
						}
					}
					if vec && off%collVector != 0 {
						return fmt.Errorf("fake: %s copy %d at %d, with vec set", r.l.kernel, c, off)
					}
					in, err := w.bytes(from, off, count*elem)
					if err != nil {
						return err
					}
					srcs = append(srcs, in)
				}
				out := make([]byte, count*elem)
				if err := coll.Reduce(ops.Sum, dtype, out, srcs...); err != nil {
					return err
				}
				d, err := w.bytes(s, at, count*elem)
				if err != nil {
					return err
				}
				copy(d, out)
			}
		}
	}
	return nil
}

// checkPut says whether bytes [off, off+n) of a scratch were put by block b of rank
// src (by: which block put each byte).
func checkPut(by []int32, off, n int64, src, b int) error {
	want := int32(src*MaxCollBlocks + b + 1)
	for x := off; x < off+n; x++ {
		if x < 0 || x >= int64(len(by)) || by[x] != want {
			who := "no block"
			if x >= 0 && x < int64(len(by)) && by[x] != 0 {
				who = fmt.Sprintf("block %d of rank %d", (by[x]-1)%MaxCollBlocks, (by[x]-1)/MaxCollBlocks)
			}
			return fmt.Errorf("it sums scratch byte %d, which %s put there, not block %d of rank %d", x, who, b, src)
		}
	}
	return nil
}

// needMoEKernels fails a test that launches the MoE kernels when the catalogue lacks
// one (they are built on the GPU machine: kernels/build-kernels.py --only symmem_moe).
func needMoEKernels(t *testing.T) {
	t.Helper()
	if err := moeKernelsMissing(); err != nil {
		t.Fatalf("%v: rebuild the kernels with kernels/build-kernels.py --only symmem_moe", err)
	}
}

// moeKernelsMissing says which MoE kernel the catalogue lacks, if any.
func moeKernelsMissing() error {
	for _, k := range []string{kDispatch, kCombineBF16, kCombineF32} {
		if _, err := kernels.Default().Select("triton", k, 4, fakeCC); err != nil {
			return fmt.Errorf("the kernel catalogue has no triton/%s yet (%v)", k, err)
		}
	}
	return nil
}

// moeJob is n fake ranks set up for a routing as the bench sets them up: send, receive
// and scratch buffers as large as the largest of a rank's tokens and its slots.
type moeJob struct {
	rt   *coll.Routing
	bs   []*Backend
	gs   []*fakeGPU
	bufs [3]backend.Buffer
}

func newMoEJob(t *testing.T, n int, m coll.MoE, dtype string) *moeJob {
	t.Helper()
	return newMoEJobScratch(t, n, m, dtype, 1)
}

// newMoEJobScratch is newMoEJob with a scratch of layers times the others' size.
func newMoEJobScratch(t *testing.T, n int, m coll.MoE, dtype string, layers int64) *moeJob {
	t.Helper()
	rt, err := m.Route(n, ops.ElemSize(dtype))
	if err != nil {
		t.Fatal(err)
	}
	most := max(rt.Bytes(), rt.MaxSlots(), 1)
	w := newWorld(t, n, (2+layers)*backend.Align(most, backend.HeapAlign)+backend.HeapAlign)
	j := &moeJob{rt: rt}
	for r := range n {
		g := &fakeGPU{w: w, rank: r, live: map[string]int{}}
		b, err := start(Place{Rank: r, LocalRank: r, Size: n}, moeDevice{g}, g, fakeCC, Config{Heap: w.heap})
		if err != nil {
			t.Fatal(err)
		}
		w.opened = append(w.opened, b) // addUser gives it the user's registry
		for i := range j.bufs {
			size := most
			if i == 2 {
				size *= layers
			}
			if j.bufs[i], err = b.Alloc(size); err != nil {
				t.Fatal(err)
			}
		}
		j.bs, j.gs = append(j.bs, b), append(j.gs, g)
	}
	return j
}

// collective is op over the job's routing, as bench describes it (combine: with the
// algorithm the implementation chooses, unless algo says).
func (j *moeJob) collective(op ops.Op, dtype string) backend.Collective {
	c := backend.Collective{Op: op, Bytes: j.rt.Bytes(), Send: j.bufs[0], Recv: j.bufs[1], Scratch: j.bufs[2], Blocks: j.rt.Dispatch}
	if op == ops.Combine {
		c.DType, c.Blocks = dtype, j.rt.Combine
	}
	return c
}

// pull is op as collective describes it, combine pinned to the pull kernel (the tests
// of the pull kernel, which run without the staged kernels in the catalogue).
func (j *moeJob) pull(op ops.Op, dtype string) backend.Collective {
	c := j.collective(op, dtype)
	if op == ops.Combine {
		c.Algo = combinePull
	}
	return c
}

// run writes every rank's input (measurement seq of coll's check data) and poisons its
// output, runs c on every rank with l, and returns what each rank's output holds and
// what it should hold (what bench checks).
func (j *moeJob) run(t *testing.T, c backend.Collective, l backend.Launch, seq int) (got, want [][]byte, err error) {
	t.Helper()
	n, rt := len(j.bs), j.rt
	sendOf := func(p int) int64 { return rt.Bytes() }
	recvOf := func(p int) int64 { return int64(rt.Slots[p]) * rt.Token }
	if c.Op == ops.Combine {
		sendOf, recvOf = recvOf, sendOf
	}
	data := coll.NewData(c.DType, ops.Sum, n, c.Send.Size)
	for r, b := range j.bs {
		if err := b.Write(c.Send, data.Input(r, seq, sendOf(r))); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(c.Recv, bytes.Repeat([]byte{0xEE}, int(c.Recv.Size))); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range j.bs {
		if err := b.Collective(c, l); err != nil {
			return nil, nil, err
		}
	}
	checkPhases(t, j.bs)
	for r, b := range j.bs {
		w, err := data.WantBlocks(c.Op, c.Blocks, r, seq, sendOf, recvOf(r))
		if err != nil {
			t.Fatal(err)
		}
		g := make([]byte, len(w))
		if err := b.Read(c.Recv, g); err != nil {
			t.Fatal(err)
		}
		got, want = append(got, g), append(want, w)
	}
	return got, want, nil
}

// Small routings that split unevenly: many experts per token, few, a skew, tokens of a
// size that is not a whole number of 16-byte vectors (the kernel's element-wise path).
var moeShapes = []coll.MoE{
	{Tokens: 96, Hidden: 256, TopK: 4, Experts: 16, Seed: 3},
	{Tokens: 50, Hidden: 64, TopK: 1, Experts: 6, Seed: 4},
	{Tokens: 70, Hidden: 40, TopK: 3, Experts: 12, Seed: 5, Skew: 1.5},
	{Tokens: 33, Hidden: 7, TopK: 2, Experts: 9, Seed: 6},
}

// dispatch and the pull combine hand their kernels tables that move and sum the right bytes:
// every rank's output is what bench checks (coll.Data.WantBlocks, as the CPU backend
// computes it) on 2 and 3 fake ranks, for both element types, with the grid chosen by
// size and with grids smaller and larger than the routing's rows; every rank launches
// one kernel with the same grid (the barriers pair blocks across ranks); a table is
// built and uploaded once per routing and freed by Close.
func TestMoEDeliver(t *testing.T) {
	needMoEKernels(t)
	for _, n := range []int{2, 3} {
		for _, m := range moeShapes {
			for _, dtype := range []string{"bf16", "float32"} {
				j := newMoEJob(t, n, m, dtype)
				for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
					for _, l := range []backend.Launch{{Impl: "triton"}, {Impl: "triton", Blocks: 3, Warps: 4}, {Impl: "triton", Blocks: 128, Warps: 8}} {
						name := fmt.Sprintf("%d ranks/%+v/%s/%s/%d blocks", n, m, dtype, op, l.Blocks)
						for _, g := range j.gs {
							g.launches = nil
						}
						c := j.pull(op, dtype)
						for seq := range 2 { // the second runs from the kept table
							got, want, err := j.run(t, c, l, seq)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							for r := range got {
								if !bytes.Equal(got[r], want[r]) {
									t.Errorf("%s: rank %d holds the wrong result (call %d)", name, r, seq+1)
								}
							}
						}
						for r, g := range j.gs {
							if gr := grids(g); len(gr) != 2 || gr[0] != gr[1] || gr[0] != grids(j.gs[0])[0] {
								t.Errorf("%s: rank %d launched %v, rank 0 %v", name, r, gr, grids(j.gs[0]))
							}
						}
					}
				}
				for r, g := range j.gs {
					if mem := g.mem(); mem.allocs != 6 { // dispatch and combine, three grids
						t.Errorf("%d ranks/%+v/%s: rank %d uploaded %d tables, want 6", n, m, dtype, r, mem.allocs)
					}
					if err := j.bs[r].Close(); err != nil {
						t.Fatal(err)
					}
					if mem := g.mem(); len(mem.live) != 0 {
						t.Errorf("rank %d: Close left %d tables in device memory", r, len(mem.live))
					}
				}
			}
		}
	}
}

// Combine tells the kernel its addresses are whole 16-byte vectors exactly when they
// are: DeepSeek-like tokens take the vector path, 14-byte ones the element-wise one.
func TestMoECombineVectors(t *testing.T) {
	needMoEKernels(t)
	for _, tc := range []struct {
		hidden int
		vec    uint64
	}{{128, 1}, {7, 0}} {
		j := newMoEJob(t, 2, coll.MoE{Tokens: 40, Hidden: tc.hidden, TopK: 2, Experts: 4, Seed: 1}, "bf16")
		if _, _, err := j.run(t, j.pull(ops.Combine, "bf16"), backend.Launch{Impl: "triton"}, 0); err != nil {
			t.Fatal(err)
		}
		a, err := kernels.Default().Select("triton", kCombineBF16, j.gs[0].launches[0].warps, fakeCC)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range a.Params {
			if p.Name == "vec" && j.gs[0].launches[0].args[i] != tc.vec {
				t.Errorf("hidden %d: vec %d, want %d", tc.hidden, j.gs[0].launches[0].args[i], tc.vec)
			}
		}
	}
}

// A rank under the drop fault takes part (it launches, so its peers do not wait for it
// at the kernels' barriers) but delivers nothing where it should: dispatch's puts from
// it land in the peers' scratch, so its peer misses its tokens; the pull combine's sums
// land in its own scratch, so its own output is wrong. Ignoring the drop fails this
// test. (The staged combine's: TestMoECombineStagedDrop.)
func TestMoEDrop(t *testing.T) {
	needMoEKernels(t)
	for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
		j := newMoEJob(t, 2, moeShapes[0], "bf16")
		j.bs[1].SetDrop(true)
		got, want, err := j.run(t, j.pull(op, "bf16"), backend.Launch{Impl: "triton"}, 0)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		wrong := 0 // dispatch: the dropping rank's peer
		if op == ops.Combine {
			wrong = 1
		}
		if bytes.Equal(got[wrong], want[wrong]) {
			t.Errorf("%s: rank %d's output is right although rank 1 dropped", op, wrong)
		}
		if len(j.gs[1].launches) == 0 {
			t.Errorf("%s: the dropping rank launched nothing: its peers would wait for it forever", op)
		}
	}
}

// What the MoE kernels cannot do is refused on every rank alike (every rank holds the
// same blocks), before anything is launched, saying what to do.
func TestMoERefusals(t *testing.T) {
	j := newMoEJob(t, 2, moeShapes[0], "bf16")
	out := j.collective(ops.Dispatch, "")
	out.Blocks = slices.Clone(out.Blocks)
	out.Blocks[5].DstOff = j.bufs[1].Size
	overlap := j.collective(ops.Dispatch, "")
	overlap.Blocks = slices.Clone(overlap.Blocks)
	for i, k := range overlap.Blocks {
		if i > 0 && k.Dst == overlap.Blocks[0].Dst {
			overlap.Blocks[i].DstOff = overlap.Blocks[0].DstOff + 16
			break
		}
	}
	split := j.collective(ops.Combine, "bf16")
	split.Blocks = slices.Clone(split.Blocks)
	split.Blocks[3].SrcOff++
	for _, tc := range []struct {
		c    backend.Collective
		l    backend.Launch
		want string
	}{
		{j.collective(ops.Combine, "int32"), backend.Launch{Impl: "triton"}, "combine {impl} triton sums bf16 and float32, not int32: use {dtype} bf16 or float32"},
		{j.collective(ops.Combine, "bf16"), backend.Launch{Impl: "triton", Blocks: 129}, "at most 128 blocks"},
		{out, backend.Launch{Impl: "triton"}, "does not fit the"},
		{overlap, backend.Launch{Impl: "triton"}, "give every copy a place of its own"},
		{split, backend.Launch{Impl: "triton"}, "splits 2-byte elements of bf16"},
	} {
		for r, b := range j.bs {
			if err := b.Collective(tc.c, tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rank %d, %s %+v: %v, want %q", r, tc.c.Op, tc.l, err, tc.want)
			}
		}
	}
	for r, g := range j.gs {
		if len(g.launches) != 0 {
			t.Errorf("rank %d: refused operations launched %v", r, grids(g))
		}
	}
}

// On the default layer (4096 tokens of 7168 bf16, top-8 of 256 experts) on two ranks
// nearly every token goes to both, in token order: the tables merge those runs, so a
// block makes a few large puts or sums, not hundreds of token-sized ones (the staged
// combine's puts too); and the grid, from the busiest rank, is the same on every rank
// and for both combines.
func TestMoETablesMergeRuns(t *testing.T) {
	rt, err := coll.DefaultMoE.Route(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	most := max(rt.Bytes(), rt.MaxSlots())
	sh := ShapeFor(rt.Bytes(), backend.Launch{})
	for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
		c := backend.Collective{Op: op, DType: "bf16", Bytes: rt.Bytes(), Send: backend.Buffer{Size: most}, Recv: backend.Buffer{Size: most}, Blocks: rt.Dispatch}
		if op == ops.Combine {
			c.Blocks = rt.Combine
		}
		c.Scratch = c.Recv
		var grids []int
		for me := range 2 {
			for _, staged := range []bool{false, true} {
				if staged && op == ops.Dispatch {
					continue
				}
				p, err := planMoE(c, backend.Launch{}, sh, 2, me, 2, staged)
				if err != nil {
					t.Fatal(err)
				}
				grids = append(grids, p.grid)
				rows := (len(p.words) - p.parts[1]) / 4
				if op == ops.Combine {
					rows = (p.parts[2] - p.parts[1]) / 4
				}
				if rows > 3*p.grid {
					t.Errorf("%s rank %d: %d rows for %d blocks (%d token copies): runs are not merged", op, me, rows, p.grid, len(c.Blocks)/2)
				}
				if puts := (len(p.words) - p.parts[len(p.parts)-1]) / 4; staged && puts > 3*p.grid {
					t.Errorf("staged combine rank %d: %d puts for %d blocks: runs are not merged", me, puts, p.grid)
				}
				if op == ops.Combine && !p.vec {
					t.Errorf("combine rank %d (staged %v): 14336-byte tokens, but not the vector path", me, staged)
				}
			}
		}
		if slices.Min(grids) != slices.Max(grids) || grids[0] != MaxCollBlocks {
			t.Errorf("%s: grids %v, want %d on both ranks", op, grids, MaxCollBlocks)
		}
	}
}

// share gives every block an equal share of the cost, in order, cutting items only at
// whole vectors from their start, and covers every byte once.
func TestMoEShare(t *testing.T) {
	type item struct{ at, n, w int64 }
	items := []item{{0, 100000, 4}, {200000, 48, 4}, {300000, 7, 1}, {400000, 250000, 1}, {700000, 16, 4}, {800000, 33333, 5}}
	var total int64
	for _, it := range items {
		total += it.n * it.w
	}
	for _, blocks := range []int{1, 2, 7, 128, 1000} {
		bounds, out := share(items, blocks, 16, func(it item) (int64, int64) { return it.n, it.w },
			func(it item, off, m int64) item { return item{it.at + off, m, it.w} })
		if len(bounds) != blocks+1 || bounds[0] != 0 || bounds[blocks] != int64(len(out)) {
			t.Fatalf("%d blocks: bounds %v for %d pieces", blocks, bounds, len(out))
		}
		next := 0
		var covered int64
		for b := range blocks {
			var cost int64
			for _, p := range out[bounds[b]:bounds[b+1]] {
				cost += p.n * p.w
			}
			if most := total/int64(blocks) + 1 + 16*5; cost > most {
				t.Errorf("%d blocks: block %d costs %d, more than %d", blocks, b, cost, most)
			}
		}
		for _, p := range out {
			for next < len(items) && p.at >= items[next].at+items[next].n {
				next++
			}
			it := items[next]
			if p.at < it.at || p.at+p.n > it.at+it.n || (p.at-it.at)%16 != 0 || p.n <= 0 {
				t.Errorf("%d blocks: piece %+v of item %+v", blocks, p, it)
			}
			covered += p.n
		}
		if want := int64(100000 + 48 + 7 + 250000 + 16 + 33333); covered != want {
			t.Errorf("%d blocks: pieces cover %d bytes, want %d", blocks, covered, want)
		}
	}
}

// Combine's places are cut wherever a block landing on the rank starts or ends, keep
// their copies in the blocks' order (the order the CPU backend and the check add them
// in, which float sums depend on), and merge with a neighbour only when every copy
// continues the neighbour's; blocks landing elsewhere are not this rank's.
func TestMoECombinePlaces(t *testing.T) {
	blocks := []backend.Block{
		{Src: 2, Dst: 0, SrcOff: 64, DstOff: 0, Bytes: 32},
		{Src: 0, Dst: 0, SrcOff: 0, DstOff: 0, Bytes: 32},
		{Src: 1, Dst: 1, SrcOff: 0, DstOff: 0, Bytes: 64},
		{Src: 1, Dst: 0, SrcOff: 96, DstOff: 16, Bytes: 32},
		{Src: 1, Dst: 0, SrcOff: 128, DstOff: 48, Bytes: 16}, // continues the one before
		{Src: 2, Dst: 0, SrcOff: 200, DstOff: 64, Bytes: 16}, // continues it in place only
	}
	want := []moePlace{
		{0, 16, []moeCopy{{2, 64}, {0, 0}}},
		{16, 16, []moeCopy{{2, 80}, {0, 16}, {1, 96}}},
		{32, 32, []moeCopy{{1, 112}}},
		{64, 16, []moeCopy{{2, 200}}},
	}
	if got := combinePlaces(blocks, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("places %v, want %v", got, want)
	}
}

// Dispatch's rows go to the other ranks first, from the next one on, then to the rank
// itself, each by place, merged where both ends continue the row before.
func TestMoEDispatchRows(t *testing.T) {
	blocks := []backend.Block{
		{Src: 1, Dst: 1, SrcOff: 0, DstOff: 0, Bytes: 16},
		{Src: 1, Dst: 0, SrcOff: 16, DstOff: 32, Bytes: 16},
		{Src: 1, Dst: 2, SrcOff: 0, DstOff: 0, Bytes: 16},
		{Src: 0, Dst: 2, SrcOff: 0, DstOff: 16, Bytes: 16},
		{Src: 1, Dst: 0, SrcOff: 0, DstOff: 16, Bytes: 16},  // continued by the second
		{Src: 1, Dst: 2, SrcOff: 32, DstOff: 16, Bytes: 16}, // not continuing at the source
	}
	want := []moeRow{{0, 0, 2, 16}, {32, 16, 2, 16}, {0, 16, 0, 32}, {0, 0, 1, 16}}
	if got := dispatchRows(blocks, 1, 3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}

// needStagedKernels fails a test of the staged combine when the catalogue lacks its
// kernels (built on the GPU machine: kernels/build-kernels.py --only symmem_moe).
func needStagedKernels(t *testing.T) {
	t.Helper()
	needMoEKernels(t)
	if _, err := kernels.Default().Select("triton", kCombineStagedBF16, 4, fakeCC); err != nil {
		t.Fatalf("the kernel catalogue has no triton/%s (%v): rebuild with kernels/build-kernels.py --only symmem_moe", kCombineStagedBF16, err)
	}
	if _, err := kernels.Default().Select("triton", kCombineStagedF32, 4, fakeCC); err != nil {
		t.Fatalf("the kernel catalogue has triton/%s but not %s (%v): rebuild with kernels/build-kernels.py --only symmem_moe", kCombineStagedBF16, kCombineStagedF32, err)
	}
}

// stagedLayers is the most other ranks any token of rt goes to, from its destinations
// (not from the blocks the backend reads): the scratch layers the staged combine needs.
func stagedLayers(rt *coll.Routing) int64 {
	most := 0
	for s, ts := range rt.Dests {
		for _, ds := range ts {
			k := len(ds)
			if slices.Contains(ds, s) {
				k--
			}
			most = max(most, k)
		}
	}
	return int64(most)
}

// launched is the kernels rank g launched since its launches were last cleared, and
// their grids and warps.
func launched(g *fakeGPU) (kernels, shapes []string) {
	for _, l := range g.launches {
		kernels = append(kernels, l.kernel)
		shapes = append(shapes, fmt.Sprintf("w%d x%d", l.warps, l.dim.Grid))
	}
	return kernels, shapes
}

// Combine pulls unless told to stage, and stages (--algo staged) where the scratch
// holds a layer for every copy a token gets from another rank: on two ranks always
// (one layer: the bench's scratch, as large as the output, holds it), on three only
// with a larger scratch. Algorithm says which; Collective runs it whether it chooses
// itself or is told (as bench tells it what Algorithm said); every rank launches that
// kernel with the same grid, and every rank's output is what bench checks, for both
// element types, uneven routings and grids smaller and larger than the tables' rows.
func TestMoECombineStaged(t *testing.T) {
	needStagedKernels(t)
	ranStaged, ranPull := 0, 0
	for _, n := range []int{2, 3} {
		for _, layers := range []int64{1, 2} {
			for _, m := range moeShapes {
				for _, dtype := range []string{"bf16", "float32"} {
					j := newMoEJobScratch(t, n, m, dtype, layers)
					asked, want := "", combinePull
					if stagedLayers(j.rt) <= layers {
						asked, want = combineStaged, combineStaged
					}
					kernel, _ := combineKernel("triton", dtype, want == combineStaged)
					for _, l := range []backend.Launch{{Impl: "triton"}, {Impl: "triton", Blocks: 3, Warps: 4}, {Impl: "triton", Blocks: 128, Warps: 8}} {
						c := j.collective(ops.Combine, dtype)
						c.Algo = asked
						for r, b := range j.bs {
							if a := b.Algorithm(c, l); a != want {
								t.Fatalf("%d ranks, scratch of %d layers, %+v, algo %q: rank %d's Algorithm says %q, want %q", n, layers, m, asked, r, a, want)
							}
						}
						for seq, algo := range []string{asked, want} {
							name := fmt.Sprintf("%d ranks/%d layers/%+v/%s/%d blocks/--algo %q", n, layers, m, dtype, l.Blocks, algo)
							c.Algo = algo
							for _, g := range j.gs {
								g.launches = nil
							}
							got, wantOut, err := j.run(t, c, l, seq)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							for r := range got {
								if !bytes.Equal(got[r], wantOut[r]) {
									t.Errorf("%s: rank %d holds the wrong result", name, r)
								}
								k, sh := launched(j.gs[r])
								if _, sh0 := launched(j.gs[0]); len(k) != 1 || k[0] != kernel || sh[0] != sh0[0] {
									t.Errorf("%s: rank %d launched %v (%v), rank 0 %v; want %s once", name, r, k, sh, sh0, kernel)
								}
							}
						}
					}
					if want == combineStaged {
						ranStaged++
					} else {
						ranPull++
					}
				}
			}
		}
	}
	// The shapes must take both ways: a routing that fits everywhere tests no fallback.
	if ranStaged == 0 || ranPull == 0 {
		t.Errorf("%d jobs staged, %d pulled: the shapes no longer exercise both", ranStaged, ranPull)
	}
}

// --algo staged where the scratch cannot hold the copies, or an algorithm combine does
// not have, is refused on every rank alike, in one line that says what to do, before
// anything is launched; Algorithm then reports what was asked.
func TestMoECombineStagedRefusals(t *testing.T) {
	j := newMoEJob(t, 3, moeShapes[0], "bf16")
	if stagedLayers(j.rt) < 2 {
		t.Fatalf("the routing sends no token to two other ranks: nothing to refuse")
	}
	for _, tc := range []struct{ algo, want string }{
		{combineStaged, "{algo} staged stages up to 2 copies of a token from other ranks: "},
		{"ring", "{algo} ring: {impl} triton runs combine as staged or pull"},
	} {
		c := j.collective(ops.Combine, "bf16")
		c.Algo = tc.algo
		for r, b := range j.bs {
			err := b.Collective(c, backend.Launch{Impl: "triton"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("rank %d, algo %s: %v, want %q", r, tc.algo, err, tc.want)
			}
			if a := b.Algorithm(c, backend.Launch{Impl: "triton"}); a != tc.algo {
				t.Errorf("rank %d: Algorithm says %q for algo %s", r, a, tc.algo)
			}
		}
	}
	for r, g := range j.gs {
		if len(g.launches) != 0 {
			t.Errorf("rank %d: refused operations launched %v", r, grids(g))
		}
	}
}

// Under the drop fault the staged combine's dropping rank still meets its peers (it
// launches with the same grid) but pulls, sending its sums to its own scratch, and
// puts nothing: exactly the peers' tokens that needed a copy from it come out wrong
// (they sum what an earlier launch left in their scratch: the same tokens of another
// measurement), the others right, as its redirected output reaches no peer; its own
// output is wrong. Once it stops dropping, every rank is right again.
func TestMoECombineStagedDrop(t *testing.T) {
	needStagedKernels(t)
	const drop = 1
	for _, tc := range []struct {
		n      int
		layers int64
	}{{2, 1}, {3, 2}} {
		j := newMoEJobScratch(t, tc.n, moeShapes[0], "bf16", tc.layers)
		c := j.collective(ops.Combine, "bf16")
		c.Algo = combineStaged
		l := backend.Launch{Impl: "triton"}
		check := func(seq int, dropping bool) {
			t.Helper()
			for _, g := range j.gs {
				g.launches = nil
			}
			got, want, err := j.run(t, c, l, seq)
			if err != nil {
				t.Fatalf("%d ranks: %v", tc.n, err)
			}
			for r, g := range j.gs {
				kernel := kCombineStagedBF16
				if dropping && r == drop {
					kernel = kCombineBF16
				}
				k, sh := launched(g)
				if _, sh0 := launched(j.gs[0]); len(k) != 1 || k[0] != kernel || sh[0] != sh0[0] {
					t.Errorf("%d ranks, drop %v: rank %d launched %v (%v), rank 0 %v; want %s once", tc.n, dropping, r, k, sh, sh0, kernel)
				}
			}
			tok := j.rt.Token
			for s := range tc.n {
				if dropping && s == drop {
					if bytes.Equal(got[s], want[s]) {
						t.Errorf("%d ranks: the dropping rank's output is right", tc.n)
					}
					continue
				}
				wrong, needed := 0, 0
				for i, ds := range j.rt.Dests[s] {
					ok := bytes.Equal(got[s][int64(i)*tok:int64(i+1)*tok], want[s][int64(i)*tok:int64(i+1)*tok])
					if dropping && slices.Contains(ds, drop) && s != drop {
						needed++
						if !ok {
							wrong++
						}
					} else if !ok {
						t.Errorf("%d ranks, drop %v: rank %d's token %d (to ranks %v) is wrong", tc.n, dropping, s, i, ds)
					}
				}
				if wrong != needed {
					t.Errorf("%d ranks: %d of rank %d's %d tokens that needed the dropping rank's copies are right", tc.n, needed-wrong, s, needed)
				}
			}
		}
		check(0, false)
		j.bs[drop].SetDrop(true)
		check(1, true)
		j.bs[drop].SetDrop(false)
		check(2, false)
	}
}

// The staged combine's tables pair blocks across ranks: the rows block b of rank d puts
// to rank s are exactly the copies from d that block b of s sums, byte for byte, from
// where d holds them to where s reads them, within s's scratch; no two rows of any rank
// land on the same byte; and s sums the same pieces as the pull combine would, with
// the same copies in the same order (the routing's, which the float sums depend on),
// only those of other ranks read from its scratch. Every rank's grid is the same.
func TestMoEStagedTables(t *testing.T) {
	type at struct {
		rank int
		off  int64
	}
	type from struct {
		rank, block int
		off         int64
	}
	for _, n := range []int{2, 3} {
		for _, m := range moeShapes {
			rt, err := m.Route(n, 2)
			if err != nil {
				t.Fatal(err)
			}
			most := max(rt.Bytes(), rt.MaxSlots())
			c := backend.Collective{Op: ops.Combine, DType: "bf16", Bytes: rt.Bytes(), Send: backend.Buffer{Size: most}, Recv: backend.Buffer{Size: most},
				Scratch: backend.Buffer{Size: stagedLayers(rt) * most}, Blocks: rt.Combine}
			for _, l := range []backend.Launch{{}, {Blocks: 3, Warps: 4}, {Blocks: 128, Warps: 8}} {
				name := fmt.Sprintf("%d ranks/%+v/%d blocks", n, m, l.Blocks)
				sh := ShapeFor(rt.Bytes(), l)
				staged, pull := make([]moePlan, n), make([]moePlan, n)
				for r := range n {
					if staged[r], err = planMoE(c, l, sh, 2, r, n, true); err != nil {
						t.Fatal(err)
					}
					if pull[r], err = planMoE(c, l, sh, 2, r, n, false); err != nil {
						t.Fatal(err)
					}
				}
				put := map[at]from{}
				for d, p := range staged {
					if p.grid != staged[0].grid || p.grid != pull[d].grid || len(p.parts) != 5 {
						t.Fatalf("%s: rank %d: grid %d (pull %d, rank 0 %d), %d parts", name, d, p.grid, pull[d].grid, staged[0].grid, len(p.parts))
					}
					bounds, rows := p.words[p.parts[3]:p.parts[4]], p.words[p.parts[4]:]
					for b := range p.grid {
						for i := bounds[b]; i < bounds[b+1]; i++ {
							r := rows[4*i : 4*i+4]
							if r[2] == int64(d) || r[2] < 0 || r[2] >= int64(n) || r[1] < 0 || r[1]+r[3] > c.Scratch.Size {
								t.Fatalf("%s: rank %d block %d puts %d bytes to rank %d at %d of a %d-byte scratch", name, d, b, r[3], r[2], r[1], c.Scratch.Size)
							}
							for x := int64(0); x < r[3]; x += 2 {
								k := at{int(r[2]), r[1] + x}
								if was, ok := put[k]; ok {
									t.Fatalf("%s: rank %d block %d and rank %d block %d both put byte %d of rank %d's scratch", name, d, b, was.rank, was.block, k.off, k.rank)
								}
								put[k] = from{d, b, r[0] + x}
							}
						}
					}
				}
				for s, p := range staged {
					q := pull[s]
					if !slices.Equal(p.words[:p.parts[2]], q.words[:q.parts[2]]) {
						t.Fatalf("%s: rank %d's staged pieces are not the pull combine's", name, s)
					}
					bounds, pieces := p.words[:p.parts[1]], p.words[p.parts[1]:p.parts[2]]
					copies, pulled := p.words[p.parts[2]:p.parts[3]], q.words[q.parts[2]:]
					if len(copies) != len(pulled) {
						t.Fatalf("%s: rank %d sums %d copies staged, %d pulled", name, s, len(copies)/2, len(pulled)/2)
					}
					for b := range p.grid {
						for i := bounds[b]; i < bounds[b+1]; i++ {
							pc := pieces[4*i : 4*i+4]
							for k := pc[2]; k < pc[3]; k++ {
								rank, off, src := copies[2*k], copies[2*k+1], pulled[2*k+1]
								if rank != pulled[2*k] {
									t.Fatalf("%s: rank %d's copy %d comes from rank %d staged, %d pulled: the order of the sum changed", name, s, k, rank, pulled[2*k])
								}
								if rank == int64(s) {
									if off != src {
										t.Fatalf("%s: rank %d reads its own copy %d at %d, not %d", name, s, k, off, src)
									}
									continue
								}
								for x := int64(0); x < 2*pc[1]; x += 2 {
									want := from{int(rank), b, src + x}
									if got, ok := put[at{s, off + x}]; !ok || got != want {
										t.Fatalf("%s: rank %d block %d sums byte %d of its scratch as byte %d of rank %d's send, put there by block %d; it was put %+v (%v)",
											name, s, b, off+x, want.off, want.rank, want.block, got, ok)
									}
									delete(put, at{s, off + x})
								}
							}
						}
					}
				}
				if len(put) != 0 {
					t.Errorf("%s: %d bytes put that no block sums", name, len(put))
				}
			}
		}
	}
}

// Combine's pull runs at most combineWarps unless --warps says; the staged combine,
// and a rank that drops (and so pulls) in a staged job, keep the grid's warps, so that
// every rank launches the same grid.
func TestMoECombineWarps(t *testing.T) {
	needStagedKernels(t)
	m := coll.MoE{Tokens: 160, Hidden: 256, TopK: 4, Experts: 16, Seed: 3} // 80 KiB a rank: 32 warps by size
	for _, tc := range []struct {
		algo  string
		warps int // warps
		drop  bool
		want  int
	}{{"", 0, false, combineWarps}, {combinePull, 0, true, combineWarps}, {combineStaged, 0, false, 32},
		{combineStaged, 0, true, 32}, {"", 32, false, 32}} {
		j := newMoEJobScratch(t, 2, m, "bf16", 1)
		c := j.collective(ops.Combine, "bf16")
		c.Algo = tc.algo
		j.bs[1].SetDrop(tc.drop)
		for _, g := range j.gs {
			g.launches = nil
		}
		if _, _, err := j.run(t, c, backend.Launch{Impl: "triton", Warps: tc.warps}, 0); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		for r, g := range j.gs {
			_, sh := launched(g)
			if len(sh) != 1 || !strings.HasPrefix(sh[0], fmt.Sprintf("w%d ", tc.want)) {
				t.Errorf("algo %q warps %d, rank 1 drops %v: rank %d launched %v, want w%d", tc.algo, tc.warps, tc.drop, r, sh, tc.want)
			}
		}
	}
}
