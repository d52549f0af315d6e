"""symmem's fused matrix products in Triton over NVSHMEM (all-gather-matmul and
matmul-reduce-scatter), compiled ahead of time by scripts/build-kernels.py.

Matrices are row-major, of bf16 or float16, and products accumulate in float32 (tl.dot),
rounded to the element type once. Every rank launches the same kernel with the same grid
(the host derives it from the shape alone), and each program (block) works through its
share of the tiles persistently: tile t goes to program t % programs on every rank. So
program b of a rank works with program b of every other rank, and they meet at the
barriers of symmem_collectives.sync_peers, counting phases up in the same barrier words
as the collective kernels.

ag_matmul (all-gather-matmul): rank r holds rows r*rows.. of A (rows x k) and all of B
(k x n); every rank ends with all of C ((nranks*rows) x n). A program computes the
BM x BN tiles of this rank's rows of C given to it, and stores each finished tile
straight from registers into C on every rank (its own and each peer's, through the
peer's nvshmem_ptr mapping). A barrier before (every rank's C may be overwritten) and one
after (every rank's program b has delivered its tiles everywhere): when the kernel has
ended on a rank, each of its programs has passed the closing barrier, so every tile of
every rank is in its C.

matmul_rs (matmul-reduce-scatter): rank r holds its own A (m x k) and B (k x n); rank r
ends with rows r*rows.. of the sum over ranks of A @ B (rows = m / nranks) in C (rows x
n). Scratch (m x n) holds a slot of rows x n per rank: slot s of rank q's scratch is rank
s's product of q's rows. A program computes, for each tile t given to it, that tile of
every owner's rows (the next rank first, its own last) and stores it, rounded to the
element type, into slot me of the owner's scratch; then it meets program b of every rank
(after which every tile t given to program b has landed in every owner's slots) and sums
its tiles of this rank's rows from the n slots, in rank order, in float32, rounded once,
into C. The opening barrier of the next launch keeps a peer's next puts out of the slots
until this rank's sums have ended.

fault (the test-only SYMMEM_TEST_FAULT of internal/backend/gpu, at the point of
delivery): FAULT_SKIP leaves tile 0 of this rank undelivered (all-gather-matmul: the
first BM rows and BN columns of its rows of C, on every rank; matmul-reduce-scatter: its
product of the next rank's tile 0, in that rank's slot); FAULT_EARLY delivers that tile
as it was before its last K step was accumulated; FAULT_DROP delivers no tile at all
(the drop fault); the barriers are kept in every case, so no rank waits for a fault.
"""

import triton
import triton.language as tl

from symmem_collectives import aligned, peer_ptr, sync_peers

# fault's values; internal/backend/gpu/fused.go has the same. (constexprs: a kernel may
# read a global only where it is one.)
FAULT_NONE = tl.constexpr(0)
FAULT_SKIP = tl.constexpr(1)
FAULT_EARLY = tl.constexpr(2)
FAULT_DROP = tl.constexpr(3)


@triton.jit
def tile_product(a, b, lo, hi, col, n, k, kend, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # The float32 product of rows [lo, lo+BM) of a (row-major, k columns; rows at hi and
    # past it read as zero) and columns [col, col+BN) of b (k x n), over columns [0, kend)
    # of a: a whole product where kend == k.
    offs_m = lo + tl.arange(0, BM)
    offs_n = col + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, kend, BK):
        kk = k0 + offs_k
        av = tl.load(a + offs_m[:, None].to(tl.int64) * k + kk[None, :], mask=(offs_m[:, None] < hi) & (kk[None, :] < k),
                     other=0.0)
        bv = tl.load(b + kk[:, None].to(tl.int64) * n + offs_n[None, :], mask=(kk[:, None] < k) & (offs_n[None, :] < n),
                     other=0.0)
        acc = tl.dot(av, bv, acc)
    return acc


@triton.jit
def k_steps(k, t, fault, BK: tl.constexpr):
    # The columns of A tile t is accumulated over: all of them, but for tile 0 under
    # FAULT_EARLY, which stops before its last K step.
    kend = k
    if (fault == FAULT_EARLY) & (t == 0):
        kend = (k - 1) // BK * BK
    return kend


@triton.jit
def delivers(t, fault):
    # Whether tile t is delivered: not under FAULT_DROP, nor tile 0 under FAULT_SKIP.
    return (fault != FAULT_DROP) & ((fault != FAULT_SKIP) | (t != 0))


