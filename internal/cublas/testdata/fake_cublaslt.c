// A fake libcublasLt.so.13 for the binding's tests: every function symmem binds, with
// the prototypes of cublasLt.h, logging the arguments it received so that the Go side's
// ABI (argument order, enum values, 64-bit sizes, the 96-byte heuristic result, the
// algorithm passed by pointer) is checked against what a C compiler makes of the real
// declarations. cublasLtMatmul also multiplies CUDA_R_16BF matrices in host memory as
// cuBLASLt multiplies column-major ones, so a test can check the row-major product the
// binding's transposition is meant to give.
//
//   gcc -shared -fPIC -o libcublasLt.so.13 fake_cublaslt.c [-DOMIT_MATMUL] [-DVERSION=N]
//
// fake_log() returns the calls since fake_reset(), one per line. The heuristic offers
// one algorithm needing FAKE_WORKSPACE bytes, and none (CUBLAS_STATUS_NOT_SUPPORTED)
// where the preference allows less.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14, CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4 } cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 } cublasLtMatmulPreferenceAttributes_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef struct CUstream_st* cudaStream_t;

#define MAGIC 0x6c74
struct handle { int magic; };
struct desc { int magic, compute, scale, transa, transb; };
struct layout { int magic, type; uint64_t rows, cols; int64_t ld; };
struct pref { int magic; uint64_t workspace; };
typedef struct handle* cublasLtHandle_t;
typedef struct desc* cublasLtMatmulDesc_t;
typedef struct layout* cublasLtMatrixLayout_t;
typedef struct pref* cublasLtMatmulPreference_t;

#ifndef VERSION
#define VERSION 130100  // 13.1.0
#endif
#define FAKE_WORKSPACE 4096

static char logbuf[1 << 16];
static size_t loglen;
static int live;  // handles and descriptors not yet destroyed

static void record(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen, fmt, ap);
  va_end(ap);
  if (n > 0 && loglen + n < sizeof logbuf - 1) {
    loglen += n;
    logbuf[loglen++] = '\n';
    logbuf[loglen] = 0;
  }
}

const char* fake_log(void) { return logbuf; }
void fake_reset(void) { loglen = 0; logbuf[0] = 0; }
int fake_live(void) { return live; }

size_t cublasLtGetVersion(void) { return VERSION; }

