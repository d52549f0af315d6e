package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// build compiles the example as a user would, so that the test runs the real program:
// its ranks are that binary started again, not this test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "put")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func run(t *testing.T, bin string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// The program runs the put test on the CPU backend, and fails it, with status 3, when
// rank 0's put never lands (the test fault drops rank 0's transfers).
func TestPut(t *testing.T) {
	bin := build(t)
	out, errs, code := run(t, bin)
	want := "rank 1 received [5, 5, 5, 5, 5, 5, 5, 5] from rank 0 (want 5s)\n"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "on the cpu backend: passed") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant %q", code, out, errs, want)
	}

	out, errs, code = run(t, bin, "SYMMEM_TEST_FAULT=0:drop")
	if code != 3 || strings.Contains(out, "passed") || !strings.Contains(errs, "wrong data") {
		t.Fatalf("a dropped put: exit %d (want 3), stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
