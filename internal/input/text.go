package input

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/symmem/symmem/internal/lazyre"
)

// MaxEcho is how much of a value an error repeats: enough to recognise it, and a
// megabyte-long value still gives a one-line error.
const MaxEcho = 64

// Quote is s quoted for an error message, as %q would (control characters escaped),
// cut to MaxEcho bytes with the length of the whole where it is longer.
func Quote(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// Clip cuts a message that repeats long values to about max bytes, keeping its start
// and its end (where what to do is said).
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max*2/3, max/3
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return fmt.Sprintf("%s ...(%d bytes cut)... %s", s[:head], start-head, s[start:])
}

// MaxWord is the longest run of characters without a space that a message keeps whole:
// a path, a host name or a stack frame is shorter; a longer one is a value repeated
// unquoted (a host name from a 900 KB --store-addr), which ClipWords cuts.
const MaxWord = 256

// ClipWords cuts every run of characters without a space (or newline, or tab) longer
// than MaxWord in s to its first MaxEcho bytes and the length of the whole, as Quote
// cuts a quoted value: "aaaa... (900000 bytes)"; the punctuation that ends it stays.
func ClipWords(s string) string {
	var b strings.Builder
	start, cut := 0, 0 // the current word's start; what of s is in b
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != ' ' && s[i] != '\n' && s[i] != '\t' {
			continue
		}
		if i-start > MaxWord {
			keep := start + MaxEcho
			for keep > start && !utf8.RuneStart(s[keep]) {
				keep--
			}
			end := i // the punctuation that ends the word stays: "directory aaa...:"
			for end > i-2 && strings.IndexByte(":;,.)", s[end-1]) >= 0 {
				end--
			}
			b.WriteString(s[cut:keep])
			fmt.Fprintf(&b, "... (%d bytes)", end-start)
			cut = end
		}
		start = i + 1
	}
	if cut == 0 {
		return s
	}
	b.WriteString(s[cut:])
	return b.String()
}

// Printable replaces the control characters in s, newlines and tabs aside, with their
// escapes (ESC becomes \x1b): text read from a file must not drive the terminal it is
// printed on (move the cursor, retitle the window, hide what follows).
func Printable(s string) string {
	if !hasControl(s) {
		return s
	}
	out := make([]byte, 0, len(s)+16)
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			out = append(out, q[1:len(q)-1]...)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

func hasControl(s string) bool {
	for _, r := range s {
		if isControl(r) {
			return true
		}
	}
	return false
}

// isControl: C0 and C1 controls and DEL, which terminals act on; a byte that is no
// UTF-8 (RuneError) too, as the start of a C1 sequence in a legacy encoding.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0 || r == utf8.RuneError)
}

// Terminal wraps w so that what is written through it is Printable: for output that
// repeats text from files (a saved result's names and command line). Each Write is
// taken whole, as the printers write whole lines.
func Terminal(w io.Writer) io.Writer { return terminal{w} }

type terminal struct{ w io.Writer }

func (t terminal) Write(p []byte) (int, error) {
	s := string(p)
	if !hasControl(s) {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, Printable(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap is the writer under t: tables printed through t are laid out as on it.
func (t terminal) Unwrap() io.Writer { return t.w }

// ClipQuoted cuts every quoted value in msg longer than MaxEcho as Quote does: a
// check deep down that quotes what it refused (a 900 KB value of a config file) must
// not make the message that long.
func ClipQuoted(msg string) string {
	return longQuoted().ReplaceAllStringFunc(msg, func(q string) string {
		s, err := strconv.Unquote(q)
		if err != nil {
			return q
		}
		return Quote(s)
	})
}

// longQuoted is a quoted value longer than MaxEcho, compiled on first use: its
// repetition count makes a large program.
var longQuoted = lazyre.MustCompile(`"(?:[^"\\]|\\.){` + strconv.Itoa(MaxEcho+1) + `,}"`)
