package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/symmem/symmem/internal/config"
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
