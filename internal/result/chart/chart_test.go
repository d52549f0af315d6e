package chart

import (
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"math"
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
	file, svg := plotSVG(t, res)
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

// The PNG is the same figure rasterized: its size follows the panels, and it holds
// each implementation's colour and the text in black. Where a series is drawn in one
// panel only, that panel alone shows its colour.
func TestPlotPNGDrawsTheSeries(t *testing.T) {
	res := result.Result{Header: result.Header{Backend: "cpu", NProc: 2}, OK: true}
	for _, n := range []int64{1 << 10, 1 << 20} {
		res.Rows = append(res.Rows,
			result.Row{Op: "put", Impl: "a", Size: n, Src: 0, Dst: 1, GBps: 10, Checked: true},
			result.Row{Op: "get", Impl: "b", Size: n, Src: 0, Dst: 1, GBps: 20, Checked: true},
			result.Row{Op: "get", Impl: "c", Size: n, Src: 0, Dst: 1, GBps: 30, Checked: true, Wrong: 1})
	}
	file := filepath.Join(t.TempDir(), "bw.png")
	if err := Plot(res, file); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	if w, h := int(math.Ceil((panelW+legendW)*pngScale)), int(math.Ceil(2*panelH*pngScale)); b.Dx() != w || b.Dy() != h {
		t.Fatalf("the image is %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	// count says how many pixels of the rows y0..y1 of the panels' width are c.
	count := func(c color.RGBA, y0, y1 int) int {
		n := 0
		for y := y0; y < y1; y++ {
			for x := 0; x < int(panelW*pngScale); x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
					n++
				}
			}
		}
		return n
	}
	mid := b.Dy() / 2
	if n := count(palette[0], 0, mid); n < 50 {
		t.Errorf("put's panel has %d pixels of a's colour", n)
	}
	if n := count(palette[0], mid, b.Dy()); n != 0 {
		t.Errorf("get's panel has %d pixels of a's colour, which only put has", n)
	}
	if n := count(palette[1], mid, b.Dy()); n < 50 {
		t.Errorf("get's panel has %d pixels of b's colour", n)
	}
	if n := count(palette[2], 0, b.Dy()); n != 0 {
		t.Errorf("c's wrong rows were drawn (%d pixels)", n)
	}
	if n := count(black, 0, b.Dy()); n < 500 {
		t.Errorf("%d black pixels: the text and axes are missing", n)
	}
}

// A dashed line is cut into its dashes, carried across the polyline's corners.
func TestDashes(t *testing.T) {
	got := dashes([]point{{0, 0}, {5, 0}, {5, 5}}, []float64{3, 2})
	want := [][]point{{{0, 0}, {3, 0}}, {{5, 0}, {5, 3}}, {{5, 5}}}
	if len(got) != 2 || len(got[0]) != 2 || got[0][1] != want[0][1] || got[1][0] != want[1][0] || got[1][1] != want[1][1] {
		t.Errorf("dashes = %v, want %v", got, want[:2])
	}
}

// A panel whose op was measured only between other ranks than the pair drawn is empty
// but whole: its size axis labelled, no coordinate NaN or infinite.
func TestPlotEmptyPanel(t *testing.T) {
	res := result.Result{Header: result.Header{Backend: "cpu", NProc: 3}, OK: true, Rows: []result.Row{
		{Op: "get", Impl: "a", Size: 1 << 20, Src: 0, Dst: 1, GBps: 5, Checked: true},
		{Op: "put", Impl: "a", Size: 1 << 20, Src: 1, Dst: 2, GBps: 5, Checked: true},
	}}
	if _, s := plotSVG(t, res); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") || !strings.Contains(s, ">put<") || strings.Count(s, ">1M<") < 2 {
		t.Errorf("the empty panel is broken:\n%s", s)
	}
}

// Names from a result file are anyone's: markup and characters XML cannot hold do not
// break the SVG.
func TestPlotSVGEscapesNames(t *testing.T) {
	res := result.Result{Header: result.Header{Backend: "cpu\x1b[31m", NProc: 2}, OK: true, Rows: []result.Row{
		{Op: "put", Impl: "a\x01<b>&\"\xff", Size: 1 << 20, Src: 0, Dst: 1, GBps: 5, Checked: true},
	}}
	_, svg := plotSVG(t, res)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
	}
	if !strings.Contains(svg, ">a\uFFFD&lt;b&gt;&amp;&quot;\uFFFD<") {
		t.Errorf("the name is not escaped as it should be:\n%s", svg)
	}
}

// plotSVG draws res into an SVG file and returns the file and what it holds.
func plotSVG(t *testing.T, res result.Result) (file, svg string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "bw.svg")
	if err := Plot(res, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, string(b)
}
