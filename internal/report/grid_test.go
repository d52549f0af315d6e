package report

import (
	"bytes"
	"strings"
	"testing"
)

// draw is t printed on a writer of style, every column kept.
func draw(t *testing.T, tb Table, style Style) string {
	t.Helper()
	var b bytes.Buffer
	if err := tb.Print(&Writer{Writer: &b, Style: style, Wide: true}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestPrintDrawsBoxesAndPlainColumns(t *testing.T) {
	tb := Table{Title: "title", Header: []string{"rank", "name", "x"}, Rows: [][]string{{"1", "alpha", "3.5"}, {"22", " b ", ""}, {"3", "µs…", "100000"}}}
	box := `title
┌──────┬───────┬────────┐
│ rank │ name  │   x    │
├──────┼───────┼────────┤
│    1 │ alpha │    3.5 │
│   22 │     b │        │
│    3 │   µs… │ 100000 │
└──────┴───────┴────────┘
`
	if got := draw(t, tb, Box); got != box {
		t.Errorf("box:\n%s\nwant:\n%s", got, box)
	}
	tb.Left = true
	plain := "title\n" +
		" rank  name     x    \n" +
		" 1     alpha  3.5    \n" +
		" 22    b             \n" +
		" 3     µs…    100000 \n"
	if got := draw(t, tb, Plain); got != plain {
		t.Errorf("plain:\n%q\nwant:\n%q", got, plain)
	}
}

func TestPrintMeasuresWhatATerminalShows(t *testing.T) {
	// A wide character takes two columns; a cell of two lines makes its row two tall;
	// a table without rows has no rule under its header.
	got := draw(t, Table{Header: []string{"name", "note"}, Rows: [][]string{{"日本", "one\ntwo"}}}, Box)
	want := `┌──────┬──────┐
│ name │ note │
├──────┼──────┤
│ 日本 │  one │
│      │  two │
└──────┴──────┘
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := draw(t, Table{Header: []string{"a"}}, Box); got != "┌───┐\n│ a │\n└───┘\n" {
		t.Errorf("no rows:\n%s", got)
	}
}

func TestPrintFitsByCuttingOrWrapping(t *testing.T) {
	long := "a cell far too long to fit the width the table is given here"
	var b bytes.Buffer
	tb := Table{Header: []string{"k", "detail"}, Left: true, Rows: [][]string{{"x", long}}}
	if err := tb.Print(&Writer{Writer: &b, Style: Box, Width: 30}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if w := textWidth(lines[0]); w != 30 || !strings.Contains(b.String(), "…") || !strings.Contains(b.String(), "long cells cut to fit 30") {
		t.Errorf("cut to 30 columns: the rule is %d wide:\n%s", w, b.String())
	}
	b.Reset()
	tb.Wrap = true
	if err := tb.Print(&Writer{Writer: &b, Style: Box, Width: 30}); err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if textWidth(l) > 30 {
			t.Errorf("line wider than 30: %q", l)
		}
		if f := strings.Split(l, "│"); len(f) == 4 && strings.TrimSpace(f[2]) != "" && strings.TrimSpace(f[2]) != "detail" {
			words = append(words, strings.TrimSpace(f[2]))
		}
	}
	if got := strings.Join(words, " "); got != long {
		t.Errorf("the wrapped cell reads %q, want %q:\n%s", got, long, b.String())
	}
}

func TestStreamCutsCellsToItsColumns(t *testing.T) {
	var b bytes.Buffer
	s, err := StartStream(&Writer{Writer: &b, Style: Box, Wide: true}, Table{Header: []string{"size", "time"}}, []int{8, 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]string{{"1K", "12.5"}, {"1M", "123456789012"}} {
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := `┌────────┬──────────┐
│  size  │   time   │
├────────┼──────────┤
│     1K │     12.5 │
│     1M │ 12345678 │
└────────┴──────────┘
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrapBreaksAWordWiderThanItsColumn(t *testing.T) {
	path := "/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem/lib/libnvshmem_host.so.3"
	var b bytes.Buffer
	tb := Table{Header: []string{"variable", "value"}, Left: true, Wrap: true, Rows: [][]string{{"NVSHMEM_HOME", path}}}
	if err := tb.Print(&Writer{Writer: &b, Style: Box, Width: 40}); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if textWidth(l) > 40 {
			t.Errorf("line wider than 40: %q", l)
		}
		if f := strings.Split(l, "│"); len(f) == 4 && strings.TrimSpace(f[2]) != "value" {
			got.WriteString(strings.TrimSpace(f[2]))
		}
	}
	if got.String() != path {
		t.Errorf("the path reads %q over the lines, want it whole:\n%s", got.String(), b.String())
	}
}
