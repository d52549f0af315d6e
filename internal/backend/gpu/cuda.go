package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// implCUDA names the CUDA C kernels against the NVSHMEM device library.
const implCUDA = "cuda"

// cudaImpl is put, get, put-signal and latency in CUDA C (the registry's "cuda"):
// the same kernels' names and arguments as triton's, from another source.
type cudaImpl struct{ noColl }

var _ = registerColl(implCUDA, cudaImpl{})

func (cudaImpl) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	return b.kernelMove(impl, dst, src, peer, l, op, st)
}
