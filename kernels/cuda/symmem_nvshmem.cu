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

// globaltimer: the GPU's nanosecond clock, for per-round stamps and wait limits.
__device__ static inline uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// What a kernel that gave up waiting writes into word 0 of the rank's mailbox (pinned
// host memory, written through its device mapping); words 1 and 2 are the value waited
// for and the last one seen, word 3 the peer. The Triton kernels use the same layout
// (kernels/triton/nvshmem_device.py); internal/backend/gpu/mailbox.go reads it.
enum { GAVE_UP_SIGNAL = 1, GAVE_UP_ROUND = 2 };

// A wait went past its limit: say so in the mailbox, make the words visible to the
// host, and end the kernel with a trap. The trap ends the whole grid wherever its
// threads are, and leaves the context unusable: the rank is failed anyway, and the host
// reads the mailbox to say why.
__device__ static void give_up(uint64_t *mailbox, uint64_t what, uint64_t want, uint64_t seen, uint64_t where) {
  volatile uint64_t *m = mailbox;
  m[1] = want;
  m[2] = seen;
  m[3] = where;
  m[0] = what;
  __threadfence_system();
  asm volatile("trap;");
}

// Spins until *sig reaches value, reading it with NVSHMEM's own signal fetch, or until
// limit_ns of the GPU's clock have passed; returns the last value read (below value:
// it gave up). The clock is first read at the 64th spin and then every 64th, so a wait
// that ends early reads it never. (With the clock read on entry the ping-pong's half
// round trip was 2.56 us, 2.62 with acquire loads; NVSHMEM's unbounded wait gave 2.02.)
__device__ static uint64_t wait_until_ge(uint64_t *sig, uint64_t value, uint64_t limit_ns) {
  uint64_t t0 = 0, v;
  for (unsigned spin = 1;; spin++) {
    v = nvshmem_signal_fetch(sig);
    if (v >= value) return v;
    if (spin % 64 == 0) {
      uint64_t t = global_timer();
      if (t0 == 0) t0 = t;
      else if (t - t0 >= limit_ns) return v;
    }
  }
}

// Bounded on the device: a signal that has not come after limit_ns ends the kernel
// (give_up), so it does not hold the GPU.
extern "C" __global__ void cuda_wait_signal(uint64_t *sig, uint64_t value, uint64_t limit_ns,
                                            uint64_t *mailbox) {
  if (threadIdx.x == 0) {
    uint64_t seen = wait_until_ge(sig, value, limit_ns);
    if (seen < value) give_up(mailbox, GAVE_UP_SIGNAL, value, seen, 0);
  }
  __syncthreads();
}

// Ping-pong of nbytes with a signal: the initiator puts src into the peer's dst and waits
// for the answer; the responder waits, then puts its own src into the initiator's dst.
// Every round carries its number in the payload's first 8 bytes, and each side checks,
// once the round's signal is there, that the number in its dst is this round's: data
// that did not arrive (or arrived after its signal) is counted in stamps[iters+1]. The
// host checks the rest of the payload after the run. The initiator stamps the clock
// before the first round and after every round into stamps[0..iters]: per-round times.
// A wait longer than limit_ns ends the kernel (give_up, with the round).
extern "C" __global__ void cuda_pingpong(char *dst, char *src, uint64_t *sig, long long nbytes,
                                         int iters, int peer, int initiator, uint64_t *stamps,
                                         uint64_t limit_ns, uint64_t *mailbox) {
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
        uint64_t seen = wait_until_ge(sig, v, limit_ns);
        if (seen < v) give_up(mailbox, GAVE_UP_ROUND, v, seen, peer);
        stamps[i + 1] = global_timer();
        if (*tag_in != v) wrong++;
      }
      __syncthreads();
    } else {
      if (threadIdx.x == 0) {
        uint64_t seen = wait_until_ge(sig, v, limit_ns);
        if (seen < v) give_up(mailbox, GAVE_UP_ROUND, v, seen, peer);
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
