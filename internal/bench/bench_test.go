package bench

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
)

func TestPatternDiffersPerRankAndShift(t *testing.T) {
	a, b := make([]byte, 4096), make([]byte, 4096)
	pattern(0, 0, a)
	pattern(1, 0, b)
	if bytes.Equal(a, b) {
		t.Fatal("two ranks send the same bytes")
	}
	pattern(0, 1, b)
	if bytes.Equal(a, b) {
		t.Fatal("two lanes send the same bytes")
	}
	if bytes.Equal(a[16:16+1024], a[32:32+1024]) {
		t.Fatal("shifted windows are equal: iterations would not differ")
	}
}

func TestLastOps(t *testing.T) {
	for _, c := range []struct {
		ops, lanes int
		want       []int
	}{
		{5, 1, []int{4}},
		{5, 2, []int{4, 3}},
		{5, 3, []int{3, 4, 2}},
		{2, 4, []int{0, 1}}, // lanes 2 and 3 never ran
	} {
		if got := lastOps(c.ops, c.lanes); !reflect.DeepEqual(got, c.want) {
			t.Errorf("lastOps(%d, %d) = %v, want %v", c.ops, c.lanes, got, c.want)
		}
	}
}

// dropLane loses every put and get queued on one lane after the first, the way a
// broken overlapped transfer would: the receiver's check must notice.
type dropLane struct {
	backend.Backend
	lane, seen int
}

func (d *dropLane) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if l.Lane == d.lane {
		if d.seen++; d.seen > 1 {
			return nil
		}
	}
	return d.Backend.Put(dst, src, peer, l)
}

// fakeLinks advances like links that carry 1.25 raw bytes per payload byte of one
// timed loop between two readings.
type fakeLinks struct {
	reads   int
	perLoop uint64
}

func (f *fakeLinks) Read() (topo.LinkSample, error) {
	f.reads++
	k := uint64(f.reads/2) * f.perLoop
	return topo.LinkSample{DataTx: k, RawTx: k * 5 / 4, RawRx: k / 2}, nil
}

// runPair runs spec on two CPU-backend ranks in this process; wrap may replace rank 0's
// backend. It returns the merged rows.
func runPair(t *testing.T, spec result.BenchSpec, wrap func(backend.Backend) backend.Backend, setup ...func(*Runner)) []result.Row {
	t.Helper()
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("bench")
	heap, _ := HeapBytes(own, spec, 2)
	if err := cpu.Create(path, 2, heap); err != nil {
		t.Fatal(err)
	}
	var rows [2][]result.Row
	var errs [2]error
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		b, err := cpu.Open(path, r, 2, heap)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var be backend.Backend = b
		if r == 0 && wrap != nil {
			be = wrap(b)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := &Runner{B: be, S: spec, Reg: own, Words: setting.Flags}
			for _, f := range setup {
				f(run)
			}
			rows[r], errs[r] = run.Run()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return result.Merge(rows[:])
}

func TestOverlapChecksEveryLane(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put", "get", "put-signal"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 4 << 10,
		Factor: 4, Iters: 4, Warmup: 1, Reps: 2, Overlap: 3, LatencySize: 8}
	rows := runPair(t, spec, nil)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	for _, r := range rows {
		if !r.Checked || r.Wrong != 0 || r.Overlap != 3 || len(r.TimesUS) != 2 {
			t.Errorf("row %s: checked %v, wrong %d, overlap %d, %d times", r.Label(), r.Checked, r.Wrong, r.Overlap, len(r.TimesUS))
		}
	}
	spec.Ops = []string{"put"}
	rows = runPair(t, spec, func(b backend.Backend) backend.Backend { return &dropLane{Backend: b, lane: 1} })
	for _, r := range rows {
		if r.Wrong == 0 {
			t.Errorf("row %s: puts lost on lane 1 went unnoticed", r.Label())
		}
		// The first wrong byte names its lane: the offset is within that lane's window.
		if w := r.FirstWrong; w == nil || w.Where != "(in lane 1 of lanes 0..2, --overlap)" {
			t.Errorf("row %s: first wrong byte %+v, want one in lane 1 of lanes 0..2", r.Label(), w)
		}
	}
}

