"""symmem's signal, put-flag and barrier kernels, compiled ahead of time by
scripts/build-kernels.py (module symmem_sync); internal/backend/gpu/sync.go launches
them. The CUDA C kernels of kernels/cuda/symmem_nvshmem_sync.cu take the same arguments.

The NVSHMEM device functions they call beyond nvshmem_device.py's are bound below, the
same way (extern calls that the device bitcode given through extern_libs resolves).
"""

import triton
import triton.language as tl
from triton.language import core

import nvshmem_device as nv


@core.extern
def signal_op(sig, value, sigop, pe, _semantic=None):
    """void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)"""
    return core.extern_elementwise(
        "", "", [sig, value, sigop, pe],
        {(core.dtype("int64"), core.dtype("uint64"), core.dtype("int32"), core.dtype("int32")):
         ("nvshmemx_signal_op", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def quiet(_semantic=None):
    """void nvshmem_quiet(void)"""
    return core.extern_elementwise(
        "", "", [], {(): ("nvshmem_quiet", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def barrier_all_block(_semantic=None):
    """void nvshmemx_barrier_all_block(void)"""
    return core.extern_elementwise(
        "", "", [], {(): ("nvshmemx_barrier_all_block", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def sync_all_block(_semantic=None):
    """void nvshmemx_sync_all_block(void)"""
    return core.extern_elementwise(
        "", "", [], {(): ("nvshmemx_sync_all_block", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def uint64_g(src, pe, _semantic=None):
    """uint64_t nvshmem_uint64_g(const uint64_t *src, int pe)"""
    return core.extern_elementwise(
        "", "", [src, pe],
        {(core.dtype("int64"), core.dtype("int32")): ("nvshmem_uint64_g", core.dtype("uint64"))},
        is_pure=False, _semantic=_semantic)


@core.extern
def uint64_p(dst, value, pe, _semantic=None):
    """void nvshmem_uint64_p(uint64_t *dst, uint64_t value, int pe)"""
    return core.extern_elementwise(
        "", "", [dst, value, pe],
        {(core.dtype("int64"), core.dtype("uint64"), core.dtype("int32")): ("nvshmem_uint64_p", core.dtype("int32"))},
        is_pure=False, _semantic=_semantic)


# put_flag's order argument (internal/backend/gpu/sync.go: flagOrders, flagFirst).
# constexpr: a jit function reads no plain global of its own module.
ORDER_FENCE = tl.constexpr(0)
ORDER_QUIET = tl.constexpr(1)


@triton.jit
def global_timer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.uint64,
                                     is_pure=False, pack=1)


@triton.jit
def signal_op_kernel(sig, op, value, peer):
    # One signal op on the peer's word, then a fence: the next launch's signal to the
    # same peer lands after this one (a set then an add must not swap).
    signal_op(sig.to(tl.int64), value, op, peer)
    nv.fence()


@triton.jit
def put_flag(dst, src, nbytes, flag, value, order, peer):
    # One block: the data, the ordering, then the one-element flag the receiver waits on.
    nv.putmem_block(dst.to(tl.int64), src.to(tl.int64), nbytes, peer)
    if order == ORDER_QUIET:
        quiet()
    else:
        nv.fence()
    uint64_p(flag.to(tl.int64), value, peer)


@triton.jit
def signal_pingpong(sig, iters, peer, initiator, stamps, limit_ns, mailbox):
    # One block. Round k of each side does to the other's word what ops.SignalRound(k, 1)
    # says (odd: set k, even: add 1) and waits for its own to reach k, which must then
    # hold k (else counted in stamps[iters+1]). The initiator stamps the clock before
    # the first round and after each into stamps[0..iters]. A wait past limit_ns ends
    # the kernel (give_up, with the round).
    wrong = tl.full([], 0, tl.uint64)
    if initiator != 0:
        tl.store(stamps, global_timer())
    for i in range(iters):
        v = (i + 1).to(tl.uint64)
        is_set = (i % 2) == 0
        op = tl.where(is_set, nv.SIGNAL_SET, nv.SIGNAL_ADD)
        val = tl.where(is_set, v, tl.full([], 1, tl.uint64))
        if initiator != 0:
            signal_op(sig.to(tl.int64), val, op, peer)
            seen = nv.wait_until_ge(sig.to(tl.int64), v, limit_ns)
            if seen < v:
                nv.give_up(mailbox, nv.GAVE_UP_ROUND, v, seen, peer)
            tl.store(stamps + i + 1, global_timer())
            wrong += (seen != v).to(tl.uint64)
        else:
            seen = nv.wait_until_ge(sig.to(tl.int64), v, limit_ns)
            if seen < v:
                nv.give_up(mailbox, nv.GAVE_UP_ROUND, v, seen, peer)
            wrong += (seen != v).to(tl.uint64)
            signal_op(sig.to(tl.int64), val, op, peer)
    tl.store(stamps + iters + 1, wrong)


@triton.jit
def stamp_of(rank, rnd):
    # ops.MeetStamp
    return (rnd << 16) | (rank + 1).to(tl.uint64)


# A barrier round's meet argument (internal/backend/gpu/sync.go): STAMP writes the
# stamp, MEET meets, LATE (the unordered test fault) writes it only after the meeting and
# LATE_STAMP_DELAY_NS more, as a barrier that returned before this rank's writes had
# landed would let its peers see.
MEET_STAMP = tl.constexpr(1)
MEET_MEET = tl.constexpr(2)
MEET_LATE = tl.constexpr(4)
LATE_STAMP_DELAY_NS = tl.constexpr(20000000)


@triton.jit
def pause_ns(ns):
    t0 = global_timer()
    while global_timer() - t0 < ns:
        pass


@triton.jit
def push_stamp(slots, base, me, n, rnd):
    for p in range(n):
        uint64_p(slots.to(tl.int64) + (base + me) * 8, stamp_of(me, rnd), p)


@triton.jit
def barrier_all(slots, wrong, rnd, me, n, meet):
    # One block. STAMP: put this rank's stamp into its word of every rank's slots
    # (ops.MeetSlot); MEET: meet by nvshmemx_barrier_all_block, which completes the
    # puts. Then count the stamps not in this rank's own slots into *wrong.
    base = ((rnd % 2) * n).to(tl.int64)
    if (meet & (MEET_STAMP | MEET_LATE)) == MEET_STAMP:
        push_stamp(slots, base, me, n, rnd)
    if (meet & MEET_MEET) != 0:
        barrier_all_block()
    if (meet & (MEET_STAMP | MEET_LATE)) == MEET_STAMP | MEET_LATE:
        pause_ns(LATE_STAMP_DELAY_NS)
        push_stamp(slots, base, me, n, rnd)
        quiet()
    bad = tl.full([], 0, tl.uint64)
    for p in range(n):
        got = tl.load(slots + base + p, volatile=True)
        bad += (got != stamp_of(p, rnd)).to(tl.uint64)
    tl.atomic_add(wrong, bad)


@triton.jit
def sync_all(slots, wrong, rnd, me, n, meet):
    # As barrier_all, but the stamp is a store into this rank's own slots, the meeting
    # nvshmemx_sync_all_block (which completes no put), and each rank's stamp is
    # fetched from its own slots (nvshmem_uint64_g) after it.
    base = ((rnd % 2) * n).to(tl.int64)
    if (meet & (MEET_STAMP | MEET_LATE)) == MEET_STAMP:
        tl.store(slots + base + me, stamp_of(me, rnd))
        tl.debug_barrier()
    if (meet & MEET_MEET) != 0:
        sync_all_block()
    if (meet & (MEET_STAMP | MEET_LATE)) == MEET_STAMP | MEET_LATE:
        pause_ns(LATE_STAMP_DELAY_NS)
        tl.store(slots + base + me, stamp_of(me, rnd))
        tl.debug_barrier()
    bad = tl.full([], 0, tl.uint64)
    for p in range(n):
        got = uint64_g(slots.to(tl.int64) + (base + p) * 8, p)
        bad += (got != stamp_of(p, rnd)).to(tl.uint64)
    tl.atomic_add(wrong, bad)


# name -> (function, ordered signature), as symmem_kernels.KERNELS.
KERNELS = {
    "signal_op": (signal_op_kernel, {"sig": "*u64", "op": "i32", "value": "u64", "peer": "i32"}),
    "put_flag": (put_flag, {"dst": "*i8", "src": "*i8", "nbytes": "i64", "flag": "*u64", "value": "u64",
                            "order": "i32", "peer": "i32"}),
    "signal_pingpong": (signal_pingpong, {"sig": "*u64", "iters": "i32", "peer": "i32", "initiator": "i32",
                                          "stamps": "*u64", "limit_ns": "u64", "mailbox": "*u64"}),
    "barrier_all": (barrier_all, {"slots": "*u64", "wrong": "*u64", "rnd": "u64", "me": "i32", "n": "i32",
                                  "meet": "i32"}),
    "sync_all": (sync_all, {"slots": "*u64", "wrong": "*u64", "rnd": "u64", "me": "i32", "n": "i32",
                            "meet": "i32"}),
}
