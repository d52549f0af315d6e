package cublas

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/dl"
)

// fakes are the fake libraries TestMain built: "" is the full one, "nomatmul" lacks
// cublasLtMatmul, "v12" says it is 12.9.1. noFake says why there are none.
var (
	fakes  = map[string]string{}
	noFake string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "symmem-fake-cublaslt-")
	if err != nil {
		panic(err)
	}
	buildFakes(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildFakes(dir string) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		noFake = fmt.Sprintf("no C compiler (%s) to build the fake libcublasLt.so.13 from testdata/fake_cublaslt.c: install gcc to run the ABI tests", cc)
		return
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "fake_cublaslt.c"))
	for name, flags := range map[string][]string{"": nil, "nomatmul": {"-DOMIT_MATMUL"}, "v12": {"-DVERSION=120901"}} {
		out := filepath.Join(dir, name, LibNames[0])
		os.MkdirAll(filepath.Dir(out), 0o755)
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", out, src}, flags...)
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			noFake = fmt.Sprintf("building the fake libcublasLt.so.13: %s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
			return
		}
		fakes[name] = out
	}
}

// fake is the fake library opened through the binding, and the fake's own log.
type fake struct {
	*Lib
	log   func() *byte
	reset func()
	live  func() int32
}

func openFake(t *testing.T, name string) *fake {
	t.Helper()
	if noFake != "" {
		t.Skip(noFake)
	}
	l, err := Open(fakes[name])
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{Lib: l}
	h, err := dl.Open(fakes[name])
	if err != nil {
		t.Fatal(err)
	}
	if err := h.BindAll([]dl.Binding{{Fn: &f.log, Names: []string{"fake_log"}}, {Fn: &f.reset, Names: []string{"fake_reset"}},
		{Fn: &f.live, Names: []string{"fake_live"}}}); err != nil {
		t.Fatal(err)
	}
	f.reset()
	return f
}

// calls returns the calls logged since the last one and starts a new log.
func (f *fake) calls() []string {
	s := strings.TrimSpace(dl.GoString(f.log()))
	f.reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
