// Package cublas binds cuBLASLt (libcublasLt.so.13), opened at run time with dlopen like
// the CUDA driver, NVSHMEM and NCCL: finding the library, its version, and the one
// operation symmem needs of it, a row-major matrix product C = A @ B of bf16 or float16
// with float32 accumulation, which the unfused baselines of the fused operations
// (all-gather-matmul, matmul-reduce-scatter) time beside symmem's fused kernels.
// Nothing of cuBLAS is needed to build.
//
// # Finding the library
//
// Find looks, in order, at an explicit path (SYMMEM_CUBLAS_LIB, a file or a
// directory), CUDA_HOME/lib64 and lib, the nvidia-cublas wheel beside PyTorch
// (site-packages/nvidia/cu13/lib for CUDA 13's wheels, nvidia/cublas/lib for CUDA 12's),
// the CUDA toolkits under /usr/local (cuda, cuda-13.*, cuda-12.*), and last the bare
// sonames, which leave the search to the dynamic loader. libcublasLt.so.13 is looked for
// before libcublasLt.so.12 in each place: the calls symmem makes are the same in both.
//
// # The product
//
// cuBLASLt multiplies column-major matrices. A row-major M x N matrix is, byte for
// byte, its N x M transpose in column-major order, so C = A @ B (row-major) is computed
// as C^T = B^T @ A^T (column-major) with no transposition at all: cuBLASLt's A is
// symmem's B seen as an N x K column-major matrix (leading dimension N), its B is
// symmem's A seen as K x M (leading dimension K), and its D (and C) is symmem's C seen
// as N x M (leading dimension N). The descriptor asks for CUBLAS_COMPUTE_32F with float32
// scale (alpha 1, beta 0): products accumulate in float32 and are rounded to the
// element type once.
//
// A Plan holds the descriptors of one shape and element type and the algorithm
// cuBLASLt's heuristic chose for them (cublasLtMatmulAlgoGetHeuristic, with the
// workspace the caller offers); Plan.Run queues the product on a CUDA stream.
//
// # The ABI
//
// Handles and descriptors are opaque pointers (uintptr); enums are C ints (int32);
// uint64_t, int64_t and size_t are 64-bit. cublasLtMatmulHeuristicResult_t is 96 bytes:
// the 64-byte algorithm (uint64_t data[8]), size_t workspaceSize, cublasStatus_t state,
// float wavesCount and int reserved[4], laid out as cublasLt.h declares it; cublasLtMatmul
// takes a pointer to its algorithm. The tests check all of this against a fake
// libcublasLt.so.13 compiled from testdata/fake_cublaslt.c with the header's prototypes,
// which also multiplies bf16 matrices on the host as cuBLASLt would, so that the
// transposition above is checked for its result, not only its arguments.
package cublas