func TestLinkTrafficPerRow(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put", "latency"}, Impls: []string{"memcpy"}, MinSize: 256 << 10, MaxSize: 1 << 20,
		Factor: 4, Iters: 16, Warmup: 1, Reps: 3, LatencySize: 8}
	links := &fakeLinks{perLoop: 17 << 20} // 1 warm-up and 16 timed puts of 1M
	rows := runPair(t, spec, nil, func(r *Runner) {
		if r.B.Rank() == 0 {
			r.Links = links
		}
	})
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[2].Op != "latency" || rows[2].Link != nil {
		t.Errorf("latency row carries link traffic: %+v", rows[2])
	}
	if rows[0].Link != nil {
		t.Errorf("256K x 16 is under result.MinCounted, yet counted: %+v", rows[0].Link)
	}
	l := rows[1].Link
	if l == nil || links.reads != 6 {
		t.Fatalf("1M x 16: link %+v after %d reads, want 2 reads per repetition", l, links.reads)
	}
	if l.PayloadBytes != 3*17<<20 || l.DataBytes != 3*17<<20 || l.RawBytes != 3*17<<20*5/4 || l.WirePerByte != 1.25 {
		t.Errorf("link traffic %+v", l)
	}
	if l.WireGBps != rows[1].GBps*1.25 || l.WireGBps <= 0 {
		t.Errorf("wire GB/s %g at %g GB/s of payload", l.WireGBps, rows[1].GBps)
	}
}

// stopAfter delivers the puts, gets and signals of the first `good` measurements and
// none after (or, with impl set, never for that implementation): a transfer that stops
// working partway.
type stopAfter struct {
	backend.Backend
	good, seen int
	impl       string
	dataOnly   bool // drop the payload but still signal
	everyOther bool // deliver the payload of every second put-signal only (the last one too)
	sent       int
}

func (s *stopAfter) live(l backend.Launch) bool {
	if s.impl != "" {
		return l.Impl != s.impl
	}
	return s.seen <= s.good
}
func (s *stopAfter) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if !s.live(l) {
		return nil
	}
	return s.Backend.Put(dst, src, peer, l)
}
func (s *stopAfter) Get(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if !s.live(l) {
		return nil
	}
	return s.Backend.Get(dst, src, peer, l)
}
func (s *stopAfter) PutSignal(dst, src, sig backend.Buffer, peer int, l backend.Launch) error {
	s.sent++
	if s.dataOnly || s.everyOther && s.sent%2 == 1 { // the signal arrives, the data does not
		return s.Backend.PutSignal(dst, src.Slice(0, 0), sig, peer, l)
	}
	if !s.live(l) {
		return nil
	}
	return s.Backend.PutSignal(dst, src, sig, peer, l)
}

// runPairHooked is runPair with rank 0's BeforeMeasure hook counting measurements into
// the stopAfter wrapper.
func runPairStopping(t *testing.T, spec result.BenchSpec, s *stopAfter) []result.Row {
	return runPair(t, spec, func(b backend.Backend) backend.Backend { s.Backend = b; return s }, func(r *Runner) {
		if r.B.Rank() == 0 {
			r.BeforeMeasure = func(seq int) { s.seen = seq + 1 }
		}
	})
}

// A transfer that works once and then does nothing must fail every later window: the
// destination keeps the first good window, which must not pass for the later ones.
// With buffers taking turns (Places), the same holds in every place.
func TestTransferThatStopsAfterFirstMeasurementFails(t *testing.T) {
	for _, places := range []int{0, 3} {
		for _, op := range []string{"put", "get"} {
			spec := result.BenchSpec{Ops: []string{op}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 4 << 10, Factor: 4,
				Iters: 3, Warmup: 1, Reps: 3, LatencySize: 8, Places: places}
			rows := runPairStopping(t, spec, &stopAfter{good: 1})
			if len(rows) != 2 {
				t.Fatalf("%d rows", len(rows))
			}
			if rows[0].Wrong != 2*1<<10 {
				t.Errorf("%s 1K, %d places: %d wrong bytes, want the 2 dropped repetitions (2048)", op, places, rows[0].Wrong)
			}
			if rows[1].Wrong != 3*4<<10 {
				t.Errorf("%s 4K, %d places: %d wrong bytes, want every repetition (12288)", op, places, rows[1].Wrong)
			}
		}
	}
}

// Measurements take the places in turn: the destination of measurement i is place
// i % Places.
func TestMeasurementsTakeBuffersInTurn(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2,
		Iters: 1, Warmup: 0, Reps: 6, LatencySize: 8, Places: 3}
	var dsts []int64
	rec := &recordPut{seen: &dsts}
	runPair(t, spec, func(b backend.Backend) backend.Backend { rec.Backend = b; return rec })
	if len(dsts) != 6 || dsts[0] == dsts[1] || dsts[1] == dsts[2] || dsts[0] == dsts[2] || dsts[3] != dsts[0] || dsts[5] != dsts[2] {
		t.Errorf("destinations of the 6 measurements: %v, want 3 places taken in turn", dsts)
	}
}

