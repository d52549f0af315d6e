package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/kernelbuild"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/exitcode"
)

// configs/default.yaml must document every setting, with the flags' real defaults.
func TestDefaultConfigMatchesFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	root := NewCmdRoot(IO{Out: os.Stdout, Err: os.Stderr})
	keys := config.Keys(root)
	for k := range keys {
		if _, ok := file[k]; !ok {
			t.Errorf("configs/default.yaml does not document %q", k)
		}
	}
	for k := range file {
		if k != "version" && !keys[k] {
			t.Errorf("configs/default.yaml has %q, which no command accepts", k)
		}
	}
	for _, path := range [][]string{{"run"}, {"bench"}, {"bench", "compare"}, {"check-nvshmem"}} {
		cmd, _, _ := root.Find(path)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			v, ok := file[f.Name]
			if !ok || f.Name == "help" {
				return
			}
			got := fmtYAML(v)
			if got == "" && strings.HasSuffix(f.Value.Type(), "Slice") {
				got = "[]"
			}
			if got != f.DefValue {
				t.Errorf("default.yaml %s = %q, but %s's default is %q", f.Name, got, path[0], f.DefValue)
			}
		})
	}
}

// A copy of configs/default.yaml is a config every command takes as it is: its values
// are the defaults (tokens: 0 among them), not values that mean nothing.
func TestDefaultConfigIsAccepted(t *testing.T) {
	file := filepath.Join("..", "..", "configs", "default.yaml")
	for _, args := range [][]string{{"run", "dispatch"}, {"bench"}, {"bench", "show", "x.json"}, {"check-nvshmem"}} {
		root := NewCmdRoot(IO{Out: io.Discard, Err: io.Discard})
		cmd, rest, err := root.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		if err := config.Apply(cmd, config.Sources{File: file}); err != nil {
			t.Errorf("%v --config configs/default.yaml: %v", args, err)
		}
		if err := typedZeroTokens(cmd.Flags()); err != nil {
			t.Errorf("%v --config configs/default.yaml: %v", args, err)
		}
	}
}

func fmtYAML(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = fmtYAML(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case bool:
		if t {
			return "true"
		}
		return "false"
	}
	b, _ := yaml.Marshal(v)
	return string(b[:len(b)-1])
}

func TestRunFlagsParse(t *testing.T) {
	root := NewCmdRoot(IO{Out: os.Stdout, Err: os.Stderr})
	run, _, _ := root.Find([]string{"run"})
	if err := run.ParseFlags([]string{"--nproc", "4", "--count", "2K", "--dtype", "bf16", "--heap-size", "64M"}); err != nil {
		t.Fatal(err)
	}
	if got := run.Flags().Lookup("count").Value.String(); got != "2048" {
		t.Errorf("count = %s, want 2048", got)
	}
	if got := run.Flags().Lookup("heap-size").Value.String(); got != "64M" {
		t.Errorf("heap-size = %s, want 64M", got)
	}
}

// Bad input from any source is a usage error (exit 2) with one line that says what to
// do and nothing of Go's parsers; none of these starts a job.
func TestBadInputIsUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"run", "put", "--nproc", "two"}, "", `--nproc "two": want a whole number, such as 4`},
		{[]string{"run", "put", "--count", "1.5"}, "", `--count "1.5": 1.5 is not a whole number of elements`},
		{[]string{"run", "put", "--count", "99999999999999999999"}, "", "out of range for a whole number"},
		{[]string{"run", "put", "--timeout", "5"}, "", "want a duration with its unit"},
		// Values that were taken and meant nothing: a byte unit on an element count,
		// a wait shorter than a time slice, --tokens 0 run as the default.
		{[]string{"run", "all-reduce", "--count", "16MB", "--dtype", "int32"}, "", `--count "16MB": a count is of elements, not bytes`},
		{[]string{"run", "put-signal", "--backend", "cpu", "--wait-limit", "1ns"}, "", "--wait-limit 1ns is too short"},
		{[]string{"run", "dispatch", "--tokens", "0"}, "", `--tokens 0: give 1..65536 tokens per rank`},
		{[]string{"run", "put", "--store-addr", strings.Repeat("a", 900000)}, "", `--store-addr "aaaaaaaa`},
		{[]string{"run", "put", "--nprc", "3"}, "", "unknown flag --nprc; did you mean --nproc?"},
		{[]string{"run", "put", "--store-addr", "bogus"}, "", `--store-addr "bogus": want HOST:PORT`},
		{[]string{"run"}, "", "run takes one operation"},
		{[]string{"version", "extra"}, "", `version takes no arguments, got "extra"`},
		{[]string{"bench", "compare", "a.json"}, "", "bench compare takes two files"},
		{[]string{"bench", "shwo"}, "", "did you mean 'symmem bench show'?"},
		{[]string{"completion", "powershellx"}, "", `unknown shell "powershellx"; did you mean powershell?`},
		{[]string{"frob"}, "", `unknown command "frob" for symmem`},
		{[]string{"help", "frob"}, "", `unknown command "frob" for symmem`},
		{[]string{"run", "put", "--nproc", "2"}, "SYMMEM_NPROC=two", `environment variable SYMMEM_NPROC "two": want a whole number`},
		{[]string{"run", "put"}, "SYMMEM_NPORC=4", "SYMMEM_NPORC is not a setting; did you mean SYMMEM_NPROC?"},
		{[]string{"check-nvshmem", "--nproc", "0"}, "", "--nproc 0 out of range"},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		root := NewCmdRoot(IO{Out: &out, Err: &errb})
		root.SetArgs(c.args)
		err := root.ExecuteContext(context.Background())
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
		if err == nil {
			t.Errorf("%v: accepted", c.args)
			continue
		}
		msg := flagWords.Error(err).Error() // as Main says it
		if code := symmem.ExitCode(err); code != exitcode.Usage || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || len(msg) > 1000 ||
			strings.Contains(msg, "strconv") || strings.Contains(msg, " flag:") {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line containing %q", c.args, code, msg, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%v printed %q", c.args, out.String())
		}
	}
}

// The kernel build's SYMMEM_TORCH_API and SYMMEM_NVSHMEM_PRUNED are read by the build
// script, not settings: a command run with one set is not refused for it.
func TestBuildVariablesAreNoSettings(t *testing.T) {
	for _, v := range []string{kernelbuild.EnvTorchAPI, kernelbuild.EnvPruned} {
		t.Setenv(v, "0")
		var out, errb bytes.Buffer
		root := NewCmdRoot(IO{Out: &out, Err: &errb})
		root.SetArgs([]string{"version"})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Errorf("symmem version with %s=0: %v", v, err)
		}
		os.Unsetenv(v)
	}
}
