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
	bad := Row{Op: "get", Impl: "memcpy", Size: 1 << 10, Src: 0, Dst: 1, TimesUS: []float64{3, 3, 3}, Wrong: 1024, Checked: true}
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
	// The committed examples come from real GPU runs (some hold a row that failed its
	// check): every one must still load.
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.json"))
	if len(files) == 0 {
		t.Fatal("no docs/*.json")
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
		{"zero iters", func(r *Result) { r.Header.Spec.Iters = 0 }, "header.spec.iters is 0: bench times 1 to 1000000 operations per repetition"},
		{"negative iters", func(r *Result) { r.Header.Spec.Iters = -4 }, "header.spec.iters is -4"},
		{"too many iters", func(r *Result) { r.Header.Spec.Iters = 1_000_001 }, "header.spec.iters is 1000001"},
		{"zero reps", func(r *Result) { r.Header.Spec.Reps = 0 }, "header.spec.reps is 0: bench makes at least 1 repetition per row"},
		{"negative warmup", func(r *Result) { r.Header.Spec.Warmup = -1 }, "header.spec.warmup is -1"},
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
			for _, w := range []string{f + " is not a symmem bench --json result: ", c.want, "write it again with symmem bench --json"} {
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
