package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documents whose marked examples TestDocExamples runs, and the directory their
// commands run in (the repository root), from this package's directory.
var (
	docExampleFiles = []string{"../../README.md", "../../docs/*.md"}
	docExampleDir   = filepath.Join("..", "..")
)

// An example is a console block right after a marker line:
//
//	<!-- example: put-ring -->            (exit status 0)
//	<!-- example: wrong-data exit=3 -->   (exit status 3)
//	```console
//	$ bin/symmem run put --nproc 4 --backend cpu
//	...what it prints, stdout and stderr as one stream...
//	```
var exampleMarker = regexp.MustCompile(`^<!-- example: ([a-z0-9-]+)(?: exit=(\d+))? -->$`)

const regenerate = "go test ./internal/cli -run TestDocExamples -update"

type docExample struct {
	file, name string
	exit       int
	line       int // of the "$ " command
	args       []string
	want       []string // the output lines shown
	first      int      // index in the file's lines of want[0]
}

// TestDocExamples runs every marked example of the README and docs/ with this package's
// test binary as symmem (the same Main and backends cmd/symmem runs) and fails when
// what it prints differs from what the page shows, once times, ports, paths and the
// build's provenance are masked. -update rewrites the pages' samples from the runs.
func TestDocExamples(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pattern := range docExampleFiles {
		m, err := filepath.Glob(pattern)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no such file (%v)", pattern, err)
		}
		files = append(files, m...)
	}
	inReadme := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		examples, err := parseDocExamples(file, lines)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(file) == "README.md" {
			inReadme = len(examples)
		}
		// Later blocks first, so that rewriting one leaves the earlier ones' line
		// numbers as they were.
		changed := false
		for _, ex := range slices.Backward(examples) {
			got, code := runDocExample(t, exe, ex)
			if code != ex.exit {
				t.Errorf("%s:%d: example %s exited %d, the page says %d; it printed:\n%s",
					ex.file, ex.line, ex.name, code, ex.exit, strings.Join(got, "\n"))
				continue
			}
			if slices.Equal(normalDoc(got), normalDoc(ex.want)) {
				continue
			}
			if *update {
				lines = slices.Replace(lines, ex.first, ex.first+len(ex.want), keepShown(ex.want, got)...)
				changed = true
				continue
			}
			t.Errorf("%s:%d: example %s prints something else than the page shows (times, ports and paths masked; %s rewrites it):\n%s",
				ex.file, ex.line, ex.name, regenerate, lineDiff(normalDoc(ex.want), normalDoc(got)))
		}
		if changed {
			if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the examples of %s", file)
		}
	}
	if inReadme < 3 {
		t.Errorf("README.md has %d marked examples; its front page shows three, each after an <!-- example: NAME --> line", inReadme)
	}
}

// keepShown is got, except that where a line of it differs from the page's only in
// what is masked (a time, a measured cell), the page's line stays: regenerating after
// a change rewrites the lines the change touched, not every time.
func keepShown(shown, got []string) []string {
	if len(shown) != len(got) {
		return got
	}
	out := slices.Clone(got)
	ms, mg := maskDocOutput(shown), maskDocOutput(got)
	if !slices.Equal(sortRankLines(shown), shown) || !slices.Equal(sortRankLines(got), got) {
		return got // ranks' lines in another order: the run's, as a user sees them
	}
	for i := range out {
		if ms[i] == mg[i] {
			out[i] = shown[i]
		}
	}
	return out
}

