// NVSHMEM's own device collectives, as the nvshmem implementation
// (internal/backend/gpu/nvshmem.go): each kernel is one block calling NVSHMEM's block
// collective on NVSHMEM_TEAM_WORLD, launched cooperatively as nvshmemx_collective_launch
// does. symmem adds nothing to the data path but what NVSHMEM lacks: avg (sum, then a
// division by the rank count) and broadcast's copy into the root's own output.
// Built by kernels/build-kernels.py like symmem_nvshmem.cu (-rdc, device-linked against
// libnvshmem_device.a); the barrier and sync kernels are symmem_nvshmem_sync.cu's,
// compiled into this module too.
#include <cuda_bf16.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdint.h>

#include "symmem_nvshmem_sync.cu"

// The operator argument: ops.RedOp's Code (NCCL's ncclRedOp_t); OP_FIRST is the test
// fault's operator that keeps this rank's own input (ops.First).
enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3, OP_AVG = 4, OP_FIRST = -1 };

template <typename T>
__device__ static inline T divided(T x, int n) {
  return x / (T)n;
}
template <>
__device__ inline __nv_bfloat16 divided(__nv_bfloat16 x, int n) {
  return __float2bfloat16(__bfloat162float(x) / (float)n);
}

// finish is what follows NVSHMEM's reduction of nelem elements into dst: avg divides
// them by the rank count; the first-input fault overwrites them with own, this rank's
// input for them.
template <typename T>
__device__ static void finish(T *dst, const T *own, long long nelem, int n, int op) {
  if (op != OP_AVG && op != OP_FIRST) return;
  __syncthreads();
  for (long long i = threadIdx.x; i < nelem; i += blockDim.x) dst[i] = op == OP_AVG ? divided(dst[i], n) : own[i];
  __syncthreads();
}

// all-reduce of nelem elements and reduce-scatter of nelem elements a rank, one kernel
// per element type, the operator an argument.
#define SYMMEM_REDUCE(TYPENAME, T, SFX)                                                                   \
  extern "C" __global__ void nvshmem_allreduce_##SFX(T *dst, const T *src, long long nelem, int n,       \
                                                     int op) {                                           \
    switch (op) {                                                                                        \
      case OP_PROD: nvshmemx_##TYPENAME##_prod_reduce_block(NVSHMEM_TEAM_WORLD, dst, src, nelem); break;  \
      case OP_MAX: nvshmemx_##TYPENAME##_max_reduce_block(NVSHMEM_TEAM_WORLD, dst, src, nelem); break;    \
      case OP_MIN: nvshmemx_##TYPENAME##_min_reduce_block(NVSHMEM_TEAM_WORLD, dst, src, nelem); break;    \
      default: nvshmemx_##TYPENAME##_sum_reduce_block(NVSHMEM_TEAM_WORLD, dst, src, nelem); break;        \
    }                                                                                                    \
    finish(dst, src, nelem, n, op);                                                                      \
  }                                                                                                      \
  extern "C" __global__ void nvshmem_reducescatter_##SFX(T *dst, const T *src, long long nelem, int n,   \
                                                         int op) {                                       \
    switch (op) {                                                                                        \
      case OP_PROD:                                                                                      \
        nvshmemx_##TYPENAME##_prod_reducescatter_block(NVSHMEM_TEAM_WORLD, dst, src, nelem);             \
        break;                                                                                           \
      case OP_MAX:                                                                                       \
        nvshmemx_##TYPENAME##_max_reducescatter_block(NVSHMEM_TEAM_WORLD, dst, src, nelem);              \
        break;                                                                                           \
      case OP_MIN:                                                                                       \
        nvshmemx_##TYPENAME##_min_reducescatter_block(NVSHMEM_TEAM_WORLD, dst, src, nelem);              \
        break;                                                                                           \
      default: nvshmemx_##TYPENAME##_sum_reducescatter_block(NVSHMEM_TEAM_WORLD, dst, src, nelem); break; \
    }                                                                                                    \
    finish(dst, src + (long long)nvshmem_my_pe() * nelem, nelem, n, op);                                 \
  }

// bf16 and float32, as triton's: NVSHMEM inlines every algorithm of every operator
// into each kernel, some 2 MB of cubin an element type and architecture.
SYMMEM_REDUCE(bfloat16, __nv_bfloat16, bf16)
SYMMEM_REDUCE(float, float, f32)

// all-gather: nbytes from each rank, in rank order (NVSHMEM's fcollect).
extern "C" __global__ void nvshmem_fcollect(char *dst, const char *src, long long nbytes) {
  nvshmemx_fcollectmem_block(NVSHMEM_TEAM_WORLD, dst, src, (size_t)nbytes);
}

// all-to-all: nbytes from each rank to each rank.
extern "C" __global__ void nvshmem_alltoall(char *dst, const char *src, long long nbytes) {
  nvshmemx_alltoallmem_block(NVSHMEM_TEAM_WORLD, dst, src, (size_t)nbytes);
}

// broadcast of root's nbytes into every rank's dst. OpenSHMEM's versions differ on
// whether the root's own dst is written, so the root copies it, by 16-byte vectors
// where it can.
extern "C" __global__ void nvshmem_broadcast(char *dst, const char *src, long long nbytes, int root) {
  nvshmemx_int8_broadcast_block(NVSHMEM_TEAM_WORLD, (int8_t *)dst, (const int8_t *)src, (size_t)nbytes, root);
  if (nvshmem_my_pe() != root || dst == src) return;
  long long head = 0;
  if (((uintptr_t)dst | (uintptr_t)src) % 16 == 0) {
    head = nbytes / 16 * 16;
    for (long long i = threadIdx.x; i < head / 16; i += blockDim.x) ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
  }
  for (long long i = head + threadIdx.x; i < nbytes; i += blockDim.x) dst[i] = src[i];
}
