package gpu

// implCUDA names the CUDA C kernels against the NVSHMEM device library.
const implCUDA = "cuda"

// cudaImpl is put, get, put-signal and latency in CUDA C (the registry's "cuda"):
// the same kernels' names and arguments as triton's, from another source, so
// nvshmemKernels serves it whole.
type cudaImpl struct{ nvshmemKernels }

var _ = registerImpl(implCUDA, cudaImpl{})