// parseDocExamples finds the marked console blocks of one page.
func parseDocExamples(file string, lines []string) ([]docExample, error) {
	var out []docExample
	for i := 0; i < len(lines); i++ {
		m := exampleMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "<!-- example") {
				return nil, fmt.Errorf("%s:%d: %q: write <!-- example: NAME --> or <!-- example: NAME exit=N -->", file, i+1, lines[i])
			}
			continue
		}
		ex := docExample{file: file, name: m[1], line: i + 3}
		if m[2] != "" {
			ex.exit, _ = strconv.Atoi(m[2])
		}
		if i+2 >= len(lines) || lines[i+1] != "```console" || !strings.HasPrefix(lines[i+2], "$ ") {
			return nil, fmt.Errorf("%s:%d: example %s: the marker must be followed by a ```console block whose first line is \"$ symmem ...\"", file, i+1, ex.name)
		}
		args := strings.Fields(strings.TrimPrefix(lines[i+2], "$ "))
		if len(args) == 0 || (args[0] != "symmem" && args[0] != "bin/symmem") {
			return nil, fmt.Errorf("%s:%d: example %s: the command must be symmem or bin/symmem, not %q", file, i+3, ex.name, lines[i+2])
		}
		for _, a := range args {
			if strings.ContainsAny(a, "|&;<>$`'\"*") {
				return nil, fmt.Errorf("%s:%d: example %s: %q: an example is one symmem command, without quotes, pipes or redirections", file, i+3, ex.name, a)
			}
		}
		ex.args = args[1:]
		ex.first = i + 3
		end := ex.first
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: example %s: its ```console block never ends", file, i+1, ex.name)
		}
		ex.want = lines[ex.first:end]
		out = append(out, ex)
		i = end
	}
	return out, nil
}

// runDocExample runs one example's command and returns what it printed (ranks' lines
// in rank order) and its exit status.
func runDocExample(t *testing.T, exe string, ex docExample) ([]string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shm := t.TempDir()
	cmd := exec.CommandContext(ctx, exe, ex.args...)
	cmd.Args[0] = "symmem"  // TestMain runs Main for that name
	cmd.Dir = docExampleDir // the commands are written for the repository root (bin/symmem)
	// What a user's terminal would have, whatever the caller's: box tables of at most
	// 120 columns, no SYMMEM_* setting.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return strings.HasPrefix(name, "SYMMEM") || strings.HasPrefix(name, "LC_") ||
			slices.Contains([]string{"LANG", "TERM", "COLUMNS", "NO_COLOR"}, name)
	})
	cmd.Env = append(env, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm", "COLUMNS=120", "SYMMEM_FORMAT=box", envScriptShm+"="+shm)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // one pipe: the order the launcher wrote in
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("%s:%d: example %s: %v", ex.file, ex.line, ex.name, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s:%d: example %s did not finish in 2 minutes; it printed:\n%s", ex.file, ex.line, ex.name, out.String())
	}
	// As a terminal shows it, but for bench's word on its progress: on a terminal a
	// progress bar says it and clears itself.
	lines := slices.DeleteFunc(strings.Split(strings.TrimRight(out.String(), "\n"), "\n"), progressLine.MatchString)
	return lines, code
}

// progressLine is bench's word on its progress where stderr is not a terminal; on a
// terminal, what the pages show, a progress bar says it and clears itself.
var progressLine = regexp.MustCompile(`^bench: (.* rows landing \(|\d+ of \d+ measurements in )`)

// machineLine is what depends on the machine the example runs on: the warning about
// more ranks than cores (the pages show what a 2-core machine prints).
var machineLine = regexp.MustCompile(`^warning: \d+ ranks on \d+ CPU cores`)

// normalDoc is an example's output as the comparison sees it: without what depends
// on the machine, the ranks' lines in rank order (they print in whichever order they
// finish, and the page shows one such order), what changes from run to run masked.
func normalDoc(lines []string) []string {
	return maskDocOutput(sortRankLines(slices.DeleteFunc(slices.Clone(lines), machineLine.MatchString)))
}

var rankLine = regexp.MustCompile(`^\[(\d+)\] `)

// sortRankLines puts each run of ranks' lines ("[2] Rank 2: received ...") in rank
// order: the ranks print at once, in whichever order they finish.
func sortRankLines(lines []string) []string {
	out := slices.Clone(lines)
	rank := func(l string) int {
		n, _ := strconv.Atoi(rankLine.FindStringSubmatch(l)[1])
		return n
	}
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && rankLine.MatchString(out[j]) {
			j++
		}
		if j == i {
			i++
			continue
		}
		slices.SortStableFunc(out[i:j], func(a, b string) int { return rank(a) - rank(b) })
		i = j
	}
	return out
}

var (
	// A measured column: a time, a rate, a share of the peak, a single operation's.
	measuredColumn = regexp.MustCompile(`\bus\b|GB/s|bw$|% peak|1-op|^p50|^p99|worst`)
	docMasks       = []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`^(PASS|FAIL)\b.*`), "$1 (times)"},
		{regexp.MustCompile(`^(# Avg bus bandwidth +: ).*`), "${1}RATE"},
		// The kernels' hash stays: a page showing another build's kernels is stale.
		{regexp.MustCompile(`^# symmem .*(\bkernels [0-9a-f]+).*\bstarted .*`), "# symmem (version) $1 (host, start time)"},
		{regexp.MustCompile(`\b\d+\.\d+\.\d+\.\d+:\d+\b`), "ADDR"},
		{regexp.MustCompile(`(/tmp|/dev/shm|/root|/home)/\S*`), "PATH"},
		{regexp.MustCompile(`\b\d+(\.\d+)? (ms|s|us)\b`), "TIME"},
	}
)

