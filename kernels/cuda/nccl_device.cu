// symmem's operations against NCCL's device API (nccl_device.h, NCCL 2.28+): the same
// operations and chunking contract as symmem_nvshmem.cu (block b moves bytes
// [b*chunk, min((b+1)*chunk, nbytes))), on buffers in an NCCL window that every rank
// registered. Buffers are window offsets; ncclGetLsaPointer(win, off, peer) is where
// the peer's bytes are, reached by plain loads and stores (LSA: NVLink or PCIe P2P),
// and the all-reduce kernels pair their blocks with LSA barriers of the device
// communicator (block b uses barrier b). internal/backend/gpu/nccldevice.go launches
// them. Built by scripts/build-kernels.py (build_nccl_device) against the nvidia-nccl
// wheel's headers; nothing here calls NVSHMEM.
//
// The device communicator comes as a pointer to its 200 bytes in device memory, not by
// value: symmem passes every kernel argument in one 64-bit slot (pkg/kernels Args).
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <nccl_device.h>
#include <stdint.h>

// globaltimer: the GPU's nanosecond clock, for per-round stamps and wait limits.
__device__ static inline uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The mailbox a kernel that gave up waiting writes (as symmem_nvshmem.cu's and the
// Triton kernels': internal/backend/gpu/mailbox.go reads it).
enum { GAVE_UP_SIGNAL = 1, GAVE_UP_ROUND = 2 };

__device__ static void give_up(uint64_t *mailbox, uint64_t what, uint64_t want, uint64_t seen, uint64_t where) {
  volatile uint64_t *m = mailbox;
  m[1] = want;
  m[2] = seen;
  m[3] = where;
  m[0] = what;
  __threadfence_system();
  asm volatile("trap;");
}

// Spins until *sig reaches value (acquire loads at system scope: a peer's stores before
// its signal are visible once the signal is), or until limit_ns have passed; returns
// the last value read. The clock is read every 64th spin only.
__device__ static uint64_t wait_until_ge(uint64_t *sig, uint64_t value, uint64_t limit_ns) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> a(*sig);
  uint64_t t0 = 0, v;
  for (unsigned spin = 1;; spin++) {
    v = a.load(cuda::memory_order_acquire);
    if (v >= value) return v;
    if (spin % 64 == 0) {
      uint64_t t = global_timer();
      if (t0 == 0) t0 = t;
      else if (t - t0 >= limit_ns) return v;
    }
  }
}

// copy_block moves n bytes with the block's threads: 16-byte vectors where both sides allow
// them, bytes for the rest.
__device__ static void copy_block(char *d, const char *s, long long n) {
  long long head = 0;
  if ((((uintptr_t)d | (uintptr_t)s) & 15) == 0) {
    long long n16 = n / 16;
    const int4 *s4 = (const int4 *)s;
    int4 *d4 = (int4 *)d;
    for (long long i = threadIdx.x; i < n16; i += blockDim.x) d4[i] = s4[i];
    head = n16 * 16;
  }
  for (long long i = head + threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}

// signal_peer makes the block's stores visible at system scope, then one thread stores (or
// adds) the signal on the peer.
__device__ static void signal_peer(uint64_t *sig, uint64_t v, bool add) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> a(*sig);
    if (add) a.fetch_add(v, cuda::memory_order_release);
    else a.store(v, cuda::memory_order_release);
  }
}

extern "C" __global__ void nccl_put_block(ncclWindow_t win, uint64_t dst, uint64_t src, long long nbytes,
                                          long long chunk, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n > 0) copy_block((char *)ncclGetLsaPointer(win, dst + off, peer), (const char *)ncclGetLocalPointer(win, src + off), n);
}

extern "C" __global__ void nccl_get_block(ncclWindow_t win, uint64_t dst, uint64_t src, long long nbytes,
                                          long long chunk, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n > 0) copy_block((char *)ncclGetLocalPointer(win, dst + off), (const char *)ncclGetLsaPointer(win, src + off, peer), n);
}

// Each block adds one to sig on peer once its part is stored, as put_signal_block does.
extern "C" __global__ void nccl_put_signal_block(ncclWindow_t win, uint64_t dst, uint64_t src, long long nbytes,
                                                 long long chunk, uint64_t sig, int peer) {
  long long off = (long long)blockIdx.x * chunk;
  long long n = min(chunk, nbytes - off);
  if (n > 0) copy_block((char *)ncclGetLsaPointer(win, dst + off, peer), (const char *)ncclGetLocalPointer(win, src + off), n);
  signal_peer((uint64_t *)ncclGetLsaPointer(win, sig, peer), 1, true);
}