type recordPut struct {
	backend.Backend
	seen *[]int64
}

func (r *recordPut) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	*r.seen = append(*r.seen, dst.Off)
	return r.Backend.Put(dst, src, peer, l)
}

// Implementations share the buffers: a broken one measured after a working one must
// not pass on what the working one left behind.
func TestBrokenImplAfterWorkingOneFails(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put", "get"}, Impls: []string{"triton", "cuda"}, MinSize: 1 << 10, MaxSize: 1 << 10,
		Factor: 2, Iters: 2, Warmup: 1, Reps: 2, LatencySize: 8}
	rows := runPairStopping(t, spec, &stopAfter{impl: "cuda"})
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if bad := r.Impl == "cuda"; bad != (r.Wrong > 0) {
			t.Errorf("%s: %d wrong bytes", r.Label(), r.Wrong)
		}
	}
}

// put-signal and latency check the payload, not only the signal.
func TestSignalWithoutDataFails(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put-signal", "latency"}, Impls: []string{"memcpy"}, MinSize: 256, MaxSize: 256,
		Factor: 2, Iters: 2, Warmup: 1, Reps: 2, LatencySize: 64}
	rows := runPairStopping(t, spec, &stopAfter{good: 1 << 30, dataOnly: true})
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if !r.Checked || r.Wrong == 0 {
			t.Errorf("%s: signals without data passed (checked %v, wrong %d)", r.Label(), r.Checked, r.Wrong)
		}
	}
}

// slowQuiet takes a millisecond to complete the rank's puts remotely.
type slowQuiet struct{ backend.Backend }

func (s slowQuiet) Quiet() error { time.Sleep(time.Millisecond); return s.Backend.Quiet() }

// The clock stops after remote completion: a slow quiet shows up in the time.
func TestTimingIncludesQuiet(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, MinSize: 64, MaxSize: 64, Factor: 2,
		Iters: 4, Warmup: 0, Reps: 2, LatencySize: 8}
	rows := runPair(t, spec, func(b backend.Backend) backend.Backend { return slowQuiet{b} })
	if got := rows[0].MinUS; got < 1000/4 {
		t.Errorf("%.1f us per put with a 1 ms quiet over 4 puts: the quiet is outside the timed region", got)
	}
}

// Small messages and latency carry per-operation statistics; large ones do not.
func TestPerIterationStats(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put", "latency"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 16 << 10, Factor: 16,
		Iters: 5, Warmup: 1, Reps: 2, LatencySize: 8, PerIterMax: 4 << 10}
	rows := runPair(t, spec, nil)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	small, large, lat := rows[0], rows[1], rows[2]
	// Of 5 operations no p99 is given (result.MinP99Samples).
	if p := small.PerIter; p == nil || p.N != 5 || p.P50US <= 0 || p.P50US > p.MaxUS || p.P99US != 0 {
		t.Errorf("1K: per-iteration stats %+v", small.PerIter)
	}
	if large.PerIter != nil {
		t.Errorf("16K is above PerIterMax, yet has %+v", large.PerIter)
	}
	if p := lat.PerIter; p == nil || p.N != 2*LatencyRounds(spec) {
		t.Errorf("latency: per-round stats %+v, want %d rounds", lat.PerIter, 2*LatencyRounds(spec))
	}
	if small.Wrong != 0 || !small.Checked || lat.Wrong != 0 || !lat.Checked {
		t.Errorf("clean run has wrong bytes: %+v %+v", small, lat)
	}
}

// A ping-pong that delivers its payload in every second round only, the last one
// included, leaves a right final payload: only the check of every round, as its signal
// comes, catches the others.
func TestPingPongChecksEveryRound(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"latency"}, Impls: []string{"memcpy"}, MinSize: 8, MaxSize: 8, Factor: 2,
		Iters: 2, Warmup: 0, Reps: 1, LatencySize: 64}
	rows := runPairStopping(t, spec, &stopAfter{good: 1 << 30, everyOther: true})
	if rounds := LatencyRounds(spec); len(rows) != 1 || rows[0].Wrong != 8*int64(rounds/2) {
		t.Fatalf("payload of every second round lost: %+v, want %d wrong bytes (8 per round)", rows, 8*(rounds/2))
	}
	if rows := runPair(t, spec, nil); rows[0].Wrong != 0 || !rows[0].Checked {
		t.Errorf("a clean ping-pong: %+v", rows[0])
	}
}

// firstOnly delivers the first `first` puts and gets of every measurement (counted
// from the BeforeMeasure hook) and none after: timed operations that do nothing once
// the warm-up has.
type firstOnly struct {
	backend.Backend
	first, ops int
}

