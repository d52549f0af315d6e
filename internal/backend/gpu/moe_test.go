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
	"github.com/symmem/symmem/internal/kernels"
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
	for p, b := range g.mem().live {
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

// moe imitates dispatch and combine_bf16/f32 (kernels/triton/symmem_moe.py), reading
// the arguments by the names in the artifact's sidecar and the rows from the rank's own
// memory: dispatch's block b puts rows bounds[b]..bounds[b+1] (src_off, dst_off, dst,
// nbytes) from send here to recv on dst; combine's block b stores each of its pieces
// (dst_off, count, c0, c1) as the sum of copies c0..c1-1 (src, src_off), read at send on
// src, in that order. With vec set, every address must be a whole 16-byte vector, as
// the kernel tells Triton it is.
func (g *fakeGPU) moe(l fakeLaunch) error {
	a, err := kernels.Default().Select(l.impl, l.kernel, l.warps, fakeCC)
	if err != nil {
		return err
	}
	arg := map[string]uint64{}
	for i, p := range a.Params {
		arg[p.Name] = l.args[i]
	}
	want := []string{"send", "recv", "bounds", "pad", "state", "me", "n", "limit_ns", "mailbox"}
	if l.kernel == kDispatch {
		want = append(want, "rows")
	} else {
		want = append(want, "pieces", "copies", "vec")
	}
	for _, name := range want {
		if _, ok := arg[name]; !ok {
			return fmt.Errorf("fake: %s has no parameter %q", a.Name(), name)
		}
	}
	if err := g.checkColl(l, arg["pad"], arg["state"], arg["me"], arg["n"]); err != nil {
		return err
	}
	if _, err := g.hostWords(arg["mailbox"], mailboxWords); err != nil {
		return fmt.Errorf("fake: %s: mailbox: %w", l.kernel, err)
	}
	send, recv, err := g.sym2(arg["send"], arg["recv"])
	if err != nil {
		return err
	}
	grid := int64(l.dim.Grid)
	bounds, err := g.devWords(arg["bounds"], grid+1)
	if err != nil {
		return err
	}
	for b := range grid {
		if bounds[b] > bounds[b+1] {
			return fmt.Errorf("fake: %s: block %d's rows run from %d to %d", l.kernel, b, bounds[b], bounds[b+1])
		}
	}
	if l.kernel == kDispatch {
		for i := bounds[0]; i < bounds[grid]; i++ {
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
	dtype, elem := "bf16", int64(2)
	if l.kernel == kCombineF32 {
		dtype, elem = "float32", 4
	}
	vec := arg["vec"] != 0
	for i := bounds[0]; i < bounds[grid]; i++ {
		pc, err := g.devWords(arg["pieces"]+uint64(32*i), 4)
		if err != nil {
			return err
		}
		at, count := recv+pc[0], pc[1]
		if vec && at%collVector != 0 {
			return fmt.Errorf("fake: combine piece %d at %d, with vec set", i, at)
		}
		var srcs [][]byte
		for c := pc[2]; c < pc[3]; c++ {
			cp, err := g.devWords(arg["copies"]+uint64(16*c), 2)
			if err != nil {
				return err
			}
			if vec && (send+cp[1])%collVector != 0 {
				return fmt.Errorf("fake: combine copy %d at %d, with vec set", c, send+cp[1])
			}
			s, err := g.w.bytes(int(cp[0]), send+cp[1], count*elem)
			if err != nil {
				return err
			}
			srcs = append(srcs, s)
		}
		out := make([]byte, count*elem)
		if err := coll.Sum(dtype, out, srcs...); err != nil {
			return err
		}
		d, err := g.w.bytes(g.rank, at, count*elem)
		if err != nil {
			return err
		}
		copy(d, out)
	}
	return nil
}

// needMoEKernels fails a test that launches the MoE kernels when the catalogue lacks
// one (they are built on the GPU machine: scripts/build-kernels.py --only symmem_moe).
func needMoEKernels(t *testing.T) {
	t.Helper()
	if err := moeKernelsMissing(); err != nil {
		t.Fatalf("%v: rebuild the kernels with scripts/build-kernels.py --only symmem_moe", err)
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
	rt, err := m.Route(n, coll.ElemSize(dtype))
	if err != nil {
		t.Fatal(err)
	}
	most := max(rt.Bytes(), rt.MaxSlots(), 1)
	w := newWorld(n, 3*backend.Align(most, backend.HeapAlign)+backend.HeapAlign)
	j := &moeJob{rt: rt}
	for r := range n {
		g := &fakeGPU{w: w, rank: r, live: map[string]int{}}
		b, err := start(Place{Rank: r, LocalRank: r, Size: n}, moeDevice{g}, g, fakeCC, Config{Heap: w.heap})
		if err != nil {
			t.Fatal(err)
		}
		for i := range j.bufs {
			if j.bufs[i], err = b.Alloc(most); err != nil {
				t.Fatal(err)
			}
		}
		j.bs, j.gs = append(j.bs, b), append(j.gs, g)
	}
	return j
}

// collective is op over the job's routing, as bench describes it.
func (j *moeJob) collective(op, dtype string) backend.Collective {
	c := backend.Collective{Op: op, Bytes: j.rt.Bytes(), Send: j.bufs[0], Recv: j.bufs[1], Scratch: j.bufs[2], Blocks: j.rt.Dispatch}
	if op == backend.OpCombine {
		c.DType, c.Blocks = dtype, j.rt.Combine
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
	if c.Op == backend.OpCombine {
		sendOf, recvOf = recvOf, sendOf
	}
	data := coll.NewData(c.DType, n, c.Send.Size)
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
	for r, b := range j.bs {
		w, err := data.WantBlocks(c.Blocks, r, seq, sendOf, recvOf(r), c.Op == backend.OpCombine)
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

// dispatch and combine hand their kernels tables that move and sum the right bytes:
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
				for _, op := range []string{backend.OpDispatch, backend.OpCombine} {
					for _, l := range []backend.Launch{{Impl: "triton"}, {Impl: "triton", Blocks: 3, Warps: 4}, {Impl: "triton", Blocks: 128, Warps: 8}} {
						name := fmt.Sprintf("%d ranks/%+v/%s/%s/%d blocks", n, m, dtype, op, l.Blocks)
						for _, g := range j.gs {
							g.launches = nil
						}
						c := j.collective(op, dtype)
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
		if _, _, err := j.run(t, j.collective(backend.OpCombine, "bf16"), backend.Launch{Impl: "triton"}, 0); err != nil {
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
// it land in the peers' scratch, so its peer misses its tokens; combine's sums land in
// its own scratch, so its own output is wrong. Ignoring the drop fails this test.
func TestMoEDrop(t *testing.T) {
	needMoEKernels(t)
	for _, op := range []string{backend.OpDispatch, backend.OpCombine} {
		j := newMoEJob(t, 2, moeShapes[0], "bf16")
		j.bs[1].SetDrop(true)
		got, want, err := j.run(t, j.collective(op, "bf16"), backend.Launch{Impl: "triton"}, 0)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		wrong := 0 // dispatch: the dropping rank's peer
		if op == backend.OpCombine {
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
	out := j.collective(backend.OpDispatch, "")
	out.Blocks = slices.Clone(out.Blocks)
	out.Blocks[5].DstOff = j.bufs[1].Size
	overlap := j.collective(backend.OpDispatch, "")
	overlap.Blocks = slices.Clone(overlap.Blocks)
	for i, k := range overlap.Blocks {
		if i > 0 && k.Dst == overlap.Blocks[0].Dst {
			overlap.Blocks[i].DstOff = overlap.Blocks[0].DstOff + 16
			break
		}
	}
	split := j.collective(backend.OpCombine, "bf16")
	split.Blocks = slices.Clone(split.Blocks)
	split.Blocks[3].SrcOff++
	for _, tc := range []struct {
		c    backend.Collective
		l    backend.Launch
		want string
	}{
		{j.collective(backend.OpCombine, "int32"), backend.Launch{Impl: "triton"}, "combine --impl triton sums bf16 and float32, not int32: use --dtype bf16 or float32"},
		{j.collective(backend.OpCombine, "bf16"), backend.Launch{Impl: "triton", Blocks: 129}, "at most 128 blocks"},
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
// block makes a few large puts or sums, not hundreds of token-sized ones; and the grid,
// from the busiest rank, is the same on every rank.
func TestMoETablesMergeRuns(t *testing.T) {
	rt, err := coll.DefaultMoE.Route(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	most := max(rt.Bytes(), rt.MaxSlots())
	sh := ShapeFor(rt.Bytes(), backend.Launch{})
	for _, op := range []string{backend.OpDispatch, backend.OpCombine} {
		c := backend.Collective{Op: op, DType: "bf16", Bytes: rt.Bytes(), Send: backend.Buffer{Size: most}, Recv: backend.Buffer{Size: most}, Blocks: rt.Dispatch}
		if op == backend.OpCombine {
			c.Blocks = rt.Combine
		}
		var grids []int
		for me := range 2 {
			p, err := planMoE(c, backend.Launch{}, sh, 2, me, 2)
			if err != nil {
				t.Fatal(err)
			}
			grids = append(grids, p.grid)
			rows := (len(p.words) - p.parts[1]) / 4
			if op == backend.OpCombine {
				rows = (p.parts[2] - p.parts[1]) / 4
			}
			if rows > 3*p.grid {
				t.Errorf("%s rank %d: %d rows for %d blocks (%d token copies): runs are not merged", op, me, rows, p.grid, len(c.Blocks)/2)
			}
			if op == backend.OpCombine && !p.vec {
				t.Errorf("combine rank %d: 14336-byte tokens, but not the vector path", me)
			}
		}
		if grids[0] != grids[1] || grids[0] != MaxCollBlocks {
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
