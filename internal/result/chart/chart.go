// Package chart draws a bench result as a figure, an SVG document or a PNG image. It
// draws its own lines and text (canvas.go) rather than use a plotting library: such a
// library's package initialisation (parsing a dozen fonts) ran in every symmem process,
// the ranks of a 200-rank job included, and its 70 packages made a fifth of a cold
// build of the tests.
package chart

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// The figure's measures, in points.
const (
	panelW   = 7 * 72   // a panel, axes and labels included
	legendW  = 2.6 * 72 // the legend beside the panels
	panelH   = 3.6 * 72
	titleSz  = 12
	labelSz  = 12
	tickSz   = 10
	legendSz = 10
	tickLen  = 6.0
)

// palette is the implementations' colours, in order (gonum/plot's soft colours, which
// the figures have always used).
var palette = []color.RGBA{
	{241, 90, 96, 255}, {122, 195, 106, 255}, {90, 155, 212, 255}, {250, 167, 91, 255},
	{158, 103, 171, 255}, {206, 112, 88, 255}, {215, 127, 180, 255},
}

var (
	black     = color.RGBA{0, 0, 0, 255}
	gridGray  = color.RGBA{220, 220, 220, 255}
	legendGry = color.RGBA{90, 90, 90, 255}
	dotted    = []float64{1, 3}
	dashed    = []float64{6, 4}
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
		if !result.Plotted(r.Op) || r.GBps <= 0 || !r.Trusted() {
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
		return setting.Errorf("%s: no bandwidth rows to draw", setting.Plot)
	}
	w, h := float64(panelW+legendW), panelH*float64(len(measured))
	var c canvas
	if strings.EqualFold(filepath.Ext(file), ".svg") {
		c = newSVG(w, h)
	} else {
		c = newPNG(w, h)
	}
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
	var lg legend
	for i, op := range measured {
		p := newPanel(res, op, src, dst, impls)
		if i == 0 {
			p.title = append([]string{title}, p.title...)
		}
		p.draw(c, float64(i)*panelH)
		lg.add(p)
	}
	lg.draw(c, res.Header)
	f, err := os.Create(file)
	if err != nil {
		return setting.Errorf("%s: %w", setting.Plot, err)
	}
	if err := c.writeTo(f); err != nil {
		f.Close()
		return setting.Errorf("%s %s: %w", setting.Plot, file, err)
	}
	return f.Close()
}

// series is one implementation's points in a panel, and its measured ceiling (0: none).
type series struct {
	impl    string
	colour  int // its index in impls: its colour and marker
	pts     []point
	ceiling float64
}

// panel is one operation's rows of one pair (or the collective's), in data units.
type panel struct {
	title          []string
	xLabel, yLabel string
	series         []series
	peak           float64
	xMin, xMax     float64
	yMax           float64
}

