"""symmem's own Triton bindings to NVSHMEM device functions.

Each binding is an extern call with an empty library name and path: the NVSHMEM device
bitcode (libnvshmem_device.bc) given to triton.compile through extern_libs resolves it.
Pointers cross as int64, the way the NVSHMEM C signatures take them (void *, uint64_t *).
Return types follow the C declarations where Triton needs one: void functions are
declared as returning int32 and the value is ignored.
"""

import triton
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


# What a kernel that gave up waiting writes into word 0 of the rank's mailbox (pinned
# host memory the GPU writes through its mapping; the host reads it when the kernel
# has ended, by its trap: see give_up):
# words 1 and 2 are the value waited for and the last value seen, word 3 says where
# (the peer, and for a barrier the block << 32). internal/backend/gpu/mailbox.go reads
# the same layout.
GAVE_UP_SIGNAL = 1
GAVE_UP_ROUND = 2
GAVE_UP_BARRIER = 3


@triton.jit
def wait_until_ge(addr, value, limit_ns):
    # Every thread spins until the 64-bit word at addr (this GPU's memory) reaches value,
    # each with its own acquire load at system scope (what the writer did before its
    # release, or before NVSHMEM's signal, is visible after it), or until limit_ns of
    # the GPU's clock have passed. Returns the last value read: below value means the
    # wait gave up. The clock is read every 64th spin only, so that a spin stays a load
    # and a compare. (Measured on two H200s against spinning in thread 0 alone, or
    # bounding thread 0 alone: this one gave the staged MoE combine 228 us against 253,
    # the ping-pong 1.99 us against 2.12-2.19.) The braces keep the labels local.
    return tl.inline_asm_elementwise(
        """{ .reg .pred p; .reg .u64 v, t0, t; .reg .u32 k;
        mov.u64 t0, %globaltimer; mov.u32 k, 0;
        WAIT_GE: ld.acquire.sys.global.u64 v, [$1]; setp.ge.u64 p, v, $2; @p bra WAIT_END;
        add.u32 k, k, 1; and.b32 k, k, 63; setp.ne.u32 p, k, 0; @p bra WAIT_GE;
        mov.u64 t, %globaltimer; sub.u64 t, t, t0; setp.lt.u64 p, t, $3; @p bra WAIT_GE;
        WAIT_END: mov.u64 $0, v; }""",
        "=l,l,l,l", [addr, value, limit_ns], dtype=tl.uint64, is_pure=False, pack=1)


@triton.jit
def ll_wait(addr, flag, limit_ns):
    # LL ("low latency") receive: every element spins on the 8-byte word at its addr
    # (this GPU's memory) until the word's high half equals flag, or until limit_ns of
    # the GPU's clock have passed; returns the last word read (its high half differs
    # from flag: the wait gave up). The writer stores data and flag in one 8-byte store,
    # which lands whole, so no fence or separate signal orders the two. Volatile loads,
    # the clock every 64th spin, local labels, as wait_until_ge.
    return tl.inline_asm_elementwise(
        """{ .reg .pred p; .reg .u64 v, t0, t, h; .reg .u32 k, f;
        mov.u64 t0, %globaltimer; mov.u32 k, 0;
        LL_WAIT: ld.volatile.global.u64 v, [$1]; shr.u64 h, v, 32; cvt.u32.u64 f, h; setp.eq.u32 p, f, $2;
        @p bra LL_END;
        add.u32 k, k, 1; and.b32 k, k, 63; setp.ne.u32 p, k, 0; @p bra LL_WAIT;
        mov.u64 t, %globaltimer; sub.u64 t, t, t0; setp.lt.u64 p, t, $3; @p bra LL_WAIT;
        LL_END: mov.u64 $0, v; }""",
        "=l,l,r,l", [addr, flag, limit_ns], dtype=tl.uint64, is_pure=False, pack=1)


@triton.jit
def give_up(mailbox, what: tl.constexpr, want, seen, where):
    # A wait went past its limit: say so in the mailbox (see GAVE_UP_*), make the words
    # visible to the host, and end the kernel with a trap. The trap ends the whole grid
    # wherever its threads are, so no thread is left at a barrier the others skipped,
    # and it leaves the context unusable: the rank is failed anyway, and the host reads
    # the mailbox to say why. The stores are in the same asm as the trap, so every
    # thread that gives up writes its own account before any trap can end the grid
    # (tl.store of a scalar would store from thread 0 only, which may not be the one
    # giving up); when several give up at once, the words may mix their accounts (the
    # same peer and phase as a rule: they waited for the same launch).
    w = tl.zeros([], tl.int64) + where
    tl.inline_asm_elementwise(
        """{ st.relaxed.sys.global.u64 [$1+8], $3; st.relaxed.sys.global.u64 [$1+16], $4;
        st.relaxed.sys.global.u64 [$1+24], $5; st.relaxed.sys.global.u64 [$1], $2;
        fence.sc.sys; trap; mov.u32 $0, 0; }""",
        "=r,l,l,l,l,l", [mailbox.to(tl.int64), tl.full([], what, tl.int64), want.to(tl.int64), seen.to(tl.int64), w],
        dtype=tl.int32, is_pure=False, pack=1)
