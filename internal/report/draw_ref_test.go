package report

import (
	"github.com/symmem/symmem/internal/setting"
	"io"
	"slices"
	"strings"
)

// The drawing code symmem used before tablewriter drew its tables again, kept as the
// reference the differential test holds tablewriter's output to: every table must
// stay byte for byte what it was.

type refBox struct{ h, v, tl, tm, tr, ml, mm, mr, bl, bm, br string }

var refLines = refBox{"─", "│", "┌", "┬", "┐", "├", "┼", "┤", "└", "┴", "┘"}

type refAlignment int

const (
	refRight refAlignment = iota
	refLeft
	refCenter
)

type refGrid struct {
	w      io.Writer
	style  Style
	widths []int
	err    error
}

func (g *refGrid) write(s string) {
	if g.err == nil {
		_, g.err = io.WriteString(g.w, s)
	}
}

func (g *refGrid) rule(l, m, r string) {
	if g.style != Box {
		return
	}
	var b strings.Builder
	b.WriteString(l)
	for i, n := range g.widths {
		if i > 0 {
			b.WriteString(m)
		}
		b.WriteString(strings.Repeat(refLines.h, n))
	}
	b.WriteString(r)
	b.WriteByte('\n')
	g.write(b.String())
}

func (g *refGrid) top()    { g.rule(refLines.tl, refLines.tm, refLines.tr) }
func (g *refGrid) middle() { g.rule(refLines.ml, refLines.mm, refLines.mr) }
func (g *refGrid) bottom() { g.rule(refLines.bl, refLines.bm, refLines.br) }

func (g *refGrid) row(row []string, align refAlignment) {
	split := make([][]string, len(g.widths))
	height := 1
	for i := range g.widths {
		if i < len(row) {
			split[i] = strings.Split(row[i], "\n")
			height = max(height, len(split[i]))
		}
	}
	var b strings.Builder
	for k := range height {
		if g.style == Box {
			b.WriteString(refLines.v)
		}
		for i, n := range g.widths {
			if i > 0 && g.style == Box {
				b.WriteString(refLines.v)
			}
			text := ""
			if k < len(split[i]) {
				text = strings.TrimSpace(split[i][k])
			}
			b.WriteString(refPad(text, n, align))
		}
		if g.style == Box {
			b.WriteString(refLines.v)
		}
		b.WriteByte('\n')
	}
	g.write(b.String())
}

func refPad(text string, n int, align refAlignment) string {
	room := max(n-2, 0)
	if textWidth(text) > room {
		text = textCut(text, room)
	}
	gap := room - textWidth(text)
	l := 0
	switch align {
	case refRight:
		l = gap
	case refCenter:
		l = gap / 2
	}
	return " " + strings.Repeat(" ", l) + text + strings.Repeat(" ", gap-l) + " "
}

func (t Table) refRowAlign() refAlignment {
	if t.Left {
		return refLeft
	}
	return refRight
}

// refPrint is Print as it drew before.
func (t Table) refPrint(w io.Writer) error {
	style, wide, width := writerOf(w)
	note := ""
	switch {
	case !wide && t.Wrap:
		t = t.wrapTo(style, width)
	case !wide:
		t, note = t.fit(style, width, wordsOf(w))
	}
	if t.Title != "" {
		if err := Note(w, t.Title); err != nil {
			return err
		}
	}
	g := &refGrid{w: w, style: style, widths: t.widths()}
	g.top()
	g.row(t.Header, refCenter)
	if len(t.Rows) > 0 {
		g.middle()
	}
	for _, r := range t.Rows {
		g.row(r, t.refRowAlign())
	}
	g.bottom()
	if g.err != nil {
		return g.err
	}
	if note != "" {
		return Note(w, note)
	}
	return nil
}

// refStream is Stream as it drew before.
type refStream struct {
	g     *refGrid
	align refAlignment
	keep  []int
	rows  int
}

func refStartStream(w io.Writer, t Table, widths []int) (*refStream, error) {
	style, wide, width := writerOf(w)
	ws := make([]int, len(t.Header))
	for i, h := range t.Header {
		ws[i] = widest(h) + 2
		if i < len(widths) {
			ws[i] = max(ws[i], widths[i])
		}
	}
	keep := make([]int, len(t.Header))
	for i := range keep {
		keep[i] = i
	}
	var left []string
	for _, name := range t.Optional {
		if wide || span(pick(ws, keep), style) <= width {
			break
		}
		if i := slices.Index(t.Header, name); i >= 0 {
			keep = slices.DeleteFunc(keep, func(k int) bool { return k == i })
			left = append(left, name)
		}
	}
	kept := pick(ws, keep)
	cut := false
	if !wide {
		shown := Table{Header: pickS(t.Header, keep)}
		narrowed := shown.limits(kept, style, width)
		cut = !slices.Equal(narrowed, kept)
		kept = narrowed
	}
	if t.Title != "" || len(left) > 0 || cut {
		title := t.Title
		switch {
		case len(left) > 0 && cut:
			title += wordsOf(w).Sprintf(" (%s left out and long cells cut to fit %d columns: %s shows them)", strings.Join(left, ", "), width, setting.Wide)
		case len(left) > 0:
			title += wordsOf(w).Sprintf(" (%s left out to fit %d columns: %s shows them)", strings.Join(left, ", "), width, setting.Wide)
		case cut:
			title += wordsOf(w).Sprintf(" (long cells cut to fit %d columns: %s shows them)", width, setting.Wide)
		}
		if err := Note(w, strings.TrimSpace(title)); err != nil {
			return nil, err
		}
	}
	s := &refStream{g: &refGrid{w: w, style: style, widths: kept}, align: t.refRowAlign(), keep: keep}
	s.g.top()
	s.g.row(pickS(t.Header, keep), refCenter)
	return s, s.g.err
}

func (s *refStream) Append(row []string) error {
	if s.rows == 0 {
		s.g.middle()
	}
	s.rows++
	s.g.row(pickS(row, s.keep), s.align)
	return s.g.err
}

func (s *refStream) Close() error {
	s.g.bottom()
	return s.g.err
}
