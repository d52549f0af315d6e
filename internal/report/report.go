package report

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/setting"
)

// Table is a titled grid of strings.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	// Left aligns cells left (text); the default is right (numbers).
	Left bool
	// Optional names the columns (by header) left out, in this order, until the table
	// fits MaxWidth; --wide keeps them.
	Optional []string
	// Wrap fits a table of text (what to fix, and why) in MaxWidth by wrapping its long
	// cells over lines rather than cutting them.
	Wrap bool
}

// Style is how tables are drawn.
type Style int

const (
	// Box draws Unicode box lines.
	Box Style = iota
	// Plain aligns columns with spaces only: for terminals that cannot draw boxes
	// (LANG=C, TERM=dumb), and for grep and awk.
	Plain
)

// MaxWidth is the width default tables fit in.
const MaxWidth = 120

// Writer is an output that says how tables are drawn on it: the commands' stdout.
type Writer struct {
	io.Writer
	Style Style
	// Wide keeps every column, however wide the table.
	Wide bool
	// Width is the columns tables and notes fit in (Screen.TableColumns); 0 is MaxWidth.
	Width int
	// Words name the settings a table's notes speak of ("--wide shows them"): the
	// flags of the command that prints.
	Words setting.Words
}

// StyleFor picks the style for --format (box, plain, or "" for auto) and the
// environment: plain where the terminal cannot draw boxes, TERM=dumb or a locale set to
// one without UTF-8 (LANG=C); boxes otherwise (no locale set at all reads as most
// terminals draw).
func StyleFor(format string, getenv func(string) string) (Style, error) {
	switch format {
	case "box":
		return Box, nil
	case "plain":
		return Plain, nil
	case "", "auto":
	default:
		return Box, setting.Errorf("%s %q: use box, plain or auto", setting.Format, format)
	}
	if getenv("TERM") == "dumb" {
		return Plain, nil
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			if l := strings.ToLower(v); strings.Contains(l, "utf-8") || strings.Contains(l, "utf8") {
				return Box, nil
			}
			return Plain, nil
		}
	}
	return Box, nil
}

// StyleOn picks the style for --format and the environment as StyleFor does, and
// plain where the output is no terminal (a file, a pipe: grep and awk read it) unless
// --format box asks for boxes.
func StyleOn(format string, getenv func(string) string, terminal bool) (Style, error) {
	style, err := StyleFor(format, getenv)
	if err == nil && !terminal && (format == "" || format == "auto") {
		style = Plain
	}
	return style, err
}

// unwrapper is a writer that filters another (input.Terminal): tables on it are laid
// out as on the other.
type unwrapper interface{ Unwrap() io.Writer }

// find is the Writer under w, or nil.
func find(w io.Writer) *Writer {
	for {
		switch x := w.(type) {
		case *Writer:
			return x
		case unwrapper:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// writerOf is how tables are laid out on w: its style, whether it keeps every column,
// and the width tables fit. A writer that is no Writer (a test's buffer) gets boxes,
// every column.
func writerOf(w io.Writer) (Style, bool, int) {
	if tw := find(w); tw != nil {
		width := tw.Width
		if width <= 0 {
			width = MaxWidth
		}
		return tw.Style, tw.Wide, width
	}
	return Box, true, MaxWidth
}

// wordsOf is how settings are named on w: its Writer's Words (bare names on a writer
// that is none).
func wordsOf(w io.Writer) setting.Words {
	if tw := find(w); tw != nil {
		return tw.Words
	}
	return nil
}

// layoutOf is the width notes on w wrap to, 0 where they are not wrapped (--wide).
func layoutOf(w io.Writer) (Style, int) {
	style, wide, width := writerOf(w)
	if wide {
		return style, 0
	}
	return style, width
}

// Columns is the width tables on w fit, 0 where they are not fitted (--wide).
func Columns(w io.Writer) int {
	_, width := layoutOf(w)
	return width
}

// StyleOf is the style tables on w are drawn in.
func StyleOf(w io.Writer) Style {
	style, _, _ := writerOf(w)
	return style
}

// Print renders t in w's style, fitted to w's width unless w is wide.
func (t Table) Print(w io.Writer) error {
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
	ws := t.widths()
	tbl := newTable(w, style, ws, t.rowAlign(), false)
	tbl.Header(cells(t.Header, ws))
	for _, r := range t.Rows {
		if err := tbl.Append(cells(r, ws)); err != nil {
			return err
		}
	}
	if err := tbl.done(tbl.Render()); err != nil {
		return err
	}
	if note != "" {
		return Note(w, note)
	}
	return nil
}

// widths are the columns' widths, padding included: each the widest line of its
// header and cells.
func (t Table) widths() []int {
	ws := make([]int, len(t.Header))
	for i, h := range t.Header {
		ws[i] = widest(h) + 2
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(ws) {
				ws[i] = max(ws[i], widest(c)+2)
			}
		}
	}
	return ws
}

// widest is the width of text's widest line.
func widest(text string) int {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		n = max(n, textWidth(strings.TrimSpace(line)))
	}
	return n
}

// limits narrows the widest of the columns ws a column at a time until they span
// width in style, none below its header or 10 columns, and returns the narrowed ones.
func (t Table) limits(ws []int, style Style, width int) []int {
	limit := slices.Clone(ws)
	for span(limit, style) > width {
		i := slices.Index(limit, slices.Max(limit))
		if limit[i] <= max(widest(t.Header[i])+2, 10) {
			break // nothing left worth narrowing
		}
		limit[i]--
	}
	return limit
}

// wrapTo fits t in width by wrapping the cells of its widest columns over lines, at
// spaces where it can; a word wider than its column (a path) is broken within.
func (t Table) wrapTo(style Style, width int) Table {
	ws := t.widths()
	limit := t.limits(ws, style, width)
	rows := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		rows[r] = slices.Clone(row)
		for i, c := range row {
			if i < len(limit) && limit[i] < ws[i] {
				rows[r][i] = Fold(Wrap(c, limit[i]-2, ""), limit[i]-2)
			}
		}
	}
	t.Rows = rows
	return t
}

