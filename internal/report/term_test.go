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

// A paragraph is wrapped once, from its source lines, at whatever indent it is
// written: an indented one written for 88 columns does not leave a word alone on a
// line at 80 (run --help left "+ r," so). List items and the lines under them are
// items still.
func TestWrapHelpJoinsIndentedParagraphs(t *testing.T) {
	text := "Intro:\n\n" +
		"  put          rank 0 writes --count elements of --value into --peer's buffer\n" +
		"  get          rank 0 reads them\n\n" +
		"  all-reduce, all-gather: every rank takes part with --count elements per block\n" +
		"  (element k of block p of rank r holds --value + r,\n" +
		"  + N*p for all-to-all), checked.\n\n" +
		"  triton       prebuilt Triton kernels calling NVSHMEM device functions (nvshmem\n" +
		"               backend; put, get)"
	got := WrapHelp(text, 60)
	want := "Intro:\n\n" +
		"  put          rank 0 writes --count elements of --value\n" +
		"               into --peer's buffer\n" +
		"  get          rank 0 reads them\n\n" +
		"  all-reduce, all-gather: every rank takes part with --count\n" +
		"  elements per block (element k of block p of rank r holds\n" +
		"  --value + r, + N*p for all-to-all), checked.\n\n" +
		"  triton       prebuilt Triton kernels calling NVSHMEM\n" +
		"               device functions (nvshmem backend; put, get)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Examples are shell commands: one too long is broken before a flag (with its value)
// and goes on after " \", a comment after it goes above it, and one that fits is left.
func TestWrapExamplesBreaksCommandsAsAShellReadsThem(t *testing.T) {
	text := "  symmem bench --op put --impl triton,copy-engine --min-size 1M --max-size 256M --plot bw.svg\n" +
		"  symmem bench -b 8 -e 128M --op all-reduce -J ar.json   # nccl-tests' letters\n" +
		"  symmem bench --json > new.json && symmem bench compare old.json new.json\n" +
		"  symmem run put"
	want := "  symmem bench --op put --impl triton,copy-engine \\\n" +
		"      --min-size 1M --max-size 256M --plot bw.svg\n" +
		"  # nccl-tests' letters\n" +
		"  symmem bench -b 8 -e 128M --op all-reduce -J ar.json\n" +
		"  symmem bench --json > new.json \\\n" +
		"      && symmem bench compare old.json new.json\n" +
		"  symmem run put"
	if got := WrapExamples(text, 56); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
