package engine

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/result"
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

// A sweep's header says where each user's implementation came from, from its
// sidecars: the directory, the sources' sha256 and the Triton that built them;
// symmem's own implementations are not named.
func TestUserSources(t *testing.T) {
	dir := "../kernels/testdata/userar"
	if err := UseKernels(dir); err != nil {
		t.Fatal(err)
	}
	got := userSources([]string{"triton", "one-shot-all-reduce", "nccl"})
	want := map[string]result.KernelSource{"one-shot-all-reduce": {Dir: dir, Source: "10869abba4dc534fa48b0f51f5dd5bc58a800d3cdfebd974e6055e934696d93a", Triton: "3.6.0"}}
	if !maps.Equal(got, want) {
		t.Errorf("userSources = %v, want %v", got, want)
	}
	if got := userSources([]string{"triton"}); got != nil {
		t.Errorf("without a user's implementation: %v", got)
	}
}
