package bench

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/pkg/kernels"
)

// runRanks runs spec on n CPU-backend ranks in this process; wrap may replace each
// rank's backend. It returns the merged rows.
func runRanks(t *testing.T, n int, spec result.BenchSpec, wrap func(r int, b *cpu.Backend) backend.Backend) []result.Row {
	t.Helper()
	return runRanksWith(t, own, n, spec, wrap)
}

// runRanksWith is runRanks with the registry reg.
func runRanksWith(t *testing.T, reg *backend.Registry, n int, spec result.BenchSpec, wrap func(r int, b *cpu.Backend) backend.Backend) []result.Row {
	t.Helper()
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("coll")
	heap, err := HeapBytes(reg, spec, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := cpu.Create(path, n, heap); err != nil {
		t.Fatal(err)
	}
	rows := make([][]result.Row, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		b, err := cpu.Open(path, r, n, heap)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var be backend.Backend = b
		if wrap != nil {
			be = wrap(r, b)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[r], errs[r] = (&Runner{B: be, S: spec, Reg: reg}).Run()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return result.Merge(rows)
}

func collSpec(ops ...string) result.BenchSpec {
	return result.BenchSpec{Ops: ops, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 64 << 10, Factor: 8, Iters: 3, Warmup: 1, Reps: 2,
		LatencySize: 8, PerIterMax: 4 << 10, DType: "bf16", MoE: &coll.MoE{Tokens: 16, Hidden: 64, TopK: 3, Experts: 8, Seed: 3}}
}

func TestCollectivesRightOnTwoThreeFourRanks(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		rows := runRanks(t, n, collSpec(ops.Strings(ops.Collectives())...), nil)
		// Three sizes of each collective, one row each of dispatch and combine.
		if want := (len(ops.Collectives())-2)*3 + 2; len(rows) != want {
			t.Fatalf("%d ranks: %d rows, want %d", n, len(rows), want)
		}
		for _, r := range rows {
			if !r.Checked || r.Wrong != 0 || len(r.TimesUS) != 2 || r.Ranks != n || r.BusGBps <= 0 {
				t.Errorf("%d ranks, %s: checked %v, wrong %d, %d times, ranks %d, busbw %g", n, r.Label(), r.Checked, r.Wrong, len(r.TimesUS), r.Ranks, r.BusGBps)
			}
		}
	}
}

// onlyFirst carries out collectives in the first measurement only: what it left in
// the buffers must not pass for later measurements.
type onlyFirst struct {
	*cpu.Backend
	calls, per int
}

func (o *onlyFirst) Collective(c backend.Collective, l backend.Launch) error {
	o.calls++
	o.Backend.SetDrop(o.calls > o.per)
	return o.Backend.Collective(c, l)
}

func TestCollectiveThatStopsAfterFirstMeasurementFails(t *testing.T) {
	for _, op := range ops.Collectives() {
		spec := collSpec(string(op))
		spec.MinSize, spec.MaxSize, spec.PerIterMax = 4<<10, 4<<10, 0
		// The rank that stops is the root of the rooted ones: each rank's output is
		// its own pull, and a reduce's non-root pulls nothing.
		spec.Root = 2
		per := spec.Warmup + spec.Iters
		rows := runRanks(t, 3, spec, func(r int, b *cpu.Backend) backend.Backend {
			if r == 2 {
				return &onlyFirst{Backend: b, per: per}
			}
			return b
		})
		if len(rows) != 1 || rows[0].Wrong == 0 {
			t.Errorf("%s: a rank that stopped after the first measurement passed: %+v", op, rows)
		}
	}
}

// Every rank's output counts: a drop on any one rank is caught, and no peer is left
// waiting (two-shot all-reduce has a barrier in the middle that a dropping rank must
// still meet).
func TestCollectiveDropOnAnyRankFails(t *testing.T) {
	for _, op := range []string{ops.AllReduce, "two-shot", ops.AllGather, ops.Dispatch, ops.Combine} {
		spec := collSpec(string(op))
		if op == "two-shot" {
			spec = collSpec(ops.AllReduce)
			spec.Algo = ops.TwoShot
		}
		for bad := 0; bad < 3; bad++ {
			rows := runRanks(t, 3, spec, func(r int, b *cpu.Backend) backend.Backend {
				b.SetDrop(r == bad)
				return b
			})
			for _, r := range rows {
				if r.Wrong == 0 {
					t.Errorf("%s with rank %d dropping: row %s passed", op, bad, r.Label())
				}
			}
		}
	}
}

func TestTwoShotAndOneShotAgree(t *testing.T) {
	for _, algo := range []string{ops.OneShot, ops.TwoShot} {
		spec := collSpec(ops.AllReduce)
		spec.Algo = algo
		spec.MinSize, spec.MaxSize = 1000, 1000 // 500 bf16 elements: chunks of 167, 167, 166
		rows := runRanks(t, 3, spec, nil)
		if len(rows) != 1 || rows[0].Wrong != 0 || rows[0].Algo != algo {
			t.Errorf("%s: %+v", algo, rows)
		}
	}
}

// A repetition's time is the mean of the ranks' (nccl-tests' default), bus bandwidth
// nccl-tests' factor times algbw.
func TestRanksMeanTimesTheRow(t *testing.T) {
	rows := result.Merge([][]result.Row{
		{{Op: ops.AllGather, Impl: "memcpy", Size: 1024, Src: -1, Dst: -1, Ranks: 2, TimesUS: []float64{1, 5}, Checked: true}},
		{{Op: ops.AllGather, Impl: "memcpy", Size: 1024, Src: -1, Dst: -1, Ranks: 2, TimesUS: []float64{7, 3}, Checked: true}},
	})
	if len(rows) != 1 || rows[0].TimesUS[0] != 4 || rows[0].TimesUS[1] != 4 {
		t.Fatalf("merged %+v, want times [4 4]", rows)
	}
	if want := 1024 / 4e3 * 0.5; rows[0].BusGBps != want {
		t.Errorf("busbw %g, want %g (algbw x (n-1)/n)", rows[0].BusGBps, want)
	}
}

// Where a rank's link counters are read, a collective row carries the traffic per byte
// of what bus bandwidth counts (all-gather on 2 ranks: half the size per operation).
func TestCollectiveLinkTraffic(t *testing.T) {
	spec := collSpec(ops.AllGather)
	spec.MinSize, spec.MaxSize, spec.Iters, spec.Warmup, spec.Reps, spec.PerIterMax = 8<<20, 8<<20, 4, 1, 2, 0
	moved := uint64(8<<20) / 2 * 5 // (n-1)/n of 8M, 1 warm-up and 4 timed
	links := &fakeLinks{perLoop: moved}
	rows := runRanks(t, 2, spec, func(r int, b *cpu.Backend) backend.Backend { return b })
	if rows[0].Link != nil {
		t.Fatalf("no counters, yet link traffic: %+v", rows[0].Link)
	}
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("links")
	heap, _ := HeapBytes(own, spec, 2)
	if err := cpu.Create(path, 2, heap); err != nil {
		t.Fatal(err)
	}
	var got [2][]result.Row
	done := make(chan int)
	for r := 0; r < 2; r++ {
		b, err := cpu.Open(path, r, 2, heap)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		run := &Runner{B: b, S: spec, Reg: own}
		if r == 0 {
			run.Links = links
		}
		go func() {
			var err error
			if got[r], err = run.Run(); err != nil {
				t.Error(err)
			}
			done <- r
		}()
	}
	<-done
	<-done
	merged := result.Merge(got[:])
	l := merged[0].Link
	if l == nil || l.PayloadBytes != 2*moved || l.WirePerByte != 1.25 {
		t.Fatalf("link traffic %+v, want %d payload bytes at 1.25 wire bytes each", l, 2*moved)
	}
	if l.WireGBps != merged[0].BusGBps*1.25 {
		t.Errorf("wire GB/s %g at busbw %g", l.WireGBps, merged[0].BusGBps)
	}
}

// namesKernel is a backend that says which kernel ran its collectives.
type namesKernel struct{ *cpu.Backend }

func (namesKernel) Kernel() string { return "reduce_ll128_bf16" }

// A row names the kernel the backend says ran it (backend.Kerneler), rank 0's.
func TestRowNamesKernel(t *testing.T) {
	spec := collSpec(ops.AllReduce)
	spec.MinSize, spec.MaxSize = 4<<10, 4<<10
	rows := runRanks(t, 2, spec, func(r int, b *cpu.Backend) backend.Backend {
		return namesKernel{b}
	})
	if len(rows) != 1 || rows[0].Kernel != "reduce_ll128_bf16" {
		t.Errorf("%+v", rows)
	}
}

// asksAlgo records the launch the bench asks an algorithm for.
type asksAlgo struct {
	*cpu.Backend
	blocks *int
}

func (a asksAlgo) Algorithm(c backend.Collective, l backend.Launch) string {
	*a.blocks = l.Blocks
	return a.Backend.Algorithm(c, l)
}

// The algorithm is chosen for the launch that will run it: --blocks can rule a kernel
// out (LL128 runs without it), so the choice must see them.
func TestAlgorithmSeesTheLaunch(t *testing.T) {
	spec := collSpec(ops.AllReduce)
	spec.MinSize, spec.MaxSize, spec.Blocks = 4<<10, 4<<10, 3
	got := make([]int, 2)
	runRanks(t, 2, spec, func(r int, b *cpu.Backend) backend.Backend {
		return asksAlgo{b, &got[r]}
	})
	if got[0] != 3 || got[1] != 3 {
		t.Errorf("the algorithm was chosen for blocks %v, want 3", got)
	}
}

// warmUpOnly carries out the first collective of every measurement (the warm-up) and
// none of the timed ones after it: what the warm-up left in Recv must not pass for
// what the timed operations should have delivered.
type warmUpOnly struct {
	*cpu.Backend
	calls, per int
}

func (w *warmUpOnly) Collective(c backend.Collective, l backend.Launch) error {
	w.calls++
	w.Backend.SetDrop((w.calls-1)%w.per != 0)
	return w.Backend.Collective(c, l)
}

func TestCollectiveTimedOperationsChecked(t *testing.T) {
	for _, op := range ops.Collectives() {
		spec := collSpec(string(op))
		spec.MinSize, spec.MaxSize = 4<<10, 4<<10
		rows := runRanks(t, 3, spec, func(r int, b *cpu.Backend) backend.Backend {
			return &warmUpOnly{Backend: b, per: spec.Warmup + spec.Iters}
		})
		// Every rank's output is wrong in both repetitions and the per-iteration pass.
		if len(rows) != 1 || rows[0].Wrong == 0 {
			t.Errorf("%s: timed operations that did nothing after the warm-up passed: %+v", op, rows)
		}
		spec.Warmup = 0 // then the first operation is timed, and the last one is checked
		rows = runRanks(t, 3, spec, func(r int, b *cpu.Backend) backend.Backend {
			return &warmUpOnly{Backend: b, per: spec.Iters}
		})
		if len(rows) != 1 || rows[0].Wrong == 0 {
			t.Errorf("%s: operations that did nothing after the first passed: %+v", op, rows)
		}
	}
}

// overrun stores one 16-byte vector of zeros past the end of every collective's output
// after carrying the collective out, as a kernel that stores its last vector whole
// would.
type overrun struct{ *cpu.Backend }

func (o overrun) Collective(c backend.Collective, l backend.Launch) error {
	if err := o.Backend.Collective(c, l); err != nil {
		return err
	}
	return o.Backend.Write(backend.Buffer{Off: c.Recv.Off + c.Recv.Size, Size: 16}, make([]byte, 16))
}

// Bytes written past a collective's output are wrong bytes: the output itself is right.
func TestCollectiveOverrunChecked(t *testing.T) {
	for _, op := range []string{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.AllToAll} {
		spec := collSpec(string(op))
		spec.MinSize, spec.MaxSize = 4<<10, 4<<10
		rows := runRanks(t, 3, spec, nil)
		if len(rows) != 1 || rows[0].Wrong != 0 {
			t.Fatalf("%s: a clean run: %+v", op, rows)
		}
		rows = runRanks(t, 3, spec, func(r int, b *cpu.Backend) backend.Backend { return overrun{b} })
		if len(rows) != 1 || rows[0].Wrong == 0 {
			t.Errorf("%s: 16 bytes written past the output passed: %+v", op, rows)
			continue
		}
		// The first wrong byte is past the output, rank 0's, a guard byte zeroed.
		shape, _ := ops.Op(op).Shape(spec.MaxSize, 3, max(ops.ElemSize(spec.DType), 1))
		w := rows[0].FirstWrong
		if w == nil || w.Rank != 0 || w.Byte != shape.Recv || w.Where != "(past the output)" || w.Got != "0000000000000000" {
			t.Errorf("%s: first wrong %+v, want rank 0's guard byte at %d, zero", op, w, shape.Recv)
		}
	}
}

// scratchOverrun stores 8 bytes past the end of the scratch it was given after every
// collective of size bytes, as a kernel that overruns its scratch promise would: the
// store reached the sync area at the heap's end, unseen.
type scratchOverrun struct {
	*cpu.Backend
	size int64
}

func (o scratchOverrun) Collective(c backend.Collective, l backend.Launch) error {
	if err := o.Backend.Collective(c, l); err != nil || c.Bytes != o.size {
		return err
	}
	return o.Backend.Write(backend.Buffer{Off: c.Scratch.Off + c.Scratch.Size, Size: 8}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
}

// Bytes written past a collective's scratch fail the row, named as such, and only the
// rows that wrote them: the guard is written again after it is found.
func TestScratchOverrunChecked(t *testing.T) {
	spec := collSpec(ops.AllGather)
	spec.MinSize, spec.MaxSize, spec.Factor = 4<<10, 64<<10, 4 // 4K, 16K (overrun), 64K
	if rows := runRanks(t, 2, spec, nil); len(rows) != 3 || rows[0].Wrong+rows[1].Wrong+rows[2].Wrong != 0 {
		t.Fatalf("a clean run: %+v", rows)
	}
	rows := runRanks(t, 2, spec, func(r int, b *cpu.Backend) backend.Backend {
		if r == 1 {
			return scratchOverrun{Backend: b, size: 16 << 10}
		}
		return b
	})
	if len(rows) != 3 || rows[0].Wrong != 0 || rows[1].Wrong == 0 || rows[2].Wrong != 0 {
		t.Fatalf("8 bytes past rank 1's scratch in the 16K row: %+v", rows)
	}
	w := rows[1].FirstWrong
	if w == nil || w.Rank != 1 || !strings.HasPrefix(w.Where, "(past the scratch: the implementation was given ") || w.Got != "0102030405060708" {
		t.Errorf("first wrong %+v, want rank 1's scratch guard, 0102030405060708", w)
	}
}

// asUser runs a user's implementation's collectives as the CPU backend's memcpy (the
// CPU cannot launch its kernels), writing 8 bytes past the scratch it is given, as a
// kernel that overruns its promise would.
type asUser struct{ *cpu.Backend }

func (o asUser) Collective(c backend.Collective, l backend.Launch) error {
	if c.Scratch.Size < c.Recv.Size { // as the GPU backend refuses it
		return fmt.Errorf("the %d-byte scratch cannot take the %d-byte output", c.Scratch.Size, c.Recv.Size)
	}
	l.Impl = "memcpy"
	if err := o.Backend.Collective(c, l); err != nil {
		return err
	}
	return o.Backend.Write(backend.Buffer{Off: c.Scratch.Off + c.Scratch.Size, Size: 8}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
}

// A user's kernel is given the scratch it is promised, 2 x n x one rank's share, at
// every size, with the guard right after it: a write past the promise fails every row
// (the sweep's whole scratch, sized for its largest row, hid it in all but that one).
func TestUserScratchIsItsPromise(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/userar")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	spec := collSpec(ops.AllReduce)
	spec.Impls = []string{"one-shot-all-reduce"}
	spec.MinSize, spec.MaxSize, spec.Factor = 4<<10, 64<<10, 4
	rows := runRanksWith(t, reg, 2, spec, func(r int, b *cpu.Backend) backend.Backend { return asUser{b} })
	if len(rows) != 3 {
		t.Fatalf("rows: %+v", rows)
	}
	for _, row := range rows {
		w := row.FirstWrong
		if row.Wrong == 0 || w == nil || w.Where != fmt.Sprintf("(past the scratch: the implementation was given %d bytes)", 2*2*row.Size) {
			t.Errorf("%d: wrong %d, first %v; want the guard after its %d bytes of scratch", row.Size, row.Wrong, w, 2*2*row.Size)
		}
	}
	// Dispatch and combine beside a larger all-gather: their buffers are the sweep's
	// (as large as its largest output), and so is the scratch they are given, at least.
	c, err = kernels.LoadDir("../../pkg/kernels/testdata/usermoe")
	if err != nil {
		t.Fatal(err)
	}
	if reg, _, err = reg.WithUser(c); err != nil {
		t.Fatal(err)
	}
	spec = collSpec(ops.AllGather, ops.Dispatch, ops.Combine)
	spec.Impls = []string{"moe-all-to-all"}
	spec.MinSize, spec.MaxSize = 1<<20, 1<<20
	rows = runRanksWith(t, reg, 2, spec, func(r int, b *cpu.Backend) backend.Backend { return asUser{b} })
	if len(rows) != 2 {
		t.Fatalf("rows: %+v", rows)
	}
	for _, row := range rows {
		if w := row.FirstWrong; row.Wrong == 0 || w == nil || !strings.HasPrefix(w.Where, "(past the scratch: ") {
			t.Errorf("%s: wrong %d, first %v", row.Op, row.Wrong, w)
		}
	}
}

// A sweep with a user's all-reduce plans the scratch its kernel is promised (2 x n x
// the largest output) into the heap; one of symmem's own keeps the output's size.
func TestHeapHoldsAUserAllReduceScratch(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/userar")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	spec := result.BenchSpec{Ops: []string{ops.AllReduce}, Impls: []string{"triton"}, DType: "bf16", MinSize: 1 << 20, MaxSize: 4 << 20, Factor: 2, Iters: 1, Reps: 1}
	own, err := HeapBytes(reg, spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	spec.Impls = []string{"triton", "one-shot-all-reduce"}
	user, err := HeapBytes(reg, spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := user-own, int64(2*3*4<<20-4<<20); got != want {
		t.Errorf("the user's all-reduce adds %d bytes to the heap, want %d", got, want)
	}
	if got := scratchBytes(reg, spec, 4<<20, 3); got != 2*3*4<<20 {
		t.Errorf("scratch %d", got)
	}
}

// A sweep that runs a user's dispatch and combine plans their scratch into the heap:
// the 2 x n x the token buffer kernels.Signatures promises (no more: the largest buffer
// of a layer holds the copies a rank receives, up to n times the tokens).
func TestHeapHoldsAUserMoEScratch(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/usermoe")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	m := coll.MoE{Tokens: 300, Hidden: 512, TopK: 4, Experts: 12, Seed: 1}
	spec := result.BenchSpec{Ops: []string{ops.Dispatch, ops.Combine}, Impls: []string{"triton"}, DType: "bf16", MoE: &m,
		MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2, Iters: 1, Reps: 1}
	own, err := HeapBytes(reg, spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	spec.Impls = []string{"triton", "moe-all-to-all"}
	user, err := HeapBytes(reg, spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	// symmem's own take the layer's largest buffer as scratch; the user's kernels the
	// 2 x 3 ranks x 300 tokens x 512 bf16 = 1843200 bytes they are promised.
	rt, _ := m.Route(3, 2)
	most := max(rt.Bytes(), rt.MaxSlots())
	if most >= 1843200 {
		t.Fatalf("the layer's largest buffer, %d bytes, is no smaller than the user's scratch: the test tells nothing", most)
	}
	a := func(n int64) int64 { return backend.Align(n, backend.HeapAlign) }
	if got, want := user-own, a(1843200)-a(most); got != want {
		t.Errorf("the user's dispatch and combine add %d bytes to the heap, want %d", got, want)
	}
}

// A sweep of dispatch and combine alone sizes its buffers by the MoE layer, not by
// --max-size, which only the other collectives' sizes take (a dispatch-only sweep on
// two H200s planned 768M of heap for the default 256M --max-size, where its layer
// needs 335M).
func TestMoEOnlyHeapIgnoresMaxSize(t *testing.T) {
	m := coll.MoE{Tokens: 300, Hidden: 512, TopK: 4, Experts: 12, Seed: 1}
	spec := result.BenchSpec{Ops: []string{ops.Dispatch, ops.Combine}, Impls: []string{"triton"}, DType: "bf16", MoE: &m,
		MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2, Iters: 1, Reps: 1}
	small, err := HeapBytes(own, spec, 2)
	if err != nil {
		t.Fatal(err)
	}
	spec.MaxSize = 256 << 20
	if big, err := HeapBytes(own, spec, 2); err != nil || big != small {
		t.Errorf("max-size 256M moved a dispatch and combine sweep's heap from %d to %d (%v)", small, big, err)
	}
	spec.Ops = append(spec.Ops, ops.AllGather)
	if big, err := HeapBytes(own, spec, 2); err != nil || big <= small+2*(256<<20) {
		t.Errorf("with all-gather, max-size 256M gave a heap of %d (%v)", big, err)
	}
}
