package symmem

import (
	"fmt"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
)

// fewGPUs is a GPU backend on a machine with fewer GPUs than any job asks for.
type fewGPUs struct{ cpu.Factory }

func (fewGPUs) Name() string                       { return backend.NVSHMEM }
func (fewGPUs) Probe(nproc, _ int, _ string) error { return fewGPUsError(nproc) }
func (fewGPUs) Impls() []backend.Impl              { return nil }

type fewGPUsError int

func (e fewGPUsError) Error() string {
	return fmt.Sprintf("JobOptions.NProc %d needs %d GPUs, this machine has 1", int(e), int(e))
}
func (fewGPUsError) FewDevices() bool { return true }

// A job of more ranks than the machine has GPUs is refused as the GPU backend's
// failure to run, and FewDevices tells it from one that something installed would
// fix (symmem bench then adds a word for nccl-tests' -n).
func TestFewDevices(t *testing.T) {
	o := DefaultJobOptions()
	o.Backend, o.NProc, o.Backends = NVSHMEM, 16, []Backend{{cpu.Factory{}}, {fewGPUs{}}}
	_, err := NewJob(o)
	if err == nil || !FewDevices(err) || ExitCode(err) != ExitNoGPUBackend {
		t.Errorf("16 ranks on 1 GPU: %v (exit %d, few devices %v)", err, ExitCode(err), FewDevices(err))
	}
	o.Backend = CPU
	o.NProc = 0
	if _, err := NewJob(o); err == nil || FewDevices(err) {
		t.Errorf("0 ranks: %v, few devices %v", err, FewDevices(err))
	}
}
