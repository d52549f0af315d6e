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
	align := tw.AlignRight
	if t.Left {
		align = tw.AlignLeft
	}
	tbl := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(align),
		tablewriter.WithHeaderAlignment(tw.AlignCenter),
	)
	tbl.Header(t.Header)
	if err := tbl.Bulk(t.Rows); err != nil {
		return err
	}
	return tbl.Render()
}

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
	return enc.Encode(v)
}
