package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// build compiles the example once, as a user would, so that the tests run the real
// program: its ranks are that binary started again, not this test.
func build(t *testing.T) string {
	t.Helper()
	built.Do(func() {
		dir, err := os.MkdirTemp("", "put-example")
		if err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(dir, "put")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

var built struct {
	sync.Once
	bin string
	err error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.bin != "" {
		os.RemoveAll(filepath.Dir(built.bin))
	}
	os.Exit(code)
}

func run(t *testing.T, bin string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd, o, e := command(bin, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return wait(t, cmd, o, e)
}

func command(bin string, env ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	return cmd, &o, &e
}

func wait(t *testing.T, cmd *exec.Cmd, o, e *bytes.Buffer) (stdout, stderr string, code int) {
	t.Helper()
	err := cmd.Wait()
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

// Started by hand as torchrun would start it (how it runs on one GPU that two ranks
// share), each process is one rank: rank 0 reports, rank 1 prints only its own line.
func TestPutUnderTorchrun(t *testing.T) {
	bin := build(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // the store takes MASTER_PORT+1: this one
	var cmds [2]*exec.Cmd
	var outs, errs [2]*bytes.Buffer
	for r := range 2 {
		cmds[r], outs[r], errs[r] = command(bin, "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port-1), "TORCHELASTIC_RUN_ID=put-"+strconv.Itoa(port),
			"SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef")
		if err := cmds[r].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		out, stderr, code := wait(t, cmds[r], outs[r], errs[r])
		passed := strings.Contains(out, "rank 1 received [5, 5, 5, 5, 5, 5, 5, 5] from rank 0 (want 5s)")
		if code != 0 || passed != (r == 0) {
			t.Errorf("rank %d: exit %d, stdout:\n%s\nstderr:\n%s", r, code, out, stderr)
		}
	}
}
