package report

import (
	"io"
	"strings"

	"github.com/mattn/go-runewidth"
)

// Tables are drawn here rather than by a table library: the drawing is a few lines,
// and a library's package initialisation runs in every process, each rank of a job
// included (tablewriter v1's builds an 8192-entry width cache and a pool of errors: a
// fifth of a bare `symmem help`).

// termCells measures text as a terminal lays it out: East Asian wide characters take two
// columns, combining marks none; an ambiguous character (…, µ) takes one, as in any
// terminal set to a UTF-8 locale outside East Asia.
var termCells = &runewidth.Condition{EastAsianWidth: false}

// textWidth is how many columns s takes on a terminal.
func textWidth(s string) int { return termCells.StringWidth(s) }

// textCut is s cut to at most n columns.
func textCut(s string, n int) string { return termCells.Truncate(s, n, "") }

// box is the Unicode box-drawing set the Box style draws with; Plain draws none.
type box struct{ h, v, tl, tm, tr, ml, mm, mr, bl, bm, br string }

var boxLines = box{"─", "│", "┌", "┬", "┐", "├", "┼", "┤", "└", "┴", "┘"}

// grid draws the lines of a table whose columns are widths wide, padding (a space each
// side) included.
type grid struct {
	w      io.Writer
	style  Style
	widths []int
	err    error
}

func (g *grid) write(s string) {
	if g.err == nil {
		_, g.err = io.WriteString(g.w, s)
	}
}

// rule draws a horizontal line between l and r, crossing the column borders at m.
func (g *grid) rule(l, m, r string) {
	if g.style != Box {
		return
	}
	var b strings.Builder
	b.WriteString(l)
	for i, n := range g.widths {
		if i > 0 {
			b.WriteString(m)
		}
		b.WriteString(strings.Repeat(boxLines.h, n))
	}
	b.WriteString(r)
	b.WriteByte('\n')
	g.write(b.String())
}

func (g *grid) top()    { g.rule(boxLines.tl, boxLines.tm, boxLines.tr) }
func (g *grid) middle() { g.rule(boxLines.ml, boxLines.mm, boxLines.mr) }
func (g *grid) bottom() { g.rule(boxLines.bl, boxLines.bm, boxLines.br) }

// alignment places text in a column.
type alignment int

const (
	alignRight alignment = iota
	alignLeft
	alignCenter
)

// row draws one row of cells (missing ones are empty), each line of a cell without
// its leading and trailing spaces: a cell of several lines makes the row as tall, and
// a cell wider than its column is cut.
func (g *grid) row(row []string, align alignment) {
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
			b.WriteString(boxLines.v)
		}
		for i, n := range g.widths {
			if i > 0 && g.style == Box {
				b.WriteString(boxLines.v)
			}
			text := ""
			if k < len(split[i]) {
				text = strings.TrimSpace(split[i][k])
			}
			b.WriteString(pad(text, n, align))
		}
		if g.style == Box {
			b.WriteString(boxLines.v)
		}
		b.WriteByte('\n')
	}
	g.write(b.String())
}

// pad is text placed in a column n wide: a space each side, the rest filled by align
// (centred text leans left by the odd space).
func pad(text string, n int, align alignment) string {
	room := max(n-2, 0)
	if textWidth(text) > room {
		text = textCut(text, room)
	}
	gap := room - textWidth(text)
	l := 0
	switch align {
	case alignRight:
		l = gap
	case alignCenter:
		l = gap / 2
	}
	return " " + strings.Repeat(" ", l) + text + strings.Repeat(" ", gap-l) + " "
}

// rowAlign is how t's rows' cells are aligned.
func (t Table) rowAlign() alignment {
	if t.Left {
		return alignLeft
	}
	return alignRight
}
