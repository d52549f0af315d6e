package check

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Whether a user's kernels can be built here is a row of its own: ok with what the
// build would use, info with the build script's reason where it cannot (running
// symmem, and kernels built elsewhere, do not need it); skipped where the machine has
// no answer.
func TestBuildToolsCheck(t *testing.T) {
	tools := BuildTools{Python: "/opt/venv/bin/python3", Triton: "3.6.0", NVSHMEMWheel: "/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem", DeviceLibrary: "3.4.5"}
	var r Report
	r.buildTools(Machine{BuildTools: func() (BuildTools, error) { return tools, nil }})
	if len(r.Checks) != 1 || r.Checks[0].Status != OK || r.BuildTools == nil ||
		r.Checks[0].Detail != "symmem kernels build can run here: /opt/venv/bin/python3, Triton 3.6.0, NVSHMEM device library 3.4.5 (/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem)" {
		t.Errorf("with the tools: %+v, %+v", r.Checks, r.BuildTools)
	}
	r = Report{}
	r.buildTools(Machine{BuildTools: func() (BuildTools, error) { return BuildTools{}, errors.New("python3 is not on the PATH") }})
	if len(r.Checks) != 1 || r.Checks[0].Status != Info || r.Checks[0].Detail != "python3 is not on the PATH" || !strings.Contains(r.Checks[0].Remedy, "pip install triton nvidia-nvshmem-cu13") || r.BuildTools != nil {
		t.Errorf("without them: %+v", r.Checks)
	}
	r = Report{}
	r.buildTools(Machine{})
	if len(r.Checks) != 0 {
		t.Errorf("no answer: %+v", r.Checks)
	}
}

// RealBuildTools runs the embedded build script: on this machine (no Triton) it gives
// the script's own one-line reason; with a python3 that answers, what it answered;
// with one that answers garbage, says so; with none on the PATH, says that.
func TestRealBuildTools(t *testing.T) {
	if _, err := exec.LookPath("python3"); err == nil && exec.Command("python3", "-c", "import triton, nvidia.nvshmem").Run() != nil {
		if _, err := RealBuildTools(); err == nil || !strings.HasPrefix(err.Error(), "this machine cannot build kernels: ") || strings.Contains(err.Error(), "\n") {
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
	if got, err := RealBuildTools(); err != nil || got != (BuildTools{Python: "/x/python3", Triton: "3.6.0", NVSHMEMWheel: "/w", DeviceLibrary: "3.4.5"}) {
		t.Errorf("an answer: %+v, %v", got, err)
	}
	fake(`echo 'Traceback'; exit 0`)
	if _, err := RealBuildTools(); err == nil || !strings.Contains(err.Error(), "is not what symmem reads") {
		t.Errorf("garbage: %v", err)
	}
	fake(`echo 'build-kernels: no room' >&2; exit 2`)
	if _, err := RealBuildTools(); err == nil || err.Error() != "no room" {
		t.Errorf("a refusal: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := RealBuildTools(); err == nil || err.Error() != "python3 is not on the PATH" {
		t.Errorf("no python3: %v", err)
	}
}