func (f *firstOnly) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if f.ops++; f.ops > f.first {
		return nil
	}
	return f.Backend.Put(dst, src, peer, l)
}

func (f *firstOnly) Get(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if f.ops++; f.ops > f.first {
		return nil
	}
	return f.Backend.Get(dst, src, peer, l)
}

// The windows repeat every shiftSlots operations: with 65 operations a measurement the
// warm-up's window was the last one's, so a destination only the warm-up wrote passed
// for it. No earlier operation on a lane may send the last one's window.
func TestOnlyWarmUpDeliveredFails(t *testing.T) {
	for _, c := range []struct{ iters, overlap int }{{shiftSlots, 1}, {2 * shiftSlots, 2}, {shiftSlots + 3, 1}} {
		for _, op := range []string{"put", "get"} {
			spec := result.BenchSpec{Ops: []string{op}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2,
				Iters: c.iters, Warmup: 1, Reps: 2, LatencySize: 8, Overlap: c.overlap, PerIterMax: 1 << 10}
			rows := runPair(t, spec, nil)
			if len(rows) != 1 || rows[0].Wrong != 0 || !rows[0].Checked {
				t.Fatalf("%s, %d iterations, overlap %d: a clean run: %+v", op, c.iters, c.overlap, rows)
			}
			f := &firstOnly{first: c.overlap} // the first operation of every lane
			rows = runPair(t, spec, func(b backend.Backend) backend.Backend { f.Backend = b; return f }, func(r *Runner) {
				if r.B.Rank() == 0 {
					r.BeforeMeasure = func(int) { f.ops = 0 }
				}
			})
			if len(rows) != 1 || rows[0].Wrong == 0 {
				t.Errorf("%s, %d iterations, overlap %d: only the warm-ups delivered, yet it passed: %+v", op, c.iters, c.overlap, rows)
			}
		}
	}
}

// slowBroken loses the puts of one launch shape and takes its time over them: --tune
// tries it, finds wrong bytes, and picks a faster shape that works.
type slowBroken struct {
	backend.Backend
	blocks int
}

func (s slowBroken) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	if l.Blocks == s.blocks {
		time.Sleep(time.Millisecond)
		return nil
	}
	return s.Backend.Put(dst, src, peer, l)
}

// The trials of --tune are checked like any measurement: wrong bytes in a shape it did
// not pick still fail the row.
func TestTuneTrialsCount(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put"}, Impls: []string{"triton"}, MinSize: 64, MaxSize: 64, Factor: 2,
		Iters: 4, Warmup: 1, Reps: 2, LatencySize: 8, Tune: true, TuneWarps: []int{4}}
	rows := runPair(t, spec, nil)
	if len(rows) != 1 || rows[0].Wrong != 0 || !rows[0].Checked {
		t.Fatalf("a clean tuned run: %+v", rows)
	}
	rows = runPair(t, spec, func(b backend.Backend) backend.Backend { return slowBroken{b, 2} })
	if len(rows) != 1 || rows[0].Blocks == 2 || rows[0].Wrong != 64 {
		t.Errorf("a shape that lost its puts in its trial: %+v, want another shape picked and its 64 wrong bytes counted", rows)
	}
	// The first wrong byte names the trial's shape, not the one the row reports.
	if w := rows[0].FirstWrong; w == nil || w.Where != "in a --tune trial of 2 blocks x 4 warps" {
		t.Errorf("first wrong %+v, want it in the 2-block trial", w)
	}
}

// marking counts the puts rank 0 makes and notes how many had been made at each
// MarkProgress (backend.Progresser).
type marking struct {
	backend.Backend
	puts  int
	marks []int
}

func (m *marking) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	m.puts++
	return m.Backend.Put(dst, src, peer, l)
}

func (m *marking) MarkProgress() error { m.marks = append(m.marks, m.puts); return nil }

// Every measurement marks its first warm-up, and only that (the GPU backend waits for
// the mark, bounded, before the unbounded wait for the timed window); none without
// warm-ups.
func TestBenchMarksTheFirstWarmUp(t *testing.T) {
	for _, warmup := range []int{2, 0} {
		spec := result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2,
			Iters: 3, Warmup: warmup, Reps: 2, LatencySize: 8}
		m := &marking{}
		runPair(t, spec, func(b backend.Backend) backend.Backend { m.Backend = b; return m })
		var want []int
		if warmup > 0 {
			per := warmup + spec.Iters // puts per measurement
			for rep := range spec.Reps {
				want = append(want, rep*per+1)
			}
		}
		if !slices.Equal(m.marks, want) {
			t.Errorf("warmup %d: marked after puts %v, want %v (%d puts in all)", warmup, m.marks, want, m.puts)
		}
	}
}

