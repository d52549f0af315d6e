package result

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/ops"
)

func TestSpecSizesAndPairs(t *testing.T) {
	s := BenchSpec{MinSize: 4, MaxSize: 256 << 20, Factor: 2}
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
	// Rounded to 6 digits, not carried to 17.
	if want := 95.3251; r.GBps != want {
		t.Errorf("GB/s = %v, want %v", r.GBps, want)
	}
}

// Figures are rounded to what they resolve; a result written before, to 17 digits,
// still validates.
func TestFiguresAreRounded(t *testing.T) {
	r := row(10.123456789, 11, 12.000000000000002)
	if r.TimesUS[0] != 10.1235 || r.MaxUS != 12 || r.GBps != 95.3251 {
		t.Errorf("row %+v", r)
	}
	old := r
	old.TimesUS = []float64{10.123456789, 11, 12.000000000000002}
	old.MaxUS, old.GBps = 12.000000000000002, float64(1<<20)/11e3
	if err := old.derived(); err != nil {
		t.Errorf("an unrounded result: %v", err)
	}
}

func row(times ...float64) Row {
	r := Row{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, TimesUS: times, Checked: true}
	r.Finish()
	return r
}

func TestCompareReportsMissingRowsOnBothSides(t *testing.T) {
	a, b, c := row(10), row(10), row(10)
	b.Size, c.Size = 2<<20, 4<<20
	cs := CompareResults(Result{Rows: []Row{a, b}}, Result{Rows: []Row{a, c}}, CompareOptions{ThresholdPct: 5})
	var missing []string
	for _, x := range cs {
		if x.Verdict == VerdictMissing {
			missing = append(missing, x.Label+": "+x.Why)
		}
	}
	want := []string{"put triton 4M 0->1: only in the new result", "put triton 2M 0->1: only in the old result"}
	if !reflect.DeepEqual(missing, want) {
		t.Errorf("missing rows %q, want %q", missing, want)
	}
}

// Rows an incomplete result never reached are not measured, not missing; results of
// other shapes are refused, naming the difference.
func TestCompareIncompleteAndOtherShapes(t *testing.T) {
	a, b := row(10, 10, 10), row(10, 10, 10)
	b.Size = 2 << 20
	whole := Result{Header: Header{Backend: "cpu", NProc: 2, Spec: BenchSpec{Ops: []string{"put"}, Iters: 20}}, Rows: []Row{a, b}, OK: true}
	part := whole
	part.Rows, part.Incomplete = []Row{a}, &Incomplete{Reason: "interrupted by SIGINT", Rows: 1, Planned: 2}
	cs := CompareResults(whole, part, CompareOptions{ThresholdPct: 5})
	if len(cs) != 2 || cs[1].Verdict != VerdictUnmeasured || cs[1].Failed() {
		t.Errorf("compared %+v", cs)
	}
	// compare's JSON is keyed by the row's fields, not by a formatted string.
	enc, _ := json.Marshal(cs[0])
	for _, key := range []string{`"op":"put"`, `"impl":"triton"`, `"size":1048576`, `"src":0`, `"dst":1`, `"old_us":10`, `"change_pct":0`} {
		if !strings.Contains(string(enc), key) {
			t.Errorf("compare's JSON %s lacks %s", enc, key)
		}
	}
	if err := SameShape(whole, part); err != nil {
		t.Errorf("a partial run of one sweep: %v", err)
	}
	four := whole
	four.Header.NProc = 4
	if err := SameShape(whole, four); err == nil || !strings.Contains(err.Error(), "ranks 2 in the old, 4 in the new") {
		t.Errorf("2 ranks against 4: %v", err)
	}
	other := whole
	other.Header.Spec.Ops = []string{"put", "get"}
	if err := SameShape(whole, other); err == nil || !strings.Contains(err.Error(), "ops [put] in the old, [get put] in the new") {
		t.Errorf("other ops: %v", err)
	}
}

