// Package chart draws a bench result as a figure. It is apart from package result
// so that only the command line links the plotting library and its fonts.
package chart

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// Plot draws bandwidth against message size into a .png or .svg file (rows whose data
// was wrong or unchecked are left out: their figures mean nothing): one panel per
// operation, sizes on a log axis labelled 1K/1M/256M, one colour and marker per
// implementation (the same in every panel), the legend beside the panels, and, where
// the link is known, its nominal peak (dashed) and each implementation's measured
// ceiling (dotted: the highest wire rate seen, over the implementation's wire bytes per
// payload byte).
func Plot(res result.Result, file string) error {
	if err := result.CheckPlotFile(file); err != nil {
		return err
	}
	var measured, impls []string
	src, dst := -1, -1
	for _, r := range res.Rows {
		// Latency has no bandwidth; dispatch and combine have one size each, which the
		// table says better than a lone point.
		if ops.Op(r.Op).RoundTrip() || ops.Op(r.Op).Routed() || r.GBps <= 0 || !r.Trusted() {
			continue
		}
		if src < 0 && !r.Collective() {
			src, dst = r.Src, r.Dst // one pair: the first one measured
		}
		if !slices.Contains(measured, r.Op) {
			measured = append(measured, r.Op)
		}
		if !slices.Contains(impls, r.Impl) {
			impls = append(impls, r.Impl)
		}
	}
	if len(measured) == 0 {
		return setting.Errorf("{plot}: no bandwidth rows to draw")
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	styled := map[string]bool{}
	var panels []*plot.Plot
	for _, op := range measured {
		p, err := panel(res, op, src, dst, impls, &legend, styled)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	addSharedLegend(&legend, res, styled)
	legendW := 2.6 * vg.Inch
	panelH := 3.6 * vg.Inch
	w, h := 7*vg.Inch+legendW, panelH*vg.Length(len(panels))
	var canvas vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(file), ".svg") {
		canvas = vgsvg.New(w, h)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	dc := draw.New(canvas)
	title := "symmem bench: " + res.Header.Backend
	if len(res.Header.GPUs) > 0 {
		title += " on " + res.Header.GPUs[0]
	}
	if src >= 0 {
		title += fmt.Sprintf(", rank %d -> %d", src, dst)
	}
	if res.Header.NProc > 0 {
		title += fmt.Sprintf(", %d ranks", res.Header.NProc)
	}
	panels[0].Title.Text = title + "\n" + panels[0].Title.Text
	body := draw.Crop(dc, 0, -legendW, 0, 0)
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(14)}
	for i, cs := range plot.Align(grid, tiles, body) {
		grid[i][0].Draw(cs[0])
	}
	legend.Draw(draw.Crop(dc, w-legendW, 0, 0, -0.6*vg.Inch))
	f, err := os.Create(file)
	if err != nil {
		return setting.Errorf("{plot}: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return setting.Errorf("{plot} %s: %w", file, err)
	}
	return f.Close()
}

// addSharedLegend adds, after the implementations, the lines every panel shares.
func addSharedLegend(legend *plot.Legend, res result.Result, styled map[string]bool) {
	if styled["ceiling"] {
		f := plotter.NewFunction(math.Sqrt)
		f.Color, f.Width, f.Dashes = color.Gray{Y: 90}, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(3)}
		legend.Add("measured ceiling, per implementation:\nhighest wire GB/s / its wire bytes\nper payload byte", f)
	}
	if styled["peak"] {
		f := plotter.NewFunction(math.Sqrt)
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		label := "nominal link peak"
		if res.Header.Link != "" {
			label = res.Header.Link + " nominal peak"
		}
		legend.Add(fmt.Sprintf("%s %.0f GB/s", label, res.Header.PeakGBps), f)
	}
}

// panel draws one operation's rows of the pair src->dst.
func panel(res result.Result, op string, src, dst int, impls []string, legend *plot.Legend, styled map[string]bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = op
	p.X.Label.Text = "message size"
	p.Y.Label.Text = "GB/s"
	collective := ops.Op(op).IsCollective()
	if collective {
		p.Title.Text = op + " (bus bandwidth, as nccl-tests)"
		p.Y.Label.Text = "busbw GB/s"
	}
	// rate is what the panel draws for a row of op: its bandwidth, a collective's bus
	// bandwidth.
	rate := func(r result.Row) float64 {
		switch {
		case collective && r.Collective():
			return r.BusGBps
		case !collective && r.Src == src && r.Dst == dst:
			return r.GBps
		}
		return 0
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	wireMax := 0.0
	perByte := map[string]float64{} // at the largest counted size
	perByteSize := map[string]int64{}
	for _, r := range res.Rows {
		if r.Op == op && r.Src == src && r.Dst == dst && r.Link != nil && r.Link.WirePerByte > 0 && r.Trusted() {
			wireMax = math.Max(wireMax, r.Link.WireGBps)
			if r.Size >= perByteSize[r.Impl] {
				perByte[r.Impl], perByteSize[r.Impl] = r.Link.WirePerByte, r.Size
			}
		}
	}
	for i, impl := range impls {
		var pts plotter.XYs
		for _, r := range res.Rows {
			if r.Op == op && r.Impl == impl && rate(r) > 0 && r.Trusted() {
				pts = append(pts, plotter.XY{X: float64(r.Size), Y: rate(r)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		c := plotutil.Color(i)
		l.Color, sc.Color = c, c
		l.Width = vg.Points(1.5)
		sc.Shape = plotShapes[i%len(plotShapes)]
		sc.Radius = vg.Points(3)
		p.Add(l, sc)
		if !styled[impl] {
			styled[impl] = true
			legend.Add(impl, l, sc)
		}
		if pb := perByte[impl]; pb > 0 && wireMax > 0 {
			ceil := wireMax / pb
			f := plotter.NewFunction(func(float64) float64 { return ceil })
			f.Color, f.Width, f.Dashes = c, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(3)}
			p.Add(f)
			styled["ceiling"] = true
		}
	}
	if peak := res.Header.PeakGBps; peak > 0 {
		f := plotter.NewFunction(func(float64) float64 { return peak })
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(f)
		styled["peak"] = true
		p.Y.Max = math.Max(p.Y.Max, peak*1.08) // keep the peak line in view
	}
	p.Y.Min = 0
	p.Y.Max *= 1.05 // the highest point off the frame
	return p, nil
}

// plainTicks are gonum's default ticks with labels such as 250, not 250.00.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			// 6 significant digits: 0.9, not 0.9000000000000001
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 6, 64)
		}
	}
	return ticks
}

var plotShapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}}

// sizeTicks labels a log axis of bytes with binary sizes (1K, 64K, 1M, 256M): major
// ticks at powers of two spaced so that at most about nine carry labels.
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := math.Floor(math.Log2(math.Max(min, 1))), math.Ceil(math.Log2(math.Max(max, 1)))
	step := math.Max(1, math.Ceil((hi-lo)/8))
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(e)
		if v < min || v > max {
			continue
		}
		label := ""
		if math.Mod(e, step) == 0 {
			label = units.FormatSize(int64(v))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}
