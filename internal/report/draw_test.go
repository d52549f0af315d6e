package report

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// pieces are what random cells are made of: words and numbers, spaces, what a terminal
// lays out unlike ASCII (ambiguous, wide and zero-width characters, an emoji of several
// runes, control characters, ANSI escape sequences), and line breaks.
var pieces = []string{
	"a", "size", "1.25", "100000", "GB/s", "nvshmem", "put_block", "-", " ", "  ", "/opt/x/lib",
	"µs", "…", "日本", "語", "e\u0301", "🙂", "👩\u200d💻", "Ω", "\t", "x y z", "\n", "\n\n", "\r", "\x00", "\u200b", "\u00a0", "\v",
	"\x1b[31m", "\x1b]0;t\x07", "\x1b\u200b",
}

// randText is up to n random pieces.
func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// randTable is a random table: a header of 1 to 7 columns, rows that may be shorter or
// longer than it, optional columns (one perhaps not in the header), left or right, wrapped
// or not.
func randTable(r *rand.Rand) Table {
	t := Table{Left: r.IntN(2) == 0, Wrap: r.IntN(4) == 0}
	if r.IntN(2) == 0 {
		t.Title = "title " + randText(r, 3)
	}
	cols := 1 + r.IntN(7)
	for i := range cols {
		h := fmt.Sprintf("c%d", i)
		if r.IntN(3) == 0 {
			h += " " + randText(r, 3)
		}
		t.Header = append(t.Header, h)
		if i > 0 && r.IntN(3) == 0 { // a table keeps a column, as each of symmem's does
			t.Optional = append(t.Optional, h)
		}
	}
	if r.IntN(5) == 0 {
		t.Optional = append(t.Optional, "absent")
	}
	r.Shuffle(len(t.Optional), func(i, j int) { t.Optional[i], t.Optional[j] = t.Optional[j], t.Optional[i] })
	long := 3 + r.IntN(30)
	for range r.IntN(7) {
		row := make([]string, max(0, cols-1+r.IntN(3)))
		for i := range row {
			row[i] = randText(r, r.IntN(long))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// randWriter is a writer of a random style and width, wide or not.
func randWriter(r *rand.Rand, b *bytes.Buffer) *Writer {
	return &Writer{Writer: b, Style: Style(r.IntN(2)), Wide: r.IntN(4) == 0, Width: []int{0, 20, 30, 40, 60, 80, 100, 120}[r.IntN(8)]}
}

// TestTablewriterDrawsAsBefore draws random tables, printed whole and streamed, in both
// styles, fitted (columns left out, cells cut or wrapped) or wide, with tablewriter and
// with the drawing code it replaced (draw_ref_test.go), and wants the same bytes.
func TestTablewriterDrawsAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(56, 7))
	for n := range 3000 {
		tb := randTable(r)
		var want, got bytes.Buffer
		seed := r.Uint64()
		wr := randWriter(rand.New(rand.NewPCG(seed, 0)), &want)
		wn := randWriter(rand.New(rand.NewPCG(seed, 0)), &got)
		if n%2 == 0 {
			if err := tb.refPrint(wr); err != nil {
				t.Fatal(err)
			}
			if err := tb.Print(wn); err != nil {
				t.Fatal(err)
			}
		} else {
			widths := make([]int, r.IntN(len(tb.Header)+2))
			for i := range widths {
				widths[i] = r.IntN(40)
			}
			ref, err := refStartStream(wr, tb, widths)
			if err != nil {
				t.Fatal(err)
			}
			s, err := StartStream(wn, tb, widths)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range tb.Rows {
				if err := ref.Append(row); err != nil {
					t.Fatal(err)
				}
				if err := s.Append(row); err != nil {
					t.Fatal(err)
				}
			}
			if err := ref.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if got.String() != want.String() {
			t.Fatalf("table %d (stream %v, style %v, wide %v, width %d) %#v\ngot:\n%s\nwant:\n%s\ngot  %q\nwant %q",
				n, n%2 == 1, wn.Style, wn.Wide, wn.Width, tb, got.String(), want.String(), got.String(), want.String())
		}
	}
}

// failing takes n bytes, then fails every write.
type failing struct{ n int }

var errFull = errors.New("disk full")

func (f *failing) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestTablesSayTheirWriteFailed(t *testing.T) {
	// tablewriter does not look at what its writes return: report does.
	tb := Table{Header: []string{"size", "time"}, Rows: [][]string{{"1K", "2.5"}, {"1M", "30.1"}}}
	for n := range 400 {
		err := tb.Print(&Writer{Writer: &failing{n: n}, Style: Box, Wide: true})
		if want := n < len(draw(t, tb, Box)); (err != nil) != want {
			t.Fatalf("Print on a writer that takes %d bytes: %v", n, err)
		}
	}
	s, err := StartStream(&Writer{Writer: &failing{n: 200}, Style: Box}, Table{Header: []string{"size", "time"}}, []int{10, 12})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		err = s.Append([]string{"1K", "2.5"})
	}
	if !errors.Is(err, errFull) || !errors.Is(s.Close(), errFull) {
		t.Errorf("stream on a full disk: %v", err)
	}
}
