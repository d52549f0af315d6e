// Package kernelbuild runs the kernel build script this binary embeds
// (kernels/build-kernels.py) for `symmem kernels build` and `symmem check-nvshmem`:
// where the script is written, how Python is started and stopped, and how its one-line
// answers are read. It is the CLI's plumbing, not part of the kernel library
// (pkg/kernels), which only reads what the script writes.
package kernelbuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	kernelfiles "github.com/symmem/symmem/kernels"
	"github.com/symmem/symmem/pkg/kernels"
)

// EnvTorchAPI picks, for a file written against PyTorch's SHMEM modules for Triton, whose
// modules the build uses: "torch" or "symmem" (unset: torch's where torch has every
// module and name the file uses). The build script reads it, and keys an unchanged
// build on it; it is no setting of symmem's.
const EnvTorchAPI = "SYMMEM_TORCH_API"

// EnvPruned set to "0" has every compile of a build link NVSHMEM's device library
// whole, not the parts earlier compiles kept in Triton's cache (a compile Triton's own
// cache serves links nothing). The build script reads it; it is no setting of symmem's.
const EnvPruned = "SYMMEM_NVSHMEM_PRUNED"

// WriteScript writes the build script this binary embeds, with the NVSHMEM bindings
// for Triton that users' kernels import (symmem's, and PyTorch's API as symmem supplies
// it, with the module that plans a kernel written for PyTorch's), into a new directory
// laid out as a checkout's kernels/ (build-kernels.py beside triton/), and returns the
// script's path and what removes the directory. The binary's own copy, not a
// checkout's, so that what the script writes is what this binary reads
// (pkg/kernels.Signatures), installed or not.
func WriteScript() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "symmem-build-")
	if err != nil {
		return "", nil, fmt.Errorf("kernels build: a directory for the build script: %w: set TMPDIR to a directory you can write", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	for name, data := range map[string][]byte{
		filepath.Join("kernels", "build-kernels.py"):            kernelfiles.BuildScript,
		filepath.Join("kernels", "triton", "nvshmem_device.py"): kernelfiles.NVSHMEMBindings,
		filepath.Join("kernels", "triton", "nvshmem_torch.py"):  kernelfiles.TorchAPI,
		filepath.Join("kernels", "triton", "torch_plan.py"):     kernelfiles.TorchPlan,
	} {
		p := filepath.Join(dir, name)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, data, 0o644)
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("kernels build: writing the build script: %w", err)
		}
	}
	return filepath.Join(dir, "kernels", "build-kernels.py"), cleanup, nil
}

// SignaturesFile is the name WriteSignatures gives the table in its directory.
const SignaturesFile = "signatures.json"

// WriteSignatures writes into dir the table of the kernels symmem launches from a
// user's catalogue and the parameters each takes (pkg/kernels.SignaturesJSON), which
// the build script reads (--signatures) instead of holding a copy, and returns its
// path.
func WriteSignatures(dir string) (string, error) {
	p := filepath.Join(dir, SignaturesFile)
	if err := os.WriteFile(p, kernels.SignaturesJSON(), 0o644); err != nil {
		return "", fmt.Errorf("kernels build: writing the table of signatures: %w", err)
	}
	return p, nil
}

// PythonCommand is py running args in a process group of its own, bound to ctx: when
// ctx ends the whole group is killed (Python's compile workers too, which would
// otherwise hold the output pipes and outlive symmem), and the wait for the pipes is
// bounded.
func PythonCommand(ctx context.Context, py string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, py, args...)
	// Pdeathsig: a SIGKILL to symmem, which nothing can catch, ends Python too (the
	// build script has its compile workers die with it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// LastLine is the last line of what the build script printed, without its
// "build-kernels: " prefix: a refusal's one-line reason, or an answer (--check-tools).
func LastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimPrefix(lines[len(lines)-1], "build-kernels: ")
}
