package report

import (
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/symmem/symmem/internal/lazyre"
)

// HelpWidth is the width help text wraps to where the terminal's is unknown.
const HelpWidth = 80

// Screen is what a command's output goes to: whether it is a terminal, and how wide.
type Screen struct {
	// Terminal says the output is a terminal (not a file or a pipe).
	Terminal bool
	// Columns is the width to fit: COLUMNS where it is set to a positive number, else
	// the terminal's own; 0 where neither says.
	Columns int
}

// ScreenOf reads f's screen: COLUMNS (getenv), then the terminal f is on.
func ScreenOf(f *os.File, getenv func(string) string) Screen {
	var s Screen
	if f != nil {
		s.Terminal = term.IsTerminal(int(f.Fd()))
		if s.Terminal {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
				s.Columns = w
			}
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		s.Columns = n
	}
	return s
}

// HelpColumns is the width help text wraps to: the screen's, or HelpWidth where unknown.
func (s Screen) HelpColumns() int {
	if s.Columns > 0 {
		return s.Columns
	}
	return HelpWidth
}

// TableColumns is the width tables fit: MaxWidth, or the screen's where it is less.
func (s Screen) TableColumns() int {
	if s.Columns > 0 && s.Columns < MaxWidth {
		return s.Columns
	}
	return MaxWidth
}

// Wrap breaks text's lines longer than width at spaces. A wrapped line's continuation
// lines start with the line's own leading spaces and then indent (so that a list
// item's text stays under its text, or a "# " comment stays a comment). A word longer
// than width is left whole.
func Wrap(text string, width int, indent string) string {
	if width <= 0 {
		return text
	}
	lines := strings.Split(text, "\n")
	var b strings.Builder
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(wrapLine(line, width, indent))
	}
	return b.String()
}

// WrapIndent wraps one line to width, its continuation lines indented by indent.
func WrapIndent(line string, width int, indent string) string {
	return wrapLine(line, width, indent)
}

func wrapLine(line string, width int, indent string) string {
	if utf8.RuneCountInString(line) <= width {
		return line
	}
	lead := line[:len(line)-len(strings.TrimLeft(line, " "))]
	cont := lead + indent
	if utf8.RuneCountInString(cont) >= width/2 {
		cont = lead
	}
	words := strings.Split(strings.TrimLeft(line, " "), " ")
	var b strings.Builder
	cur := lead
	n := utf8.RuneCountInString(cur)
	fresh := true // nothing but the leading spaces on the current line
	for _, w := range words {
		wn := utf8.RuneCountInString(w)
		if !fresh && n+1+wn > width {
			b.WriteString(strings.TrimRight(cur, " "))
			b.WriteByte('\n')
			cur, n, fresh = cont, utf8.RuneCountInString(cont), true
		}
		if !fresh {
			cur += " "
			n++
		}
		cur += w
		n += wn
		fresh = false
	}
	b.WriteString(cur)
	return b.String()
}

// Comment writes text's lines as "# " lines that fit w's width (a long one goes on
// over lines that start "#   "); text is without the "# ".
func Comment(w io.Writer, text string) error {
	return Comments(w, "# "+strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n# ")+"\n")
}

// Comments writes text, lines of "# " comments, each wrapped to fit w's width (its
// continuation lines start "#   ").
func Comments(w io.Writer, text string) error {
	_, width := layoutOf(w)
	_, err := io.WriteString(w, Wrap(text, width, "#   "))
	return err
}

// Note writes a line of text that fits w's width, wrapped at spaces.
func Note(w io.Writer, text string) error {
	_, width := layoutOf(w)
	_, err := io.WriteString(w, Wrap(text, width, " ")+"\n")
	return err
}

// listItem is a line of help that names a thing, then says what it is after two or
// more spaces ("  triton       prebuilt Triton kernels"): its text goes on under the
// text, not under the name.
var listItem = lazyre.MustCompile(`^ *[^ ]+  +`)

// WrapHelp wraps help text to width: the lines of a paragraph (lines that start at
// the margin, up to a blank or indented line) are joined and filled again; a list
// item's lines go on under its text; other indented lines under their first character.
func WrapHelp(text string, width int) string {
	var lines []string
	para := false // the last line is a paragraph's, which the next may go on
	for _, line := range strings.Split(text, "\n") {
		atMargin := line != "" && line[0] != ' '
		if para && atMargin {
			lines[len(lines)-1] += " " + line
			continue
		}
		lines = append(lines, line)
		para = atMargin && !strings.HasSuffix(line, ":")
	}
	for i, line := range lines {
		indent := ""
		if m := listItem().FindString(line); m != "" && len(m) < width/2 {
			indent = strings.Repeat(" ", len(m)-(len(line)-len(strings.TrimLeft(line, " "))))
		}
		lines[i] = wrapLine(line, width, indent)
	}
	return strings.Join(lines, "\n")
}
