"""A user's reduce-scatter, all-gather, all-to-all and broadcast for symmem, by puts
with signals (nvshmemx_putmem_signal_block).

Block b of the grid takes elements [b*chunk, (b+1)*chunk) of one rank's share (nelem
elements: bytes where the op only moves data). It puts its part of each destination's
data straight into that rank's recv (reduce-scatter: into slot me of its scratch), with
a signal of the launch's number (seq, SIGNAL_SET) into word (b, me) of the
destination's sig, and then waits until the words of every rank it receives from hold
this launch's number. Reduce-scatter sums its block of every rank's input from scratch
(float32, rounded once); launches alternate scratch halves by seq, as in
one_shot_all_reduce.py. The rank's own part goes by the same put to itself.

Build and bench (docs/kernels.md, "Your own collectives"):

    bin/symmem kernels build examples/push_collectives.py --arch 90 --out mykernels
    bin/symmem bench --kernels mykernels --op all-gather,all-to-all,broadcast,reduce-scatter \\
        --impl push-collectives,triton,nccl
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

SYMMEM_KERNELS = {"all-gather": "all_gather", "all-to-all": "all_to_all", "broadcast": "broadcast",
                  "reduce-scatter": "reduce_scatter_bf16", "reduce-scatter:float32": "reduce_scatter_f32"}

BLOCK = tl.constexpr(1024)  # elements summed per step


@triton.jit
def _part(nelem, ESIZE: tl.constexpr):
    # This block's elements of a share of nelem: [lo, lo + m), whole 16-byte vectors
    # per block; the last blocks' parts may be short or empty.
    pid = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    vec = 16 // ESIZE
    chunk = ((nelem + grid - 1) // grid + vec - 1) // vec * vec
    lo = pid * chunk
    return lo, tl.maximum(tl.minimum(chunk, nelem - lo), 0)


@triton.jit
def _wait(words, src, seq, limit_ns, mailbox):
    # Until rank src's word of this block holds this launch's number.
    seen = nv.wait_until_ge(words + src * 8, seq.to(tl.uint64), limit_ns)
    if seen < seq.to(tl.uint64):
        nv.give_up(mailbox, nv.GAVE_UP_SIGNAL, seq, seen, src)


@triton.jit
def _exchange(send, recv, nelem, sig, seq, me, n, limit_ns, mailbox, SPLIT: tl.constexpr):
    # all-gather (SPLIT false): every rank's send to slot me of every recv; all-to-all
    # (SPLIT true): block q of send to slot me of rank q's recv.
    lo, m = _part(nelem, 1)
    words = sig.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    for i in range(0, n):
        q = (me + i) % n
        src = send.to(tl.int64) + lo
        if SPLIT:
            src += q * nelem
        nv.putmem_signal_block(recv.to(tl.int64) + me * nelem + lo, src, m, words + me * 8, seq.to(tl.uint64),
                               nv.SIGNAL_SET, q)
    for q in range(0, n):
        _wait(words, q, seq, limit_ns, mailbox)


@triton.jit
def all_gather(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _exchange(send, recv, nelem, sig, seq, me, n, limit_ns, mailbox, False)


@triton.jit
def all_to_all(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _exchange(send, recv, nelem, sig, seq, me, n, limit_ns, mailbox, True)


@triton.jit
def broadcast(send, recv, scratch, nelem, sig, seq, me, n, root, limit_ns, mailbox):
    lo, m = _part(nelem, 1)
    words = sig.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    if me == root:
        for q in range(0, n):
            nv.putmem_signal_block(recv.to(tl.int64) + lo, send.to(tl.int64) + lo, m, words + root * 8,
                                   seq.to(tl.uint64), nv.SIGNAL_SET, q)
    _wait(words, root, seq, limit_ns, mailbox)


@triton.jit
def _reduce_scatter(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, ESIZE: tl.constexpr):
    lo, m = _part(nelem, ESIZE)
    half = (seq % 2) * n * nelem  # elements
    base = scratch.to(tl.int64) + half * ESIZE
    words = sig.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    for i in range(1, n):
        q = (me + i) % n
        nv.putmem_signal_block(base + (me * nelem + lo) * ESIZE, send.to(tl.int64) + (q * nelem + lo) * ESIZE,
                               m * ESIZE, words + me * 8, seq.to(tl.uint64), nv.SIGNAL_SET, q)
    for i in range(1, n):
        _wait(words, (me + i) % n, seq, limit_ns, mailbox)
    for start in range(0, m, BLOCK):
        offs = lo + start + tl.arange(0, BLOCK)
        mask = offs < lo + m
        acc = tl.zeros([BLOCK], tl.float32)
        for r in range(0, n):
            if r == me:
                acc += tl.load(send + me * nelem + offs, mask=mask, other=0.0).to(tl.float32)
            else:
                acc += tl.load(scratch + half + r * nelem + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(recv + offs, acc.to(recv.dtype.element_ty), mask=mask)


@triton.jit
def reduce_scatter_bf16(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _reduce_scatter(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, 2)


@triton.jit
def reduce_scatter_f32(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _reduce_scatter(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, 4)
