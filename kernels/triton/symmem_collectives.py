"""symmem's collective kernels in Triton over NVSHMEM, compiled ahead of time by
scripts/build-kernels.py.

Every rank launches the same kernel with the same grid. Program (block) b of a rank
works with program b of every other rank: they meet at two barriers (sync_peers), one
before any data moves (every rank's input is in place and its output may be
overwritten) and one after (everything this collective delivered has landed, and no
rank still reads another's input). The barriers count up per block in a small
symmetric area: pad[b][r] is the last phase rank r's block b announced here, state[b]
the last phase this rank's block b reached. Counting up needs no reset between
launches, so the kernels run back to back and inside CUDA graphs.

Peers are reached through NVSHMEM: nvshmem_ptr gives the address at which this GPU
loads from and stores to a peer's symmetric buffer (NVLink or PCIe P2P), and
nvshmemx_putmem_block moves whole blocks of bytes. Addresses cross as int64 byte
addresses; the host keeps every one 16-byte aligned, and `aligned` says so to Triton so
that it moves 16-byte vectors.
"""

import triton
import triton.language as tl
from triton.language import core

import nvshmem_device as nv


@core.extern
def peer_ptr(addr, pe, _semantic=None):
    """void *nvshmem_ptr(const void *dest, int pe): where this GPU reaches dest on pe
    with loads and stores (0 when pe's memory is not mapped here)."""
    return core.extern_elementwise(
        "", "", [addr, pe],
        {(core.dtype("int64"), core.dtype("int32")): ("nvshmem_ptr", core.dtype("int64"))},
        is_pure=True, _semantic=_semantic)