// maskDocOutput replaces what changes from run to run (times, the cells of measured
// columns, addresses, paths, the build's provenance) with fixed words, keeping
// everything else (text, column names and widths, row keys, wrong counts) as printed.
func maskDocOutput(lines []string) []string {
	out := make([]string, 0, len(lines))
	var measured []bool // of the current box table's columns
	var bounds []int    // rune offsets of its column separators
	header, timing := false, false
	for _, l := range lines {
		l = strings.TrimRight(l, " ")
		// The timing line wraps where its figures make it long: its continuations go
		// with it.
		if timing && strings.HasPrefix(l, " ") {
			continue
		}
		timing = strings.HasPrefix(l, "PASS") || strings.HasPrefix(l, "FAIL")
		switch {
		case strings.HasPrefix(l, "┌"):
			header, measured, bounds = true, nil, nil
		case strings.HasPrefix(l, "│") && header:
			header = false
			r := []rune(l)
			for i, c := range r {
				if c == '│' {
					bounds = append(bounds, i)
				}
			}
			for k := 0; k+1 < len(bounds); k++ {
				name := strings.TrimSpace(string(r[bounds[k]+1 : bounds[k+1]]))
				measured = append(measured, measuredColumn.MatchString(name))
			}
		case strings.HasPrefix(l, "│"):
			r := []rune(l)
			for k, m := range measured {
				if !m || bounds[k+1] >= len(r) || r[bounds[k+1]] != '│' {
					continue
				}
				for i := bounds[k] + 1; i < bounds[k+1]; i++ {
					r[i] = ' '
				}
				r[bounds[k+1]-2] = '~'
			}
			l = string(r)
		default:
			for _, m := range docMasks {
				l = m.re.ReplaceAllString(l, m.with)
			}
		}
		out = append(out, l)
	}
	return out
}

// lineDiff shows the lines where want and got differ: pair by pair where they have as
// many lines, else from the first difference on.
func lineDiff(want, got []string) string {
	var b strings.Builder
	if len(want) == len(got) {
		for i := range want {
			if want[i] != got[i] {
				fmt.Fprintf(&b, "  line %d\n  - %s\n  + %s\n", i+1, want[i], got[i])
			}
		}
		return b.String()
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	fmt.Fprintf(&b, "  the page shows %d lines, the run printed %d; from line %d:\n", len(want), len(got), i+1)
	for k := i; k < min(len(want), i+8); k++ {
		fmt.Fprintf(&b, "  - %s\n", want[k])
	}
	for k := i; k < min(len(got), i+8); k++ {
		fmt.Fprintf(&b, "  + %s\n", got[k])
	}
	return b.String()
}
