// The CUDA C implementation of symmem's operations, against the NVSHMEM device library.
// Same chunking contract as the Triton kernels (kernels/triton/symmem_kernels.py): block b
// moves bytes [b*chunk, min((b+1)*chunk, nbytes)). Built by scripts/build-kernels.py with
// -rdc and device-linked against libnvshmem_device.a into one cubin per architecture.
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdint.h>

extern "C" __global__ void cuda_put_block(char *dst, const char *src, long long nbytes,
                                          long long chunk, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n > 0) nvshmemx_putmem_block(dst + off, src + off, (size_t)n, peer);
}

extern "C" __global__ void cuda_get_block(char *dst, const char *src, long long nbytes,
                                          long long chunk, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n > 0) nvshmemx_getmem_block(dst + off, src + off, (size_t)n, peer);
}

extern "C" __global__ void cuda_put_signal_block(char *dst, const char *src, long long nbytes,
                                                 long long chunk, uint64_t *sig, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n < 0) n = 0;
  nvshmemx_putmem_signal_block(dst + off, src + off, (size_t)n, sig, 1, NVSHMEM_SIGNAL_ADD, peer);
}

extern "C" __global__ void cuda_wait_signal(uint64_t *sig, uint64_t value) {
  if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, value);
  __syncthreads();
}

extern "C" __global__ void cuda_pingpong(char *buf, uint64_t *sig, long long nbytes, int iters,
                                         int peer, int initiator) {
  for (int i = 0; i < iters; i++) {
    uint64_t v = (uint64_t)i + 1;
    if (initiator) {
      nvshmemx_putmem_signal_block(buf, buf, (size_t)nbytes, sig, v, NVSHMEM_SIGNAL_SET, peer);
      if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
      __syncthreads();
    } else {
      if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
      __syncthreads();
      nvshmemx_putmem_signal_block(buf, buf, (size_t)nbytes, sig, v, NVSHMEM_SIGNAL_SET, peer);
    }
  }
}
