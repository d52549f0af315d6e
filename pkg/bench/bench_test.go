package bench

import (
	"bytes"
	"reflect"
	"sync"
	"testing"

	"github.com/symmem/symmem/pkg/backend"
	"github.com/symmem/symmem/pkg/backend/cpu"
	"github.com/symmem/symmem/pkg/topo"
)

func TestSpecSizesAndPairs(t *testing.T) {
	s := Spec{MinSize: 4, MaxSize: 256 << 20, Factor: 2}
	sizes := s.Sizes()
	if len(sizes) != 27 || sizes[0] != 4 || sizes[26] != 256<<20 {
		t.Errorf("sizes = %v", sizes)
	}
	if p := s.Pairs(4); len(p) != 1 || len(p[0]) != 2 || p[0][1] != (Pair{1, 3}) {
		t.Errorf("pairs = %v", p)
	}
	s.Matrix = true
	if p := s.Pairs(3); len(p) != 6 {
		t.Errorf("matrix rounds = %d, want 6", len(p))
	}
}

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

func TestMergeAndCompare(t *testing.T) {
	sender := []Row{{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, TimesUS: []float64{10, 12, 11}, Checked: false}}
	receiver := []Row{{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, Wrong: 3, Checked: true}}
	rows := Merge([][]Row{sender, receiver})
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	if r.MedUS != 11 || r.MinUS != 10 || r.MaxUS != 12 || r.Wrong != 3 || !r.Checked {
		t.Errorf("merged row %+v", r)
	}
	if want := float64(1<<20) / 11e3; r.GBps != want {
		t.Errorf("GB/s = %g, want %g", r.GBps, want)
	}
	old := Result{Rows: rows}
	slower := rows[0]
	slower.GBps *= 0.9
	cs := CompareResults(old, Result{Rows: []Row{slower}}, 5)
	if len(cs) != 1 || !cs[0].Regression {
		t.Errorf("a 10%% drop is no regression at 5%%: %+v", cs)
	}
	cs = CompareResults(old, Result{Rows: []Row{slower}}, 15)
	if cs[0].Regression {
		t.Error("a 10% drop is a regression at 15%")
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
func runPair(t *testing.T, spec Spec, wrap func(backend.Backend) backend.Backend, links ...LinkCounter) []Row {
	t.Helper()
	cpu.ShmDir = t.TempDir()
	path := cpu.HeapPath("bench")
	heap := spec.HeapBytes()
	if err := cpu.Create(path, 2, heap); err != nil {
		t.Fatal(err)
	}
	var rows [2][]Row
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
			run := &Runner{B: be, S: spec}
			if r == 0 && len(links) > 0 {
				run.Links = links[0]
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
	return Merge(rows[:])
}

func TestOverlapChecksEveryLane(t *testing.T) {
	spec := Spec{Ops: []string{"put", "get", "put-signal"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 4 << 10,
		Factor: 4, Iters: 4, Warmup: 1, Reps: 2, Overlap: 3, LatencySize: 8}
	rows := runPair(t, spec, nil)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	for _, r := range rows {
		if !r.Checked || r.Wrong != 0 || r.Overlap != 3 || len(r.TimesUS) != 2 {
			t.Errorf("row %s: checked %v, wrong %d, overlap %d, %d times", r.Key(), r.Checked, r.Wrong, r.Overlap, len(r.TimesUS))
		}
	}
	spec.Ops = []string{"put"}
	rows = runPair(t, spec, func(b backend.Backend) backend.Backend { return &dropLane{Backend: b, lane: 1} })
	for _, r := range rows {
		if r.Wrong == 0 {
			t.Errorf("row %s: puts lost on lane 1 went unnoticed", r.Key())
		}
	}
}

func TestLinkTrafficPerRow(t *testing.T) {
	spec := Spec{Ops: []string{"put", "latency"}, Impls: []string{"memcpy"}, MinSize: 256 << 10, MaxSize: 1 << 20,
		Factor: 4, Iters: 16, Warmup: 1, Reps: 3, LatencySize: 8}
	links := &fakeLinks{perLoop: 17 << 20} // 1 warm-up and 16 timed puts of 1M
	rows := runPair(t, spec, nil, links)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[2].Op != "latency" || rows[2].Link != nil {
		t.Errorf("latency row carries link traffic: %+v", rows[2])
	}
	if rows[0].Link != nil {
		t.Errorf("256K x 16 is under MinCounted, yet counted: %+v", rows[0].Link)
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

func TestTablesShowWireColumnsOnlyWithCounters(t *testing.T) {
	row := Row{Op: "put", Impl: "triton", Size: 256 << 20, Src: 0, Dst: 1, MedUS: 730, GBps: 367.7, Checked: true}
	plain := Tables(Result{Rows: []Row{row}})
	if len(plain) != 1 || len(plain[0].Header) != 10 {
		t.Fatalf("without counters: %+v", plain)
	}
	counted := row
	counted.Link = &LinkTraffic{WireGBps: 416.3, WirePerByte: 1.1322}
	tabs := Tables(Result{Rows: []Row{row, counted}})
	h, rows := tabs[0].Header, tabs[0].Rows
	if len(h) != 12 || h[10] != "wire GB/s" || rows[0][10] != "-" || rows[1][10] != "416.3" || rows[1][11] != "1.132" {
		t.Errorf("header %v, rows %v", h, rows)
	}
}
