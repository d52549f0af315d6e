package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// tree is a root with two commands whose settings overlap, like symmem's.
func tree() (root, run *cobra.Command, nproc *int, timeout *time.Duration, impls *[]string) {
	root = &cobra.Command{Use: "symmem"}
	run = &cobra.Command{Use: "run", Run: func(*cobra.Command, []string) {}}
	bench := &cobra.Command{Use: "bench", Run: func(*cobra.Command, []string) {}}
	nproc, timeout, impls = new(int), new(time.Duration), new([]string)
	run.Flags().IntVarP(nproc, "nproc", "n", 2, "")
	run.Flags().DurationVar(timeout, "timeout", time.Minute, "")
	run.Flags().String("impl", "", "")
	bench.Flags().StringSliceVar(impls, "impl", nil, "")
	bench.Flags().Int("reps", 5, "")
	root.AddCommand(run, bench)
	return
}

func file(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	_, run, nproc, timeout, _ := tree()
	run.ParseFlags([]string{"--timeout", "5s"})
	err := Apply(run, Sources{File: file(t, "version: 1\nnproc: 3\ntimeout: 9s\nreps: 7\n"), Env: []string{"SYMMEM_NPROC=4", "HOME=/root"}})
	if err != nil || *nproc != 4 || *timeout != 5*time.Second {
		t.Errorf("nproc %d (env 4 over file 3), timeout %s (flag 5s over file 9s), err %v", *nproc, *timeout, err)
	}
	_, run, nproc, _, _ = tree()
	if err := Apply(run, Sources{File: file(t, "nproc: 3\n")}); err != nil || *nproc != 3 {
		t.Errorf("nproc %d from the file, err %v", *nproc, err)
	}
	root, _, _, _, impls := tree()
	bench, _, _ := root.Find([]string{"bench"})
	if err := Apply(bench, Sources{File: file(t, "impl: [memcpy, triton]\n")}); err != nil || strings.Join(*impls, ",") != "memcpy,triton" {
		t.Errorf("bench --impl from a YAML list: %v, %v", *impls, err)
	}
}

