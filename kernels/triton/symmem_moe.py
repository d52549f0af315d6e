"""symmem's MoE all-to-all-v kernels in Triton over NVSHMEM (dispatch and combine),
compiled ahead of time by scripts/build-kernels.py.

A routing says where every token copy goes; the host turns it, once per routing, into a
table of this rank's part of the work (internal/backend/gpu/moe.go) and keeps it in
device memory: bounds[b] .. bounds[b+1] are the rows program (block) b handles, rows of
int64. Adjacent transfers are merged into one row and long ones split, so that every
block gets an equal share of the bytes, whatever the routing.

Every rank launches the same grid; program b meets program b of every other rank at
the barriers of symmem_collectives.sync_peers, counting phases up in the same barrier
words as the other collectives: one before anything moves (every rank's input is in
place and its output may be overwritten) and one after (everything has landed, and no
rank still reads another's input).

dispatch pushes: row (src_off, dst_off, dst, nbytes) puts nbytes from send + src_off
here into recv + dst_off on rank dst with nvshmemx_putmem_block (dst may be this rank:
NVSHMEM copies within the GPU then).

combine pulls and sums: piece (dst_off, count, c0, c1) is count elements at recv +
dst_off here, the float32 sum of copies c0 .. c1-1 added in the table's order (the
routing's, as the CPU backend adds them) and rounded once; copy (src, src_off) is read
at send + src_off on rank src through its nvshmem_ptr mapping. With vec != 0 every
address is a multiple of 16 bytes, which `aligned` tells Triton so that it moves 16-byte
vectors; otherwise the same loop runs element by element.

combine_staged only writes across the links, as reduce_staged: block b first puts rows
(src_off, dst_off, dst, nbytes) from send + src_off here into scratch + dst_off on rank
dst (the copies this rank holds of the pieces block b of rank dst sums), meets block b
of every rank, then sums its pieces as combine does, from local memory only: copy
(src, off) is at send + off when src is this rank, else at scratch + off, where block
b of rank src put it.
"""

import triton
import triton.language as tl

import nvshmem_device as nv
from symmem_collectives import aligned, peer_ptr, sync_peers


@triton.jit
def dispatch(send, recv, bounds, rows, pad, state, me, n, limit_ns, mailbox):
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    first = tl.load(bounds + pid)
    last = tl.load(bounds + pid + 1)
    for i in range(first, last):
        row = rows + i * 4
        src_off = tl.load(row)
        dst_off = tl.load(row + 1)
        dst = tl.load(row + 2).to(tl.int32)
        nbytes = tl.load(row + 3)
        nv.putmem_block(recv.to(tl.int64) + dst_off, send.to(tl.int64) + src_off, nbytes, dst)
    sync_peers(pad, me, n, phase + 2, limit_ns, mailbox)
    tl.store(state + pid, phase + 2)


@triton.jit
def sum_copies(send, scratch, like, copies, c0, c1, me, offs, mask, VEC: tl.constexpr, MASKED: tl.constexpr,
               STAGED: tl.constexpr, BLOCK: tl.constexpr):
    # The float32 sum at offs of copies c0 .. c1-1, in that order, as like's element type.
    # STAGED: a copy of this rank is at send + off, any other at scratch + off here;
    # otherwise every copy is read on its rank through nvshmem_ptr.
    acc = tl.zeros([BLOCK], tl.float32)
    for c in range(c0, c1):
        src = tl.load(copies + c * 2).to(tl.int32)
        if STAGED:
            base = tl.where(src == me, send.to(tl.int64), scratch.to(tl.int64)) + tl.load(copies + c * 2 + 1)
        else:
            base = peer_ptr(send.to(tl.int64) + tl.load(copies + c * 2 + 1), src)
        if VEC:
            p = aligned(base, like) + offs
        else:
            p = base.to(like.dtype) + offs
        if MASKED:
            acc += tl.load(p, mask=mask, other=0).to(tl.float32)
        else:
            acc += tl.load(p).to(tl.float32)
    return acc.to(like.dtype.element_ty)


@triton.jit
def store_at(val, dst, like, offs, mask, VEC: tl.constexpr, MASKED: tl.constexpr):
    # val at offs of dst (an int64 address here).
    if VEC:
        p = aligned(dst, like) + offs
    else:
        p = dst.to(like.dtype) + offs
    if MASKED:
        tl.store(p, val, mask=mask)
    else:
        tl.store(p, val)


