package chart

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// The figure is laid out in points (1/72 inch), y downwards, and drawn onto a canvas:
// an SVG document or a PNG image. Both draw the same primitives, so the two formats
// show the same figure; only the PNG needs a font and a rasterizer, and it loads the
// font when it draws the first text (a process that draws nothing parses nothing).

type point struct{ x, y float64 }

// pen is how a line is stroked: dash is on/off lengths in points, nil for solid.
type pen struct {
	c     color.RGBA
	width float64
	dash  []float64
}

// anchor is where a text's point is along it.
type anchor int

const (
	left anchor = iota
	middle
	right
)

type canvas interface {
	// line strokes the polyline through pts.
	line(pts []point, p pen)
	// fill fills the polygon pts.
	fill(pts []point, c color.RGBA)
	// text writes one line of s with its baseline at at.y; vertical turns it a quarter
	// to read upwards, at being then its baseline's point on the left of the glyphs.
	text(at point, s string, size float64, a anchor, vertical bool)
	writeTo(w io.Writer) error
}

// textWidth is the layout's estimate of s's width in points at size: the canvases
// place each text by its real anchor, so the estimate sizes margins only.
func textWidth(s string, size float64) float64 {
	return 0.56 * size * float64(len([]rune(s)))
}

// svgCanvas writes SVG elements as they are drawn.
type svgCanvas struct {
	w, h float64
	b    strings.Builder
}

func newSVG(w, h float64) *svgCanvas { return &svgCanvas{w: w, h: h} }