// Bounded on the device: a signal that has not come after limit_ns ends the kernel.
extern "C" __global__ void nccl_wait_signal(ncclWindow_t win, uint64_t sig, uint64_t value, uint64_t limit_ns,
                                            uint64_t *mailbox) {
  if (threadIdx.x == 0) {
    uint64_t seen = wait_until_ge((uint64_t *)ncclGetLocalPointer(win, sig), value, limit_ns);
    if (seen < value) give_up(mailbox, GAVE_UP_SIGNAL, value, seen, 0);
  }
  __syncthreads();
}

// The ping-pong of symmem_nvshmem.cu's cuda_pingpong, with LSA stores and a signal set
// on the peer: every round carries its number in the payload's first 8 bytes, each side
// counts the rounds whose number was not there with their signal (stamps[iters+1]), and
// the initiator stamps the clock before the first round and after each.
extern "C" __global__ void nccl_pingpong(ncclWindow_t win, uint64_t dst, uint64_t src, uint64_t sig,
                                         long long nbytes, int iters, int peer, int initiator, uint64_t stamps_off,
                                         uint64_t limit_ns, uint64_t *mailbox) {
  char *to = (char *)ncclGetLsaPointer(win, dst, peer);
  const char *from = (const char *)ncclGetLocalPointer(win, src);
  volatile uint64_t *tag_in = (volatile uint64_t *)ncclGetLocalPointer(win, dst);
  uint64_t *tag_out = (uint64_t *)ncclGetLocalPointer(win, src);
  uint64_t *mine = (uint64_t *)ncclGetLocalPointer(win, sig);
  uint64_t *theirs = (uint64_t *)ncclGetLsaPointer(win, sig, peer);
  uint64_t *stamps = (uint64_t *)ncclGetLocalPointer(win, stamps_off);
  uint64_t wrong = 0;
  if (initiator && threadIdx.x == 0) stamps[0] = global_timer();
  for (int i = 0; i < iters; i++) {
    uint64_t v = (uint64_t)i + 1;
    if (!initiator && threadIdx.x == 0) {
      uint64_t seen = wait_until_ge(mine, v, limit_ns);
      if (seen < v) give_up(mailbox, GAVE_UP_ROUND, v, seen, peer);
      if (*tag_in != v) wrong++;
    }
    if (threadIdx.x == 0) {
      *tag_out = v;
      __threadfence();
    }
    __syncthreads();
    copy_block(to, from, nbytes);
    signal_peer(theirs, v, false);
    if (initiator && threadIdx.x == 0) {
      uint64_t seen = wait_until_ge(mine, v, limit_ns);
      if (seen < v) give_up(mailbox, GAVE_UP_ROUND, v, seen, peer);
      stamps[i + 1] = global_timer();
      if (*tag_in != v) wrong++;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) stamps[iters + 1] = wrong;
}

// Element types of the all-reduce: each sums in float32, in rank order, and rounds once
// (what symmem's check computes: internal/coll Sum). A 16-byte vector holds VEC elements.
template <typename T> struct Elem;
template <> struct Elem<float> {
  static constexpr int VEC = 4;
  __device__ static float load(const float *p, long long i) { return p[i]; }
  __device__ static void store(float *p, long long i, float v) { p[i] = v; }
  __device__ static void add(float *acc, uint4 v) {
    acc[0] += __uint_as_float(v.x), acc[1] += __uint_as_float(v.y), acc[2] += __uint_as_float(v.z), acc[3] += __uint_as_float(v.w);
  }
  __device__ static uint4 pack(const float *acc) {
    return make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]), __float_as_uint(acc[3]));
  }
};
template <> struct Elem<__nv_bfloat16> {
  static constexpr int VEC = 8;
  __device__ static float load(const __nv_bfloat16 *p, long long i) { return __bfloat162float(p[i]); }
  __device__ static void store(__nv_bfloat16 *p, long long i, float v) { p[i] = __float2bfloat16(v); }
  __device__ static void add(float *acc, uint4 v) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
      acc[2 * k] += __uint_as_float(w[k] << 16);  // the lower element
      acc[2 * k + 1] += __uint_as_float(w[k] & 0xffff0000u);
    }
  }
  __device__ static uint4 pack(const float *acc) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint32_t lo = __bfloat16_as_ushort(__float2bfloat16(acc[2 * k]));
      uint32_t hi = __bfloat16_as_ushort(__float2bfloat16(acc[2 * k + 1]));
      w[k] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

