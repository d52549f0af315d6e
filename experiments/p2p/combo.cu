// Experiment: what moves data from GPU 0 to GPU 1 fastest over NVLink, alone and combined?
// Standalone (CUDA runtime + P2P, no NVSHMEM). Engines:
//   ce-push  cudaMemcpyAsync on a GPU 0 stream (GPU 0's copy engine writes into GPU 1)
//   ce-pull  cudaMemcpyAsync on a GPU 1 stream (GPU 1's copy engine reads from GPU 0)
//   sm-push  a kernel on GPU 0 storing into GPU 1 (variants below)
//   sm-pull  a kernel on GPU 1 loading from GPU 0
// A "plan" splits each transfer between engines; every iteration forks from GPU 0's main
// stream to the engines' streams and joins back (an operation is complete when the main
// stream passes it), timed with CUDA events on GPU 0. The destination is checked after
// every plan. Build and run: nvcc -O3 -arch=sm_90a -o combo combo.cu && ./combo
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

// Each block copies one contiguous chunk, 16 bytes per thread per step.
__global__ void chunk16(int4* __restrict__ dst, const int4* __restrict__ src, long long per, long long n) {
  const long long base = (long long)blockIdx.x * per;
  per = min(per, n - base);
  for (long long i = threadIdx.x; i < per; i += blockDim.x) dst[base + i] = src[base + i];
}

// Grid-stride: the whole grid sweeps the buffer front to back together.
__global__ void stride16(int4* __restrict__ dst, const int4* __restrict__ src, long long n) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i];
}

// Chunked with 4 loads in flight before 4 stores.
__global__ void chunk16x4(int4* __restrict__ dst, const int4* __restrict__ src, long long per, long long n) {
  const long long base = (long long)blockIdx.x * per;
  per = min(per, n - base);
  const int T = blockDim.x;
  for (long long i = threadIdx.x; i < per; i += 4 * T) {
    int4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++) if (i + k * T < per) v[k] = src[base + i + k * T];
#pragma unroll
    for (int k = 0; k < 4; k++) if (i + k * T < per) dst[base + i + k * T] = v[k];
  }
}

// Chunked with streaming (evict-first) stores.
__global__ void chunk16cs(int4* __restrict__ dst, const int4* __restrict__ src, long long per, long long n) {
  const long long base = (long long)blockIdx.x * per;
  per = min(per, n - base);
  for (long long i = threadIdx.x; i < per; i += blockDim.x) __stcs(dst + base + i, __ldcs(src + base + i));
}

// Chunked, write-through stores.
__global__ void chunk16wt(int4* __restrict__ dst, const int4* __restrict__ src, long long per, long long n) {
  const long long base = (long long)blockIdx.x * per;
  per = min(per, n - base);
  for (long long i = threadIdx.x; i < per; i += blockDim.x) __stwt(dst + base + i, src[base + i]);
}

enum Kind { CE_PUSH, CE_PULL, SM_PUSH, SM_PULL };
struct Part {
  Kind kind;
  double frac;
  int kernel = 0, blocks = 132, threads = 1024;
};
struct Plan {
  std::string name;
  std::vector<Part> parts;
};

static char* src;  // on GPU 0
static char* dst;  // on GPU 1 (two slots of 256 MiB for overlapped runs)
static const size_t SLOT = 256ull << 20;
static std::vector<unsigned char> host;
static cudaStream_t main0;
static cudaStream_t s0[4], s1[4];
static cudaEvent_t fork0, join0[4], join1[4];

static void launchKernel(int kernel, int blocks, int threads, cudaStream_t st, char* d, const char* s, size_t n) {
  long long n16 = n / 16, per = (n16 + blocks - 1) / blocks;
  if (kernel == 1) { stride16<<<blocks, threads, 0, st>>>((int4*)d, (const int4*)s, n16); return; }
  switch (kernel) {
    case 0: chunk16<<<blocks, threads, 0, st>>>((int4*)d, (const int4*)s, per, n16); break;
    case 2: chunk16x4<<<blocks, threads, 0, st>>>((int4*)d, (const int4*)s, per, n16); break;
    case 3: chunk16cs<<<blocks, threads, 0, st>>>((int4*)d, (const int4*)s, per, n16); break;
    case 4: chunk16wt<<<blocks, threads, 0, st>>>((int4*)d, (const int4*)s, per, n16); break;
  }
}