func TestValidateAndFailures(t *testing.T) {
	if err := (Result{}).Validate(); err == nil {
		t.Error("an empty result ({}) validated")
	}
	good := Result{Header: Header{Backend: "cpu", NProc: 2, Spec: BenchSpec{Ops: []string{"put"}, Iters: 20, Reps: 1}}, Rows: []Row{row(1)}, OK: true}
	if err := good.Validate(); err != nil || len(good.Failures()) != 0 {
		t.Errorf("good result: %v, %v", err, good.Failures())
	}
	bad := good
	bad.OK, bad.Rows = false, []Row{row(1)}
	bad.Rows[0].Wrong = 3
	if f := bad.Failures(); len(f) != 1 || f[0] != "put triton 1M 0->1: 3 wrong bytes" {
		t.Errorf("failures %q", f)
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

// The grid column says what the row ran on: blocks of warps for a kernel, streams for
// the copy engine (no warps, as result files have always recorded it); latency's table
// says what its time is.
func TestTablesSayWhatTheGridAndTimeAre(t *testing.T) {
	kernel := Row{Op: "put", Impl: "triton", Size: 1 << 20, Src: 0, Dst: 1, Blocks: 8, Warps: 16, MedUS: 10, GBps: 100, Checked: true}
	copies := kernel
	copies.Impl, copies.Blocks, copies.Warps = "copy-engine", 4, 0
	lat := Row{Op: "latency", Impl: "triton", Size: 8, Src: 0, Dst: 1, MedUS: 1.5, Checked: true}
	tabs := Tables(Result{Rows: []Row{kernel, copies, lat}})
	if len(tabs) != 2 {
		t.Fatalf("%d tables, want put and latency", len(tabs))
	}
	if rows := tabs[0].Rows; rows[0][3] != "8x16w" || rows[1][3] != "4 streams" {
		t.Errorf("grids %q and %q, want 8x16w and 4 streams", rows[0][3], rows[1][3])
	}
	if tabs[1].Title != "latency (half round trip of a put with signal)" || tabs[1].Rows[0][7] != "-" {
		t.Errorf("latency table %q, GB/s %q", tabs[1].Title, tabs[1].Rows[0][7])
	}
}

// A collective's table has a kernel column where some of its rows name the kernel that
// ran them, "-" in the others; none where no row does.
func TestTablesShowKernelOnlyWhereNamed(t *testing.T) {
	row := Row{Op: "all-reduce", Impl: "nccl", Size: 1 << 20, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", MedUS: 10, GBps: 100, BusGBps: 100, Checked: true}
	plain := Tables(Result{Rows: []Row{row}})
	if len(plain) != 1 || slices.Contains(plain[0].Header, "kernel") {
		t.Fatalf("without kernels: %+v", plain)
	}
	named := row
	named.Impl, named.Algo, named.Kernel = "triton", "one-shot", "reduce_ll128_bf16"
	tabs := Tables(Result{Rows: []Row{row, named}})
	h, rows := tabs[0].Header, tabs[0].Rows
	if len(h) != 13 || h[4] != "algo" || h[5] != "kernel" || rows[0][5] != "-" || rows[1][5] != "reduce_ll128_bf16" || rows[1][6] != "10.00" {
		t.Errorf("header %v, rows %v", h, rows)
	}
}

// The redop column shows where the sweep names an operator, after the element type.
func TestTablesShowRedOpWhereNamed(t *testing.T) {
	row := Row{Op: "all-reduce", Impl: "memcpy", Size: 1 << 10, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", RedOp: "sum", MedUS: 10, Checked: true}
	if h := Tables(Result{Rows: []Row{row}})[0].Header; slices.Contains(h, "redop") {
		t.Errorf("a sweep of sums shows a redop column: %v", h)
	}
	max := row
	max.RedOp = "max"
	tab := Tables(Result{Rows: []Row{row, max}})[0]
	if tab.Header[3] != "redop" || tab.Rows[0][3] != "sum" || tab.Rows[1][3] != "max" {
		t.Errorf("header %v, rows %v", tab.Header, tab.Rows)
	}
	if row.Key() == max.Key() || row.Key().RedOp != "" {
		t.Errorf("keys: sum %+v, max %+v", row.Key(), max.Key())
	}
}

func TestIterStats(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	got := IterStatsOf(ds, 0.5)
	if got.N != 100 || got.P50US != 25 || got.P99US != 49.5 || got.MaxUS != 50 {
		t.Errorf("iterStats = %+v", got)
	}
}

// Runs pool into one result whose rows carry every run's repetitions; runs of another
// sweep, or a failed run, do not pool quietly.
func TestPool(t *testing.T) {
	run := func(times ...float64) Result {
		return Result{Header: Header{Backend: "cpu", NProc: 2, Spec: BenchSpec{Ops: []string{"put"}, Iters: 20, Reps: len(times)}}, OK: true,
			Rows: []Row{{Op: "put", Impl: "memcpy", Size: 1 << 20, Src: 0, Dst: 1, TimesUS: times, Checked: true}}}
	}
	p, err := Pool([]Result{run(10, 11), run(14, 15), run(16, 17)}, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Rows[0]; len(r.TimesUS) != 6 || r.MedUS != 14.5 || p.Header.Spec.Reps != 2 || p.Header.Spec.Runs != 3 ||
		!slices.Equal(r.RunMedians(p.Header.Spec.Reps), []float64{10.5, 14.5, 16.5}) {
		t.Errorf("pooled row %+v, reps %d, runs %d; want 3 runs of 2", r, p.Header.Spec.Reps, p.Header.Spec.Runs)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("a pooled result: %v", err)
	}
	// A result of several runs pools as those runs.
	if q, err := Pool([]Result{p, run(1, 2)}, []string{"p", "d"}); err != nil || q.Header.Spec.Runs != 4 {
		t.Errorf("pooled again: %d runs, %v", q.Header.Spec.Runs, err)
	}
	if _, err := Pool([]Result{run(10, 11), run(14, 15, 16)}, []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "b has 3 repetitions a run, a has 2: pool runs of one sweep") {
		t.Errorf("runs of other repetitions: %v", err)
	}
	other := run(1)
	other.Rows[0].Size = 4096
	if _, err := Pool([]Result{run(1), other}, []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "pool runs of one sweep") {
		t.Errorf("pooling another sweep: %v", err)
	}
	bad := run(1)
	bad.OK, bad.Rows[0].Wrong = false, 7
	p, _ = Pool([]Result{run(1), bad}, []string{"a", "b"})
	if p.OK || p.Rows[0].Wrong != 7 {
		t.Errorf("a failed run pooled into ok %v, wrong %d", p.OK, p.Rows[0].Wrong)
	}
	// Runs of a user's implementation built from other sources measured other code.
	mine := func(src string) Result {
		r := run(1)
		r.Header.Kernels = map[string]KernelSource{"mine": {Dir: "k", Source: src}}
		return r
	}
	if _, err := Pool([]Result{mine("aaaaaaaaaaaaaaaa"), mine("aaaaaaaaaaaaaaaa")}, []string{"a", "b"}); err != nil {
		t.Errorf("pooling one build: %v", err)
	}
	if _, err := Pool([]Result{mine("aaaaaaaaaaaaaaaa"), mine("bbbbbbbbbbbbbbbb")}, []string{"a", "b"}); err == nil ||
		err.Error() != "b ran mine built from sources bbbbbbbbbbbb, a from aaaaaaaaaaaa: pool runs of one build" {
		t.Errorf("pooling two builds: %v", err)
	}
	// Behind a run that names no build (an older result), two builds still do not pool.
	if _, err := Pool([]Result{run(1), mine("aaaaaaaaaaaaaaaa"), mine("bbbbbbbbbbbbbbbb")}, []string{"a", "b", "c"}); err == nil ||
		err.Error() != "c ran mine built from sources bbbbbbbbbbbb, b from aaaaaaaaaaaa: pool runs of one build" {
		t.Errorf("pooling two builds behind an older result: %v", err)
	}
	// Nor one source built by two Tritons.
	t36, t37 := mine("aaaaaaaaaaaaaaaa"), mine("aaaaaaaaaaaaaaaa")
	t36.Header.Kernels["mine"] = KernelSource{Source: "aaaaaaaaaaaaaaaa", Triton: "3.6.0"}
	t37.Header.Kernels["mine"] = KernelSource{Source: "aaaaaaaaaaaaaaaa", Triton: "3.7.0"}
	if _, err := Pool([]Result{t36, t37}, []string{"a", "b"}); err == nil ||
		err.Error() != "b ran mine built from sources aaaaaaaaaaaa (Triton 3.7.0), a from aaaaaaaaaaaa (Triton 3.6.0): pool runs of one build" {
		t.Errorf("pooling two Tritons' builds: %v", err)
	}
	// A later run's first wrong byte comes with its wrong bytes.
	failed := run(1)
	failed.OK, failed.Rows[0].Wrong, failed.Rows[0].FirstWrong = false, 8, &WrongAt{Rank: 1, Got: "00", Want: "ff"}
	if p, _ := Pool([]Result{run(1), failed}, []string{"a", "b"}); p.Rows[0].FirstWrong == nil || p.Rows[0].FirstWrong.Rank != 1 {
		t.Errorf("pooled first wrong %+v", p.Rows[0].FirstWrong)
	}
	// The first run's rows are not changed by pooling.
	a := run(1, 2)
	Pool([]Result{a, run(3)}, []string{"a", "b"})
	if len(a.Rows[0].TimesUS) != 2 {
		t.Error("pooling changed its first run")
	}
}

// The header names where a user's implementation came from.
func TestHeaderNamesUserKernels(t *testing.T) {
	var b strings.Builder
	PrintHeader(&b, Result{Header: Header{Backend: "nvshmem", NProc: 2, Kernels: map[string]KernelSource{
		"mine": {Dir: "mykernels", Source: "0123456789abcdef0123", Triton: "3.6.0"}, "alpha": {Dir: "k2", Source: "ffff"}}}})
	want := "# user kernels alpha: from k2, sources sha256 ffff\n# user kernels mine: from mykernels, sources sha256 0123456789ab, Triton 3.6.0\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("header:\n%s\nwant it to hold\n%s", b.String(), want)
	}
}

// A p99 is given only from MinP99Samples operations or more: of 20 it is their slowest.
func TestP99NeedsEnoughSamples(t *testing.T) {
	ds := make([]time.Duration, 20)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Microsecond
	}
	if st := IterStatsOf(ds, 1); st.P99US != 0 || st.N != 20 || st.P50US != 10 || st.MaxUS != 20 {
		t.Errorf("20 samples: %+v", st)
	}
	ds = make([]time.Duration, 200)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Microsecond
	}
	if st := IterStatsOf(ds, 1); st.P99US != 198 || st.MaxUS != 200 {
		t.Errorf("200 samples: %+v", st)
	}
}

// CSV leaves a field that does not apply empty, not 0.
func TestCSVLeavesWhatDoesNotApplyEmpty(t *testing.T) {
	lat := row(2, 2, 2)
	lat.Op, lat.GBps = "latency", 0
	coll := Row{Op: "all-reduce", Impl: "memcpy", Size: 1024, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", TimesUS: []float64{1}, Checked: true}
	coll.Finish()
	// A fused row carries its shape, its rate and its GEMM alone; the others leave them
	// empty.
	fused := Row{Op: "all-gather-matmul", Impl: "triton", Size: 4096, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", TimesUS: []float64{2},
		Checked: true, Matmul: &ops.Matmul{M: 64, N: 128, K: 32}, GemmUS: 1.5}
	fused.Finish()
	var b strings.Builder
	if err := CSV(&b, Result{Rows: []Row{lat, coll, fused}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"latency,triton,1048576,0,1,false,,,2,2,2,,,0,1,,,,,,,,,,,,,,,,,",
		"all-reduce,memcpy,1024,,,false,,,1,1,1,1.024,,0,1,,,,,,2,bf16,,1.024,,,,,,,,",
		"all-gather-matmul,triton,4096,,,false,,,2,2,2,2.048,,0,1,,,,,,2,bf16,,,,,,64,128,32,0.262144,1.5",
	}
	if !reflect.DeepEqual(lines[1:], want) {
		t.Errorf("CSV rows\n%s\nwant\n%s", strings.Join(lines[1:], "\n"), strings.Join(want, "\n"))
	}
}