const char* cublasLtGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_NOT_SUPPORTED ? "the functionality requested is not supported" : "some status";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = calloc(1, sizeof **h);
  (*h)->magic = MAGIC;
  live++;
  record("cublasLtCreate");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  if (h == NULL || h->magic != MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  live--;
  record("cublasLtDestroy");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType scale) {
  *d = calloc(1, sizeof **d);
  (*d)->magic = MAGIC;
  (*d)->compute = compute;
  (*d)->scale = scale;
  live++;
  record("cublasLtMatmulDescCreate(compute=%d, scale=%d)", compute, scale);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  if (d == NULL || d->magic != MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
  d->magic = 0;
  free(d);
  live--;
  return CUBLAS_STATUS_SUCCESS;
}

// As the real one: the size must be the attribute's (int32_t for the transposes).
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (d == NULL || d->magic != MAGIC || buf == NULL || size != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t v = *(const int32_t*)buf;
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA) d->transa = v;
  else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) d->transb = v;
  else return CUBLAS_STATUS_INVALID_VALUE;
  record("cublasLtMatmulDescSetAttribute(attr=%d, value=%d, size=%zu)", attr, v, size);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (ld < (int64_t)rows) return CUBLAS_STATUS_INVALID_VALUE;
  *l = calloc(1, sizeof **l);
  (*l)->magic = MAGIC;
  (*l)->type = type;
  (*l)->rows = rows;
  (*l)->cols = cols;
  (*l)->ld = ld;
  live++;
  record("cublasLtMatrixLayoutCreate(type=%d, rows=%llu, cols=%llu, ld=%lld)", type, (unsigned long long)rows,
         (unsigned long long)cols, (long long)ld);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  if (l == NULL || l->magic != MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
  l->magic = 0;
  free(l);
  live--;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = calloc(1, sizeof **p);
  (*p)->magic = MAGIC;
  live++;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  if (p == NULL || p->magic != MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
  p->magic = 0;
  free(p);
  live--;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (p == NULL || p->magic != MAGIC || attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || size != sizeof(uint64_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  p->workspace = *(const uint64_t*)buf;
  record("cublasLtMatmulPreferenceSetAttribute(attr=%d, value=%llu, size=%zu)", attr,
         (unsigned long long)p->workspace, size);
  return CUBLAS_STATUS_SUCCESS;
}

static int same_layout(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b) {
  return a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->ld == b->ld;
}

// The shapes must chain as a product: A is m x k, B k x n, C and D m x n.
static int chains(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                  cublasLtMatrixLayout_t d) {
  return a && b && c && d && a->magic == MAGIC && b->magic == MAGIC && c->magic == MAGIC && d->magic == MAGIC &&
         a->rows == c->rows && a->cols == b->rows && b->cols == c->cols && same_layout(c, d);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  if (h == NULL || h->magic != MAGIC || op == NULL || op->magic != MAGIC || !chains(a, b, c, d) || pref == NULL ||
      pref->magic != MAGIC || requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  record("cublasLtMatmulAlgoGetHeuristic(requested=%d, workspace=%llu)", requested,
         (unsigned long long)pref->workspace);
  *returned = 0;
  if (pref->workspace < FAKE_WORKSPACE) return CUBLAS_STATUS_NOT_SUPPORTED;
  // Every field of every result requested, so that a Go struct of the wrong size reads
  // the wrong words.
  for (int i = 0; i < requested; i++) {
    for (int w = 0; w < 8; w++) results[i].algo.data[w] = 0xA1600000ull + (uint64_t)(i * 8 + w);
    results[i].workspaceSize = FAKE_WORKSPACE;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 0.5f;
    for (int w = 0; w < 4; w++) results[i].reserved[w] = 7;
  }
  *returned = requested;
  return CUBLAS_STATUS_SUCCESS;
}

static float from_bf16(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even
  return (uint16_t)(u >> 16);
}

#ifdef OMIT_MATMUL  // a library without it: Open must say which symbol is missing
#define cublasLtMatmul cublasLtMatmul_omitted
#endif
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_size,
                              cudaStream_t stream) {
  if (h == NULL || h->magic != MAGIC || op == NULL || op->magic != MAGIC || !chains(a, b, c, d) || algo == NULL)
    return CUBLAS_STATUS_INVALID_VALUE;
  float al = *(const float*)alpha, be = *(const float*)beta;
  record("cublasLtMatmul(compute=%d, scale=%d, trans=%d%d, alpha=%g, beta=%g, A=%p, B=%p, C=%p, D=%p, algo=%llx..%llx, "
         "workspace=%p/%zu, stream=%p)",
         op->compute, op->scale, op->transa, op->transb, al, be, A, B, C, D, (unsigned long long)algo->data[0],
         (unsigned long long)algo->data[7], workspace, workspace_size, (void*)stream);
  if (workspace_size < FAKE_WORKSPACE) return CUBLAS_STATUS_INVALID_VALUE;
  if (a->type != CUDA_R_16BF || op->transa != 0 || op->transb != 0) return CUBLAS_STATUS_SUCCESS;  // logged only
  // Column-major: D[i + j*ldd] = alpha * sum_p A[i + p*lda] * B[p + j*ldb] + beta * C.
  const uint16_t *ma = A, *mb = B, *mc = C;
  uint16_t* md = D;
  for (uint64_t j = 0; j < d->cols; j++) {
    for (uint64_t i = 0; i < d->rows; i++) {
      float acc = 0;
      for (uint64_t p = 0; p < a->cols; p++) acc += from_bf16(ma[i + p * a->ld]) * from_bf16(mb[p + j * b->ld]);
      float prev = be != 0 ? from_bf16(mc[i + j * c->ld]) : 0;
      md[i + j * d->ld] = to_bf16(al * acc + be * prev);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
