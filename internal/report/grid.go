package report

import (
	"bytes"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// termCells measures text as a terminal lays it out: East Asian wide characters take two
// columns, combining marks none; an ambiguous character (…, µ) takes one, as in any
// terminal set to a UTF-8 locale outside East Asia.
var termCells = &runewidth.Condition{EastAsianWidth: false}

// textWidth is how many columns s takes on a terminal.
func textWidth(s string) int { return termCells.StringWidth(s) }

// textCut is s cut to at most n columns.
func textCut(s string, n int) string { return termCells.Truncate(s, n, "") }

// newTable is a tablewriter table that draws in style, its columns widths wide (a
// space each side included), the header centred and the rows aligned by align; stream
// makes it a table printed a row at a time.
//
// report decides the layout and tablewriter draws it: the cells it is given are already
// split into lines, trimmed and cut to their columns (cells), and the widths are fixed,
// so that its own trimming (of a whole cell, which would drop a cell's leading empty
// line), wrapping and truncating ("…" where report cuts bare) never act. It measures
// with go-runewidth as report does once East Asian widths are off, which WithEastAsian
// sets for the whole process (tablewriter keeps it in a global).
func newTable(w io.Writer, style Style, widths []int, align tw.Align, stream bool) table {
	m := tw.NewMapper[int, int]()
	for i, n := range widths {
		m.Set(i, n)
	}
	opts := []tablewriter.Option{
		tablewriter.WithEastAsian(false),
		tablewriter.WithTrimSpace(tw.Off),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignCenter),
		tablewriter.WithRowAlignment(align),
		tablewriter.WithColumnWidths(m),
	}
	if style == Plain {
		// No lines at all: the columns are parted by their padding alone.
		opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Symbols: tw.NewSymbols(tw.StyleNone),
			Borders: tw.Border{Left: tw.Off, Right: tw.Off, Top: tw.Off, Bottom: tw.Off},
			Settings: tw.Settings{Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines: tw.Lines{ShowHeaderLine: tw.Off}},
		})))
	}
	if stream {
		opts = append(opts, tablewriter.WithStreaming(tw.StreamConfig{Enable: true}))
	}
	out := &tableOutput{w: w}
	return table{tablewriter.NewTable(out, opts...), out}
}

// table is a tablewriter table and what it is drawn on.
type table struct {
	*tablewriter.Table
	out *tableOutput
}

// done is err, else the first error that writing the table met: tablewriter does not
// look at what its writes return.
func (t table) done(err error) error {
	if err != nil {
		return err
	}
	return t.out.err
}

// escMark is ESC as tablewriter is given it, with a zero-width space after it:
// tablewriter measures an ANSI escape sequence ("\x1b[31m") as no columns where report
// counts the characters after the ESC ("[31m"), and the space, which both measure as
// nothing, keeps tablewriter from seeing a sequence; tableOutput takes it out again.
const escMark = "\x1b\u200b"

// tableOutput is what a table is drawn on: it writes to w until a write fails, then
// keeps that error and writes no more, and it writes each ESC that cells marked as the
// ESC alone (tablewriter writes a line at a time, so no mark is split between writes).
type tableOutput struct {
	w   io.Writer
	err error
}

func (f *tableOutput) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	q := p
	if bytes.Contains(p, []byte(escMark)) {
		q = bytes.ReplaceAll(p, []byte(escMark), []byte("\x1b"))
	}
	if _, f.err = f.w.Write(q); f.err != nil {
		return 0, f.err
	}
	return len(p), nil
}

// cells is row as newTable's table is given it: a cell for each of the columns widths
// wide (missing ones empty, extra ones dropped), each line of a cell without its
// leading and trailing spaces and cut to its column, an empty line a space, each ESC
// marked (escMark).
func cells(row []string, widths []int) []string {
	out := make([]string, len(widths))
	for i, n := range widths {
		if i >= len(row) {
			continue
		}
		room := max(n-2, 0)
		lines := strings.Split(row[i], "\n")
		for k, l := range lines {
			l = strings.TrimSpace(l)
			if textWidth(l) > room {
				l = textCut(l, room)
			}
			if l == "" && room > 0 {
				// tablewriter leaves out a line of a row that is blank in every
				// cell; a space, drawn as the padding would be, keeps it.
				l = " "
			}
			lines[k] = strings.ReplaceAll(l, "\x1b", escMark)
		}
		out[i] = strings.Join(lines, "\n")
	}
	return out
}

// rowAlign is how t's rows' cells are aligned.
func (t Table) rowAlign() tw.Align {
	if t.Left {
		return tw.AlignLeft
	}
	return tw.AlignRight
}
