package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScreenWidths(t *testing.T) {
	env := func(cols string) func(string) string {
		return func(k string) string {
			if k == "COLUMNS" {
				return cols
			}
			return ""
		}
	}
	for _, tc := range []struct {
		cols        string
		help, table int
	}{{"", 80, 120}, {"60", 60, 60}, {"200", 200, 120}, {"junk", 80, 120}, {"-3", 80, 120}} {
		s := ScreenOf(nil, env(tc.cols))
		if s.HelpColumns() != tc.help || s.TableColumns() != tc.table {
			t.Errorf("COLUMNS=%q: help %d, tables %d; want %d, %d", tc.cols, s.HelpColumns(), s.TableColumns(), tc.help, tc.table)
		}
	}
}

func TestWrapKeepsEveryWordWithinWidth(t *testing.T) {
	text := "A paragraph written at the margin\nthat goes on here, long enough to wrap twice at forty columns.\n\n" +
		"  triton       prebuilt Triton kernels calling NVSHMEM device functions (nvshmem backend)"
	got := WrapHelp(text, 40)
	for _, l := range strings.Split(got, "\n") {
		if utf8.RuneCountInString(l) > 40 {
			t.Errorf("line of %d: %q", utf8.RuneCountInString(l), l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(text), " ") {
		t.Errorf("words changed:\n%s", got)
	}
	if !strings.Contains(got, "\n               ") {
		t.Errorf("a list item's text does not hang under its text:\n%s", got)
	}
}

func TestCommentsStayComments(t *testing.T) {
	var b bytes.Buffer
	w := &Writer{Writer: &b, Width: 30}
	Comment(w, "timing: the wall clock around the operations and the quiet")
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") || len(l) > 30 {
			t.Errorf("%q", l)
		}
	}
}

func TestTablesFitTheWriterWidth(t *testing.T) {
	tbl := Table{Header: []string{"size", "pair", "impl", "extra", "note"}, Optional: []string{"extra"},
		Rows: [][]string{{"4K", "0->1", "memcpy", "something wide", strings.Repeat("n", 60)}}}
	for _, width := range []int{50, 80} {
		for _, style := range []Style{Box, Plain} {
			var b bytes.Buffer
			tbl.Print(&Writer{Writer: &b, Style: style, Width: width})
			for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("width %d style %d: line of %d: %q", width, style, n, l)
				}
			}
		}
	}
}