func newPanel(res result.Result, op string, src, dst int, impls []string) panel {
	p := panel{title: []string{op}, xLabel: "message size", yLabel: "GB/s", xMin: math.Inf(1), xMax: math.Inf(-1)}
	collective := result.BusRated(op)
	if collective {
		p.title = []string{op + " (bus bandwidth, as nccl-tests)"}
		p.yLabel = "busbw GB/s"
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
		s := series{impl: impl, colour: i}
		for _, r := range res.Rows {
			if r.Op == op && r.Impl == impl && rate(r) > 0 && r.Trusted() {
				s.pts = append(s.pts, point{float64(r.Size), rate(r)})
				p.xMin, p.xMax = math.Min(p.xMin, float64(r.Size)), math.Max(p.xMax, float64(r.Size))
				p.yMax = math.Max(p.yMax, rate(r))
			}
		}
		if len(s.pts) == 0 {
			continue
		}
		slices.SortStableFunc(s.pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		if pb := perByte[impl]; pb > 0 && wireMax > 0 {
			s.ceiling = wireMax / pb
			p.yMax = math.Max(p.yMax, s.ceiling)
		}
		p.series = append(p.series, s)
	}
	if peak := res.Header.PeakGBps; peak > 0 {
		p.peak = peak
		p.yMax = math.Max(p.yMax, peak*1.08) // keep the peak line in view
	}
	if len(p.series) == 0 { // the op's rows are of other pairs than the one drawn
		p.xMin, p.xMax = 1<<10, 1<<20
	}
	if p.yMax == 0 {
		p.yMax = 1
	}
	p.yMax *= 1.05 // the highest point off the frame
	if p.xMin == p.xMax {
		p.xMin, p.xMax = p.xMin/2, p.xMax*2 // one size: room on either side
	}
	return p
}

// draw draws the panel with its top at top.
func (p panel) draw(c canvas, top float64) {
	yTicks := linearTicks(0, p.yMax)
	labelW := 0.0
	for _, t := range yTicks {
		labelW = math.Max(labelW, textWidth(t.label, tickSz))
	}
	x0 := 6 + labelSz + 8 + labelW + 4 + tickLen
	x1 := panelW - 10 - textWidth("256M", tickSz)/2
	y0 := top + 6 + float64(len(p.title))*(titleSz+2) + 8
	y1 := top + panelH - (6 + labelSz + 4 + tickSz + 4 + tickLen)
	lx0, lx1 := math.Log2(p.xMin), math.Log2(p.xMax)
	X := func(v float64) float64 { return x0 + (math.Log2(v)-lx0)/(lx1-lx0)*(x1-x0) }
	Y := func(v float64) float64 { return y1 - v/p.yMax*(y1-y0) }

	for i, line := range p.title {
		c.text(point{(x0 + x1) / 2, top + 6 + float64(i+1)*(titleSz+2) - 2}, line, titleSz, middle, false)
	}
	// Grid and ticks.
	for _, t := range sizeTicks(p.xMin, p.xMax) {
		x := X(t.v)
		l := tickLen / 2
		if t.label != "" {
			l = tickLen
			c.line([]point{{x, y0}, {x, y1}}, pen{c: gridGray, width: 0.5})
			c.text(point{x, y1 + tickLen + 2 + tickSz}, t.label, tickSz, middle, false)
		}
		c.line([]point{{x, y1}, {x, y1 + l}}, pen{c: black, width: 0.5})
	}
	for _, t := range yTicks {
		y := Y(t.v)
		l := tickLen / 2
		if t.label != "" {
			l = tickLen
			c.line([]point{{x0, y}, {x1, y}}, pen{c: gridGray, width: 0.5})
			c.text(point{x0 - tickLen - 3, y + tickSz*0.35}, t.label, tickSz, right, false)
		}
		c.line([]point{{x0 - l, y}, {x0, y}}, pen{c: black, width: 0.5})
	}
	c.line([]point{{x0, y0}, {x0, y1}, {x1, y1}}, pen{c: black, width: 0.5})
	c.text(point{(x0 + x1) / 2, top + panelH - 6 - 2}, p.xLabel, labelSz, middle, false)
	c.text(point{6 + labelSz, (y0 + y1) / 2}, p.yLabel, labelSz, middle, true)
	// The data, the ceilings and the peak.
	for _, s := range p.series {
		col := palette[s.colour%len(palette)]
		if s.ceiling > 0 {
			c.line([]point{{x0, Y(s.ceiling)}, {x1, Y(s.ceiling)}}, pen{c: col, width: 1, dash: dotted})
		}
		pts := make([]point, len(s.pts))
		for i, q := range s.pts {
			pts[i] = point{X(q.x), Y(q.y)}
		}
		c.line(pts, pen{c: col, width: 1.5})
		for _, q := range pts {
			marker(c, q, s.colour, col)
		}
	}
	if p.peak > 0 {
		c.line([]point{{x0, Y(p.peak)}, {x1, Y(p.peak)}}, pen{c: black, width: 1, dash: dashed})
	}
}

// marker draws implementation i's marker (circle, square, triangle, cross, plus, ring
// in turn) at q.
func marker(c canvas, q point, i int, col color.RGBA) {
	const r = 3
	outline := pen{c: col, width: 1}
	switch i % 6 {
	case 0:
		c.fill(disc(q, r, 16), col)
	case 1:
		c.line([]point{{q.x - r, q.y - r}, {q.x + r, q.y - r}, {q.x + r, q.y + r}, {q.x - r, q.y + r}, {q.x - r, q.y - r}}, outline)
	case 2:
		h := r * math.Sqrt(3) / 2
		c.line([]point{{q.x, q.y - r}, {q.x + h, q.y + r/2}, {q.x - h, q.y + r/2}, {q.x, q.y - r}}, outline)
	case 3:
		c.line([]point{{q.x - r, q.y - r}, {q.x + r, q.y + r}}, outline)
		c.line([]point{{q.x - r, q.y + r}, {q.x + r, q.y - r}}, outline)
	case 4:
		c.line([]point{{q.x - r, q.y}, {q.x + r, q.y}}, outline)
		c.line([]point{{q.x, q.y - r}, {q.x, q.y + r}}, outline)
	default:
		ring := disc(q, r, 16)
		c.line(append(ring, ring[0]), outline)
	}
}

// legend is what the panels drew: each implementation once, then the lines they share.
type legend struct {
	impls            []series
	ceiling, peakSet bool
}

func (l *legend) add(p panel) {
	for _, s := range p.series {
		if !slices.ContainsFunc(l.impls, func(o series) bool { return o.impl == s.impl }) {
			l.impls = append(l.impls, s)
		}
		l.ceiling = l.ceiling || s.ceiling > 0
	}
	l.peakSet = l.peakSet || p.peak > 0
}

func (l *legend) draw(c canvas, h result.Header) {
	x, y := float64(panelW)+8, 30.0
	entry := func(lines []string, sample func(at point)) {
		sample(point{x, y})
		for i, s := range lines {
			c.text(point{x + 28, y + legendSz*0.35 + float64(i)*(legendSz+2)}, s, legendSz, left, false)
		}
		y += float64(len(lines)-1)*(legendSz+2) + 2*legendSz + 6
	}
	for _, s := range l.impls {
		col := palette[s.colour%len(palette)]
		entry([]string{s.impl}, func(at point) {
			c.line([]point{at, {at.x + 22, at.y}}, pen{c: col, width: 1.5})
			marker(c, point{at.x + 11, at.y}, s.colour, col)
		})
	}
	if l.ceiling {
		entry([]string{"measured ceiling, per", "implementation: highest wire", "GB/s / its wire bytes per", "payload byte"}, func(at point) {
			c.line([]point{at, {at.x + 22, at.y}}, pen{c: legendGry, width: 1, dash: dotted})
		})
	}
	if l.peakSet {
		label := "nominal link peak"
		if h.Link != "" {
			label = h.Link + " nominal peak"
		}
		entry([]string{fmt.Sprintf("%s %.0f GB/s", label, h.PeakGBps)}, func(at point) {
			c.line([]point{at, {at.x + 22, at.y}}, pen{c: black, width: 1, dash: dashed})
		})
	}
}

// tick is a value on an axis; an empty label makes a minor tick.
type tick struct {
	v     float64
	label string
}

// linearTicks labels about five round values from lo to hi (0, 250, 500), with
// unlabelled ticks between.
func linearTicks(lo, hi float64) []tick {
	if hi <= lo {
		return []tick{{lo, strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	raw := (hi - lo) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step, minor := mag, mag/5
	for _, m := range []struct{ step, minor float64 }{{1, 0.2}, {2, 0.5}, {2.5, 0.5}, {5, 1}, {10, 2}} {
		if m.step*mag >= raw*0.999 {
			step, minor = m.step*mag, m.minor*mag
			break
		}
	}
	var ticks []tick
	for k := math.Ceil(lo / minor); k*minor <= hi*(1+1e-9); k++ {
		v := k * minor
		label := ""
		if r := v / step; math.Abs(r-math.Round(r)) < 1e-6 {
			// 6 significant digits: 0.9, not 0.9000000000000001
			label = strconv.FormatFloat(math.Round(r)*step, 'g', 6, 64)
		}
		ticks = append(ticks, tick{v, label})
	}
	return ticks
}

// sizeTicks labels a log axis of bytes with binary sizes (1K, 64K, 1M, 256M): ticks at
// powers of two, spaced so that at most about nine carry labels.
func sizeTicks(min, max float64) []tick {
	lo, hi := math.Floor(math.Log2(math.Max(min, 1))), math.Ceil(math.Log2(math.Max(max, 1)))
	step := math.Max(1, math.Ceil((hi-lo)/8))
	var ticks []tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(e)
		if v < min || v > max {
			continue
		}
		label := ""
		if math.Mod(e, step) == 0 {
			label = units.FormatSize(int64(v))
		}
		ticks = append(ticks, tick{v, label})
	}
	return ticks
}
