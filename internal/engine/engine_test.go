package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend/gpu"
)

// A machine with too few GPUs for the ranks lacks nothing to install: the refusal says
// what to do and no more; one that lacks the driver or NVSHMEM is told to install them.
func TestCannotRunSaysWhatToDo(t *testing.T) {
	_, few := gpu.GPUIndex(3, 2)
	if few == nil {
		t.Fatal("GPUIndex(3, 2) took local rank 3 on 2 GPUs")
	}
	if msg := cannotRun(few).Error(); strings.Contains(msg, "install") || !strings.Contains(msg, "start at most 2 ranks per node") {
		t.Errorf("too few GPUs: %q", msg)
	}
	if msg := cannotRun(errors.New("NVSHMEM host library libnvshmem_host.so.3 not found")).Error(); !strings.Contains(msg, "install the NVIDIA driver and NVSHMEM") {
		t.Errorf("NVSHMEM missing: %q", msg)
	}
}
