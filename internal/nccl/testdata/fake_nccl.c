// A fake libnccl.so.2 for the binding's tests: every function symmem binds, with the
// prototypes of nccl.h, logging the arguments it received so that the Go side's ABI
// (argument order, the 128-byte ncclUniqueId by value, enum values, size_t counts) is
// checked against what a C compiler makes of the real declarations.
//
//   gcc -shared -fPIC -o libnccl.so.2 fake_nccl.c [-DOMIT_SEND]
//
// fake_log() returns the calls since fake_reset(), one per line.
//
// -DOMIT_WINDOWS leaves out the window calls (a library built without them), -DOMIT_DEVICE
// the device communicator's (ncclDevCommCreate, ncclDevCommDestroy); -DVERSION=N
// sets what ncclGetVersion says (default 22703, 2.27.3). Memory from ncclMemAlloc is
// tracked: registering a window outside it, larger than it or twice fails, and so does
// a collective that touches such memory without a live window over every byte it uses
// (a missing registration, or a window used after its deregistration).
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
#ifndef VERSION
#define VERSION 22703  // 2.27.3
#endif
  *version = VERSION;
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

#ifndef OMIT_WINDOWS
typedef struct ncclWindow* ncclWindow_t;
struct alloc { char* p; size_t size; };
struct ncclWindow { int live; ncclComm_t comm; char* buf; size_t size; };
static struct alloc allocs[64];
static struct ncclWindow wins[64];

static struct alloc* allocOf(const char* p) {
  for (int i = 0; i < 64; i++)
    if (allocs[i].p && p >= allocs[i].p && p < allocs[i].p + allocs[i].size) return &allocs[i];
  return NULL;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  record("ncclMemAlloc(size=%zu)", size);
  for (int i = 0; i < 64; i++)
    if (!allocs[i].p) {
      allocs[i].p = calloc(1, size), allocs[i].size = size;
      *ptr = allocs[i].p;
      return ncclSuccess;
    }
  return ncclSystemError;
}

ncclResult_t ncclMemFree(void* ptr) {
  record("ncclMemFree(%s)", allocOf(ptr) ? "ok" : "BAD");
  for (int i = 0; i < 64; i++)
    if (allocs[i].p == ptr) {
      free(allocs[i].p);
      allocs[i].p = NULL;
      return ncclSuccess;
    }
  snprintf(lasterr, sizeof lasterr, "ncclMemFree: %p is not from ncclMemAlloc", ptr);
  return ncclInvalidArgument;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t c, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  record("ncclCommWindowRegister(comm=%s, size=%zu, flags=%d)", comm(c), size, winFlags);
  struct alloc* a = allocOf(buff);
  if (a == NULL || (char*)buff + size > a->p + a->size) {
    snprintf(lasterr, sizeof lasterr, "ncclCommWindowRegister: %zu bytes at %p are not inside one ncclMemAlloc allocation", size, buff);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < 64; i++)
    if (wins[i].live && wins[i].buf == buff) {
      snprintf(lasterr, sizeof lasterr, "ncclCommWindowRegister: %p is registered already", buff);
      return ncclInvalidUsage;
    }
  for (int i = 0; i < 64; i++)
    if (!wins[i].live) {
      wins[i] = (struct ncclWindow){1, c, buff, size};
      *win = &wins[i];
      return ncclSuccess;
    }
  return ncclSystemError;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t c, ncclWindow_t win) {
  record("ncclCommWindowDeregister(comm=%s, %s)", comm(c), win && win->live ? "live" : "DEAD");
  if (win == NULL || !win->live || win->comm != c) {
    snprintf(lasterr, sizeof lasterr, "ncclCommWindowDeregister: not a live window of this communicator");
    return ncclInvalidArgument;
  }
  win->live = 0;
  return ncclSuccess;
}

// windowed says whether n bytes at p are safe for a collective: memory NCCL did not
// allocate is, memory from ncclMemAlloc only under a live window.
static int windowed(const void* p, size_t n) {
  if (p == NULL || allocOf(p) == NULL) return 1;
  for (int i = 0; i < 64; i++)
    if (wins[i].live && (const char*)p >= wins[i].buf && (const char*)p + n <= wins[i].buf + wins[i].size) return 1;
  return 0;
}
#else
static int windowed(const void* p, size_t n) { (void)p, (void)n; return 1; }
#endif