// A row that failed says where its first wrong byte was, on which rank, and what was
// there: a put that delivers nothing after the first measurement leaves the poison
// (the complement of what should have arrived) at byte 0 of rank 1's window.
func TestWrongRowSaysWhereItFirstWent(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 1 << 10, Factor: 2,
		Iters: 3, Warmup: 1, Reps: 3, LatencySize: 8}
	rows := runPairStopping(t, spec, &stopAfter{good: 1})
	if len(rows) != 1 || rows[0].Wrong == 0 {
		t.Fatalf("rows %+v", rows)
	}
	w := rows[0].FirstWrong
	if w == nil {
		t.Fatal("no first_wrong")
	}
	got, err1 := hex.DecodeString(w.Got)
	want, err2 := hex.DecodeString(w.Want)
	if err1 != nil || err2 != nil || w.Rank != 1 || w.Byte != 0 || len(got) != 8 || len(want) != 8 {
		t.Fatalf("first_wrong %+v", w)
	}
	for i := range got {
		if got[i] != ^want[i] {
			t.Errorf("byte %d: got %02x, want the poison %02x", i, got[i], ^want[i])
		}
	}
	res := result.Result{Rows: rows}
	if f := res.RowFailures(); len(f) != 1 || !strings.HasSuffix(f[0], fmt.Sprintf("wrong bytes (first at rank 1, byte 0: %s where %s belongs)", w.Got, w.Want)) {
		t.Errorf("failures %q", f)
	}
	// Rows that passed carry none.
	if rows := runPairStopping(t, spec, &stopAfter{good: 100}); rows[0].Wrong != 0 || rows[0].FirstWrong != nil {
		t.Errorf("a row that passed: %+v", rows[0])
	}
}

// lateRounds is a backend whose ping-pong says that 3 rounds' numbers were not there
// with their signals.
type lateRounds struct{ backend.Backend }

func (l lateRounds) PingPong(dst, src, sig, stamps backend.Buffer, n int64, rounds, peer int, initiator bool, la backend.Launch) (backend.PingPongResult, error) {
	pp, err := pingPong(l.Backend, dst, src, sig, n, rounds, peer, initiator, la)
	pp.Late = 3
	return pp, err
}

// A latency row that failed only on late round numbers says so where its first wrong
// byte would be.
func TestLatencyLateRoundsSaySo(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"latency"}, Impls: []string{"memcpy"}, MinSize: 8, MaxSize: 8, Factor: 2, Iters: 2, Warmup: 1, Reps: 1, LatencySize: 8}
	rows := runPair(t, spec, func(b backend.Backend) backend.Backend { return lateRounds{b} })
	if len(rows) != 1 || rows[0].Wrong != 24 {
		t.Fatalf("rows %+v", rows)
	}
	f := (result.Result{Rows: rows}).RowFailures()
	if len(f) != 1 || !strings.HasSuffix(f[0], "24 wrong bytes (first at rank 0 (the round number: 3 of 100 rounds found an earlier round's there when their signal came))") {
		t.Errorf("failures %q", f)
	}
}

// noDevicePingPong is a backend whose implementation has no ping-pong kernel of
// signals (a user's signal kernel on the GPU): SignalPingPong says so.
type noDevicePingPong struct {
	backend.Backend
	backend.Signaler
	asked *int
}

func (n noDevicePingPong) SignalPingPong(sig, stamps backend.Buffer, iters, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	*n.asked++
	return backend.PingPongResult{}, backend.ErrNoSignalPingPong
}

// Where the implementation has no ping-pong kernel of signals, the signal row is the
// host's ping-pong of its signal ops and waits, checked as the device's is.
func TestSignalPingPongFromTheHost(t *testing.T) {
	spec := result.BenchSpec{Ops: []string{"signal"}, Impls: []string{"memcpy"}, MinSize: 8, MaxSize: 8,
		Factor: 2, Iters: 4, Warmup: 1, Reps: 2, LatencySize: 8}
	asked := 0
	rows := runPair(t, spec, func(b backend.Backend) backend.Backend {
		return noDevicePingPong{Backend: b, Signaler: b.(backend.Signaler), asked: &asked}
	})
	if len(rows) != 1 || !rows[0].Checked || rows[0].Wrong != 0 || len(rows[0].TimesUS) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if asked == 0 {
		t.Error("the device's ping-pong was never asked for")
	}
}