func svgNum(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func svgPoints(pts []point) string {
	s := make([]string, len(pts))
	for i, p := range pts {
		s[i] = svgNum(p.x) + "," + svgNum(p.y)
	}
	return strings.Join(s, " ")
}

func (c *svgCanvas) line(pts []point, p pen) {
	dash := ""
	if len(p.dash) > 0 {
		d := make([]string, len(p.dash))
		for i, v := range p.dash {
			d[i] = svgNum(v)
		}
		dash = ` stroke-dasharray="` + strings.Join(d, ",") + `"`
	}
	fmt.Fprintf(&c.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s/>`+"\n",
		svgPoints(pts), svgColor(p.c), svgNum(p.width), dash)
}

func (c *svgCanvas) fill(pts []point, col color.RGBA) {
	fmt.Fprintf(&c.b, `<polygon points="%s" fill="%s"/>`+"\n", svgPoints(pts), svgColor(col))
}

// svgText is s as XML character data: markup escaped, and what XML may not hold
// (control characters, invalid UTF-8; a result file's names are anyone's) as U+FFFD,
// as encoding/xml's EscapeText does; that package's initialisation would run in every
// symmem process, which is what leaving the plotting library saved.
func svgText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF, r >= 0xD800 && r <= 0xDFFF:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r) // invalid UTF-8 came as utf8.RuneError already
		}
	}
	return b.String()
}

func (c *svgCanvas) text(at point, s string, size float64, a anchor, vertical bool) {
	rotate := ""
	if vertical {
		rotate = fmt.Sprintf(` transform="rotate(-90 %s %s)"`, svgNum(at.x), svgNum(at.y))
	}
	fmt.Fprintf(&c.b, `<text x="%s" y="%s" font-size="%s" text-anchor="%s"%s>%s</text>`+"\n",
		svgNum(at.x), svgNum(at.y), svgNum(size), [...]string{"start", "middle", "end"}[a], rotate, svgText(s))
}

func (c *svgCanvas) writeTo(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%spt" height="%spt" viewBox="0 0 %s %s" font-family="Go, DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		svgNum(c.w), svgNum(c.h), svgNum(c.w), svgNum(c.h))
	fmt.Fprintf(bw, `<rect width="%s" height="%s" fill="#ffffff"/>`+"\n", svgNum(c.w), svgNum(c.h))
	bw.WriteString(c.b.String())
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// pngScale is the PNG's pixels per point: 96 dpi.
const pngScale = 96.0 / 72

// pngCanvas rasterizes each primitive within its own bounds onto a white image.
type pngCanvas struct {
	img   *image.RGBA
	z     vector.Rasterizer
	faces map[float64]font.Face
}

func newPNG(w, h float64) *pngCanvas {
	img := image.NewRGBA(image.Rect(0, 0, int(math.Ceil(w*pngScale)), int(math.Ceil(h*pngScale))))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return &pngCanvas{img: img, faces: map[float64]font.Face{}}
}

// polygons fills every polygon of ps (in points) as one shape: overlaps do not darken.
func (c *pngCanvas) polygons(ps [][]point, col color.RGBA) {
	lo, hi := point{math.Inf(1), math.Inf(1)}, point{math.Inf(-1), math.Inf(-1)}
	for _, pts := range ps {
		for _, p := range pts {
			lo = point{math.Min(lo.x, p.x*pngScale), math.Min(lo.y, p.y*pngScale)}
			hi = point{math.Max(hi.x, p.x*pngScale), math.Max(hi.y, p.y*pngScale)}
		}
	}
	r := image.Rect(int(math.Floor(lo.x)), int(math.Floor(lo.y)), int(math.Ceil(hi.x))+1, int(math.Ceil(hi.y))+1).Intersect(c.img.Bounds())
	if r.Empty() {
		return
	}
	c.z.Reset(r.Dx(), r.Dy())
	c.z.DrawOp = draw.Over
	for _, pts := range ps {
		// The rasterizer sums signed areas: every polygon must turn the same way for
		// overlaps to add up instead of cancelling.
		if area(pts) > 0 {
			pts = reversed(pts)
		}
		for i, p := range pts {
			x, y := float32(p.x*pngScale-float64(r.Min.X)), float32(p.y*pngScale-float64(r.Min.Y))
			if i == 0 {
				c.z.MoveTo(x, y)
			} else {
				c.z.LineTo(x, y)
			}
		}
		c.z.ClosePath()
	}
	c.z.Draw(c.img, r, image.NewUniform(col), image.Point{})
}

func (c *pngCanvas) fill(pts []point, col color.RGBA) { c.polygons([][]point{pts}, col) }

func (c *pngCanvas) line(pts []point, p pen) { c.polygons(stroke(pts, p), p.c) }

func (c *pngCanvas) face(size float64) font.Face {
	if f, ok := c.faces[size]; ok {
		return f
	}
	var f font.Face = nilFace{}
	if ft, err := goRegular(); err == nil {
		if face, err := opentype.NewFace(ft, &opentype.FaceOptions{Size: size * pngScale, DPI: 72, Hinting: font.HintingNone}); err == nil {
			f = face
		}
	}
	c.faces[size] = f
	return f
}

// goRegular is the Go font, parsed at the first text a PNG draws.
var goRegular = sync.OnceValues(func() (*opentype.Font, error) { return opentype.Parse(goregular.TTF) })

func (c *pngCanvas) text(at point, s string, size float64, a anchor, vertical bool) {
	face := c.face(size)
	d := font.Drawer{Src: image.Black, Face: face}
	w := d.MeasureString(s).Ceil()
	shift := [...]int{0, w / 2, w}[a]
	m := face.Metrics()
	ascent, descent := m.Ascent.Ceil(), m.Descent.Ceil()
	x, y := int(math.Round(at.x*pngScale)), int(math.Round(at.y*pngScale))
	if !vertical {
		d.Dst = c.img
		d.Dot = fixed.P(x-shift, y)
		d.DrawString(s)
		return
	}
	// Draw it level on its own image, then turn that a quarter onto the figure.
	tmp := image.NewRGBA(image.Rect(0, 0, w+1, ascent+descent+1))
	d.Dst, d.Dot = tmp, fixed.P(0, ascent)
	d.DrawString(s)
	b := tmp.Bounds()
	turned := image.NewRGBA(image.Rect(0, 0, b.Dy(), b.Dx()))
	for ty := 0; ty < b.Dy(); ty++ {
		for tx := 0; tx < b.Dx(); tx++ {
			turned.Set(ty, b.Dx()-1-tx, tmp.At(tx, ty))
		}
	}
	// The level text's baseline (row ascent) becomes column ascent; its start, at the
	// bottom, goes up from y+shift.
	dst := image.Rect(x-ascent, y+shift-b.Dx()+1, x-ascent+b.Dy(), y+shift+1)
	draw.Draw(c.img, dst, turned, image.Point{}, draw.Over)
}

func (c *pngCanvas) writeTo(w io.Writer) error {
	return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, c.img)
}

// nilFace stands in where the font cannot be parsed: the figure without its words.
type nilFace struct{ font.Face }

func (nilFace) Metrics() font.Metrics { return font.Metrics{} }
func (nilFace) Glyph(fixed.Point26_6, rune) (image.Rectangle, image.Image, image.Point, fixed.Int26_6, bool) {
	return image.Rectangle{}, nil, image.Point{}, 0, false
}
func (nilFace) GlyphAdvance(rune) (fixed.Int26_6, bool) { return 0, false }
func (nilFace) Kern(rune, rune) fixed.Int26_6           { return 0 }

// area is pts' signed area (positive anticlockwise on the page).
func area(pts []point) float64 {
	a := 0.0
	for i, p := range pts {
		q := pts[(i+1)%len(pts)]
		a += p.x*q.y - q.x*p.y
	}
	return -a / 2 // y points down
}

func reversed(pts []point) []point {
	out := make([]point, len(pts))
	for i, p := range pts {
		out[len(pts)-1-i] = p
	}
	return out
}

// stroke is the outline of a line through pts drawn with p: a quadrilateral for each
// (dashed) segment and a disc at each joint, for the PNG's rasterizer.
func stroke(pts []point, p pen) [][]point {
	var out [][]point
	for _, run := range dashes(pts, p.dash) {
		for i := 0; i+1 < len(run); i++ {
			a, b := run[i], run[i+1]
			dx, dy := b.x-a.x, b.y-a.y
			l := math.Hypot(dx, dy)
			if l == 0 {
				continue
			}
			nx, ny := -dy/l*p.width/2, dx/l*p.width/2
			out = append(out, []point{{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}})
			if i > 0 {
				out = append(out, disc(a, p.width/2, 8))
			}
		}
	}
	return out
}

// dashes cuts the polyline pts into the runs its dash pattern draws (all of it when
// the pattern is empty).
func dashes(pts []point, pattern []float64) [][]point {
	if len(pattern) == 0 {
		return [][]point{pts}
	}
	var runs [][]point
	var cur []point
	k, left, on := 0, pattern[0], true
	if on {
		cur = []point{pts[0]}
	}
	for i := 0; i+1 < len(pts); i++ {
		a, b := pts[i], pts[i+1]
		l := math.Hypot(b.x-a.x, b.y-a.y)
		for pos := 0.0; pos < l; {
			step := math.Min(left, l-pos)
			pos += step
			left -= step
			at := point{a.x + (b.x-a.x)*pos/l, a.y + (b.y-a.y)*pos/l}
			if on {
				cur = append(cur, at)
			}
			if left <= 1e-9 {
				if on {
					runs = append(runs, cur)
				}
				on = !on
				k = (k + 1) % len(pattern)
				left = pattern[k]
				cur = nil
				if on {
					cur = []point{at}
				}
			}
		}
	}
	if on && len(cur) > 1 {
		runs = append(runs, cur)
	}
	return runs
}

// disc is a regular polygon of n sides around c.
func disc(c point, r float64, n int) []point {
	out := make([]point, n)
	for i := range out {
		t := 2 * math.Pi * float64(i) / float64(n)
		out[i] = point{c.x + r*math.Cos(t), c.y + r*math.Sin(t)}
	}
	return out
}