// lane < 0: fork from and join back into the main stream (each op waits for the last).
// lane 0/1: the op runs on that lane's streams only, into destination slot `lane`, so
// consecutive ops overlap; the caller forks and joins around the whole loop.
static void issue(const Plan& p, size_t bytes, int lane = -1) {
  char* dst = ::dst + (lane > 0 ? SLOT : 0);
  CK(cudaSetDevice(0));
  if (lane < 0) CK(cudaEventRecord(fork0, main0));
  size_t off = 0;
  int n0 = lane > 0 ? 2 : 0, n1 = lane > 0 ? 2 : 0;
  for (size_t k = 0; k < p.parts.size(); k++) {
    const Part& q = p.parts[k];
    size_t len = k + 1 == p.parts.size() ? bytes - off : ((size_t)(bytes * q.frac) / (1 << 16)) * (1 << 16);
    bool on1 = q.kind == CE_PULL || q.kind == SM_PULL;
    CK(cudaSetDevice(on1 ? 1 : 0));
    cudaStream_t st = on1 ? s1[n1] : s0[n0];
    if (lane < 0) CK(cudaStreamWaitEvent(st, fork0, 0));
    if (q.kind == CE_PUSH || q.kind == CE_PULL) CK(cudaMemcpyAsync(dst + off, src + off, len, cudaMemcpyDefault, st));
    else launchKernel(q.kernel, q.blocks, q.threads, st, dst + off, src + off, len);
    if (lane < 0) CK(cudaEventRecord(on1 ? join1[n1] : join0[n0], st));
    if (on1) n1++; else n0++;
    off += len;
  }
  if (lane >= 0) return;
  CK(cudaSetDevice(0));
  for (int i = 0; i < n0; i++) CK(cudaStreamWaitEvent(main0, join0[i], 0));
  for (int i = 0; i < n1; i++) CK(cudaStreamWaitEvent(main0, join1[i], 0));
}

static void forkAll() {
  CK(cudaSetDevice(0));
  CK(cudaEventRecord(fork0, main0));
  for (int i = 0; i < 4; i++) CK(cudaStreamWaitEvent(s0[i], fork0, 0));
  CK(cudaSetDevice(1));
  for (int i = 0; i < 4; i++) CK(cudaStreamWaitEvent(s1[i], fork0, 0));
}
static void joinAll() {
  for (int i = 0; i < 4; i++) { CK(cudaSetDevice(0)); CK(cudaEventRecord(join0[i], s0[i])); }
  for (int i = 0; i < 4; i++) { CK(cudaSetDevice(1)); CK(cudaEventRecord(join1[i], s1[i])); }
  CK(cudaSetDevice(0));
  for (int i = 0; i < 4; i++) { CK(cudaStreamWaitEvent(main0, join0[i], 0)); CK(cudaStreamWaitEvent(main0, join1[i], 0)); }
}

static bool overlap = false;

static double timePlan(const Plan& p, size_t bytes, int iters, int reps) {
  cudaEvent_t a, b;
  CK(cudaSetDevice(0));
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> r;
  for (int i = 0; i < 3; i++) issue(p, bytes);
  for (int rep = 0; rep < reps; rep++) {
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(a, main0));
    if (overlap) {
      forkAll();
      for (int i = 0; i < iters; i++) issue(p, bytes, i % 2);
      joinAll();
    } else
      for (int i = 0; i < iters; i++) issue(p, bytes);
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(b, main0));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    r.push_back(ms * 1000.0 / iters);
  }
  std::sort(r.begin(), r.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return r[r.size() / 2];
}

static const char* check(size_t bytes) {
  std::vector<unsigned char> g(bytes);
  CK(cudaSetDevice(1));
  CK(cudaDeviceSynchronize());
  for (int slot = 0; slot < (overlap ? 2 : 1); slot++) {
    CK(cudaMemcpy(g.data(), dst + slot * SLOT, bytes, cudaMemcpyDefault));
    if (memcmp(g.data(), host.data(), bytes) != 0) return "WRONG";
  }
  return "ok";
}

static void zero(size_t bytes) {
  CK(cudaSetDevice(1));
  CK(cudaMemset(dst, 0, bytes));
  CK(cudaMemset(dst + SLOT, 0, bytes));
  CK(cudaDeviceSynchronize());
}

