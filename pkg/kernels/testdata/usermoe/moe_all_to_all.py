"""A user's MoE dispatch and combine for symmem: dispatch by puts, combine by gets.

symmem hands each rank its routing as two tables in its own device memory
(docs/kernels.md, "Your own dispatch and combine"): slots, tokens x n int32, where
slots[t*n + d] is the slot on rank d of this rank's token t (-1 where t does not go to d),
and origin, the rank and token of each of the nslots copies this rank receives. A slot
is a token's place in the receiving rank's buffer of copies: at slot * hidden elements.

dispatch: block b of the grid takes tokens [b*per, (b+1)*per) and puts each to every
rank its table names (nvshmemx_putmem_block, to itself too); then it fences and sets
its word (b, me) on every rank to the launch's number (seq), and waits until its words
from every rank hold it. Every rank runs the same grid, so when the kernel ends here
every block of every rank has delivered.

combine: every token goes back to its owner and its copies are summed. Block b first
says on every rank that this rank's copies are ready (its word, as dispatch), waits
for every rank's word, then for each of its tokens fetches the copies held by other
ranks into scratch (nvshmemx_getmem_block) and sums them with its own copy in float32,
rounded once. The kernel only reads its peers' send, which symmem does not change
while a launch runs, so it needs no closing barrier.

Build and bench (from a symmem checkout, on a machine with Triton and the NVSHMEM wheel):

    bin/symmem kernels build examples/moe_all_to_all.py --arch 90 --out mykernels
    bin/symmem run dispatch --kernels mykernels --impl moe-all-to-all
    bin/symmem bench --kernels mykernels --op dispatch,combine --impl moe-all-to-all,triton
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

SYMMEM_KERNELS = {"dispatch": "dispatch", "combine": "combine_bf16", "combine:float32": "combine_f32"}

BLOCK = tl.constexpr(1024)  # elements summed per step


@triton.jit
def _tokens(tokens):
    # This block's tokens: [lo, hi).
    pid = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    per = (tokens + grid - 1) // grid
    lo = tl.minimum(pid * per, tokens)
    return lo, tl.minimum(lo + per, tokens)


@triton.jit
def _meet(words, seq, me, n, limit_ns, mailbox):
    # Sets this block's word me on every rank to seq, after the block's earlier puts to
    # that rank (the fence orders them), and waits for every rank's word here.
    nv.fence()
    nothing = tl.full([], 0, tl.int64)  # bytes: the signal carries no data
    for q in range(0, n):
        nv.putmem_signal_block(words, words, nothing, words + me * 8, seq.to(tl.uint64), nv.SIGNAL_SET, q)
    for q in range(0, n):
        seen = nv.wait_until_ge(words + q * 8, seq.to(tl.uint64), limit_ns)
        if seen < seq.to(tl.uint64):
            nv.give_up(mailbox, nv.GAVE_UP_SIGNAL, seq, seen, q)


@triton.jit
def dispatch(send, recv, scratch, slots, origin, tokens, nslots, hidden, sig, seq, me, n, limit_ns, mailbox):
    lo, hi = _tokens(tokens)
    words = sig.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    for t in range(lo, hi):
        for d in range(0, n):
            j = tl.load(slots + t * n + d).to(tl.int64)
            if j >= 0:
                nv.putmem_block(recv.to(tl.int64) + j * hidden, send.to(tl.int64) + t * hidden, hidden, d)
    _meet(words, seq, me, n, limit_ns, mailbox)


@triton.jit
def _combine(send, recv, scratch, slots, tokens, hidden, sig, seq, me, n, limit_ns, mailbox, ESIZE: tl.constexpr):
    lo, hi = _tokens(tokens)
    words = sig.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    _meet(words, seq, me, n, limit_ns, mailbox)
    for t in range(lo, hi):
        # The copies other ranks hold, into scratch at (d * tokens + t) * hidden.
        for d in range(0, n):
            j = tl.load(slots + t * n + d).to(tl.int64)
            if (j >= 0) & (d != me):
                nv.getmem_block(scratch.to(tl.int64) + (d * tokens + t) * hidden * ESIZE,
                                send.to(tl.int64) + j * hidden * ESIZE, hidden * ESIZE, d)
        for start in range(0, hidden, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < hidden
            acc = tl.zeros([BLOCK], tl.float32)
            for d in range(0, n):
                j = tl.load(slots + t * n + d).to(tl.int64)
                own = (j >= 0) & (d == me)
                far = (j >= 0) & (d != me)
                acc += tl.load(send + j * hidden + offs, mask=mask & own, other=0.0).to(tl.float32)
                acc += tl.load(scratch + (d * tokens + t) * hidden + offs, mask=mask & far, other=0.0).to(tl.float32)
            tl.store(recv + t * hidden + offs, acc.to(recv.dtype.element_ty), mask=mask)


@triton.jit
def combine_bf16(send, recv, scratch, slots, origin, tokens, nslots, hidden, sig, seq, me, n, limit_ns, mailbox):
    _combine(send, recv, scratch, slots, tokens, hidden, sig, seq, me, n, limit_ns, mailbox, 2)


@triton.jit
def combine_f32(send, recv, scratch, slots, origin, tokens, nslots, hidden, sig, seq, me, n, limit_ns, mailbox):
    _combine(send, recv, scratch, slots, tokens, hidden, sig, seq, me, n, limit_ns, mailbox, 4)
