// A fake libnccl.so.2 for the binding's tests: every function symmem binds, with the
// prototypes of nccl.h, logging the arguments it received so that the Go side's ABI
// (argument order, the 128-byte ncclUniqueId by value, enum values, size_t counts) is
// checked against what a C compiler makes of the real declarations.
//
//   gcc -shared -fPIC -o libnccl.so.2 fake_nccl.c [-DOMIT_SEND]
//
// fake_log() returns the calls since fake_reset(), one per line.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
               ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
               ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef struct ncclComm* ncclComm_t;
typedef struct CUstream_st* cudaStream_t;

struct ncclComm { int magic, nranks, rank; };
#define MAGIC 0x6e63636c

static char logbuf[1 << 16];
static size_t loglen;
static char lasterr[256];

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
void fake_reset(void) { loglen = 0; logbuf[0] = 0; lasterr[0] = 0; }

// comm renders a communicator as rank/nranks, or BAD when the handle is not one.
static const char* comm(ncclComm_t c) {
  static char buf[4][32];
  static int i;
  i = (i + 1) % 4;
  if (c == NULL || c->magic != MAGIC) return "BAD";
  snprintf(buf[i], sizeof buf[i], "%d/%d", c->rank, c->nranks);
  return buf[i];
}

ncclResult_t ncclGetVersion(int* version) {
  *version = 22703;  // 2.27.3
  return ncclSuccess;
}

// The ID is made from a seed so that the test knows every byte.
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) id->internal[i] = (char)(i * 7 + 3);
  record("ncclGetUniqueId");
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  // The ID in hex, first and last 4 bytes, and a checksum over all 128.
  unsigned sum = 0;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) sum = sum * 31 + (unsigned char)id.internal[i];
  const unsigned char* u = (const unsigned char*)id.internal;
  const char* nvls = getenv("NCCL_NVLS_ENABLE");
  record("ncclCommInitRank(nranks=%d, id=%02x%02x%02x%02x..%02x%02x%02x%02x sum=%08x, rank=%d) NCCL_NVLS_ENABLE=%s", nranks,
       u[0], u[1], u[2], u[3], u[124], u[125], u[126], u[127], sum, rank, nvls ? nvls : "(unset)");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    snprintf(lasterr, sizeof lasterr, "Invalid rank requested : %d/%d", rank, nranks);
    return ncclInvalidArgument;
  }
  struct ncclComm* c = calloc(1, sizeof *c);
  c->magic = MAGIC, c->nranks = nranks, c->rank = rank;
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  record("ncclCommDestroy(%s)", comm(c));
  if (c == NULL || c->magic != MAGIC) return ncclInvalidArgument;
  c->magic = 0;
  free(c);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  record("ncclCommAbort(%s)", comm(c));
  if (c == NULL || c->magic != MAGIC) return ncclInvalidArgument;
  c->magic = 0;
  free(c);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t c) {
  (void)c;
  return lasterr;
}

// A count of 0xbad fails, so that the tests see a collective's error come back.
static ncclResult_t result(size_t count, const char* call) {
  if (count == 0xbad) {
    snprintf(lasterr, sizeof lasterr, "%s: count 0xbad refused", call);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t stream) {
  record("ncclAllReduce(send=%p, recv=%p, count=%zu, dt=%d, op=%d, comm=%s, stream=%p)", sendbuff, recvbuff, count, datatype,
       op, comm(c), (void*)stream);
  return result(count, "ncclAllReduce");
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t c,
                           cudaStream_t stream) {
  record("ncclAllGather(send=%p, recv=%p, sendcount=%zu, dt=%d, comm=%s, stream=%p)", sendbuff, recvbuff, sendcount, datatype,
       comm(c), (void*)stream);
  return result(sendcount, "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t stream) {
  record("ncclReduceScatter(send=%p, recv=%p, recvcount=%zu, dt=%d, op=%d, comm=%s, stream=%p)", sendbuff, recvbuff, recvcount,
       datatype, op, comm(c), (void*)stream);
  return result(recvcount, "ncclReduceScatter");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t c,
                           cudaStream_t stream) {
  record("ncclBroadcast(send=%p, recv=%p, count=%zu, dt=%d, root=%d, comm=%s, stream=%p)", sendbuff, recvbuff, count, datatype,
       root, comm(c), (void*)stream);
  return result(count, "ncclBroadcast");
}

#ifndef OMIT_SEND
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t c, cudaStream_t stream) {
  record("ncclSend(send=%p, count=%zu, dt=%d, peer=%d, comm=%s, stream=%p)", sendbuff, count, datatype, peer, comm(c),
       (void*)stream);
  return result(count, "ncclSend");
}
#endif

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t c, cudaStream_t stream) {
  record("ncclRecv(recv=%p, count=%zu, dt=%d, peer=%d, comm=%s, stream=%p)", recvbuff, count, datatype, peer, comm(c),
       (void*)stream);
  return result(count, "ncclRecv");
}

ncclResult_t ncclGroupStart(void) {
  record("ncclGroupStart");
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  record("ncclGroupEnd");
  return ncclSuccess;
}