@triton.jit
def ag_matmul(a, b, c, rows, n, k, pad, state, me, nranks, fault, limit_ns, mailbox, BM: tl.constexpr,
              BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, nranks, phase + 1, limit_ns, mailbox)
    tiles_n = tl.cdiv(n, BN)
    tiles = tl.cdiv(rows, BM) * tiles_n
    for t in range(pid, tiles, programs):
        tm = t // tiles_n
        tn = t % tiles_n
        acc = tile_product(a, b, tm * BM, rows, tn * BN, n, k, k_steps(k, t, fault, BK), BM, BN, BK)
        out = acc.to(c.dtype.element_ty)
        offs_m = tm * BM + tl.arange(0, BM)
        offs_n = tn * BN + tl.arange(0, BN)
        mask = (offs_m[:, None] < rows) & (offs_n[None, :] < n)
        at = (me.to(tl.int64) * rows + offs_m[:, None]) * n + offs_n[None, :]
        if delivers(t, fault):
            for i in range(0, nranks):
                q = (me + 1 + i) % nranks  # the peers first, this rank last
                tl.store(aligned(peer_ptr(c.to(tl.int64), q), c) + at, out, mask=mask)
    sync_peers(pad, me, nranks, phase + 2, limit_ns, mailbox)
    tl.store(state + pid, phase + 2)


@triton.jit
def matmul_rs(a, b, c, scratch, m, n, k, pad, state, me, nranks, fault, limit_ns, mailbox, BM: tl.constexpr,
              BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    phase = tl.load(state + pid)
    sync_peers(pad, me, nranks, phase + 1, limit_ns, mailbox)
    rows = m // nranks
    tiles_n = tl.cdiv(n, BN)
    tiles = tl.cdiv(rows, BM) * tiles_n  # of one owner's rows
    for t in range(pid, tiles, programs):
        tm = t // tiles_n
        tn = t % tiles_n
        offs_m = tm * BM + tl.arange(0, BM)
        offs_n = tn * BN + tl.arange(0, BN)
        mask = (offs_m[:, None] < rows) & (offs_n[None, :] < n)
        at = (me.to(tl.int64) * rows + offs_m[:, None]) * n + offs_n[None, :]  # slot me
        for i in range(0, nranks):
            q = (me + 1 + i) % nranks  # the owner: the next rank first, this rank last
            # The fault's tile is the first delivered: tile 0 of the next rank.
            f = tl.where(i == 0, fault, tl.where(fault == FAULT_DROP, FAULT_DROP, FAULT_NONE))
            lo = q.to(tl.int64) * rows + tm * BM
            acc = tile_product(a, b, lo, q.to(tl.int64) * rows + rows, tn * BN, n, k, k_steps(k, t, f, BK), BM, BN, BK)
            # A masked store, not an if around it: Triton 3.6's Blackwell pipeline
            # (NVWSInsertTmemAref) asserts on an if that holds the accumulator's load.
            tl.store(aligned(peer_ptr(scratch.to(tl.int64), q), scratch) + at, acc.to(scratch.dtype.element_ty),
                     mask=mask & delivers(t, f))
    sync_peers(pad, me, nranks, phase + 2, limit_ns, mailbox)
    for t in range(pid, tiles, programs):
        tm = t // tiles_n
        tn = t % tiles_n
        offs_m = tm * BM + tl.arange(0, BM)
        offs_n = tn * BN + tl.arange(0, BN)
        mask = (offs_m[:, None] < rows) & (offs_n[None, :] < n)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(0, nranks):
            at = (s.to(tl.int64) * rows + offs_m[:, None]) * n + offs_n[None, :]
            acc += tl.load(scratch + at, mask=mask, other=0.0).to(tl.float32)
        tl.store(c + offs_m[:, None].to(tl.int64) * n + offs_n[None, :], acc.to(c.dtype.element_ty), mask=mask)
    tl.store(state + pid, phase + 2)


# The tiles by warp count: 128 x 128 tiles need 8 warps for their float32 accumulator;
# 4 warps take half as many rows.
def _tile(warps):
    return {"BM": 128 if warps >= 8 else 64, "BN": 128, "BK": 64}


_COMMON = {"pad": "*i64", "state": "*i64", "me": "i32", "nranks": "i32", "fault": "i32", "limit_ns": "u64",
           "mailbox": "*u64", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}


def _ag(t):
    return dict({"a": "*" + t, "b": "*" + t, "c": "*" + t, "rows": "i64", "n": "i64", "k": "i64"}, **_COMMON)


def _rs(t):
    return dict({"a": "*" + t, "b": "*" + t, "c": "*" + t, "scratch": "*" + t, "m": "i64", "n": "i64", "k": "i64"},
                **_COMMON)


# What the build records beside each kernel: the constexprs whose values are its tile
# (rows, columns, K step: the sidecar's "tile", from which the host sizes the grid). The
# warp counts each is built for are its manifest's (symmem_fused.manifest.json).
_FUSED = {"tile": ("BM", "BN", "BK")}

# name -> (function, ordered signature, constexprs by warp count, build options); what
# each serves is symmem_fused.manifest.json's.
KERNELS = {
    "ag_matmul_bf16": (ag_matmul, _ag("bf16"), _tile, _FUSED),
    "ag_matmul_f16": (ag_matmul, _ag("fp16"), _tile, _FUSED),
    "matmul_rs_bf16": (matmul_rs, _rs("bf16"), _tile, _FUSED),
    "matmul_rs_f16": (matmul_rs, _rs("fp16"), _tile, _FUSED),
}