@triton.jit
def combine_pieces(send, recv, scratch, bounds, pieces, copies, me, VEC: tl.constexpr, STAGED: tl.constexpr,
                   BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    # This program's pieces: whole BLOCKs of each unmasked, its tail masked.
    pid = tl.program_id(0)
    first = tl.load(bounds + pid)
    last = tl.load(bounds + pid + 1)
    for i in range(first, last):
        row = pieces + i * 4
        out = recv.to(tl.int64) + tl.load(row)
        count = tl.load(row + 1)
        c0 = tl.load(row + 2)
        c1 = tl.load(row + 3)
        full = count // BLOCK * BLOCK
        for start in range(0, full, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            val = sum_copies(send, scratch, recv, copies, c0, c1, me, offs, offs < count, VEC, False, STAGED, BLOCK)
            store_at(val, out, recv, offs, offs < count, VEC, False)
        # The rest: masked up to the last whole 16-byte vector (moved as vectors, see
        # symmem_collectives.reduce_range), then element by element.
        vec_hi = full
        if VEC:
            vec_hi = tl.maximum(count // (16 // ESIZE) * (16 // ESIZE), full)
        if full < vec_hi:
            offs = full + tl.arange(0, BLOCK)
            val = sum_copies(send, scratch, recv, copies, c0, c1, me, offs, offs < vec_hi, VEC, True, STAGED, BLOCK)
            store_at(val, out, recv, offs, offs < vec_hi, VEC, True)
        if vec_hi < count:
            offs = vec_hi + tl.arange(0, BLOCK)
            val = sum_copies(send, scratch, recv, copies, c0, c1, me, offs, offs < count, VEC, True, STAGED, BLOCK)
            store_at(val, out, recv, offs, offs < count, VEC, True)


@triton.jit
def combine(send, recv, bounds, pieces, copies, vec, pad, state, me, n, limit_ns, mailbox, BLOCK: tl.constexpr,
            ESIZE: tl.constexpr):
    # (send stands in for the scratch the pull path never reads.)
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    if vec != 0:
        combine_pieces(send, recv, send, bounds, pieces, copies, me, True, False, BLOCK, ESIZE)
    else:
        combine_pieces(send, recv, send, bounds, pieces, copies, me, False, False, BLOCK, ESIZE)
    sync_peers(pad, me, n, phase + 2, limit_ns, mailbox)
    tl.store(state + pid, phase + 2)


@triton.jit
def combine_staged(send, recv, scratch, bounds, pieces, copies, push_bounds, rows, vec, pad, state, me, n, limit_ns,
                   mailbox, BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    # No barrier before the puts, as in reduce_staged: the scratch they land in was last
    # read by rank dst's previous collective, every block of which read it before that
    # collective's last barrier, whatever its layout; this rank's blocks passed the same
    # barrier, and this launch starts only once this rank's previous one has ended (one
    # stream). (reduce_push has no last barrier but reads no scratch; it writes its own
    # only under the drop fault, and a rank that drops pulls: it sums nothing staged.)
    # Block b's puts land where block b of rank dst sums after the middle barrier, which
    # that block passes only once block b here has put them; no two rows of any rank
    # land on the same bytes (the host's layout).
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    first = tl.load(push_bounds + pid)
    last = tl.load(push_bounds + pid + 1)
    for i in range(first, last):
        row = rows + i * 4
        src_off = tl.load(row)
        dst_off = tl.load(row + 1)
        dst = tl.load(row + 2).to(tl.int32)
        nbytes = tl.load(row + 3)
        nv.putmem_block(scratch.to(tl.int64) + dst_off, send.to(tl.int64) + src_off, nbytes, dst)
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    if vec != 0:
        combine_pieces(send, recv, scratch, bounds, pieces, copies, me, True, True, BLOCK, ESIZE)
    else:
        combine_pieces(send, recv, scratch, bounds, pieces, copies, me, False, True, BLOCK, ESIZE)
    sync_peers(pad, me, n, phase + 2, limit_ns, mailbox)
    tl.store(state + pid, phase + 2)


# name -> (function, ordered signature, constexprs that depend on the warp count), as in
# symmem_collectives. combine comes in one build per element type; BLOCK is 16 elements
# per thread, as the reduce kernels'.
_COMBINE_SIG = {"bounds": "*i64", "pieces": "*i64", "copies": "*i64", "vec": "i32", "pad": "*i64", "state": "*i64",
                "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64", "BLOCK": "constexpr", "ESIZE": "constexpr"}
_STAGED_SIG = {"bounds": "*i64", "pieces": "*i64", "copies": "*i64", "push_bounds": "*i64", "rows": "*i64",
               "vec": "i32", "pad": "*i64", "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64",
               "mailbox": "*u64", "BLOCK": "constexpr", "ESIZE": "constexpr"}


def _combine(t):
    return dict({"send": "*" + t, "recv": "*" + t}, **_COMBINE_SIG)


def _staged(t):
    return dict({"send": "*" + t, "recv": "*" + t, "scratch": "*" + t}, **_STAGED_SIG)


KERNELS = {
    "dispatch": (dispatch, {"send": "*i8", "recv": "*i8", "bounds": "*i64", "rows": "*i64", "pad": "*i64",
                            "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64"},
                 lambda warps: {}),
    "combine_bf16": (combine, _combine("bf16"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 2}),
    "combine_f32": (combine, _combine("fp32"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 4}),
    "combine_staged_bf16": (combine_staged, _staged("bf16"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 2}),
    "combine_staged_f32": (combine_staged, _staged("fp32"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 4}),
}