// sum_range stores, for elements [lo, hi), the sum over the n LSA ranks of their send
// (window offset) into recv: on this rank only (one-shot), or on every rank (two-shot's
// all-gather of the block it reduced). Whole 16-byte vectors where the offsets allow
// them (lo is a whole number of vectors), single elements for the rest.
template <typename T>
__device__ static void sum_range(ncclWindow_t win, int n, int me, uint64_t send, uint64_t recv, long long lo, long long hi,
                                 bool everyone) {
  typedef Elem<T> E;
  long long vhi = lo;
  if (((send | recv) & 15) == 0) {
    vhi = lo + (hi - lo) / E::VEC * E::VEC;
    for (long long i = lo + (long long)threadIdx.x * E::VEC; i < vhi; i += (long long)blockDim.x * E::VEC) {
      float acc[E::VEC] = {};
      for (int p = 0; p < n; p++) E::add(acc, *(const uint4 *)((const T *)ncclGetLsaPointer(win, send, p) + i));
      uint4 out = E::pack(acc);
      for (int p = everyone ? 0 : me; p < (everyone ? n : me + 1); p++) *(uint4 *)((T *)ncclGetLsaPointer(win, recv, p) + i) = out;
    }
  }
  for (long long i = vhi + threadIdx.x; i < hi; i += blockDim.x) {
    float acc = 0;
    for (int p = 0; p < n; p++) acc += E::load((const T *)ncclGetLsaPointer(win, send, p), i);
    for (int p = everyone ? 0 : me; p < (everyone ? n : me + 1); p++) E::store((T *)ncclGetLsaPointer(win, recv, p), i, acc);
  }
}

// One-shot: after a barrier (every rank's input is in place: written before its
// kernel began), block b sums elements [b*chunk, (b+1)*chunk) of every rank's send into
// this rank's recv; the closing barrier keeps every send unchanged until all have read.
template <typename T>
__device__ static void oneshot(ncclWindow_t win, const ncclDevComm *dcp, uint64_t send, uint64_t recv, long long count,
                               long long chunk) {
  ncclDevComm const &dc = *dcp;
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  long long lo = (long long)blockIdx.x * chunk;
  if (lo < count) sum_range<T>(win, dc.lsaSize, dc.lsaRank, send, recv, lo, min(lo + chunk, count), false);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Two-shot: rank r owns elements [r*per, (r+1)*per); its block b sums part b (chunk
// elements) of them over every rank and stores the sum into every rank's recv. The
// closing barrier (acquire and release) makes every rank's stores visible to all.
template <typename T>
__device__ static void twoshot(ncclWindow_t win, const ncclDevComm *dcp, uint64_t send, uint64_t recv, long long count,
                               long long per, long long chunk) {
  ncclDevComm const &dc = *dcp;
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  long long start = (long long)dc.lsaRank * per, end = min(start + per, count);
  long long lo = start + (long long)blockIdx.x * chunk;
  if (lo < end) sum_range<T>(win, dc.lsaSize, dc.lsaRank, send, recv, lo, min(lo + chunk, end), true);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" __global__ void nccl_allreduce_oneshot_bf16(ncclWindow_t win, const ncclDevComm *dc, uint64_t send, uint64_t recv,
                                                       long long count, long long chunk) {
  oneshot<__nv_bfloat16>(win, dc, send, recv, count, chunk);
}

extern "C" __global__ void nccl_allreduce_oneshot_f32(ncclWindow_t win, const ncclDevComm *dc, uint64_t send, uint64_t recv,
                                                      long long count, long long chunk) {
  oneshot<float>(win, dc, send, recv, count, chunk);
}

extern "C" __global__ void nccl_allreduce_twoshot_bf16(ncclWindow_t win, const ncclDevComm *dc, uint64_t send, uint64_t recv,
                                                       long long count, long long per, long long chunk) {
  twoshot<__nv_bfloat16>(win, dc, send, recv, count, per, chunk);
}

extern "C" __global__ void nccl_allreduce_twoshot_f32(ncclWindow_t win, const ncclDevComm *dc, uint64_t send, uint64_t recv,
                                                      long long count, long long per, long long chunk) {
  twoshot<float>(win, dc, send, recv, count, per, chunk);
}