#ifndef OMIT_DEVICE
// ncclDevCommRequirements as nccl_device/core.h (NCCL 2.28) declares it; the Go side
// compares its layout with fake_devcomm_layout's.
typedef struct ncclDevCommRequirements {
  void* resourceRequirementsList;
  void* teamRequirementsList;
  _Bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  _Bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
} ncclDevCommRequirements_t;

// The fake's ncclDevComm: sizeof(ncclDevComm) in NCCL 2.28, starting with rank, nRanks,
// (nRanks_rcp32,) lsaRank and lsaSize as the real one does (every rank in one LSA
// team unless FAKE_LSA_SIZE says how many), then a pattern the fake checks on destroy and the serial
// number of a live device communicator in the last 8 bytes.
#ifndef DEVCOMM_BYTES
#define DEVCOMM_BYTES 200
#endif
typedef struct { unsigned char b[DEVCOMM_BYTES]; } ncclDevComm_t;
static struct { unsigned long long serial; ncclComm_t comm; } devcomms[64];
static unsigned long long devSerial;

// fake_devcomm_layout fills out[0] with sizeof(ncclDevCommRequirements) and out[1..12]
// with the offsets of its fields, in order.
void fake_devcomm_layout(long* out) {
  out[0] = sizeof(ncclDevCommRequirements_t);
  out[1] = offsetof(ncclDevCommRequirements_t, resourceRequirementsList);
  out[2] = offsetof(ncclDevCommRequirements_t, teamRequirementsList);
  out[3] = offsetof(ncclDevCommRequirements_t, lsaMultimem);
  out[4] = offsetof(ncclDevCommRequirements_t, barrierCount);
  out[5] = offsetof(ncclDevCommRequirements_t, lsaBarrierCount);
  out[6] = offsetof(ncclDevCommRequirements_t, railGinBarrierCount);
  out[7] = offsetof(ncclDevCommRequirements_t, lsaLLA2ABlockCount);
  out[8] = offsetof(ncclDevCommRequirements_t, lsaLLA2ASlotCount);
  out[9] = offsetof(ncclDevCommRequirements_t, ginForceEnable);
  out[10] = offsetof(ncclDevCommRequirements_t, ginContextCount);
  out[11] = offsetof(ncclDevCommRequirements_t, ginSignalCount);
  out[12] = offsetof(ncclDevCommRequirements_t, ginCounterCount);
}

static unsigned char devPattern(int i) { return (unsigned char)(i * 13 + 1); }

ncclResult_t ncclDevCommCreate(ncclComm_t c, const ncclDevCommRequirements_t* req, ncclDevComm_t* out) {
  record("ncclDevCommCreate(comm=%s, lists=%s/%s, lsaMultimem=%d, barrierCount=%d, lsaBarrierCount=%d, rail=%d, lla2a=%d/%d, "
         "ginForceEnable=%d, gin=%d/%d/%d)", comm(c), req->resourceRequirementsList ? "set" : "null",
         req->teamRequirementsList ? "set" : "null", req->lsaMultimem, req->barrierCount, req->lsaBarrierCount,
         req->railGinBarrierCount, req->lsaLLA2ABlockCount, req->lsaLLA2ASlotCount, req->ginForceEnable, req->ginContextCount,
         req->ginSignalCount, req->ginCounterCount);
  if (c == NULL || c->magic != MAGIC) return ncclInvalidArgument;
  if (req->lsaMultimem || req->ginForceEnable) {
    snprintf(lasterr, sizeof lasterr, "ncclDevCommCreate: this fake has no multimem and no GIN");
    return ncclInvalidUsage;
  }
  for (int i = 0; i < 64; i++)
    if (!devcomms[i].serial) {
      devcomms[i].serial = ++devSerial, devcomms[i].comm = c;
      memcpy(out->b, &c->rank, 4);
      memcpy(out->b + 4, &c->nranks, 4);
      const char* lsa = getenv("FAKE_LSA_SIZE");
      int lsaSize = lsa ? atoi(lsa) : c->nranks, lsaRank = c->rank % lsaSize;
      memcpy(out->b + 12, &lsaRank, 4);
      memcpy(out->b + 16, &lsaSize, 4);
      for (int j = 20; j < DEVCOMM_BYTES - 8; j++) out->b[j] = devPattern(j);
      memcpy(out->b + DEVCOMM_BYTES - 8, &devcomms[i].serial, 8);
      return ncclSuccess;
    }
  return ncclSystemError;
}

