"""A user's fused all-gather-matmul for symmem: PyTorch's test kernel
my_fused_matmul_allgather_put_kernel (test_nvshmem_triton.py), written against symmem's
NVSHMEM bindings.

symmem launches it once for each peer, on a grid of cdiv(m_local, block_m) x
cdiv(n, block_n) programs, with the parameters of its signature, by name and in order
(docs/kernels.md, "Your own fused kernels"): program (i, j) computes tile (i, j) of this
rank's rows of C (rows rank*m_local ..) in float32, stores it into C here and puts each
of its rows into C on peer. When every rank has run it, C is the same on every rank:
all_gather(A) @ B.

Build it on a machine with Triton and the NVSHMEM wheel (from a symmem checkout), and
run it beside symmem's own fused kernels and the unfused pair:

    bin/symmem kernels build examples/tiled_all_gather_matmul.py --arch 90 --out mykernels
    bin/symmem run all-gather-matmul --dtype float16 --kernels mykernels --impl tiled-all-gather-matmul
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

# One function, built once per element type: the keys say which kernel of symmem's
# table each build is (all-gather-matmul is bf16's, all-gather-matmul:float16 float16's).
SYMMEM_KERNELS = {"all-gather-matmul": "matmul_allgather_put", "all-gather-matmul:float16": "matmul_allgather_put"}


@triton.jit
def matmul_allgather_put(a_ptr, b_ptr, c_ptr, m_local, n, k, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                         stride_cn, rank, peer, block_m: tl.constexpr, block_n: tl.constexpr, block_k: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * block_m + tl.arange(0, block_m)
    offs_n = pid_n * block_n + tl.arange(0, block_n)
    offs_k = tl.arange(0, block_k)
    acc = tl.zeros((block_m, block_n), dtype=tl.float32)
    for k0 in range(0, k, block_k):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (offs_k[None, :] + k0) * stride_ak,
                    mask=(offs_m[:, None] < m_local) & (offs_k[None, :] + k0 < k), other=0.0)
        b = tl.load(b_ptr + (offs_k[:, None] + k0) * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] + k0 < k) & (offs_n[None, :] < n), other=0.0)
        acc += tl.dot(a, b)
    rows = offs_m + rank * m_local
    tl.store(c_ptr + rows[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < m_local) & (offs_n[None, :] < n))
    # Every thread's stores are in C before the block reads them back for the puts.
    tl.debug_barrier()
    col = pid_n * block_n
    nbytes = (tl.minimum(block_n, n - col) * 2).to(tl.int64)  # 2-byte elements
    for i in range(block_m):
        row = pid_m * block_m + i
        if row < m_local:
            at = (c_ptr + (row + rank * m_local) * stride_cm + col * stride_cn).to(tl.int64)
            nv.putmem_block(at, at, nbytes, peer)