// Fold breaks each line of text wider than n columns into lines of n (after Wrap,
// which leaves a word wider than its width whole).
func Fold(text string, n int) string {
	if n <= 0 {
		return text
	}
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		for textWidth(line) > n {
			head := textCut(line, n)
			if head == "" { // a character wider than the column
				head = string([]rune(line)[:1])
			}
			out = append(out, head)
			line = line[len(head):]
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// span is how wide a table of column widths ws is drawn in style.
func span(ws []int, style Style) int {
	n := 0
	for _, w := range ws {
		n += w
	}
	if style == Box {
		n += len(ws) + 1
	}
	return n
}

// fit leaves t's optional columns out until it fits width, then cuts its widest
// column's cells, and says what it did (note) for --wide to undo.
func (t Table) fit(style Style, width int, words setting.Words) (Table, string) {
	var left []string
	for _, name := range t.Optional {
		if span(t.widths(), style) <= width {
			break
		}
		if i := slices.Index(t.Header, name); i >= 0 {
			t = t.without(i)
			left = append(left, name)
		}
	}
	// Then the widest columns lose a character at a time, so that the cut falls on
	// the longest cells and the rest stay whole.
	cut := false
	if ws := t.widths(); span(ws, style) > width {
		limit := t.limits(ws, style, width)
		rows := make([][]string, len(t.Rows))
		for r, row := range t.Rows {
			rows[r] = slices.Clone(row)
			for i, c := range row {
				if i < len(limit) && widest(c) > limit[i]-2 {
					rows[r][i] = shorten(c, limit[i]-2)
					cut = true
				}
			}
		}
		t.Rows = rows
	}
	switch {
	case len(left) > 0 && cut:
		return t, words.Sprintf("(columns %s left out and long cells cut to fit %d columns: %s shows them)", strings.Join(left, ", "), width, setting.Wide)
	case len(left) > 0:
		return t, words.Sprintf("(columns %s left out to fit %d columns: %s shows them)", strings.Join(left, ", "), width, setting.Wide)
	case cut:
		return t, words.Sprintf("(long cells cut to fit %d columns: %s shows them)", width, setting.Wide)
	}
	return t, ""
}

// shorten is text with each line cut to n columns, "…" marking a cut.
func shorten(text string, n int) string {
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		if textWidth(l) > n {
			ls[i] = textCut(l, n-1) + "…"
		}
	}
	return strings.Join(ls, "\n")
}

// without is t less column i.
func (t Table) without(i int) Table {
	t.Header = slices.Delete(slices.Clone(t.Header), i, i+1)
	rows := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		rows[r] = slices.Clone(row)
		if i < len(row) {
			rows[r] = slices.Delete(rows[r], i, i+1)
		}
	}
	t.Rows = rows
	return t
}

// Stream is a table printed a row at a time, as each is known: its columns' widths
// are fixed when it starts (a cell wider than its column is cut).
type Stream struct {
	tbl    table
	widths []int
	keep   []int // the columns shown, of the table's
}

// StartStream prints t's title and header and returns the table to append rows to;
// widths are the columns' widths, cells and padding included (at least each header's).
// Unless w is wide, t's optional columns are left out until it fits w's width, then
// the widest columns are narrowed (their cells cut), as Print does.
func StartStream(w io.Writer, t Table, widths []int) (*Stream, error) {
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
	tbl := newTable(w, style, kept, t.rowAlign(), true)
	if err := tbl.done(tbl.Start()); err != nil {
		return nil, err
	}
	tbl.Header(cells(pickS(t.Header, keep), kept))
	return &Stream{tbl: tbl, widths: kept, keep: keep}, tbl.done(nil)
}

func pick(ws, keep []int) []int {
	out := make([]int, 0, len(keep))
	for _, k := range keep {
		out = append(out, ws[k])
	}
	return out
}

func pickS(cells []string, keep []int) []string {
	out := make([]string, 0, len(keep))
	for _, k := range keep {
		if k < len(cells) {
			out = append(out, cells[k])
		}
	}
	return out
}

// Append prints one row.
func (s *Stream) Append(row []string) error {
	return s.tbl.done(s.tbl.Append(cells(pickS(row, s.keep), s.widths)))
}

// Close ends the table.
func (s *Stream) Close() error { return s.tbl.done(s.tbl.Close()) }

// CSV writes t's header and rows as CSV.
func (t Table) CSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Header); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// JSON writes v indented.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "0->1", not "0-\u003e1": nobody embeds these in HTML
	return enc.Encode(v)
}
