package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever a config file or an SYMMEM_* variable holds, Apply either takes it or says,
// in one line without Go internals, what is wrong; it never panics.
func FuzzApply(f *testing.F) {
	for _, s := range []struct{ file, env string }{
		{"version: 1\nnproc: 3\n", "SYMMEM_NPROC=4"},
		{"nproc: lots\n", ""},
		{"nporc: 2\n", "SYMMEM_NPORC=2"},
		{"timeout: 5\n", "SYMMEM_TIMEOUT=abc"},
		{"impl: [a, b]\n", "SYMMEM_IMPL=x,y"},
		{"version: 2\n", ""},
		{"{{{", ""},
		{"nproc: 99999999999999999999999\n", ""},
		{"\x00\xff", "SYMMEM_=1"},
	} {
		f.Add(s.file, s.env)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text, env string) {
		_, run, _, _, _ := tree()
		p := filepath.Join(dir, "cfg.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		err := Apply(run, Sources{File: p, Env: []string{env}})
		if err == nil {
			return
		}
		msg := err.Error()
		for _, bad := range []string{"strconv.", "goroutine", "panic", "invalid syntax"} {
			if strings.Contains(msg, bad) {
				t.Fatalf("file %q env %q: Go internals in %q", text, env, msg)
			}
		}
	})
}
