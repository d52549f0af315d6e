// Experiment: can Hopper's bulk-copy engine (TMA, cp.async.bulk) driven from a kernel write
// to a peer GPU over NVLink faster than per-thread 16-byte stores, approaching the copy
// engine? Standalone (CUDA runtime + P2P, no NVSHMEM): GPU 0 writes into GPU 1.
// Build and run on a 2-GPU machine: nvcc -O3 -arch=sm_90a -o tma_p2p tma_p2p.cu && ./tma_p2p
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int CH = 8192;     // bytes per bulk copy
constexpr int STAGES = 4;    // shared-memory buffers per block

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__global__ void tma_copy(char* __restrict__ dst, const char* __restrict__ src, long long per_block) {
  __shared__ __align__(128) unsigned char buf[STAGES][CH];
  __shared__ __align__(8) uint64_t bar[STAGES];
  if (threadIdx.x != 0) return;
  const long long base = (long long)blockIdx.x * per_block;
  for (int s = 0; s < STAGES; s++)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(&bar[s])), "r"(1));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  uint32_t phase[STAGES] = {0, 0, 0, 0};
  const long long nchunks = per_block / CH;
  for (long long i = 0; i < nchunks; i++) {
    const int s = (int)(i % STAGES);
    if (i >= STAGES) asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(STAGES - 1) : "memory");
    const uint32_t b = smem_u32(&bar[s]);
    const uint32_t sm = smem_u32(&buf[s][0]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(CH) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(sm), "l"(src + base + i * CH), "r"(CH), "r"(b) : "memory");
    asm volatile("{\n\t.reg .pred p;\n\tW%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W%=;\n}"
                 :: "r"(b), "r"(phase[s]) : "memory");
    phase[s] ^= 1;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst + base + i * CH), "r"(sm), "r"(CH) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void int4_copy(int4* __restrict__ dst, const int4* __restrict__ src, long long n16_per_block) {
  const long long base = (long long)blockIdx.x * n16_per_block;
  for (long long i = threadIdx.x; i < n16_per_block; i += blockDim.x) dst[base + i] = src[base + i];
}

int main() {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) { printf("needs 2 GPUs\n"); return 1; }
  CK(cudaSetDevice(1));
  const size_t maxb = 256ull << 20;
  char* dst;
  CK(cudaMalloc(&dst, maxb));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  char* src;
  CK(cudaMalloc(&src, maxb));
  std::vector<unsigned char> h(maxb);
  for (size_t i = 0; i < maxb; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
  CK(cudaMemcpy(src, h.data(), maxb, cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int iters = 20;
  auto timeit = [&](auto launch) {
    for (int i = 0; i < 3; i++) launch();
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < iters; i++) launch();
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0 / iters;
  };
  auto zero = [&](size_t bytes) {
    CK(cudaSetDevice(1));
    CK(cudaMemset(dst, 0, bytes));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0));
  };
  auto check = [&](size_t bytes) {
    std::vector<unsigned char> g(bytes);
    CK(cudaMemcpy(g.data(), dst, bytes, cudaMemcpyDefault));
    return memcmp(g.data(), h.data(), bytes) == 0 ? "ok" : "WRONG";
  };
  for (size_t bytes : {1ull << 20, 16ull << 20, 256ull << 20}) {
    zero(bytes);
    double us = timeit([&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st)); });
    printf("%6zu MiB copy-engine           %8.2f us %7.1f GB/s %s\n", bytes >> 20, us, bytes / us / 1e3, check(bytes));
    for (int blocks : {64, 128, 256, 512}) {
      long long per = (long long)(bytes / blocks);
      if (bytes % blocks || per % CH) continue;
      zero(bytes);
      us = timeit([&] { tma_copy<<<blocks, 32, 0, st>>>(dst, src, per); });
      printf("%6zu MiB tma %4d blocks         %8.2f us %7.1f GB/s %s\n", bytes >> 20, blocks, us, bytes / us / 1e3, check(bytes));
    }
    for (int blocks : {128, 256}) {
      long long per16 = (long long)(bytes / 16 / blocks);
      zero(bytes);
      us = timeit([&] { int4_copy<<<blocks, 1024, 0, st>>>((int4*)dst, (const int4*)src, per16); });
      printf("%6zu MiB int4 %4d x 1024       %8.2f us %7.1f GB/s %s\n", bytes >> 20, blocks, us, bytes / us / 1e3, check(bytes));
    }
  }
  return 0;
}
