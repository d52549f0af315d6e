// Package report prints results for people (tables) and for programs (JSON, CSV).
package report

import (
	"encoding/csv"
	"encoding/json"
	"io"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Table is a titled grid of strings.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	// Left aligns cells left (text); the default is right (numbers).
	Left bool
}

// Print renders t as a box table.
func (t Table) Print(w io.Writer) error {
	if t.Title != "" {
		if _, err := io.WriteString(w, t.Title+"\n"); err != nil {
			return err
		}
	}
	tbl := tablewriter.NewTable(w, t.options()...)
	tbl.Header(t.Header)
	if err := tbl.Bulk(t.Rows); err != nil {
		return err
	}
	return tbl.Render()
}

func (t Table) options() []tablewriter.Option {
	align := tw.AlignRight
	if t.Left {
		align = tw.AlignLeft
	}
	return []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(align),
		tablewriter.WithHeaderAlignment(tw.AlignCenter),
	}
}

// Stream is a table printed a row at a time, as each is known: its columns' widths
// are fixed when it starts (a cell wider than its column is cut).
type Stream struct {
	tbl *tablewriter.Table
}

// StartStream prints t's title and header and returns the table to append rows to;
// widths are the columns' widths, cells and padding included (at least each header's).
func StartStream(w io.Writer, t Table, widths []int) (*Stream, error) {
	if t.Title != "" {
		if _, err := io.WriteString(w, t.Title+"\n"); err != nil {
			return nil, err
		}
	}
	m := tw.NewMapper[int, int]()
	for i, h := range t.Header {
		width := len(h) + 2
		if i < len(widths) {
			width = max(width, widths[i])
		}
		m.Set(i, width)
	}
	opts := append(t.options(), tablewriter.WithStreaming(tw.StreamConfig{Enable: true}), tablewriter.WithColumnWidths(m))
	tbl := tablewriter.NewTable(w, opts...)
	if err := tbl.Start(); err != nil {
		return nil, err
	}
	tbl.Header(t.Header)
	return &Stream{tbl: tbl}, nil
}

// Append prints one row.
func (s *Stream) Append(row []string) error { return s.tbl.Append(row) }

// Close ends the table.
func (s *Stream) Close() error { return s.tbl.Close() }

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
