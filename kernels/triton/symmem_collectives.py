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
def aligned(addr, like):
    # addr, an int64 byte address the host keeps 16-byte aligned, as a pointer of like's
    # type that Triton knows is a multiple of 16, so that it moves 16-byte vectors. The
    # hint has to sit on the pointer: Triton's alignment analysis does not follow an
    # integer-to-pointer cast (with only the rounding below, which it does see, every sum
    # kernel here compiled to 2-byte loads and stores; internal/kernels' vector test
    # reads the PTX). The rounding leaves an aligned address as it is.
    return tl.multiple_of(((addr // 16) * 16).to(like.dtype), 16)


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
def sync_peers(pad, me, n, phase, limit_ns, mailbox):
    # Barrier of this block with the same block on every rank: every block counts its
    # phases in the word pad[b][me] of each peer (one add per phase, so the word holds
    # the phase it announced) and waits until pad[b][q] here reaches phase for every
    # peer q. The block's stores so far, local and remote, are ordered before the
    # release (debug_barrier is __syncthreads); what the peers did before theirs is
    # visible after the acquire. A peer that has not come within limit_ns ends the
    # kernel (give_up, naming the peer and the block).
    row = pad.to(tl.int64) + tl.program_id(0).to(tl.int64) * n * 8
    tl.debug_barrier()
    for i in range(1, n):
        q = (me + i) % n
        signal_add(peer_ptr(row + me * 8, q))
    for i in range(1, n):
        q = (me + i) % n
        seen = nv.wait_until_ge(row + q * 8, phase.to(tl.uint64), limit_ns)
        if seen < phase.to(tl.uint64):
            nv.give_up(mailbox, nv.GAVE_UP_BARRIER, phase, seen, q.to(tl.int64) | (tl.program_id(0).to(tl.int64) << 32))
    tl.debug_barrier()


# The reduction operators, by the op argument of the reduce kernels (internal/ops:
# RedOp.Code, which is NCCL's ncclRedOp_t): 0 sum, 1 prod, 2 max, 3 min, 4 avg (which
# combines as sum and divides at the end). min's and max's identities are the largest
# float32 of either sign.


@triton.jit
def op_identity(op):
    # The value every operator combines any x with to x, in float32.
    return tl.where(op == 1, 1.0, tl.where(op == 2, -3.4028234663852886e38, tl.where(op == 3, 3.4028234663852886e38, 0.0)))


@triton.jit
def op_combine(acc, x, op):
    # acc op x, element-wise; op is the same for every thread, so the branch is uniform.
    if op == 1:
        acc = acc * x
    elif op == 2:
        acc = tl.maximum(acc, x)
    elif op == 3:
        acc = tl.minimum(acc, x)
    else:
        acc = acc + x
    return acc


@triton.jit
def op_finish(acc, op, n):
    # What the combined value of n inputs becomes: avg divides it by n.
    if op == 4:
        acc = acc / n.to(tl.float32)
    return acc


@triton.jit
def sum_ranks(src, like, me, n, scratch, shard, offs, mask, op, STAGED: tl.constexpr, MASKED: tl.constexpr,
              BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    # The float32 reduction under op of like's element type at offs over every rank,
    # combined in rank order 0, 1, ..., n-1 on every rank, so that every rank computes
    # the same bits.
    # Rank r's part is read at src on r (nvshmem_ptr; for r == me that is this GPU's own
    # address); STAGED: rank me's part is at src here and rank r's in slot r of this
    # rank's scratch (shard elements of ESIZE bytes each), where the staged kernel's puts
    # left it.
    acc = tl.zeros([BLOCK], tl.float32) + op_identity(op)
    for r in range(n):
        if not STAGED:
            base = peer_ptr(src, r)
        else:
            base = tl.where(r == me, src, scratch + r.to(tl.int64) * shard * ESIZE)
        p = aligned(base, like) + offs
        if MASKED:
            acc = op_combine(acc, tl.load(p, mask=mask, other=0).to(tl.float32), op)
        else:
            acc = op_combine(acc, tl.load(p).to(tl.float32), op)
    return op_finish(acc, op, n).to(like.dtype.element_ty)


@triton.jit
def store_sum(val, dst, like, offs, mask, push, me, n, MASKED: tl.constexpr):
    # val at offs of dst here and, with push != 0, at the same place on every peer.
    stores = tl.full([], 1, tl.int32)
    if push != 0:
        stores = n
    for i in range(0, stores):
        p = aligned(peer_ptr(dst, (me + i) % n), like) + offs
        if MASKED:
            tl.store(p, val, mask=mask)
        else:
            tl.store(p, val)


@triton.jit
def reduce_range(src, dst, like, scratch, shard, lo, hi, push, me, n, op, STAGED: tl.constexpr, BLOCK: tl.constexpr,
                 ESIZE: tl.constexpr):
    # Elements [lo, hi) of the sum (sum_ranks) into dst (store_sum); lo is a multiple of
    # 16 bytes' worth. Whole BLOCKs unmasked; then, masked, up to the last whole 16-byte
    # vector, a bound Triton sees is a multiple of the vector (so a short range, a small
    # all-reduce's whole part, still moves vectors); the last few elements one by one.
    full = lo + tl.maximum(hi - lo, 0) // BLOCK * BLOCK
    for start in range(lo, full, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        val = sum_ranks(src, like, me, n, scratch, shard, offs, offs < hi, op, STAGED, False, BLOCK, ESIZE)
        store_sum(val, dst, like, offs, offs < hi, push, me, n, False)
    vec_hi = tl.maximum(hi // (16 // ESIZE) * (16 // ESIZE), full)
    if full < vec_hi:
        offs = full + tl.arange(0, BLOCK)
        val = sum_ranks(src, like, me, n, scratch, shard, offs, offs < vec_hi, op, STAGED, True, BLOCK, ESIZE)
        store_sum(val, dst, like, offs, offs < vec_hi, push, me, n, True)
    if vec_hi < hi:
        offs = vec_hi + tl.arange(0, BLOCK)
        val = sum_ranks(src, like, me, n, scratch, shard, offs, offs < hi, op, STAGED, True, BLOCK, ESIZE)
        store_sum(val, dst, like, offs, offs < hi, push, me, n, True)


@triton.jit
def reduce_sum(send, recv, count, chunk, in_off, out_off, push, extra, pad, state, me, n, limit_ns, mailbox, op,
               BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    # recv[out_off:][i] = sum over every rank r of send[in_off:][i] on r, for i < count
    # (elements); with push != 0 the sum is also stored at the same place in every
    # peer's recv. Block b sums elements [b*chunk, (b+1)*chunk); chunk is a multiple of
    # BLOCK. One kernel serves one-shot all-reduce (whole buffer, no push), two-shot
    # all-reduce (this rank's shard, pushed to every peer) and reduce-scatter (this
    # rank's block of every input). extra empty barriers before the last one keep step
    # with peers that run reduce_staged in steps (a rank that drops runs this kernel
    # where its peers stage).
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    lo = (pid.to(tl.int64) * chunk // BLOCK) * BLOCK
    hi = tl.minimum(lo + chunk, count)
    reduce_range(send.to(tl.int64) + in_off, recv.to(tl.int64) + out_off, recv, 0, 0, lo, hi, push, me, n, op, False,
                 BLOCK, ESIZE)
    for k in range(0, extra):
        sync_peers(pad, me, n, phase + 2 + k, limit_ns, mailbox)
    sync_peers(pad, me, n, phase + 2 + extra, limit_ns, mailbox)
    tl.store(state + pid, phase + 2 + extra)


@triton.jit
def staged_put(send, scratch, nelem, shard, me, n, s0, s1):
    # Elements [s0, s1) of this rank's part of every peer q's shard into slot me of
    # q's scratch (clipped to the shard).
    for i in range(1, n):
        q = (me + i) % n
        first = q.to(tl.int64) * shard
        hi = tl.minimum(s1, tl.minimum(shard, nelem - first))
        if hi > s0:
            nv.putmem_block(scratch.to(tl.int64) + (me.to(tl.int64) * shard + s0) * 2,
                            send.to(tl.int64) + (first + s0) * 2, (hi - s0) * 2, q)


@triton.jit
def reduce_staged(send, recv, scratch, nelem, shard, chunk, sub, pad, state, me, n, limit_ns, mailbox, op,
                  BLOCK: tl.constexpr):
    # Two-shot all-reduce that only writes across the links. Shard q is elements
    # [q*shard, min((q+1)*shard, nelem)); block b handles [b*chunk, (b+1)*chunk) of
    # every shard, in steps of sub elements (a multiple of BLOCK; sub == chunk: one
    # step). Step k: every rank puts its part of step k of shard q into slot me (the
    # same place, in its own shard-sized slot) of rank q's scratch with
    # nvshmemx_putmem_block; then, while those puts drain, sums step k-1 of shard me
    # from its send and the slots of its scratch (local loads only) and stores the sum
    # into its recv and every peer's recv; then a barrier, after which step k's parts
    # and step k-1's sums have landed everywhere. So the link carries the puts of one
    # step and the sums of the one before at once, where one step would leave it idle
    # while the blocks meet between the two.
    # No barrier before the first puts. The scratch they land in was last read by rank
    # q's previous collective, and every block of it passed that collective's last
    # barrier after its reads; this rank's blocks passed the same barriers, and this
    # launch starts only once this rank's previous one has ended (one stream: the host
    # refuses a second lane). recv is written only after the first barrier, which every
    # rank reaches inside this launch. (After reduce_push, which has no closing barrier,
    # a peer may still be summing into its recv from its send and staging area when
    # these puts land: neither is this scratch, as long as buffers do not alias, which
    # the bench and run never do.)
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    lo = (pid.to(tl.int64) * chunk // BLOCK) * BLOCK
    end = lo + chunk
    first = me.to(tl.int64) * shard
    mine = tl.minimum(shard, nelem - first)
    src = send.to(tl.int64) + first * 2
    dst = recv.to(tl.int64) + first * 2
    steps = (chunk + sub - 1) // sub
    staged_put(send, scratch, nelem, shard, me, n, lo, tl.minimum(lo + sub, end))
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    for k in range(1, steps):
        s0 = tl.multiple_of(lo + k * sub, 64)
        staged_put(send, scratch, nelem, shard, me, n, s0, tl.minimum(s0 + sub, end))
        p0 = tl.multiple_of(s0 - sub, 64)
        reduce_range(src, dst, recv, scratch.to(tl.int64), shard, p0, tl.minimum(s0, mine), 1, me, n, op, True, BLOCK, 2)
        sync_peers(pad, me, n, phase + 1 + k, limit_ns, mailbox)
    last = tl.multiple_of(lo + (steps - 1) * sub, 64)
    reduce_range(src, dst, recv, scratch.to(tl.int64), shard, last, tl.minimum(end, mine), 1, me, n, op, True, BLOCK, 2)
    sync_peers(pad, me, n, phase + 1 + steps, limit_ns, mailbox)
    tl.store(state + pid, phase + 1 + steps)


@triton.jit
def reduce_push(send, recv, area, cap, nelem, chunk, stride, deliver, pad, state, me, n, limit_ns, mailbox, op,
                BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    # One-shot all-reduce and reduce-scatter for small messages, waiting once, not
    # twice. Rank q's sum is of elements [q*stride, q*stride + nelem) of every input:
    # stride 0 for all-reduce (every rank sums the whole input), a shard for
    # reduce-scatter (each rank its own). Block b sums elements [b*chunk, (b+1)*chunk)
    # of it (chunk*ESIZE <= cap). It puts its part of what rank q sums into slot me of
    # its own area on q, for every peer q (nvshmemx_putmem_block), announces it and
    # waits for every peer's announcement (sync_peers), then sums from local memory
    # only, in rank order, into its own recv. Block b's area (in the sync area past the
    # heap: 2 halves of n slots of cap bytes) is written only by block b of the peers
    # and read only by block b here, and launches alternate halves by the block's
    # phase, which counts its launches alike on every rank: launch k+1 of a peer writes
    # the half that launch k here is not reading; launch k+2 writes this one again only
    # after its launch k+1 saw this rank's announcement of launch k+1, made after
    # launch k had ended (one stream). So no closing barrier is needed. With deliver ==
    # 0 (the drop fault) the block puts nothing but still announces.
    pid = tl.program_id(0)
    phase = tl.load(state + pid) + 1
    lo = pid.to(tl.int64) * chunk
    m = tl.maximum(tl.minimum(chunk, nelem - lo), 0)
    half = area.to(tl.int64) + (pid.to(tl.int64) * 2 + phase % 2) * n * cap
    if deliver != 0:
        if m > 0:
            for i in range(1, n):
                q = (me + i) % n
                nv.putmem_block(half + me.to(tl.int64) * cap, send.to(tl.int64) + (q * stride + lo) * ESIZE, m * ESIZE,
                                q)
    sync_peers(pad, me, n, phase, limit_ns, mailbox)
    reduce_range(send.to(tl.int64) + (me * stride + lo) * ESIZE, recv.to(tl.int64) + lo * ESIZE, recv, half,
                 cap // ESIZE, 0, m, 0, me, n, op, True, BLOCK, ESIZE)
    tl.store(state + pid, phase)


@triton.jit
def reduce_ll(send, recv, area, cap, nwords, chunk, deliver, pad, state, me, n, limit_ns, mailbox, op,
              WORDS: tl.constexpr, F32: tl.constexpr):
    # One-shot all-reduce of small messages in LL form: no fence, no signal, no barrier.
    # The input is read as 32-bit words (two bf16 or one float32); block b handles
    # words [b*chunk, b*chunk + min(chunk, WORDS)). It stores each word with its flag
    # (the block's phase, which counts its launches alike on every rank) as one 8-byte
    # store into slot me of its area on every peer, then reads slot r of its own area
    # for every peer r until every word carries this launch's flag, and sums in rank
    # order (float32, rounded once), as sum_ranks does, into its recv. The areas (in
    # the sync area, apart from reduce_push's: 2 halves of n slots of cap bytes per
    # block) alternate by the phase, as reduce_push's do, so no closing barrier is
    # needed. With deliver == 0 (the drop fault) the words go out with their flags but
    # zero data: the peers do not wait in vain, and their sums lack this rank's part.
    pid = tl.program_id(0)
    phase = tl.load(state + pid) + 1
    flag = phase.to(tl.uint32)
    lo = pid.to(tl.int64) * chunk
    m = tl.minimum(chunk, nwords - lo)
    if m > 0:
        offs = tl.arange(0, WORDS)
        mask = offs < m
        mine = tl.load(send.to(tl.pointer_type(tl.int32)) + lo + offs, mask=mask, other=0)
        data = mine.to(tl.int64) & 0xFFFFFFFF
        if deliver == 0:
            data = data * 0
        packed = (flag.to(tl.int64) << 32) | data
        half = area.to(tl.int64) + (pid.to(tl.int64) * 2 + phase % 2) * n * cap
        for i in range(1, n):
            q = (me + i) % n
            dst = aligned(peer_ptr(half + me.to(tl.int64) * cap, q), pad) + offs
            tl.store(dst, packed, mask=mask)
        acc_lo = tl.zeros([WORDS], tl.float32) + op_identity(op)
        acc_hi = tl.zeros([WORDS], tl.float32) + op_identity(op)
        for r in range(n):
            w = mine
            if r != me:
                # Lanes past the block's words watch its first word, which comes too.
                at = half + r.to(tl.int64) * cap + tl.where(mask, offs, 0).to(tl.int64) * 8
                v = nv.ll_wait(at, flag, limit_ns)
                got = (v >> 32).to(tl.uint32)
                if tl.sum((got != flag).to(tl.int32)) > 0:
                    nv.give_up(mailbox, nv.GAVE_UP_BARRIER, phase, tl.min(got.to(tl.int64)),
                               r.to(tl.int64) | (pid.to(tl.int64) << 32))
                w = (v & 0xFFFFFFFF).to(tl.uint32).to(tl.int32, bitcast=True)
            if F32:
                acc_lo = op_combine(acc_lo, w.to(tl.float32, bitcast=True), op)
            else:
                acc_lo = op_combine(acc_lo, (w << 16).to(tl.float32, bitcast=True), op)
                acc_hi = op_combine(acc_hi, (w & -65536).to(tl.float32, bitcast=True), op)
        acc_lo = op_finish(acc_lo, op, n)
        acc_hi = op_finish(acc_hi, op, n)
        if F32:
            out = acc_lo.to(tl.int32, bitcast=True)
        else:
            lo16 = acc_lo.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
            hi16 = acc_hi.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) << 16
            out = lo16 | hi16
        tl.store(recv.to(tl.pointer_type(tl.int32)) + lo + offs, out, mask=mask)
    tl.store(state + pid, phase)


@triton.jit
def clock_ns(like):
    # The GPU's global clock (ns), shaped like like (32-bit), which only gives the asm
    # an operand.
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [like], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def ll128_send(send_w, half, cap, lo, start, m, nwords, flag, deliver, pad, me, n, rows, cols):
    # Lines [start, start+LINES) of the block (from its line lo on) into this rank's
    # slot of the block's area half on every peer q: slot me - (me > q), as no rank has
    # a slot for itself.
    line = start + rows
    word = (lo + line) * 15 + cols
    mine = tl.load(send_w + word, mask=(cols < 15) & (line < m) & (word < nwords), other=0)
    if deliver == 0:
        mine = mine * 0
    packed = tl.where(cols == 15, flag, mine)
    for i in range(1, n):
        q = (me + i) % n
        slot = me - (me > q).to(tl.int32)
        dst = aligned(peer_ptr(half + slot.to(tl.int64) * cap, q), pad) + line * 16 + cols
        tl.store(dst, packed, mask=(line < m) & (cols < 16))


@triton.jit
def ll128_recv(send_w, recv_w, half, cap, lo, start, m, nwords, flag, phase, pid, me, n, limit_ns, mailbox, pad,
               rows, cols, op, LINES: tl.constexpr, F32: tl.constexpr):
    # Lines [start, start+LINES) of the block from every peer r (slot r - (r > me) of
    # this rank's area half), each tile loaded again until every line carries flag, so
    # that a line's data comes from the load that saw its flag; summed in rank order in
    # float32 (as sum_ranks does) into recv.
    line = start + rows
    word = (lo + line) * 15 + cols
    dmask = (cols < 15) & (line < m) & (word < nwords)
    lmask = (line < m) & (cols < 16)
    mine = tl.load(send_w + word, mask=dmask, other=0)
    acc0 = tl.zeros([LINES, 16], tl.float32) + op_identity(op)
    acc1 = tl.zeros([LINES, 16], tl.float32) + op_identity(op)
    acc2 = tl.zeros([LINES, 16], tl.float32) + op_identity(op)
    acc3 = tl.zeros([LINES, 16], tl.float32) + op_identity(op)
    for r in range(n):
        w = mine
        if r != me:
            slot = r - (r > me).to(tl.int32)
            at = aligned(half + slot.to(tl.int64) * cap, pad) + line * 16 + cols
            # A line's flag is this launch's or an older one: the tile is in when its
            # oldest flag is this launch's. Every decision below is the block's (a
            # reduction), so all of its threads spin, and give up, together; the clock
            # is read every 64th spin only.
            v = tl.load(at, mask=lmask, other=flag, volatile=True)
            oldest = tl.min(tl.where(cols == 15, v, flag))
            t0 = clock_ns(pid)
            spins = 0
            while oldest < flag:
                v = tl.load(at, mask=lmask, other=flag, volatile=True)
                oldest = tl.min(tl.where(cols == 15, v, flag))
                spins += 1
                if (oldest < flag) & (spins % 64 == 0):
                    if tl.max(clock_ns(rows + cols) - t0) > limit_ns.to(tl.int64):
                        nv.give_up(mailbox, nv.GAVE_UP_BARRIER, phase, oldest, r.to(tl.int64) | (pid.to(tl.int64) << 32))
            w = tl.where(dmask, v, 0)
        if F32:
            acc0 = op_combine(acc0, (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True), op)
            acc1 = op_combine(acc1, (w >> 32).to(tl.int32).to(tl.float32, bitcast=True), op)
        else:
            acc0 = op_combine(acc0, ((w & 0xFFFF) << 16).to(tl.int32).to(tl.float32, bitcast=True), op)
            acc1 = op_combine(acc1, (w & 0xFFFF0000).to(tl.int32).to(tl.float32, bitcast=True), op)
            acc2 = op_combine(acc2, ((w >> 16) & 0xFFFF0000).to(tl.int32).to(tl.float32, bitcast=True), op)
            acc3 = op_combine(acc3, ((w >> 32) & 0xFFFF0000).to(tl.int32).to(tl.float32, bitcast=True), op)
    acc0 = op_finish(acc0, op, n)
    acc1 = op_finish(acc1, op, n)
    acc2 = op_finish(acc2, op, n)
    acc3 = op_finish(acc3, op, n)
    if F32:
        out = ((acc0.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF) |
               (acc1.to(tl.int32, bitcast=True).to(tl.int64) << 32))
    else:
        out = ((acc0.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int64) & 0xFFFF) |
               ((acc1.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int64) & 0xFFFF) << 16) |
               ((acc2.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int64) & 0xFFFF) << 32) |
               (acc3.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int64) << 48))
    tl.store(recv_w + word, out, mask=dmask)


@triton.jit
def reduce_ll128(send, recv, area, cap, nwords, chunk, deliver, pad, state, me, n, limit_ns, mailbox, op,
                 LINES: tl.constexpr, F32: tl.constexpr):
    # One-shot all-reduce in LL128 form (NCCL's protocol of that name): the input goes
    # in 128-byte lines of 15 data words (8 bytes) and one flag word, the block's launch
    # count, each line stored whole by one warp's store (8 threads of 16 bytes), so that
    # a reader that sees the flag in the same load sees the line's data: no fence,
    # signal or barrier, and 1/15 more bytes (8 flag bytes a 120-byte line) where LL
    # sends twice the data. That NVLink keeps a warp's 128-byte line whole is what
    # NCCL's LL128 relies on, not a promise of PTX; every result is checked all the same.
    # Block b handles lines [b*chunk, b*chunk + min(chunk, lines left)), LINES at a time
    # ([LINES, 16] int64 tiles, which Triton lays out as 8 threads of 2 words a line):
    # it sends tile t to every peer (ll128_send), then receives and sums tile t-1
    # (ll128_recv), so that its sums overlap its lines crossing the link. The area
    # holds 2 halves of n-1 slots of cap bytes per block; halves alternate by the launch
    # count, as reduce_ll's do, so no closing barrier is needed. With deliver == 0 (the
    # drop fault) the lines carry their flags and zero data.
    pid = tl.program_id(0)
    phase = tl.load(state + pid) + 1
    flag = phase.to(tl.int64)
    nlines = (nwords + 14) // 15
    lo = pid.to(tl.int64) * chunk
    m = tl.minimum(chunk, nlines - lo)
    half = area.to(tl.int64) + (pid.to(tl.int64) * 2 + phase % 2) * (n - 1) * cap
    rows = tl.arange(0, LINES)[:, None]
    cols = tl.arange(0, 16)[None, :]
    send_w = send.to(tl.pointer_type(tl.int64))
    recv_w = recv.to(tl.pointer_type(tl.int64))
    for start in range(0, m + LINES, LINES):
        if start < m:
            ll128_send(send_w, half, cap, lo, start, m, nwords, flag, deliver, pad, me, n, rows, cols)
        if start >= LINES:
            ll128_recv(send_w, recv_w, half, cap, lo, start - LINES, m, nwords, flag, phase, pid, me, n, limit_ns,
                       mailbox, pad, rows, cols, op, LINES, F32)
    tl.store(state + pid, phase)


@triton.jit
def push_ll(send, recv, area, cap, nwords, chunk, src_stride, dst_stride, root, deliver, pad, state, me, n, limit_ns,
            mailbox, WORDS: tl.constexpr):
    # all-gather, broadcast and all-to-all of small messages in LL form, as reduce_ll:
    # every rank r (only root when root >= 0) sends nwords 32-bit words from send +
    # q*src_stride to every other rank q, each word with its flag (the block's phase)
    # in one 8-byte store into slot r of q's area; each rank waits for the words from
    # every sender and stores them at recv + r*dst_stride (bytes). Block b moves words
    # [b*chunk, (b+1)*chunk), WORDS at a time, and copies the rank's own part (from send
    # + me*src_stride to recv + me*dst_stride) as it goes. all-gather: src_stride 0, dst_stride nbytes;
    # broadcast: 0, 0, root; all-to-all: nbytes, nbytes. With deliver == 0 (the drop
    # fault) the words go out with their flags and zero data. state counts the block's
    # LL launches (not the barrier phases: nothing is announced here).
    # A broadcast's root hears from nobody, so it would run ahead and overwrite an area
    # half a peer still reads: every other rank first sends it an ack (a flag in word 0
    # of its slot on the root, which no data uses), and the root, once it has sent,
    # waits for every ack of this launch, as the other kernels wait for data.
    pid = tl.program_id(0)
    phase = tl.load(state + pid) + 1
    flag = phase.to(tl.uint32)
    lo = pid.to(tl.int64) * chunk
    m = tl.minimum(chunk, nwords - lo)
    half = area.to(tl.int64) + (pid.to(tl.int64) * 2 + phase % 2) * n * cap
    send_w = send.to(tl.pointer_type(tl.int32))
    recv_w = recv.to(tl.pointer_type(tl.int32))
    offs = tl.arange(0, WORDS)
    if (root >= 0) & (root != me):
        ack = aligned(peer_ptr(half + me.to(tl.int64) * cap, root), pad) + offs * 0
        tl.store(ack, (flag.to(tl.int64) << 32) + offs * 0, mask=offs == 0)
    for start in range(0, m, WORDS):
        mask = start + offs < m
        if (root < 0) | (root == me):
            # The rank's own part, here in the kernel: one launch per collective, as the
            # host's launches decide small collectives' time.
            own = tl.load(send_w + me.to(tl.int64) * (src_stride // 4) + lo + start + offs, mask=mask, other=0)
            tl.store(recv_w + me.to(tl.int64) * (dst_stride // 4) + lo + start + offs, own, mask=mask)
            for i in range(1, n):
                q = (me + i) % n
                words = tl.load(send_w + q.to(tl.int64) * (src_stride // 4) + lo + start + offs, mask=mask, other=0)
                data = words.to(tl.int64) & 0xFFFFFFFF
                if deliver == 0:
                    data = data * 0
                packed = (flag.to(tl.int64) << 32) | data
                dst = aligned(peer_ptr(half + me.to(tl.int64) * cap, q), pad) + start + offs
                tl.store(dst, packed, mask=mask)
        for i in range(1, n):
            r = (me + i) % n
            if (root < 0) | (root == r):
                # Lanes past the block's words watch its first word, which comes too.
                at = half + r.to(tl.int64) * cap + (start + tl.where(mask, offs, 0)).to(tl.int64) * 8
                v = nv.ll_wait(at, flag, limit_ns)
                got = (v >> 32).to(tl.uint32)
                if tl.sum((got != flag).to(tl.int32)) > 0:
                    nv.give_up(mailbox, nv.GAVE_UP_BARRIER, phase, tl.min(got.to(tl.int64)),
                               r.to(tl.int64) | (pid.to(tl.int64) << 32))
                w = (v & 0xFFFFFFFF).to(tl.uint32).to(tl.int32, bitcast=True)
                tl.store(recv_w + r.to(tl.int64) * (dst_stride // 4) + lo + start + offs, w, mask=mask)
    if root == me:
        for i in range(1, n):
            r = (me + i) % n
            v = nv.ll_wait(half + r.to(tl.int64) * cap + offs.to(tl.int64) * 0, flag, limit_ns)
            got = (v >> 32).to(tl.uint32)
            if tl.sum((got != flag).to(tl.int32)) > 0:
                nv.give_up(mailbox, nv.GAVE_UP_BARRIER, phase, tl.min(got.to(tl.int64)),
                           r.to(tl.int64) | (pid.to(tl.int64) << 32))
    tl.store(state + pid, phase)


@triton.jit
def push(send, recv, nbytes, chunk, src_stride, dst_off, root, pad, state, me, n, limit_ns, mailbox):
    # Every rank r (only root when root >= 0) puts nbytes from send + q*src_stride into
    # recv + dst_off on every other rank q, with nvshmemx_putmem_block; block b moves
    # bytes [b*chunk, (b+1)*chunk) of each. The rank's own part is copied beside the
    # kernel by the copy engine (the host queues it), so the SMs drive only the links.
    # all-gather: src_stride 0, dst_off me*nbytes; broadcast: 0, 0, root; all-to-all:
    # nbytes, me*nbytes.
    pid = tl.program_id(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, n, phase + 1, limit_ns, mailbox)
    off = pid.to(tl.int64) * chunk
    m = tl.minimum(chunk, nbytes - off)
    if m > 0:
        if (root < 0) | (root == me):
            for i in range(1, n):
                q = (me + i) % n
                nv.putmem_block(recv.to(tl.int64) + dst_off + off,
                                send.to(tl.int64) + q.to(tl.int64) * src_stride + off, m, q)
    sync_peers(pad, me, n, phase + 2, limit_ns, mailbox)
    tl.store(state + pid, phase + 2)


@triton.jit
def barrier(pad, state, me, n, limit_ns, mailbox):
    # The copy-engine collectives' barrier on the stream (one block): block 0 of every
    # rank announces its next phase and waits for every peer's (sync_peers), in the same
    # words as the kernels above. Stream order puts it after the copies queued before
    # it, which have landed by then; it costs a kernel launch and one trip across the
    # link, where NVSHMEM's barrier on a stream cost ~13 us.
    phase = tl.load(state) + 1
    sync_peers(pad, me, n, phase, limit_ns, mailbox)
    tl.store(state, phase)


# name -> (function, ordered signature, constexprs that depend on the warp count).
# reduce_sum comes in one build per element type; BLOCK is 16 elements per thread (two
# 16-byte loads of bf16 per input in flight).
_REDUCE_SIG = {"count": "i64", "chunk": "i64", "in_off": "i64", "out_off": "i64", "push": "i32", "extra": "i32",
               "pad": "*i64", "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64",
               "op": "i32", "BLOCK": "constexpr", "ESIZE": "constexpr"}


def _reduce(t):
    return dict({"send": "*" + t, "recv": "*" + t}, **_REDUCE_SIG)


_PUSH_SIG = {"area": "i64", "cap": "i64", "nelem": "i64", "chunk": "i64", "stride": "i64", "deliver": "i32", "pad": "*i64", "state": "*i64", "me": "i32",
             "n": "i32", "limit_ns": "u64", "mailbox": "*u64", "op": "i32", "BLOCK": "constexpr", "ESIZE": "constexpr"}

_LL_SIG = {"area": "i64", "cap": "i64", "nwords": "i64", "chunk": "i64", "deliver": "i32", "pad": "*i64",
           "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64", "op": "i32", "WORDS": "constexpr",
           "F32": "constexpr"}
_LL128_SIG = {"area": "i64", "cap": "i64", "nwords": "i64", "chunk": "i64", "deliver": "i32", "pad": "*i64",
              "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64", "op": "i32", "LINES": "constexpr",
              "F32": "constexpr"}

# Lines of one pass of a reduce_ll128 block per warp (internal/backend/gpu: ll128Warps' comment).
LL128_LINES_PER_WARP = 16

# Words of one block of reduce_ll (internal/backend/gpu: llWords).
LL_WORDS = 256

KERNELS = {
    "push_ll": (push_ll, {"send": "*i8", "recv": "*i8", "area": "i64", "cap": "i64", "nwords": "i64", "chunk": "i64",
                          "src_stride": "i64", "dst_stride": "i64", "root": "i32", "deliver": "i32", "pad": "*i64",
                          "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64",
                          "WORDS": "constexpr"},
                lambda warps: {"WORDS": LL_WORDS}),
    "reduce_ll_bf16": (reduce_ll, dict({"send": "*bf16", "recv": "*bf16"}, **_LL_SIG),
                       lambda warps: {"WORDS": LL_WORDS, "F32": False}),
    "reduce_ll_f32": (reduce_ll, dict({"send": "*fp32", "recv": "*fp32"}, **_LL_SIG),
                      lambda warps: {"WORDS": LL_WORDS, "F32": True}),
    "reduce_ll128_bf16": (reduce_ll128, dict({"send": "*bf16", "recv": "*bf16"}, **_LL128_SIG),
                          lambda warps: {"LINES": LL128_LINES_PER_WARP * warps, "F32": False}),
    "reduce_ll128_f32": (reduce_ll128, dict({"send": "*fp32", "recv": "*fp32"}, **_LL128_SIG),
                         lambda warps: {"LINES": LL128_LINES_PER_WARP * warps, "F32": True}),
    "reduce_push_bf16": (reduce_push, dict({"send": "*bf16", "recv": "*bf16"}, **_PUSH_SIG),
                         lambda warps: {"BLOCK": 512 * warps, "ESIZE": 2}),
    "reduce_push_f32": (reduce_push, dict({"send": "*fp32", "recv": "*fp32"}, **_PUSH_SIG),
                        lambda warps: {"BLOCK": 512 * warps, "ESIZE": 4}),
    "reduce_staged_bf16": (reduce_staged, {"send": "*bf16", "recv": "*bf16", "scratch": "*bf16", "nelem": "i64",
                                           "shard": "i64", "chunk": "i64", "sub": "i64", "pad": "*i64", "state": "*i64",
                                           "me": "i32", "n": "i32", "limit_ns": "u64", "mailbox": "*u64",
                                           "op": "i32", "BLOCK": "constexpr"},
                           lambda warps: {"BLOCK": 512 * warps}),
    "reduce_bf16": (reduce_sum, _reduce("bf16"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 2}),
    "reduce_f32": (reduce_sum, _reduce("fp32"), lambda warps: {"BLOCK": 512 * warps, "ESIZE": 4}),
    "barrier": (barrier, {"pad": "*i64", "state": "*i64", "me": "i32", "n": "i32", "limit_ns": "u64",
                          "mailbox": "*u64"},
                lambda warps: {}),
    "push": (push, {"send": "*i8", "recv": "*i8", "nbytes": "i64", "chunk": "i64", "src_stride": "i64",
                    "dst_off": "i64", "root": "i32", "pad": "*i64", "state": "*i64", "me": "i32", "n": "i32",
                    "limit_ns": "u64", "mailbox": "*u64"},
             lambda warps: {}),
}
