package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// implCUDA names the CUDA C kernels against the NVSHMEM device library.
const implCUDA = "cuda"

// cudaImpl is put, get, put-signal and latency in CUDA C (the registry's "cuda"):
// the same kernels' names and arguments as triton's, from another source, so
// nvshmemKernels serves it whole.
type cudaImpl struct{ nvshmemKernels }

var _ interface {
	mover
	signaller
	pinger
} = cudaImpl{}

// What it serves is what the manifests of kernels/cuda/symmem_nvshmem.cu and
// symmem_nvshmem_sync.cu say.
var _ = registerImpl(backend.Impl{Name: implCUDA, Summary: "the same operations in CUDA C against the NVSHMEM device library"}, cudaImpl{})

func (cudaImpl) home() home                       { return onHeap }
func (cudaImpl) reach(backend.Impl, ops.Op) reach { return byCalls }
