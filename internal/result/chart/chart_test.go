package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/result"
)

// The plot reads like a figure: a panel per op, binary size labels, every
// implementation in the legend, the nominal peak and the measured ceiling.
func TestPlotPanelsLabelsAndCeilings(t *testing.T) {
	res := result.Result{Header: result.Header{Backend: "nvshmem", GPUs: []string{"NVIDIA H200"}, Link: "NV18", PeakGBps: 478, NProc: 2,
		Spec: result.BenchSpec{Ops: []string{"put", "get"}}}, OK: true}
	for _, op := range []string{"put", "get"} {
		for _, impl := range []string{"triton", "copy-engine"} {
			for _, n := range []int64{1 << 20, 16 << 20, 256 << 20} {
				r := result.Row{Op: op, Impl: impl, Size: n, Src: 0, Dst: 1, GBps: float64(n>>20) + 100, Checked: true}
				if n >= result.MinCounted {
					r.Link = &result.LinkTraffic{WirePerByte: 1.132, WireGBps: 420}
				}
				res.Rows = append(res.Rows, r)
			}
		}
	}
	file := filepath.Join(t.TempDir(), "bw.svg")
	if err := Plot(res, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{">put<", ">get<", ">1M<", ">16M<", ">256M<", ">triton<", ">copy-engine<",
		"measured ceiling", "NV18 nominal peak 478 GB/s"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot has no %q", want)
		}
	}
	if err := Plot(result.Result{Rows: []result.Row{{Op: "latency", Impl: "x", Size: 8, MedUS: 2}}}, file); err == nil {
		t.Error("a plot of latency rows only was drawn")
	}
}
