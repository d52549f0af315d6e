"""A user's one-shot all-reduce (sum) for symmem, in bf16 and float32.

Block b of the grid takes elements [b*chunk, (b+1)*chunk) of the message. It puts that
part of this rank's input into its slot (me) of every peer's scratch, with a signal of
the launch's number (nvshmemx_putmem_signal_block, SIGNAL_SET) into its word of the
peer's sig, waits until every peer's signal of this launch has arrived here, and sums
its part of every rank's input in rank order (float32, rounded once) into recv.

Launches alternate two halves of scratch by seq, so no closing barrier is needed: a
peer's launch k+2 writes this rank's half again only after its launch k+1 saw this
rank's signal of launch k+1, sent after this rank's launch k had read the half.

Build it on a machine with Triton and the NVSHMEM wheel (from a symmem checkout):

    bin/symmem kernels build examples/one_shot_all_reduce.py --arch 90 --out mykernels

then run it and bench it beside symmem's own and NCCL (docs/kernels.md):

    bin/symmem run all-reduce --kernels mykernels --impl one-shot-all-reduce
    bin/symmem bench --kernels mykernels --op all-reduce --impl one-shot-all-reduce,triton,nccl
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

SYMMEM_KERNELS = {"all-reduce": "one_shot_bf16", "all-reduce:float32": "one_shot_f32"}

BLOCK = tl.constexpr(1024)  # elements summed per step


@triton.jit
def _one_shot(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, ESIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    # Whole 16-byte vectors per block; the last blocks' parts may be short or empty.
    vec = 16 // ESIZE
    chunk = ((nelem + grid - 1) // grid + vec - 1) // vec * vec
    lo = pid * chunk
    m = tl.maximum(tl.minimum(chunk, nelem - lo), 0)
    half = (seq % 2) * n * nelem  # elements
    base = scratch.to(tl.int64) + half * ESIZE
    words = sig.to(tl.int64) + pid * n * 8  # this block's n words
    for i in range(1, n):
        q = (me + i) % n
        # An empty part still signals: the peer waits for every block of every rank.
        nv.putmem_signal_block(base + (me * nelem + lo) * ESIZE, send.to(tl.int64) + lo * ESIZE, m * ESIZE,
                               words + me * 8, seq.to(tl.uint64), nv.SIGNAL_SET, q)
    for i in range(1, n):
        q = (me + i) % n
        seen = nv.wait_until_ge(words + q * 8, seq.to(tl.uint64), limit_ns)
        if seen < seq.to(tl.uint64):
            nv.give_up(mailbox, nv.GAVE_UP_SIGNAL, seq, seen, q)
    for start in range(0, m, BLOCK):
        offs = lo + start + tl.arange(0, BLOCK)
        mask = offs < lo + m
        acc = tl.zeros([BLOCK], tl.float32)
        for r in range(0, n):
            if r == me:
                acc += tl.load(send + offs, mask=mask, other=0.0).to(tl.float32)
            else:
                acc += tl.load(scratch + half + r * nelem + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(recv + offs, acc.to(recv.dtype.element_ty), mask=mask)


@triton.jit
def one_shot_bf16(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _one_shot(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, 2)


@triton.jit
def one_shot_f32(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    _one_shot(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox, 4)