ncclResult_t ncclDevCommDestroy(ncclComm_t c, const ncclDevComm_t* dc) {
  unsigned long long serial;
  memcpy(&serial, dc->b + DEVCOMM_BYTES - 8, 8);
  int intact = 1;
  for (int j = 20; j < DEVCOMM_BYTES - 8; j++) intact &= dc->b[j] == devPattern(j);
  int slot = -1;
  for (int i = 0; i < 64; i++)
    if (serial && devcomms[i].serial == serial && devcomms[i].comm == c) slot = i;
  record("ncclDevCommDestroy(comm=%s, %s)", comm(c), !intact ? "CORRUPT" : slot < 0 ? "DEAD" : "live");
  if (!intact || slot < 0) {
    snprintf(lasterr, sizeof lasterr, "ncclDevCommDestroy: not a live device communicator of this communicator");
    return ncclInvalidArgument;
  }
  devcomms[slot].serial = 0;
  return ncclSuccess;
}
#endif

static size_t dtSize(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// buffers fails a collective whose ncclMemAlloc memory is not under a live window.
static ncclResult_t buffers(const char* call, const void* send, size_t sendBytes, const void* recv, size_t recvBytes) {
  if (!windowed(send, sendBytes) || !windowed(recv, recvBytes)) {
    snprintf(lasterr, sizeof lasterr, "%s: a buffer from ncclMemAlloc is not under a registered window", call);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
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
  size_t n = count * dtSize(datatype);
  if (buffers("ncclAllReduce", sendbuff, n, recvbuff, n)) return ncclInvalidUsage;
  return result(count, "ncclAllReduce");
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t c,
                           cudaStream_t stream) {
  record("ncclAllGather(send=%p, recv=%p, sendcount=%zu, dt=%d, comm=%s, stream=%p)", sendbuff, recvbuff, sendcount, datatype,
       comm(c), (void*)stream);
  size_t n = sendcount * dtSize(datatype);
  if (buffers("ncclAllGather", sendbuff, n, recvbuff, n * c->nranks)) return ncclInvalidUsage;
  return result(sendcount, "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t stream) {
  record("ncclReduceScatter(send=%p, recv=%p, recvcount=%zu, dt=%d, op=%d, comm=%s, stream=%p)", sendbuff, recvbuff, recvcount,
       datatype, op, comm(c), (void*)stream);
  size_t n = recvcount * dtSize(datatype);
  if (buffers("ncclReduceScatter", sendbuff, n * c->nranks, recvbuff, n)) return ncclInvalidUsage;
  return result(recvcount, "ncclReduceScatter");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t c,
                           cudaStream_t stream) {
  record("ncclBroadcast(send=%p, recv=%p, count=%zu, dt=%d, root=%d, comm=%s, stream=%p)", sendbuff, recvbuff, count, datatype,
       root, comm(c), (void*)stream);
  size_t n = count * dtSize(datatype);
  if (buffers("ncclBroadcast", sendbuff, n, recvbuff, n)) return ncclInvalidUsage;
  return result(count, "ncclBroadcast");
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t stream) {
  record("ncclReduce(send=%p, recv=%p, count=%zu, dt=%d, op=%d, root=%d, comm=%s, stream=%p)", sendbuff, recvbuff, count,
       datatype, op, root, comm(c), (void*)stream);
  size_t n = count * dtSize(datatype);
  if (buffers("ncclReduce", sendbuff, n, recvbuff, n)) return ncclInvalidUsage;
  return result(count, "ncclReduce");
}

#ifndef OMIT_SEND
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t c, cudaStream_t stream) {
  record("ncclSend(send=%p, count=%zu, dt=%d, peer=%d, comm=%s, stream=%p)", sendbuff, count, datatype, peer, comm(c),
       (void*)stream);
  if (buffers("ncclSend", sendbuff, count * dtSize(datatype), NULL, 0)) return ncclInvalidUsage;
  return result(count, "ncclSend");
}
#endif

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t c, cudaStream_t stream) {
  record("ncclRecv(recv=%p, count=%zu, dt=%d, peer=%d, comm=%s, stream=%p)", recvbuff, count, datatype, peer, comm(c),
       (void*)stream);
  if (buffers("ncclRecv", NULL, 0, recvbuff, count * dtSize(datatype))) return ncclInvalidUsage;
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
