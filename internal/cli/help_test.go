package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/report"
)

// Every command's examples read as a shell reads them at every width: a command is
// never broken but with " \" (and then not before a flag's value), and each command
// and comment of the source comes out whole; every help line fits the width, but for
// a word longer than it.
func TestHelpExamplesStayCommands(t *testing.T) {
	var walk func(c *cobra.Command) []*cobra.Command
	walk = func(c *cobra.Command) []*cobra.Command {
		out := []*cobra.Command{c}
		for _, sub := range c.Commands() {
			out = append(out, walk(sub)...)
		}
		return out
	}
	for _, width := range []int{40, 60, 80, 120} {
		var out bytes.Buffer
		root := NewCmdRoot(IO{Out: &out, Err: &out, Screen: report.Screen{Columns: width}})
		for _, c := range walk(root) {
			if c.Example == "" {
				continue
			}
			out.Reset()
			root.SetArgs(append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "symmem")), "--help"))
			if err := root.Execute(); err != nil {
				t.Fatalf("%s --help: %v", c.CommandPath(), err)
			}
			help := out.String()
			// At 40 columns a flag and its value, or pflag's usage column, may not fit.
			for _, l := range strings.Split(help, "\n") {
				if n := utf8.RuneCountInString(l); n > width && width >= 60 {
					t.Errorf("%s --help at %d columns: a line of %d: %q", c.CommandPath(), width, n, l)
				}
			}
			shown := help[strings.Index(help, "Examples:\n")+len("Examples:\n"):]
			shown = shown[:strings.Index(shown, "\n\n")]
			if got, want := commands(t, shown, true), commands(t, c.Example, false); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s --help at %d columns shows the examples\n%s\nas\n%s\nwant\n%s", c.CommandPath(), width, shown, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
}

// commands are the commands and comments of examples, a line each, words single
// spaced: lines that end in " \" joined to the next, and a comment after a command
// set before it. Each line shown must start a command or be a comment.
func commands(t *testing.T, examples string, shown bool) []string {
	var lines []string
	goesOn := false
	for _, l := range strings.Split(examples, "\n") {
		if goesOn {
			lines[len(lines)-1] += " " + strings.TrimSpace(l)
		} else {
			lines = append(lines, l)
		}
		if goesOn = strings.HasSuffix(l, " \\"); goesOn {
			lines[len(lines)-1] = strings.TrimSuffix(lines[len(lines)-1], " \\")
		}
	}
	var out []string
	for _, l := range lines {
		if first, _, _ := strings.Cut(strings.TrimSpace(l), " "); shown && first != "symmem" && first != "srun" && first != "#" {
			t.Errorf("an example line that starts no command: %q", l)
		}
		if i := strings.Index(l, "  # "); i >= 0 && strings.TrimSpace(l[:i]) != "" {
			out = append(out, strings.TrimSpace(l[i:]))
			l = l[:i]
		}
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}
