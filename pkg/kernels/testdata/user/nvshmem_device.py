"""symmem's own Triton bindings to NVSHMEM device functions.

Each binding is an extern call with an empty library name and path: the NVSHMEM device
bitcode (libnvshmem_device.bc) given to triton.compile through extern_libs resolves it.
Pointers cross as int64, the way the NVSHMEM C signatures take them (void *, uint64_t *).
Return types follow the C declarations where Triton needs one: void functions are
declared as returning int32 and the value is ignored.
"""

import triton.language as tl
from triton.language import core

# nvshmem_cmp_type values, and nvshmemx_signal_op_t's (NVSHMEM_SIGNAL_SET == 9,
# NVSHMEM_SIGNAL_ADD == 10 in NVSHMEM 3.x: the device code treats any other value as an
# add, which is how SET = 0 once made every ping-pong round after the first few return
# without waiting; the latency's per-round payload check caught it).
CMP_EQ = 0
CMP_NE = 1
CMP_GT = 2
CMP_LE = 3
CMP_LT = 4
CMP_GE = 5
SIGNAL_SET = 9
SIGNAL_ADD = 10


@core.extern
def putmem_block(dst, src, nbytes, pe, _semantic=None):
    """nvshmemx_putmem_block(void *dst, const void *src, size_t nbytes, int pe)"""
    return core.extern_elementwise(
        "", "", [dst, src, nbytes, pe],
        {(core.dtype("int64"), core.dtype("int64"), core.dtype("int64"), core.dtype("int32")):
         ("nvshmemx_putmem_block", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def getmem_block(dst, src, nbytes, pe, _semantic=None):
    """nvshmemx_getmem_block(void *dst, const void *src, size_t nbytes, int pe)"""
    return core.extern_elementwise(
        "", "", [dst, src, nbytes, pe],
        {(core.dtype("int64"), core.dtype("int64"), core.dtype("int64"), core.dtype("int32")):
         ("nvshmemx_getmem_block", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def putmem_signal_block(dst, src, nbytes, sig, sigval, sigop, pe, _semantic=None):
    """nvshmemx_putmem_signal_block(void *dst, const void *src, size_t nbytes,
    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)"""
    return core.extern_elementwise(
        "", "", [dst, src, nbytes, sig, sigval, sigop, pe],
        {(core.dtype("int64"), core.dtype("int64"), core.dtype("int64"), core.dtype("int64"),
          core.dtype("uint64"), core.dtype("int32"), core.dtype("int32")):
         ("nvshmemx_putmem_signal_block", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def signal_wait_until(sig, cmp, value, _semantic=None):
    """uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)"""
    return core.extern_elementwise(
        "", "", [sig, cmp, value],
        {(core.dtype("int64"), core.dtype("int32"), core.dtype("uint64")):
         ("nvshmem_signal_wait_until", core.dtype("uint64"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def fence(_semantic=None):
    """void nvshmem_fence(void)"""
    return core.extern_elementwise(
        "", "", [], {(): ("nvshmem_fence", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)