int main(int argc, char** argv) {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) { printf("needs 2 GPUs\n"); return 1; }
  const size_t maxb = 256ull << 20;
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  CK(cudaMalloc(&dst, 2 * SLOT));
  for (int i = 0; i < 4; i++) CK(cudaStreamCreateWithFlags(&s1[i], cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++) CK(cudaEventCreateWithFlags(&join1[i], cudaEventDisableTiming));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaMalloc(&src, maxb));
  CK(cudaStreamCreateWithFlags(&main0, cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++) CK(cudaStreamCreateWithFlags(&s0[i], cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++) CK(cudaEventCreateWithFlags(&join0[i], cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&fork0, cudaEventDisableTiming));
  host.resize(maxb);
  for (size_t i = 0; i < maxb; i++) host[i] = (unsigned char)(i * 2654435761u >> 13);
  CK(cudaMemcpy(src, host.data(), maxb, cudaMemcpyHostToDevice));

  std::vector<Plan> plans;
  auto one = [](Kind k, int kernel = 0, int blocks = 132, int threads = 1024) { Part p{k, 1.0}; p.kernel = kernel; p.blocks = blocks; p.threads = threads; return p; };
  auto part = [](Kind k, double f, int blocks = 132) { Part p{k, f}; p.blocks = blocks; return p; };
  plans.push_back({"ce-push", {one(CE_PUSH)}});
  plans.push_back({"ce-pull", {one(CE_PULL)}});
  plans.push_back({"sm-push chunk 132x1024", {one(SM_PUSH)}});
  plans.push_back({"sm-push chunk 264x1024", {one(SM_PUSH, 0, 264)}});
  plans.push_back({"sm-push chunk 128x512", {one(SM_PUSH, 0, 128, 512)}});
  plans.push_back({"sm-push stride 132x1024", {one(SM_PUSH, 1)}});
  plans.push_back({"sm-push stride 528x512", {one(SM_PUSH, 1, 528, 512)}});
  plans.push_back({"sm-push chunk x4 132x1024", {one(SM_PUSH, 2)}});
  plans.push_back({"sm-push chunk x4 32x1024", {one(SM_PUSH, 2, 32)}});
  plans.push_back({"sm-push chunk cs 132x1024", {one(SM_PUSH, 3)}});
  plans.push_back({"sm-push chunk wt 132x1024", {one(SM_PUSH, 4)}});
  plans.push_back({"sm-pull chunk 132x1024", {one(SM_PULL)}});
  plans.push_back({"sm-pull chunk x4 132x1024", {one(SM_PULL, 2)}});
  plans.push_back({"sm-pull stride 264x1024", {one(SM_PULL, 1, 264)}});
  for (double f : {0.05, 0.1, 0.2, 0.3}) {
    char name[64];
    snprintf(name, sizeof name, "ce-push %.0f%% + sm-push 16x", 100 * (1 - f));
    plans.push_back({name, {part(CE_PUSH, 1 - f), part(SM_PUSH, f, 16)}});
    snprintf(name, sizeof name, "ce-push %.0f%% + sm-push 132x", 100 * (1 - f));
    plans.push_back({name, {part(CE_PUSH, 1 - f), part(SM_PUSH, f, 132)}});
  }
  for (double f : {0.3, 0.5}) {
    char name[64];
    snprintf(name, sizeof name, "ce-push %.0f%% + ce-pull", 100 * (1 - f));
    plans.push_back({name, {part(CE_PUSH, 1 - f), part(CE_PULL, f)}});
    snprintf(name, sizeof name, "ce-push %.0f%% + sm-pull 132x", 100 * (1 - f));
    plans.push_back({name, {part(CE_PUSH, 1 - f), part(SM_PULL, f)}});
    snprintf(name, sizeof name, "sm-push %.0f%% + sm-pull 132x", 100 * (1 - f));
    plans.push_back({name, {part(SM_PUSH, 1 - f), part(SM_PULL, f)}});
  }
  plans.push_back({"ce-push 50% + ce-push 50% (2 streams)", {part(CE_PUSH, 0.5), part(CE_PUSH, 0.5)}});

  int a = 1;
  if (a < argc && !strcmp(argv[a], "overlap")) { overlap = true; a++; }
  if (a + 3 < argc + 0 && !strcmp(argv[a], "only")) {
    // one plan, one size, many iterations: for reading link counters around it
    size_t bytes = strtoull(argv[a + 2], 0, 10) << 20;
    int iters = atoi(argv[a + 3]);
    for (const Plan& p : plans) {
      if (p.name != argv[a + 1]) continue;
      zero(bytes);
      double us = timePlan(p, bytes, iters, 1);
      printf("%4zu MiB  %-40s %9.2f us %7.1f GB/s  %s  (%d ops)\n", bytes >> 20, p.name.c_str(), us, bytes / us / 1e3, check(bytes), iters + 3);
      return 0;
    }
    printf("no plan %s\n", argv[a + 1]);
    return 1;
  }
  for (size_t bytes : {1ull << 20, 16ull << 20, 256ull << 20}) {
    int iters = bytes >= (256ull << 20) ? 20 : bytes >= (16ull << 20) ? 100 : 200;
    for (const Plan& p : plans) {
      bool small = bytes < (16ull << 20);
      if (small && p.name.find("16x") != std::string::npos) continue;
      zero(bytes);
      double us = timePlan(p, bytes, iters, 5);
      printf("%4zu MiB  %-40s %9.2f us %7.1f GB/s  %s\n", bytes >> 20, p.name.c_str(), us, bytes / us / 1e3, check(bytes));
      fflush(stdout);
    }
  }
  return 0;
}
