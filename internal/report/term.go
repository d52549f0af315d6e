package report

import (
	"io"
	"os"
	"slices"
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

// indentOf is how many spaces line starts with.
func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// WrapHelp wraps help text to width, each paragraph once, from its source lines: the
// lines of a paragraph (lines at one indent, up to a blank line, a line at another
// indent or a list item; a line that ends in ":" ends one) are joined and filled
// again, so that a paragraph written for one width reads whole at another; a list
// item's text goes on under its text (with the lines written under it), other lines
// under their first character.
func WrapHelp(text string, width int) string {
	var lines []string
	goesOn := -1 // the indent a line must have to go on the last paragraph (-1: none)
	for _, line := range strings.Split(text, "\n") {
		if goesOn >= 0 && line != "" && indentOf(line) == goesOn && !isItem(line) {
			lines[len(lines)-1] += " " + strings.TrimLeft(line, " ")
		} else {
			lines = append(lines, line)
		}
		last := lines[len(lines)-1]
		switch {
		case last == "" || strings.HasSuffix(last, ":"):
			goesOn = -1
		case isItem(last):
			goesOn = len(listItem().FindString(last)) // its text's column
		default:
			goesOn = indentOf(last)
		}
	}
	for i, line := range lines {
		indent := ""
		if m := listItem().FindString(line); m != "" && len(m) < width/2 {
			indent = strings.Repeat(" ", len(m)-indentOf(line))
		}
		lines[i] = wrapLine(line, width, indent)
	}
	return strings.Join(lines, "\n")
}

// isItem says whether line is a list item (listItem).
func isItem(line string) bool { return listItem().MatchString(line) }

// WrapExamples wraps the command lines of help's examples to width as a shell reads
// them: a command too long is broken before one of its flags (a flag stays with its
// value) or a shell operator, each broken line ending in " \" and the next indented
// under it; a comment after it ("  # ...") goes on a line of its own above it. A line
// is never broken inside a command, as a paragraph would be.
func WrapExamples(text string, width int) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if utf8.RuneCountInString(line) <= width {
			out = append(out, line)
			continue
		}
		lead := line[:indentOf(line)]
		cmd := strings.TrimLeft(line, " ")
		if i := strings.Index(cmd, "  # "); i >= 0 {
			out = append(out, lead+strings.TrimSpace(cmd[i:]))
			cmd = strings.TrimSpace(cmd[:i])
		}
		out = append(out, breakCommand(cmd, lead, width)...)
	}
	return strings.Join(out, "\n")
}

// breakCommand breaks a shell command, lead before it, into lines of width at most
// (but for a flag and its value longer than a line): before a flag or a shell
// operator where it can, else at any space that parts neither a flag from its value
// nor an operator from its operand.
func breakCommand(cmd, lead string, width int) []string {
	words := strings.Fields(cmd)
	var lines []string
	cont := lead + "    "
	cur := lead
	fresh := func() bool { return cur == lead || cur == cont }
	add := func(part string) {
		if !fresh() {
			cur += " "
		}
		cur += part
	}
	fits := func(part string) bool {
		n := utf8.RuneCountInString(cur) + utf8.RuneCountInString(part)
		if !fresh() {
			n++
		}
		return n <= width-2 // room for " \\"
	}
	for _, part := range parts(words, true) {
		if !fresh() && !fits(part) {
			lines, cur = append(lines, cur+" \\"), cont
		}
		if fits(part) || fresh() && len(parts(strings.Fields(part), false)) == 1 {
			add(part)
			continue
		}
		for _, p := range parts(strings.Fields(part), false) {
			if !fresh() && !fits(p) {
				lines, cur = append(lines, cur+" \\"), cont
			}
			add(p)
		}
	}
	return append(lines, cur)
}

// parts groups a command's words into what a line break must not split: a flag with
// its value, an operator with its operand; where strong, also the words up to the
// next flag or operator (a command and its arguments).
func parts(words []string, strong bool) []string {
	var out []string
	for _, w := range words {
		if n := len(out); n > 0 {
			last := out[n-1][strings.LastIndex(out[n-1], " ")+1:]
			value := strings.HasPrefix(last, "-") && !strings.Contains(last, "=") && !strings.HasPrefix(w, "-")
			starts := strings.HasPrefix(w, "-") || shellOp(w)
			if value || shellOp(last) || strong && !starts {
				out[n-1] += " " + w
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

// shellOp says whether part is a shell operator alone, which its operand must follow
// on the same line.
func shellOp(part string) bool {
	return slices.Contains([]string{"|", "||", "&&", ";", ">", ">>", "<", "2>"}, part)
}
