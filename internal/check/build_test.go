package check

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Whether a user's kernels can be built here is a row of its own: ok with what the
// build would use, info with the build script's reason where it cannot (running
// symmem, and kernels built elsewhere, do not need it); skipped where the machine has
// no answer.
func TestBuildToolsCheck(t *testing.T) {
	tools := BuildTools{Python: "/opt/venv/bin/python3", Triton: "3.6.0", NVSHMEMWheel: "/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem", DeviceLibrary: "3.4.5"}
	var r Report
	r.buildTools(Machine{BuildTools: func(context.Context) (BuildTools, error) { return tools, nil }}, Options{})
	if len(r.Checks) != 1 || r.Checks[0].Status != OK || r.BuildTools == nil ||
		r.Checks[0].Detail != "symmem kernels build can run here: /opt/venv/bin/python3, Triton 3.6.0, NVSHMEM device library 3.4.5 (/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem)" {
		t.Errorf("with the tools: %+v, %+v", r.Checks, r.BuildTools)
	}
	r = Report{}
	r.buildTools(Machine{BuildTools: func(context.Context) (BuildTools, error) {
		return BuildTools{}, errors.New("python3 is not on the PATH")
	}}, Options{})
	if len(r.Checks) != 1 || r.Checks[0].Status != Info || r.Checks[0].Detail != "python3 is not on the PATH" || !strings.Contains(r.Checks[0].Remedy, "kernels built elsewhere need only this binary") || r.BuildTools != nil {
		t.Errorf("without them: %+v", r.Checks)
	}
	r = Report{}
	r.buildTools(Machine{}, Options{})
	if len(r.Checks) != 0 {
		t.Errorf("no answer: %+v", r.Checks)
	}
}

// RealBuildTools runs the embedded build script: on this machine (no Triton) it gives
// the script's own one-line reason; with a python3 that answers, what it answered;
// with one that answers garbage, says so; with none on the PATH, says that.
func TestRealBuildTools(t *testing.T) {
	if _, err := exec.LookPath("python3"); err == nil && exec.Command("python3", "-c", "import triton, nvidia.nvshmem").Run() != nil {
		if _, err := RealBuildTools(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "this machine cannot build kernels: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("without Triton: %v", err)
		}
	}
	fake := func(script string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", dir)
	}
	fake(`echo '{"python": "/x/python3", "triton": "3.6.0", "nvshmem_wheel": "/w", "device_library": "3.4.5"}'`)
	if got, err := RealBuildTools(context.Background()); err != nil || got != (BuildTools{Python: "/x/python3", Triton: "3.6.0", NVSHMEMWheel: "/w", DeviceLibrary: "3.4.5"}) {
		t.Errorf("an answer: %+v, %v", got, err)
	}
	fake(`echo 'Traceback'; exit 0`)
	if _, err := RealBuildTools(context.Background()); err == nil || !strings.Contains(err.Error(), "is not what symmem reads") {
		t.Errorf("garbage: %v", err)
	}
	fake(`echo 'build-kernels: no room' >&2; exit 2`)
	if _, err := RealBuildTools(context.Background()); err == nil || err.Error() != "no room" {
		t.Errorf("a refusal: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := RealBuildTools(context.Background()); err == nil || err.Error() != "python3 is not on the PATH" {
		t.Errorf("no python3: %v", err)
	}
}

// The check's Python is bounded, with whatever it started: a python3 that leaves a
// child holding the output pipe is killed with its child at the limit (it ran on for
// 50 s: only the direct child was killed, and the wait sat on the pipe), and a
// cancelled context (SIGINT, SIGTERM to symmem) ends it at once.
func TestRealBuildToolsIsBounded(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := "#!/bin/sh\nsleep 50 &\necho $! > " + pidFile + "\nsleep 50\n"
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	defer func(d time.Duration) { buildToolsTimeout = d }(buildToolsTimeout)
	buildToolsTimeout = time.Second
	start := time.Now()
	_, err := RealBuildTools(context.Background())
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "took more than 1s") || took > 10*time.Second {
		t.Errorf("a python3 that hangs: %v after %s", err, took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Gone, or a zombie of its reaper's.
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("python3's child %d outlived the check", pid)
		}
	}
	buildToolsTimeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start = time.Now()
	if _, err := RealBuildTools(ctx); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled: %v after %s", err, time.Since(start))
	}
}
