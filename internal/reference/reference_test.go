package reference

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

var update = flag.Bool("update", false, "copy the figures of docs/results into reference.json")

const resultsDir = "../../docs/results"

// Every figure is the row of its docs/results file, to the digits results keep, and
// that file measured the machine the figure is filed under, the plain way (no graph,
// no overlap, no tuning, every byte checked): the figures cannot drift from the
// results the documents show. -update copies the files' figures in.
func TestShippedMatchesResults(t *testing.T) {
	tbl, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	changed := false
	for mi, m := range tbl.Machines {
		for fi, f := range m.Figures {
			res, err := result.Load(filepath.Join(resultsDir, f.Source))
			if err != nil {
				t.Fatalf("%s: %v", m.Name(), err)
			}
			h := res.Header
			gpu, why := gpuOf(h.GPUs)
			if h.NProc != m.NProc || h.Link != m.Link || gpu != m.GPU || why != "" {
				t.Errorf("%s: %s measured %s (%s), not %s", f.Source, f.Op, Name(gpu, h.NProc, h.Link), why, m.Name())
			}
			if s := h.Spec; s.Graph || s.Lanes() > 1 || s.Tune || s.Bidir || s.Blocks != 0 || s.Warps != 0 || s.RunCount() > 1 {
				t.Errorf("%s was not measured the way the key sweep measures (graph, overlap, tune, bidir, a fixed grid or pooled runs): %+v", f.Source, s)
			}
			i := slices.IndexFunc(res.Rows, func(r result.Row) bool { return keyOf(r) == f.Key() })
			if i < 0 {
				t.Errorf("%s has no row %+v", f.Source, f.Key())
				continue
			}
			r := res.Rows[i]
			if !r.Trusted() {
				t.Errorf("%s's row %s failed its checks (%d wrong)", f.Source, RowName(r), r.Wrong)
			}
			want := result.RoundSig(MetricOf(f.Op).Of(r), result.RateDigits)
			if f.Value != want {
				if *update {
					tbl.Machines[mi].Figures[fi].Value, changed = want, true
					continue
				}
				t.Errorf("%s %s: reference.json has %g, %s has %g (go test ./internal/reference -update)", m.Name(), RowName(r), f.Value, f.Source, want)
			}
		}
	}
	if changed {
		b, err := json.MarshalIndent(tbl, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("reference.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Every figure is a row the key sweep measures on its machine's ranks: none waits for
// a row that never comes.
func TestSweepMeasuresEveryFigure(t *testing.T) {
	tbl, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	s := Sweep(result.BenchSpec{Iters: 20, Warmup: 5, Reps: 3, Overlap: 1, LatencySize: 64})
	for _, m := range tbl.Machines {
		var keys []result.RowKey
		for _, op := range s.Ops {
			for _, impl := range s.Impls {
				for _, size := range s.Sizes() {
					if ops.Op(op).IsCollective() {
						keys = append(keys, result.RowKey{Op: op, Impl: impl, Size: size, Src: -1, Dst: -1, Ranks: m.NProc, DType: s.DType})
						continue
					}
					if ops.Op(op).RoundTrip() {
						size = s.LatencySize
					}
					for _, p := range s.Pairs(m.NProc)[0] {
						keys = append(keys, result.RowKey{Op: op, Impl: impl, Size: size, Src: p.Src, Dst: p.Dst})
					}
				}
			}
		}
		for _, f := range m.Figures {
			if !slices.Contains(keys, f.Key()) {
				t.Errorf("%s: the key sweep does not measure %+v", m.Name(), f.Key())
			}
		}
	}
}

// made is a table of figures made up for the tests, apart from the shipped ones.
var made = Table{Version: Version, Machines: []Machine{{GPU: "NVIDIA H200", NProc: 2, Link: "NV18", Figures: []Figure{
	{Op: "put", Impl: "triton", Size: 16 << 20, Src: 0, Dst: 1, Metric: "gbps", Value: 350, Source: "a.json"},
	{Op: "put", Impl: "triton", Size: 256 << 20, Src: 0, Dst: 1, Metric: "gbps", Value: 370, Source: "a.json"},
	{Op: "latency", Impl: "triton", Size: 8, Src: 0, Dst: 1, Metric: "time_us", Value: 2, Source: "a.json"},
	{Op: "all-reduce", Impl: "triton", Size: 256 << 20, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", Metric: "busbw", Value: 360, Source: "b.json"},
}}}}

func put(size int64, gbps float64) result.Row {
	return result.Row{Op: "put", Impl: "triton", Size: size, Src: 0, Dst: 1, GBps: gbps, Checked: true}
}

func sweep(link string, gpus []string, rows ...result.Row) result.Result {
	return result.Result{Header: result.Header{NProc: 2, Link: link, GPUs: gpus}, Rows: rows, OK: true}
}

var twoH200 = []string{"NVIDIA H200 (GPU-aaaa)", "NVIDIA H200 (GPU-bbbb)"}

func verdicts(j Judgement) map[string]Verdict {
	v := map[string]Verdict{}
	for _, r := range j.Rows {
		v[r.Name] = r.Verdict
	}
	return v
}

func TestJudgeNamesRowsBelowWithCauses(t *testing.T) {
	res := sweep("NV18", twoH200,
		put(16<<20, 340),  // 97%: ok
		put(256<<20, 220), // 59%: below
		result.Row{Op: "latency", Impl: "triton", Size: 8, Src: 0, Dst: 1, MedUS: 3.1, Checked: true}, // 2/3.1 = 65%: below
		result.Row{Op: "all-reduce", Impl: "triton", Size: 256 << 20, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", Algo: "two-shot", BusGBps: 365, Checked: true},
		result.Row{Op: "all-reduce", Impl: "triton", Size: 16 << 20, Src: -1, Dst: -1, Ranks: 2, DType: "bf16", BusGBps: 100, Checked: true}, // no figure
	)
	j := Judge(res, made, 15)
	want := map[string]Verdict{
		"put triton 16M 0->1": OK, "put triton 256M 0->1": Below, "latency triton 8B 0->1": Below,
		"all-reduce triton 256M 2 ranks": OK, "all-reduce triton 16M 2 ranks": NoFigure,
	}
	if got := verdicts(j); !maps.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
	if j.Below != 2 || j.Reference != "NVIDIA H200 x2 NV18" || j.NoReference != "" || j.GPU != "NVIDIA H200" {
		t.Errorf("below %d, reference %q, no reference %q, gpu %q", j.Below, j.Reference, j.NoReference, j.GPU)
	}
	for _, r := range j.Rows {
		switch r.Name {
		case "put triton 256M 0->1":
			if r.Ratio != 0.5946 || r.Reference != 370 || r.Source != "a.json" || !strings.Contains(strings.Join(r.Causes, "\n"), "link down") {
				t.Errorf("%s: ratio %g, reference %g from %s, causes %q", r.Name, r.Ratio, r.Reference, r.Source, r.Causes)
			}
		case "latency triton 8B 0->1":
			if r.Unit != "us" || r.Ratio != 0.6452 || !strings.Contains(r.Causes[0], "another job") {
				t.Errorf("%s: %+v", r.Name, r)
			}
		case "put triton 16M 0->1":
			if len(r.Causes) != 0 {
				t.Errorf("%s is within the tolerance and has causes %q", r.Name, r.Causes)
			}
		}
	}
}

// The tolerance is the line: 85% of the figure stands at 15%, 84.9% does not, and a
// faster machine is ok.
func TestJudgeTolerance(t *testing.T) {
	for _, tc := range []struct {
		gbps float64
		tol  float64
		want Verdict
	}{{314.5, 15, OK}, {314.1, 15, Below}, {500, 15, OK}, {360, 0, Below}, {370, 0, OK}} {
		j := Judge(sweep("NV18", twoH200, put(256<<20, tc.gbps)), made, tc.tol)
		if got := j.Rows[0].Verdict; got != tc.want {
			t.Errorf("%g GB/s against 370 at %g%%: %s, want %s", tc.gbps, tc.tol, got, tc.want)
		}
	}
}

// Another GPU, another rank count, ranks sharing one GPU, a result without GPUs: no
// reference, said why, and every row shown without a verdict.
func TestJudgeWithoutReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  result.Result
		want string
	}{
		{"other GPU", sweep("NV18", []string{"NVIDIA B200 (GPU-a)", "NVIDIA B200 (GPU-b)"}, put(256<<20, 700)),
			"no reference for NVIDIA B200 x2 NV18: symmem has figures for NVIDIA H200 x2 NV18 only"},
		{"eight ranks", func() result.Result {
			r := sweep("NV18", slices.Repeat([]string{"NVIDIA H200"}, 8), put(256<<20, 100))
			r.Header.NProc = 8
			return r
		}(), "no reference for NVIDIA H200 x8 NV18"},
		{"shared GPU", sweep("", []string{"NVIDIA H200 (GPU-aaaa)", "NVIDIA H200 (GPU-aaaa)"}, put(256<<20, 10)),
			"ranks 0 and 1 share one GPU (GPU-aaaa)"},
		{"mixed GPUs", sweep("NV18", []string{"NVIDIA H200 (GPU-a)", "NVIDIA H100 80GB HBM3 (GPU-b)"}, put(256<<20, 10)),
			"different GPUs (NVIDIA H200, NVIDIA H100 80GB HBM3)"},
		{"CPU backend", sweep("", nil, put(256<<20, 10)), "names no GPU"},
	} {
		j := Judge(tc.res, made, 15)
		if !strings.Contains(j.NoReference, tc.want) || j.Reference != "" || j.Below != 0 {
			t.Errorf("%s: no reference %q (want %q), reference %q, below %d", tc.name, j.NoReference, tc.want, j.Reference, j.Below)
		}
		for _, r := range j.Rows {
			if r.Verdict != NoFigure || r.Reference != 0 {
				t.Errorf("%s: %s judged %s against %g", tc.name, r.Name, r.Verdict, r.Reference)
			}
		}
	}
}

// A link other than the reference's is what the check is for: the figures still
// apply, and the difference leads the causes of every row below.
func TestJudgeNamesTheLinkThatDiffers(t *testing.T) {
	for _, tc := range []struct{ link, want string }{
		{"NV12", "is NV12 here and NV18 in the reference: NVLinks are down"},
		{"PHB", "joined by PCIe (PHB) here and by NV18 in the reference"},
	} {
		j := Judge(sweep(tc.link, twoH200, put(256<<20, 50)), made, 15)
		if j.Reference != "NVIDIA H200 x2 NV18" || j.Below != 1 || !strings.Contains(j.Rows[0].Causes[0], tc.want) || len(j.Notes) != 1 {
			t.Errorf("link %s: reference %q, below %d, notes %q, causes %q", tc.link, j.Reference, j.Below, j.Notes, j.Rows[0].Causes)
		}
	}
	res := sweep("NV18", twoH200, put(256<<20, 50))
	res.Header.Transports = map[string]string{"0->1": "remote"}
	if j := Judge(res, made, 15); !strings.Contains(j.Rows[0].Causes[0], "NVSHMEM reached 0->1 (remote) through its remote transport") {
		t.Errorf("remote transport: causes %q", j.Rows[0].Causes)
	}
}

// A row whose bytes were wrong is no measurement: not judged, not counted.
func TestJudgeLeavesWrongRowsOut(t *testing.T) {
	r := put(256<<20, 50)
	r.Wrong = 3
	j := Judge(sweep("NV18", twoH200, r), made, 15)
	if j.Rows[0].Verdict != Untrusted || j.Below != 0 {
		t.Errorf("a row with wrong bytes: %s, below %d", j.Rows[0].Verdict, j.Below)
	}
}

func TestParseRefusesBadFigures(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"version": 2}`, "version 2"},
		{`{"version": 1, "machines": [{"gpu": "G", "nproc": 2, "figures": [{"op": "put", "metric": "busbw", "value": 1}]}]}`, "put is judged by gbps, not busbw"},
		{`{"version": 1, "machines": [{"gpu": "G", "nproc": 2, "figures": [{"op": "put", "metric": "gbps", "value": 0}]}]}`, "figure 0"},
		{`{"version": 1, "machines": [{"gpu": "G", "nproc": 2, "figures": [{"op": "put", "metric": "speed", "value": 1}]}]}`, `unknown metric "speed"`},
	} {
		if _, err := Parse([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}