// Every source is checked whether or not it wins, with one line that names the source
// and says what to type; a name that is no setting gets the nearest real one.
func TestBadSources(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		src   Sources
		want  string
	}{
		{"typed value under a flag", []string{"--nproc", "2"}, Sources{File: file(t, "nproc: lots\n")}, `cfg.yaml: nproc "lots": want a whole number, such as 4`},
		{"other command's setting", nil, Sources{File: file(t, "reps: two\n")}, `reps "two": want a whole number`},
		{"duration without unit", nil, Sources{File: file(t, "timeout: 30\n")}, `timeout "30": want a duration with its unit`},
		{"misspelt key", nil, Sources{File: file(t, "nprocs: 4\n")}, `"nprocs" is not a setting; did you mean nproc?`},
		{"far key", nil, Sources{File: file(t, "colour: red\n")}, `"colour" is not a setting; known settings: impl, nproc, reps, timeout`},
		{"version", nil, Sources{File: file(t, "version: 2\n")}, "version 2 is not supported"},
		{"bad YAML", nil, Sources{File: file(t, "nproc: [1\n")}, "is not valid YAML"},
		{"repeated key", nil, Sources{File: file(t, "nproc: 2\nnproc: 3\n")}, `is not valid YAML: line 2: mapping key "nproc" already defined at line 1`},
		{"a list, not settings", nil, Sources{File: file(t, "- nproc\n")}, `is not valid YAML: line 1: it holds a list; want settings, one per line (nproc: 4)`},
		{"missing file", nil, Sources{File: "/nonexistent/cfg.yaml"}, "config file /nonexistent/cfg.yaml: no such file or directory; give an existing YAML file"},
		{"env typo", nil, Sources{Env: []string{"SYMMEM_NPORC=4"}}, "environment variable SYMMEM_NPORC is not a setting; did you mean SYMMEM_NPROC?"},
		{"env far", nil, Sources{Env: []string{"SYMMEM_COLOUR=red"}}, "SYMMEM_COLOUR is not a setting (a setting's variable"},
		{"env value under a flag", []string{"-n", "2"}, Sources{Env: []string{"SYMMEM_NPROC=two"}}, `environment variable SYMMEM_NPROC "two": want a whole number, such as 4`},
		{"env near another variable", nil, Sources{Env: []string{"SYMMEM_CONFGI=x"}, Other: []string{"SYMMEM_CONFIG"}}, "did you mean SYMMEM_CONFIG?"},
		// An earlier default.yaml listed these (false): true would turn a command into another.
		{"a flag only, set", nil, Sources{File: file(t, "check: true\n")}, `"check" is the command-line flag of kernels build --check only, not a setting: remove it`},
		{"a flag only, in the environment", nil, Sources{Env: []string{"SYMMEM_DRY_RUN=1"}}, `environment variable SYMMEM_DRY_RUN: "dry-run" is the command-line flag of bench --dry-run only`},
	} {
		_, run, _, _, _ := tree()
		if err := run.ParseFlags(c.flags); err != nil {
			t.Fatal(err)
		}
		err := Apply(run, c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%s: got %v; want one line containing %q", c.name, err, c.want)
		}
	}
	// A further check runs on every source's value, the flag's too.
	addr := map[string]func(string) error{"impl": func(v string) error {
		if v == "tpu" {
			return errors.New("want a real implementation")
		}
		return nil
	}}
	for _, c := range []struct {
		flags []string
		src   Sources
		want  string
	}{
		{[]string{"--impl", "tpu"}, Sources{Checks: addr}, `--impl "tpu": want a real implementation`},
		{nil, Sources{Env: []string{"SYMMEM_IMPL=tpu"}, Checks: addr}, `environment variable SYMMEM_IMPL "tpu": want a real implementation`},
		{[]string{"--impl", "cuda"}, Sources{File: file(t, "impl: tpu\n"), Checks: addr}, `cfg.yaml: impl "tpu": want a real implementation`},
	} {
		_, run, _, _, _ := tree()
		run.ParseFlags(c.flags)
		if err := Apply(run, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: got %v, want %q", c.flags, c.src, err, c.want)
		}
	}
	// Other variables, and empty ones (how scripts clear a setting), are left alone.
	_, run, _, _, _ := tree()
	if err := Apply(run, Sources{Env: []string{"SYMMEM_RANK=1", "SYMMEM_NPORC=", "SYMMEMX=1"}, Other: []string{"SYMMEM_RANK"}}); err != nil {
		t.Error(err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"nproc", "heap-size", "count", "config", "timeout", "wait-limit"}
	for in, want := range map[string]string{"nporc": "nproc", "nprocs": "nproc", "heap_size": "heap-size", "heapsize": "heap-size",
		"coutn": "count", "confgi": "config", "time": "timeout", "colour": "", "x": "", "waitlimit": "wait-limit"} {
		if got := Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// An empty name in a list (a stray comma) is refused from a file or the environment, as
// on the command line (bench --impl ,); it was dropped, and `impl: ","` ran the defaults.
func TestEmptyListName(t *testing.T) {
	for _, c := range []struct {
		src  Sources
		want string
	}{
		{Sources{File: file(t, "impl: \",\"\n")}, `cfg.yaml: impl ",": an empty name (a stray comma?): give names separated by commas`},
		{Sources{File: file(t, "impl: [memcpy, \"\"]\n")}, `cfg.yaml: impl "memcpy,": an empty name`},
		{Sources{Env: []string{"SYMMEM_IMPL=memcpy,,triton"}}, `environment variable SYMMEM_IMPL "memcpy,,triton": an empty name`},
	} {
		root, _, _, _, _ := tree()
		bench, _, _ := root.Find([]string{"bench"})
		if err := Apply(bench, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.src, err, c.want)
		}
	}
	// An empty list is no list, as --impl "" is: the command's default.
	root, _, _, _, impls := tree()
	bench, _, _ := root.Find([]string{"bench"})
	if err := Apply(bench, Sources{File: file(t, "impl: []\n")}); err != nil || len(*impls) != 0 {
		t.Errorf("impl: []: %v, %v", *impls, err)
	}
}

// A copy of an earlier configs/default.yaml, which listed dry-run and check as false,
// still reads, and so does the variable set to false: they say nothing to do.
func TestFlagsOnlyFalseAreIgnored(t *testing.T) {
	_, run, _, _, _ := tree()
	if err := Apply(run, Sources{File: file(t, "dry-run: false\ncheck: false\nnproc: 3\n"), Env: []string{"SYMMEM_CHECK=false"}}); err != nil {
		t.Fatal(err)
	}
}

// A config file is one flat document of settings. Nested 2,000 deep, viper's
// flattening took 12 s (the cube of the depth) and the process was deaf to Ctrl-C
// meanwhile; settings after a `---` were dropped and the run went ahead.
func TestFileIsOneFlatDocument(t *testing.T) {
	deep := strings.Repeat("{k: ", 5000) + "1" + strings.Repeat("}", 5000)
	indented := ""
	for i := range 1000 {
		indented += strings.Repeat(" ", i) + "k:\n"
	}
	indented += strings.Repeat(" ", 1000) + "x: 1\n"
	for _, c := range []struct{ name, text, want string }{
		{"flow nesting", "a: " + deep + "\n", `line 1: brackets nested more than 16 deep; settings are not nested`},
		{"shallow flow nesting", "a: {k: {k: 1}}\n", `line 1: "a" holds settings of its own; settings are not nested`},
		{"block nesting", indented, `line 2: "k" holds settings of its own`},
		{"second document", "nproc: 2\n---\nnproc: lots\n", "line 2: a second YAML document (after ---); put every setting in one document"},
		{"list of settings", "impl: [{a: 1}]\n", `"impl" holds a list of lists or settings`},
		{"alias of a mapping", "x: &m {a: 1}\nnproc: *m\n", `"x" holds settings of its own`},
	} {
		_, run, _, _, _ := tree()
		start := time.Now()
		err := Apply(run, Sources{File: file(t, c.text)})
		// A bound far above the check (milliseconds alone, seconds under -race on a busy
		// machine) and far below the parse it saves (5,000 levels took over 196 s).
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s: %s to refuse", c.name, took)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	deepTOML := filepath.Join(t.TempDir(), "deep.toml")
	os.WriteFile(deepTOML, []byte("a = "+strings.Repeat("[", 400000)+strings.Repeat("]", 400000)+"\n"), 0o600)
	start := time.Now()
	if _, run, _, _, _ := tree(); !strings.Contains(fmt.Sprint(Apply(run, Sources{File: deepTOML})), "line 1: brackets nested more than 16 deep") || time.Since(start) > 20*time.Second {
		t.Errorf("TOML arrays 400,000 deep: %v after %s", Apply(run, Sources{File: deepTOML}), time.Since(start))
	}
	toml := filepath.Join(t.TempDir(), "cfg.toml")
	os.WriteFile(toml, []byte("[a.b.c]\nx = 1\n"), 0o600)
	if _, run, _, _, _ := tree(); !strings.Contains(fmt.Sprint(Apply(run, Sources{File: toml})), `"a" holds settings of its own`) {
		t.Errorf("nested TOML: %v", Apply(run, Sources{File: toml}))
	}
}

// A value or a key is repeated cut short: a 900 KB store-addr gave a 1.8 MB error line.
func TestLongValuesEchoedShort(t *testing.T) {
	long := strings.Repeat("9", 100000)
	checks := map[string]func(string) error{"impl": func(string) error { return errors.New("want HOST:PORT") }}
	for _, src := range []Sources{
		{Env: []string{"SYMMEM_NPROC=" + long}},
		{File: file(t, "nproc: "+long[:900]+"\n")},
		{File: file(t, `"`+strings.Repeat("k", 1000)+`": 1`+"\n")},
		{Env: []string{"SYMMEM_IMPL=" + long}, Checks: checks},
	} {
		_, run, _, _, _ := tree()
		err := Apply(run, src)
		if err == nil || len(err.Error()) > 600 || !strings.Contains(err.Error(), " bytes)") {
			t.Errorf("%d-byte error: %.200s", len(fmt.Sprint(err)), err)
		}
	}
}