@triton.jit
def aligned(addr):
    # The value is unchanged (the host passes 16-byte aligned addresses); written this
    # way Triton knows it is a multiple of 16 and vectorises the loads and stores.
    return (addr // 16) * 16


@triton.jit
def signal_add(addr):
    # One thread of the block adds 1 to the 64-bit word at addr with release semantics
    # at system scope (the word may be on another GPU): red, so nothing waits for an
    # answer. The value returned is a dummy.
    return tl.inline_asm_elementwise(
        """{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0;
        @p red.release.sys.global.add.u64 [$1], 1; mov.u32 $0, 0; }""",
        "=r,l", [addr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def wait_ge(addr, value):
    # Every thread spins until the 64-bit word at addr (this GPU's memory) reaches value,
    # each with its own acquire load, so what the writers did before their release is
    # visible to every thread after it.
    return tl.inline_asm_elementwise(
        """{ .reg .pred p; .reg .u64 v;
        WAIT_GE: ld.acquire.sys.global.u64 v, [$1]; setp.lt.u64 p, v, $2; @p bra WAIT_GE;
        mov.u64 $0, v; }""",
        "=l,l,l", [addr, value], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def sync_peers(pad, me, n, phase):
    # Barrier of this block with the same block on every rank: every block counts its
    # phases in the word pad[b][me] of each peer (one add per phase, so the word holds
    # the phase it announced) and waits until pad[b][q] here reaches phase for every
    # peer q. The block's stores so far, local and remote, are ordered before the
    # release (debug_barrier is __syncthreads); what the peers did before theirs is
    # visible after the acquire.
    row = pad.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    tl.debug_barrier()
    for i in range(1, n):
        q = (me + i) % n
        signal_add(peer_ptr(row + me * 8, q))
    for i in range(1, n):
        q = (me + i) % n
        wait_ge(row + q * 8, phase)
    tl.debug_barrier()


@triton.jit
def reduce_sum(send, recv, count, chunk, in_off, out_off, push, pad, state, me, n, BLOCK: tl.constexpr):
    # recv[out_off:][i] = sum over every rank r of send[in_off:][i] on r, for i < count
    # (elements); with push != 0 the sum is also stored at the same place in every
    # peer's recv. Block b sums elements [b*chunk, (b+1)*chunk); chunk is a multiple of
    # BLOCK. One kernel serves one-shot all-reduce (whole buffer, no push), two-shot
    # all-reduce (this rank's shard, pushed to every peer) and reduce-scatter (this
    # rank's block of every input).
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1)
    lo = (pid.to(tl.int64) * chunk // BLOCK) * BLOCK
    hi = tl.minimum(lo + chunk, count)
    full = lo + tl.maximum(hi - lo, 0) // BLOCK * BLOCK
    src = aligned(send.to(tl.int64) + in_off)
    dst = aligned(recv.to(tl.int64) + out_off)
    mine = src.to(send.dtype)
    out = dst.to(recv.dtype)
    for start in range(lo, full, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc = tl.load(mine + offs).to(tl.float32)
        for i in range(1, n):
            theirs = aligned(peer_ptr(src, (me + i) % n)).to(send.dtype)
            acc += tl.load(theirs + offs).to(tl.float32)
        val = acc.to(recv.dtype.element_ty)
        tl.store(out + offs, val)
        if push != 0:
            for i in range(1, n):
                tl.store(aligned(peer_ptr(dst, (me + i) % n)).to(recv.dtype) + offs, val)
    if full < hi:
        offs = full + tl.arange(0, BLOCK)
        mask = offs < hi
        acc = tl.load(mine + offs, mask=mask, other=0).to(tl.float32)
        for i in range(1, n):
            theirs = aligned(peer_ptr(src, (me + i) % n)).to(send.dtype)
            acc += tl.load(theirs + offs, mask=mask, other=0).to(tl.float32)
        val = acc.to(recv.dtype.element_ty)
        tl.store(out + offs, val, mask=mask)
        if push != 0:
            for i in range(1, n):
                tl.store(aligned(peer_ptr(dst, (me + i) % n)).to(recv.dtype) + offs, val, mask=mask)
    sync_peers(pad, me, n, phase + 2)
    tl.store(state + pid, phase + 2)


@triton.jit
def reduce_staged(send, recv, scratch, nelem, shard, chunk, pad, state, me, n, BLOCK: tl.constexpr):
    # Two-shot all-reduce that only writes across the links. Shard q is elements
    # [q*shard, min((q+1)*shard, nelem)); block b handles [b*chunk, (b+1)*chunk) of
    # every shard. First every rank puts its part of shard q into slot me (the same
    # place, in its own shard-sized slot) of rank q's scratch with nvshmemx_putmem_block;
    # after a barrier each rank sums shard me from its send and the slots of its scratch
    # (local loads only) and stores the sum into its recv and every peer's recv. No
    # barrier before the puts: they land in scratch, which the peer's block finished
    # reading before it passed the last barrier of the previous collective; recv is
    # written only after the middle barrier, which every rank reaches inside this one.
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    lo = (pid.to(tl.int64) * chunk // BLOCK) * BLOCK
    for i in range(1, n):
        q = (me + i) % n
        first = q.to(tl.int64) * shard
        m = tl.minimum(tl.minimum(shard, nelem - first) - lo, chunk)
        if m > 0:
            nv.putmem_block(scratch.to(tl.int64) + (me.to(tl.int64) * shard + lo) * 2,
                            send.to(tl.int64) + (first + lo) * 2, m * 2, q)
    sync_peers(pad, me, n, phase + 1)
    first = me.to(tl.int64) * shard
    hi = tl.minimum(lo + chunk, tl.minimum(shard, nelem - first))
    full = lo + tl.maximum(hi - lo, 0) // BLOCK * BLOCK
    mine = aligned(send.to(tl.int64) + first * 2).to(send.dtype)
    out = aligned(recv.to(tl.int64) + first * 2).to(recv.dtype)
    for start in range(lo, full, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc = tl.load(mine + offs).to(tl.float32)
        for i in range(1, n):
            p = (me + i) % n
            slot = aligned(scratch.to(tl.int64) + p.to(tl.int64) * shard * 2).to(scratch.dtype)
            acc += tl.load(slot + offs).to(tl.float32)
        val = acc.to(recv.dtype.element_ty)
        tl.store(out + offs, val)
        for i in range(1, n):
            tl.store(aligned(peer_ptr(out.to(tl.int64), (me + i) % n)).to(recv.dtype) + offs, val)
    if full < hi:
        offs = full + tl.arange(0, BLOCK)
        mask = offs < hi
        acc = tl.load(mine + offs, mask=mask, other=0).to(tl.float32)
        for i in range(1, n):
            p = (me + i) % n
            slot = aligned(scratch.to(tl.int64) + p.to(tl.int64) * shard * 2).to(scratch.dtype)
            acc += tl.load(slot + offs, mask=mask, other=0).to(tl.float32)
        val = acc.to(recv.dtype.element_ty)
        tl.store(out + offs, val, mask=mask)
        for i in range(1, n):
            tl.store(aligned(peer_ptr(out.to(tl.int64), (me + i) % n)).to(recv.dtype) + offs, val, mask=mask)
    sync_peers(pad, me, n, phase + 2)
    tl.store(state + pid, phase + 2)


@triton.jit
def push(send, recv, nbytes, chunk, src_stride, dst_off, root, pad, state, me, n):
    # Every rank r (only root when root >= 0) puts nbytes from send + q*src_stride into
    # recv + dst_off on every other rank q, with nvshmemx_putmem_block; block b moves
    # bytes [b*chunk, (b+1)*chunk) of each. The rank's own part is copied beside the
    # kernel by the copy engine (the host queues it), so the SMs drive only the links.
    # all-gather: src_stride 0, dst_off me*nbytes; broadcast: 0, 0, root; all-to-all:
    # nbytes, me*nbytes.
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1)
    off = pid.to(tl.int64) * chunk
    m = tl.minimum(chunk, nbytes - off)
    if m > 0:
        if (root < 0) | (root == me):
            for i in range(1, n):
                q = (me + i) % n
                nv.putmem_block(recv.to(tl.int64) + dst_off + off,
                                send.to(tl.int64) + q.to(tl.int64) * src_stride + off, m, q)
    sync_peers(pad, me, n, phase + 2)
    tl.store(state + pid, phase + 2)


# name -> (function, ordered signature, constexprs that depend on the warp count).
# reduce_sum comes in one build per element type; BLOCK is 16 elements per thread (two
# 16-byte loads of bf16 per input in flight).
_REDUCE_SIG = {"count": "i64", "chunk": "i64", "in_off": "i64", "out_off": "i64", "push": "i32",
               "pad": "*i64", "state": "*i64", "me": "i32", "n": "i32", "BLOCK": "constexpr"}


def _reduce(t):
    return dict({"send": "*" + t, "recv": "*" + t}, **_REDUCE_SIG)


KERNELS = {
    "reduce_staged_bf16": (reduce_staged, {"send": "*bf16", "recv": "*bf16", "scratch": "*bf16", "nelem": "i64",
                                           "shard": "i64", "chunk": "i64", "pad": "*i64", "state": "*i64", "me": "i32",
                                           "n": "i32", "BLOCK": "constexpr"},
                           lambda warps: {"BLOCK": 512 * warps}),
    "reduce_bf16": (reduce_sum, _reduce("bf16"), lambda warps: {"BLOCK": 512 * warps}),
    "reduce_f32": (reduce_sum, _reduce("fp32"), lambda warps: {"BLOCK": 512 * warps}),
    "push": (push, {"send": "*i8", "recv": "*i8", "nbytes": "i64", "chunk": "i64", "src_stride": "i64",
                    "dst_off": "i64", "root": "i32", "pad": "*i64", "state": "*i64", "me": "i32", "n": "i32"},
             lambda warps: {}),
}
