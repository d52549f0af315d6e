package nccl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/dl"
)

// fakes are the fake libraries TestMain built: "" is the full one, "nosend" lacks
// ncclSend, "nowin" is a 2.26 without the window calls, "old" a 2.26 that has them,
// "v228" a 2.28.9 (the device API), "nodev" a 2.28.9 without the device-comm calls,
// "bigdev" a 2.29 whose ncclDevComm is 264 bytes.
// noFake says why there are none.
var (
	fakes  = map[string]string{}
	noFake string
)

// helperEnv makes the test binary open NCCL by its bare soname and print the path it
// loaded (TestOpenBareSoname): the loader reads LD_LIBRARY_PATH only at start-up.
const helperEnv = "SYMMEM_NCCL_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		l, err := Open(LibName)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("path=%s version=%s\n", l.Path, l.Version())
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "symmem-fake-nccl-")
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
		noFake = fmt.Sprintf("no C compiler (%s) to build the fake libnccl.so.2 from testdata/fake_nccl.c: install gcc to run the ABI tests", cc)
		return
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "fake_nccl.c"))
	for name, flags := range map[string][]string{"": nil, "nosend": {"-DOMIT_SEND"}, "nowin": {"-DOMIT_WINDOWS", "-DVERSION=22600"},
		"old": {"-DVERSION=22600"}, "v228": {"-DVERSION=22809"}, "nodev": {"-DOMIT_DEVICE", "-DVERSION=22809"},
		"bigdev": {"-DVERSION=22900", "-DDEVCOMM_BYTES=264"}} {
		out := filepath.Join(dir, name, LibName)
		os.MkdirAll(filepath.Dir(out), 0o755)
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", out, src}, flags...)
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			noFake = fmt.Sprintf("building the fake libnccl.so.2: %s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
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
}

func openFake(t *testing.T) *fake { t.Helper(); return openFakeOf(t, "") }

// openFakeOf opens the fake library named as in fakes.
func openFakeOf(t *testing.T, name string) *fake {
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
	if err := h.BindAll([]dl.Binding{{Fn: &f.log, Names: []string{"fake_log"}}, {Fn: &f.reset, Names: []string{"fake_reset"}}}); err != nil {
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
