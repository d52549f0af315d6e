// symmem's signal, put-flag and barrier kernels in CUDA C against the NVSHMEM device
// library: the same names and arguments as kernels/triton/symmem_sync.py, launched by
// internal/backend/gpu/sync.go. Built by kernels/build-kernels.py like
// symmem_nvshmem.cu (-rdc, device-linked against libnvshmem_device.a).
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdint.h>

__device__ static inline uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The mailbox of a kernel that gave up waiting: symmem_nvshmem.cu's layout
// (internal/backend/gpu/mailbox.go reads it).
enum { GAVE_UP_ROUND = 2 };

__device__ static void give_up(uint64_t *mailbox, uint64_t what, uint64_t want, uint64_t seen, uint64_t where) {
  volatile uint64_t *m = mailbox;
  m[1] = want;
  m[2] = seen;
  m[3] = where;
  m[0] = what;
  __threadfence_system();
  asm volatile("trap;");
}

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

// One signal op on the peer's word, then a fence: the next launch's signal to the
// same peer lands after this one.
extern "C" __global__ void cuda_signal_op(uint64_t *sig, int op, uint64_t value, int peer) {
  if (threadIdx.x == 0) {
    nvshmemx_signal_op(sig, value, op, peer);
    nvshmem_fence();
  }
}

// put_flag's order (internal/backend/gpu/sync.go: flagOrders): 0 fence, 1 quiet.
enum { ORDER_FENCE = 0, ORDER_QUIET = 1 };

extern "C" __global__ void cuda_put_flag(char *dst, const char *src, long long nbytes, uint64_t *flag,
                                         uint64_t value, int order, int peer) {
  nvshmemx_putmem_block(dst, src, (size_t)nbytes, peer);
  if (threadIdx.x == 0) {
    if (order == ORDER_QUIET) nvshmem_quiet();
    else nvshmem_fence();
    nvshmem_uint64_p(flag, value, peer);
  }
}

// The ping-pong of signals alone: round k does ops.SignalRound(k, 1) (odd: set k, even:
// add 1) to the peer's word and waits for this rank's to reach k, which must hold k.
extern "C" __global__ void cuda_signal_pingpong(uint64_t *sig, int iters, int peer, int initiator,
                                                uint64_t *stamps, uint64_t limit_ns, uint64_t *mailbox) {
  if (threadIdx.x != 0) return;
  uint64_t wrong = 0;
  if (initiator) stamps[0] = global_timer();
  for (int i = 0; i < iters; i++) {
    uint64_t v = (uint64_t)i + 1;
    int op = (i % 2 == 0) ? NVSHMEM_SIGNAL_SET : NVSHMEM_SIGNAL_ADD;
    uint64_t val = (i % 2 == 0) ? v : 1;
    if (initiator) nvshmemx_signal_op(sig, val, op, peer);
    uint64_t seen = wait_until_ge(sig, v, limit_ns);
    if (seen < v) give_up(mailbox, GAVE_UP_ROUND, v, seen, peer);
    if (seen != v) wrong++;
    if (initiator) stamps[i + 1] = global_timer();
    else nvshmemx_signal_op(sig, val, op, peer);
  }
  stamps[iters + 1] = wrong;
}

__device__ static inline uint64_t stamp_of(int rank, uint64_t round) { return round << 16 | (uint64_t)(rank + 1); }

// A barrier round's meet argument (ops.Meet; internal/backend/gpu/sync.go): STAMP writes
// the stamp, MEET meets, LATE (the unordered test fault) writes the stamp only after the
// meeting and LATE_STAMP_DELAY_NS more, as a barrier that returned before this rank's
// writes had landed would let its peers see.
enum { MEET_STAMP = 1, MEET_MEET = 2, MEET_LATE = 4 };
#define LATE_STAMP_DELAY_NS 20000000ull

__device__ static void pause_ns(uint64_t ns) {
  uint64_t t0 = global_timer();
  while (global_timer() - t0 < ns) {
  }
}

__device__ static void push_stamp(uint64_t *half, int me, int n, uint64_t round) {
  for (int p = 0; p < n; p++) nvshmem_uint64_p(half + me, stamp_of(me, round), p);
}

extern "C" __global__ void cuda_barrier_all(uint64_t *slots, uint64_t *wrong, uint64_t round, int me, int n, int meet) {
  uint64_t *half = slots + (round % 2) * n;
  bool late = meet & MEET_LATE;
  if ((meet & MEET_STAMP) && !late && threadIdx.x == 0) push_stamp(half, me, n, round);
  __syncthreads();
  if (meet & MEET_MEET) nvshmemx_barrier_all_block();
  if ((meet & MEET_STAMP) && late && threadIdx.x == 0) {
    pause_ns(LATE_STAMP_DELAY_NS);
    push_stamp(half, me, n, round);
    nvshmem_quiet();
  }
  if (threadIdx.x == 0) {
    uint64_t bad = 0;
    for (int p = 0; p < n; p++)
      if (((volatile uint64_t *)half)[p] != stamp_of(p, round)) bad++;
    atomicAdd((unsigned long long *)wrong, (unsigned long long)bad);
  }
}

extern "C" __global__ void cuda_sync_all(uint64_t *slots, uint64_t *wrong, uint64_t round, int me, int n, int meet) {
  uint64_t *half = slots + (round % 2) * n;
  bool late = meet & MEET_LATE;
  if ((meet & MEET_STAMP) && !late && threadIdx.x == 0) {
    ((volatile uint64_t *)half)[me] = stamp_of(me, round);
    __threadfence_system();
  }
  __syncthreads();
  if (meet & MEET_MEET) nvshmemx_sync_all_block();
  if ((meet & MEET_STAMP) && late && threadIdx.x == 0) {
    pause_ns(LATE_STAMP_DELAY_NS);
    ((volatile uint64_t *)half)[me] = stamp_of(me, round);
    __threadfence_system();
  }
  if (threadIdx.x == 0) {
    uint64_t bad = 0;
    for (int p = 0; p < n; p++)
      if (nvshmem_uint64_g(half + p, p) != stamp_of(p, round)) bad++;
    atomicAdd((unsigned long long *)wrong, (unsigned long long)bad);
  }
}
