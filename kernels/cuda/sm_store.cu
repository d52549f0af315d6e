// Plain SM stores into a peer's memory through the mapping nvshmem_ptr returns (NVLink P2P):
// no NVSHMEM device calls, so this module needs no nvshmemx_cumodule_init. Same chunking
// contract as the other kernels; each block copies its chunk with 16-byte vector stores
// where both pointers allow it.
#include <stdint.h>

extern "C" __global__ void sm_store(char *__restrict__ dst, const char *__restrict__ src,
                                    long long nbytes, long long chunk) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n <= 0) return;
  char *d = dst + off;
  const char *s = src + off;
  long long head = 0;
  if ((((uintptr_t)d | (uintptr_t)s) & 15) == 0) {
    long long n16 = n / 16;
    const int4 *s4 = (const int4 *)s;
    int4 *d4 = (int4 *)d;
    long long i = threadIdx.x;
    // Four independent loads in flight per thread before the stores.
    for (; i + 3 * blockDim.x < n16; i += 4 * blockDim.x) {
      int4 a = s4[i], b = s4[i + blockDim.x], c = s4[i + 2 * blockDim.x], e = s4[i + 3 * blockDim.x];
      d4[i] = a; d4[i + blockDim.x] = b; d4[i + 2 * blockDim.x] = c; d4[i + 3 * blockDim.x] = e;
    }
    for (; i < n16; i += blockDim.x) d4[i] = s4[i];
    head = n16 * 16;
  }
  for (long long i = head + threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}
