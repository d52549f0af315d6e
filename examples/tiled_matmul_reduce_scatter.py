"""A user's fused matmul-reduce-scatter for symmem, in bf16 and float16.

Every rank multiplies its own A by its own B and puts each rank's rows of the product to
that rank, which sums what it gets; written against symmem's NVSHMEM bindings.

symmem launches it on a grid of cdiv(m_local, block_m) x cdiv(n, block_n) programs, with
the parameters of its signature, by name and in order (docs/kernels.md, "Your own fused
kernels"), in two steps, and meets every rank before each. Step 0, once for each peer
(rank+1, rank+2, ..., this rank last): program (i, j) computes tile (i, j) of rows
peer*m_local.. of A @ B in float32, stores it, rounded to the element type, into slot
rank of this rank's own scratch (rows rank*m_local..), and puts each of its rows from
there into the same place on peer. That slot is free to stage in: no other rank writes
it, and this rank's own launch, the last, leaves its own product there. Step 1 (peer =
rank): program (i, j) sums tile (i, j) of the slots of its scratch in rank order, in
float32, and stores it, rounded once, into C: this rank's rows of the sum over ranks of
A @ B.

Build it on a machine with Triton and the NVSHMEM wheel (from a symmem checkout), and
run it beside symmem's own fused kernels and the unfused pair:

    bin/symmem kernels build examples/tiled_matmul_reduce_scatter.py --arch 90 --warps 4 --out mykernels
    bin/symmem run matmul-reduce-scatter --dtype float16 --kernels mykernels --impl tiled-matmul-reduce-scatter
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

# One function, built once per element type: the keys say which kernel of symmem's
# table each build is (matmul-reduce-scatter is bf16's, matmul-reduce-scatter:float16
# float16's).
SYMMEM_KERNELS = {"matmul-reduce-scatter": "matmul_reduce_scatter", "matmul-reduce-scatter:float16": "matmul_reduce_scatter"}


@triton.jit
def matmul_reduce_scatter(a_ptr, b_ptr, c_ptr, scratch_ptr, m_local, n, k, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, rank, peer, ranks, step, block_m: tl.constexpr, block_n: tl.constexpr,
                          block_k: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * block_m + tl.arange(0, block_m)
    offs_n = pid_n * block_n + tl.arange(0, block_n)
    mask = (offs_m[:, None] < m_local) & (offs_n[None, :] < n)
    if step == 0:
        offs_k = tl.arange(0, block_k)
        rows = offs_m.to(tl.int64) + peer * m_local  # peer's rows of this rank's A
        acc = tl.zeros((block_m, block_n), dtype=tl.float32)
        for k0 in range(0, k, block_k):
            a = tl.load(a_ptr + rows[:, None] * stride_am + (offs_k[None, :] + k0) * stride_ak,
                        mask=(offs_m[:, None] < m_local) & (offs_k[None, :] + k0 < k), other=0.0)
            b = tl.load(b_ptr + (offs_k[:, None] + k0) * stride_bk + offs_n[None, :] * stride_bn,
                        mask=(offs_k[:, None] + k0 < k) & (offs_n[None, :] < n), other=0.0)
            acc += tl.dot(a, b)
        slot = offs_m.to(tl.int64) + rank * m_local  # slot rank's rows
        tl.store(scratch_ptr + slot[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                 acc.to(scratch_ptr.dtype.element_ty), mask=mask)
        if peer != rank:
            # Every thread's stores are in the slot before the block reads them back for
            # the puts; a put returns once its source may be written again, so the next
            # launch's stores do not overtake it.
            tl.debug_barrier()
            col = pid_n * block_n
            nbytes = (tl.minimum(block_n, n - col) * 2).to(tl.int64)  # 2-byte elements
            for i in range(block_m):
                row = pid_m * block_m + i
                if row < m_local:
                    at = (scratch_ptr + (row + rank * m_local).to(tl.int64) * stride_cm + col * stride_cn).to(tl.int64)
                    nv.putmem_block(at, at, nbytes, peer)
    else:
        acc = tl.zeros((block_m, block_n), dtype=tl.float32)
        for s in range(0, ranks):
            slot = offs_m.to(tl.int64) + s * m_local
            acc += tl.load(scratch_ptr + slot[:, None] * stride_cm + offs_n[None, :] * stride_cn, mask=mask,
                           other=0.0).to(tl.float32)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                 mask=mask)
