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

// globaltimer: the GPU's nanosecond clock, for per-round stamps.
__device__ static inline uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Ping-pong of nbytes with a signal: the initiator puts src into the peer's dst and waits
// for the answer; the responder waits, then puts its own src into the initiator's dst.
// Every round carries its number in the payload's first 8 bytes, and each side checks,
// once the round's signal is there, that the number in its dst is this round's: data
// that did not arrive (or arrived after its signal) is counted in stamps[iters+1]. The
// host checks the rest of the payload after the run. The initiator stamps the clock
// before the first round and after every round into stamps[0..iters]: per-round times.
extern "C" __global__ void cuda_pingpong(char *dst, char *src, uint64_t *sig, long long nbytes,
                                         int iters, int peer, int initiator, uint64_t *stamps) {
  volatile uint64_t *tag_in = (volatile uint64_t *)dst;
  uint64_t *tag_out = (uint64_t *)src;
  uint64_t wrong = 0;
  if (initiator && threadIdx.x == 0) stamps[0] = global_timer();
  for (int i = 0; i < iters; i++) {
    uint64_t v = (uint64_t)i + 1;
    if (initiator) {
      if (threadIdx.x == 0) {
        *tag_out = v;
        __threadfence();
      }
      __syncthreads();
      nvshmemx_putmem_signal_block(dst, src, (size_t)nbytes, sig, v, NVSHMEM_SIGNAL_SET, peer);
      if (threadIdx.x == 0) {
        nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
        stamps[i + 1] = global_timer();
        if (*tag_in != v) wrong++;
      }
      __syncthreads();
    } else {
      if (threadIdx.x == 0) {
        nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
        if (*tag_in != v) wrong++;
        *tag_out = v;
        __threadfence();
      }
      __syncthreads();
      nvshmemx_putmem_signal_block(dst, src, (size_t)nbytes, sig, v, NVSHMEM_SIGNAL_SET, peer);
    }
  }
  if (threadIdx.x == 0) stamps[iters + 1] = wrong;
}
