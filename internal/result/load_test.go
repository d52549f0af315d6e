package result

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// written is a result as bench --json writes it: a point-to-point row, a latency row
// (no bandwidth), a collective and a row whose data was wrong (still a result bench
// writes, one that failed its checks).
func written() Result {
	put := Row{Op: "put", Impl: "memcpy", Size: 64 << 10, Src: 0, Dst: 1, TimesUS: []float64{10, 12, 11}, Checked: true,
		PerIter: &IterStats{N: 20, P50US: 0.5, P99US: 1, MaxUS: 2}}
	lat := Row{Op: "latency", Impl: "memcpy", Size: 8, Src: 0, Dst: 1, TimesUS: []float64{0.6, 0.7, 0.65}, Checked: true}
	ar := Row{Op: "all-reduce", Impl: "nccl", Size: 1 << 20, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", TimesUS: []float64{20, 21, 22}, Checked: true}
	bad := Row{Op: "get", Impl: "memcpy", Size: 1 << 10, Src: 0, Dst: 1, TimesUS: []float64{3, 3, 3}, Wrong: 1024, Checked: true,
		FirstWrong: &WrongAt{Rank: 0, Byte: 16, Got: "0000", Want: "ffff"}}
	rows := []Row{put, lat, ar, bad}
	for i := range rows {
		rows[i].Finish()
	}
	return Result{Header: Header{Backend: "cpu", NProc: 2, Spec: BenchSpec{Ops: []string{"put", "get", "latency", "all-reduce"},
		Impls: []string{"memcpy"}, Iters: 20, Warmup: 5, Reps: 3}}, Rows: rows, OK: false}
}

func save(t *testing.T, r Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadTakesWhatBenchWrites(t *testing.T) {
	if _, err := Load(save(t, written())); err != nil {
		t.Fatalf("a result as bench writes it: %v", err)
	}
	// Before --iters had a bound, bench wrote results with more.
	many := written()
	many.Header.Spec.Iters, many.Header.Spec.Warmup = 1_500_000, 2_000_000
	if _, err := Load(save(t, many)); err != nil {
		t.Fatalf("a result of 1500000 iterations: %v", err)
	}
	// The committed examples come from real GPU runs (some hold a row that failed its
	// check): every one must still load.
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "results", "*.json"))
	if len(files) == 0 {
		t.Fatal("no docs/results/*.json")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestLoadRefusesWhatBenchCannotWrite: hand-edited or truncated results are refused
// with the file, the row and the field named, and what to do.
func TestLoadRefusesWhatBenchCannotWrite(t *testing.T) {
	cases := []struct {
		name string
		edit func(r *Result)
		want string
	}{
		{"nproc in the millions", func(r *Result) { r.Header.NProc = 5_000_000 }, "header.nproc is 5000000: bench runs 2 to 1024 ranks"},
		{"nproc just too many", func(r *Result) { r.Header.NProc = 1025 }, "header.nproc is 1025"},
		{"zero iters", func(r *Result) { r.Header.Spec.Iters = 0 }, "header.spec.iters is 0: bench times at least 1 operation per repetition"},
		{"negative iters", func(r *Result) { r.Header.Spec.Iters = -4 }, "header.spec.iters is -4"},
		{"zero reps", func(r *Result) { r.Header.Spec.Reps = 0 }, "header.spec.reps is 0: bench makes at least 1 repetition per row"},
		{"negative warmup", func(r *Result) { r.Header.Spec.Warmup = -1 }, "header.spec.warmup is -1"},
		{"empty times", func(r *Result) { r.Rows[0].TimesUS = []float64{} }, "row 1 (put memcpy 64K 0->1): times_us holds 0 times: bench writes one per repetition, and header.spec.reps is 3"},
		{"no times", func(r *Result) { r.Rows[2].TimesUS = nil }, "row 3 (all-reduce nccl 1M 2 ranks): times_us holds 0 times"},
		{"a time cut off", func(r *Result) { r.Rows[1].TimesUS = r.Rows[1].TimesUS[:2] }, "row 2 (latency memcpy 8B 0->1): times_us holds 2 times"},
		{"a zero time", func(r *Result) { r.Rows[0].TimesUS[1] = 0 }, "row 1 (put memcpy 64K 0->1): times_us[1] is 0: bench writes a positive time per operation"},
		{"a negative time", func(r *Result) { r.Rows[3].TimesUS[2] = -3 }, "row 4 (get memcpy 1K 0->1): times_us[2] is -3"},
		{"every time zero", func(r *Result) {
			for i := range r.Rows {
				row := &r.Rows[i]
				for j := range row.TimesUS {
					row.TimesUS[j] = 0
				}
				row.MedUS, row.MinUS, row.MaxUS, row.GBps, row.BusGBps = 0, 0, 0, 0, 0
			}
		}, "row 1 (put memcpy 64K 0->1): times_us[0] is 0"},
		{"median zero", func(r *Result) { r.Rows[0].MedUS = 0 }, "row 1 (put memcpy 64K 0->1): time_us 0, min_us 10, max_us 12: bench writes the median, least and greatest of times_us"},
		{"min above median", func(r *Result) { r.Rows[1].MinUS = 5 }, "row 2 (latency memcpy 8B 0->1): time_us 0.65, min_us 5, max_us 0.7"},
		{"negative wrong", func(r *Result) { r.Rows[0].Wrong = -7 }, "row 1 (put memcpy 64K 0->1): wrong is -7: bench counts wrong bytes from 0"},
		{"negative bandwidth", func(r *Result) { r.Rows[0].GBps = -1 }, "row 1 (put memcpy 64K 0->1): gbps is -1: bench writes a bandwidth of 0 or more"},
		{"negative bus bandwidth", func(r *Result) { r.Rows[2].BusGBps = -2 }, "row 3 (all-reduce nccl 1M 2 ranks): busbw is -2"},
		{"a rank that is not there", func(r *Result) { r.Rows[0].Dst = 9 }, "row 1 (put memcpy 64K 0->9): src 0, dst 9: bench pairs two different ranks from 0 to 1 (header.nproc is 2)"},
		{"a rank with itself", func(r *Result) { r.Rows[3].Dst = 0 }, "row 4 (get memcpy 1K 0->0): src 0, dst 0"},
		{"a collective of other ranks", func(r *Result) { r.Rows[2].Ranks = 3 }, "row 3 (all-reduce nccl 1M 3 ranks): ranks is 3: a collective takes every rank, and header.nproc is 2"},
		{"an op bench has not", func(r *Result) { r.Rows[0].Op = "frob" }, `row 1 (frob memcpy 64K 0->1): op "frob": bench measures put, get, put-signal, latency, all-reduce`},
		{"a collective without its ranks", func(r *Result) { r.Rows[0].Op = "all-reduce" }, "row 1 (all-reduce memcpy 64K 0->1): ranks is 0: a collective takes every rank, and header.nproc is 2"},
		{"a pair with ranks", func(r *Result) { r.Rows[2].Op = "put" }, "row 3 (put nccl 1M 2 ranks): ranks is 2: put is between two ranks (src, dst); bench writes ranks for collectives only"},
		{"a bandwidth edited", func(r *Result) { r.Rows[0].GBps *= 2 }, "row 1 (put memcpy 64K 0->1): gbps is 11.9156 where times_us gives 5.95782: bench derives it from times_us"},
		{"a median edited", func(r *Result) { r.Rows[0].MedUS = 10.99 }, "row 1 (put memcpy 64K 0->1): time_us is 10.99 where times_us gives 11"},
		{"a bus bandwidth edited", func(r *Result) { r.Rows[2].BusGBps = 99 }, "row 3 (all-reduce nccl 1M 2 ranks): busbw is 99 where times_us gives 49.9322"},
		{"a wire rate edited", func(r *Result) {
			r.Rows[0].Link = &LinkTraffic{PayloadBytes: 1 << 30, RawBytes: 1 << 31, WirePerByte: 2, WireGBps: 50}
		}, "row 1 (put memcpy 64K 0->1): link.wire_gbps is 50 where times_us and link.wire_per_byte give 11.9156: bench derives it from them"},
		{"a first wrong byte on a row that passed", func(r *Result) { r.Rows[0].FirstWrong = &WrongAt{Rank: 1, Got: "00", Want: "ff"} },
			"row 1 (put memcpy 64K 0->1): first_wrong names rank 1, byte 0, on a row of 0 wrong bytes: bench names the first of a row's wrong bytes, on a rank from 0 to 1"},
		{"a first wrong byte on a rank not there", func(r *Result) { r.Rows[3].FirstWrong = &WrongAt{Rank: 2, Got: "00", Want: "ff"} },
			"row 4 (get memcpy 1K 0->1): first_wrong names rank 2, byte 0, on a row of 1024 wrong bytes"},
		{"per-operation stats of nothing", func(r *Result) { r.Rows[0].PerIter.N = 0 }, "row 1 (put memcpy 64K 0->1): per_iter.n is 0: bench writes per-operation statistics of at least 1 operation"},
		{"negative per-operation time", func(r *Result) { r.Rows[0].PerIter.P99US = -1 }, "row 1 (put memcpy 64K 0->1): per_iter: p50_us 0.5, p99_us -1, max_us 2: bench writes times of 0 or more"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := written()
			c.edit(&r)
			f := save(t, r)
			_, err := Load(f)
			if err == nil {
				t.Fatalf("loaded; want %q", c.want)
			}
			msg := err.Error()
			for _, w := range []string{f + " is not a symmem bench {json} result: ", c.want, "write it again with symmem bench {json}"} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\nwant it to say %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
		})
	}
}

// TestLoadNamesANumberThatDoesNotFit: encoding/json only says "number" into "number".
func TestLoadNamesANumberThatDoesNotFit(t *testing.T) {
	r := written()
	r.Rows[0].Link = &LinkTraffic{PayloadBytes: 1}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(f, []byte(strings.Replace(string(b), `"payload_bytes":1`, `"payload_bytes":-1`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "rows.link.payload_bytes holds -1 where bench {json} writes a whole number of 0 or more; write it again with symmem bench {json}"
	if _, err := Load(f); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to say %q", err, want)
	}
}

// A row of the same measurement twice (a file edited by hand, or joined from two):
// compare matches one of them by key, and the other's wrong bytes would go unseen.
func TestLoadRefusesRepeatedRows(t *testing.T) {
	r := written()
	r.OK = true
	r.Rows = r.Rows[:3] // every row right
	again := r.Rows[0]
	again.Wrong = 5
	r.Rows = append([]Row{again}, r.Rows...)
	_, err := Load(save(t, r))
	if err == nil || !strings.Contains(err.Error(), "rows 1 and 2 are both put memcpy 64K 0->1") {
		t.Fatalf("a result with a row twice: %v", err)
	}
}
