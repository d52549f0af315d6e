# Owner(s): ["oncall: distributed"]
# PyTorch's test/distributed/test_nvshmem_triton.py in its newest form (late 2026), written
# against the backend-generic _shmem_triton module (NVSHMEM or rocSHMEM), as a file of its
# shape ships: its imports, its gate on is_nvshmem_available(), its 27 kernels with their
# names, parameters and SHMEM calls, a test class and its runner. PyTorch is BSD-3-Clause
# licensed (Copyright (c) Facebook, Inc. and its affiliates; see PyTorch's LICENSE). The
# bodies of the three kernels that need the tritonblas package, and the test class, are
# written here around the same calls: symmem builds none of them.
#
# symmem's CPU tests run `symmem kernels build --check` on this file and build it whole
# against a stand-in for Triton (internal/cli/torchfile_test.go); scripts/gpu-check.sh
# (SECTIONS=torchfile) builds it and runs every kernel it serves, each byte checked.
import os
import sys
import unittest

import torch
import torch.distributed._symmetric_memory as symm_mem

# Skip the whole module where the SHMEM backend is not there.
if not symm_mem.is_nvshmem_available():
    print("SHMEM backend (NVSHMEM/rocSHMEM) not available, skipping tests")
    sys.exit(0)

import triton.language as tl

import torch.distributed as dist
import torch.distributed._symmetric_memory._shmem_triton as shmem_triton
from torch._inductor.runtime.triton_compat import triton
from torch.testing._internal.common_distributed import MultiProcContinuousTest
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)
from torch.testing._internal.inductor_utils import requires_triton

try:
    from tritonblas.kernels.stages import GemmContext, ScheduleContext, make_tensor_view

    HAS_TRITONBLAS = True
except ImportError:
    GemmContext = None
    ScheduleContext = None
    make_tensor_view = None
    HAS_TRITONBLAS = False


shmem_backend = shmem_triton.get_shmem_backend_module()
requires_shmem = shmem_triton.requires_shmem

device_type = "cuda"
device_module = torch.get_device_module(device_type)


@requires_shmem
@triton.jit
def my_put_kernel(dest, src, nelems, pe):
    shmem_backend.put(dest, src, nelems, pe)


@requires_shmem
@triton.jit
def my_get_kernel(dest, src, nelems, pe, nbi: tl.constexpr):
    if nbi:
        shmem_backend.get_nbi(dest, src, nelems, pe)
        shmem_backend.quiet()
    else:
        shmem_backend.get(dest, src, nelems, pe)


@requires_shmem
@triton.jit
def my_putmem_signal_block_kernel(
    dst,
    src,
    size_bytes,
    signal,
    sig_val,
    sig_op,
    peer,
):
    shmem_backend.putmem_signal_block(
        dst, src, size_bytes, signal, sig_val, sig_op, peer
    )


@requires_shmem
@triton.jit
def my_signal_wait_until_kernel(signal, cmp_op, cmp_val):
    shmem_backend.signal_wait_until(signal, cmp_op, cmp_val)


@requires_shmem
@triton.jit
def my_signal_op_kernel(
    sig_addr,
    signal,
    sig_op,
    peer,
):
    shmem_backend.signal_op(sig_addr, signal, sig_op, peer)


@requires_shmem
@triton.jit
def my_wait_until_kernel(ivar, cmp_op, cmp_val):
    shmem_backend.wait_until(ivar, cmp_op, cmp_val)


@requires_shmem
@triton.jit
def my_fence_kernel():
    shmem_backend.fence()


@requires_shmem
@triton.jit
def my_put_with_fence_kernel(
    dst1,
    src1,
    dst2,
    src2,
    flag_dst,
    flag_src,
    nelems,
    peer,
):
    shmem_backend.put(dst1, src1, nelems, peer)
    shmem_backend.fence()
    shmem_backend.put(dst2, src2, nelems, peer)
    shmem_backend.fence()
    shmem_backend.put(flag_dst, flag_src, 1, peer)


@requires_shmem
@triton.jit
def my_put_with_quiet_kernel(
    dst,
    src,
    flag_dst,
    flag_src,
    nelems,
    peer,
):
    shmem_backend.put(dst, src, nelems, peer)
    shmem_backend.quiet()
    shmem_backend.put(flag_dst, flag_src, 1, peer)


@requires_shmem
@triton.jit
def my_barrier_test_kernel(dst, src, nelems):
    my_pe = shmem_backend.my_pe()
    n_pes = shmem_backend.n_pes()
    if my_pe == 0:
        p_src = src.to(tl.pointer_type(tl.int32))
        tl.store(p_src, 42)
        i = 1
        while i < n_pes:
            shmem_backend.put(dst, src, nelems, i)
            i += 1
    shmem_backend.barrier_all()
    if my_pe != 0:
        p_dst = dst.to(tl.pointer_type(tl.int32))
        received = tl.load(p_dst)
        tl.store(p_dst, received + 1)


@requires_shmem
@triton.jit
def my_sync_test_kernel(local_data, remote_data, nelems):
    my_pe = shmem_backend.my_pe()
    n_pes = shmem_backend.n_pes()
    p_local = local_data.to(tl.pointer_type(tl.int32))
    unique_value = my_pe + 100
    tl.store(p_local, unique_value)
    shmem_backend.sync_all()
    next_pe = (my_pe + 1) % n_pes
    shmem_backend.get(remote_data, local_data, nelems, next_pe)


@requires_shmem
@triton.jit
def my_barrier_all_kernel():
    shmem_backend.barrier_all()


@requires_shmem
@triton.jit
def my_alltoall_kernel(
    team_handle,
    dst,
    src,
    nelems_per_pe,
):
    shmem_backend.alltoall(team_handle, dst, src, nelems_per_pe)


@requires_shmem
@triton.jit
def my_broadcast_kernel(
    team_handle,
    dst,
    src,
    nelems,
    pe_root,
):
    shmem_backend.broadcast(team_handle, dst, src, nelems, pe_root)


@requires_shmem
@triton.jit
def my_reduce_kernel(
    team_handle,
    dest_tensor,
    source_tensor,
    nreduce,
    operation: tl.constexpr,
):
    shmem_backend.reduce(team_handle, dest_tensor, source_tensor, nreduce, operation)


@requires_shmem
@triton.jit
def my_fused_get_add_kernel(
    out,
    local_inp,
    remote_symm_src,
    tmp_remote,
    nelems,
    peer,
    block_size: tl.constexpr,
):
    shmem_backend.get(tmp_remote, remote_symm_src, nelems, peer)
    offsets = tl.arange(0, block_size)
    mask = offsets < nelems
    lhs = tl.load(local_inp + offsets, mask=mask)
    rhs = tl.load(tmp_remote + offsets, mask=mask)
    tl.store(out + offsets, lhs + rhs, mask=mask)


@requires_shmem
@triton.jit
def my_put_quiet_kernel(dest, src, nelems, pe):
    shmem_backend.put(dest, src, nelems, pe)
    shmem_backend.quiet()


@requires_shmem
@triton.jit
def my_parallel_put_quiet_kernel(
    src_ptr,
    total_elems,
    peer,
    chunk_per_wg: tl.constexpr,
):
    pid = tl.program_id(0)
    start = pid * chunk_per_wg
    if start < total_elems:
        remaining = total_elems - start
        count = chunk_per_wg
        if remaining < chunk_per_wg:
            count = remaining
        shmem_backend.put(src_ptr + start, src_ptr + start, count, peer)
    shmem_backend.quiet()


@requires_shmem
@triton.jit
def my_parallel_put_allpeers_quiet_kernel(
    src_ptr,
    total_elems,
    rank,
    chunk_per_wg: tl.constexpr,
    world_size: tl.constexpr,
):
    pid = tl.program_id(0)
    start = pid * chunk_per_wg
    if start < total_elems:
        remaining = total_elems - start
        count = chunk_per_wg
        if remaining < chunk_per_wg:
            count = remaining
        for p in tl.static_range(0, world_size):
            if p != rank:
                shmem_backend.put(src_ptr + start, src_ptr + start, count, p)
    shmem_backend.quiet()


@requires_shmem
@triton.jit
def my_parallel_put_no_quiet_kernel(
    src_ptr,
    total_elems,
    peer,
    chunk_per_wg: tl.constexpr,
):
    pid = tl.program_id(0)
    start = pid * chunk_per_wg
    if start < total_elems:
        remaining = total_elems - start
        count = chunk_per_wg
        if remaining < chunk_per_wg:
            count = remaining
        shmem_backend.put(src_ptr + start, src_ptr + start, count, peer)


@requires_shmem
@triton.jit
def my_parallel_put_striped_peers_quiet_kernel(
    src_ptr,
    total_elems,
    rank,
    chunk_per_wg_per_peer: tl.constexpr,
    world_size: tl.constexpr,
    wgs_per_peer: tl.constexpr,
):
    pid = tl.program_id(0)
    num_peers = world_size - 1
    peer_idx = pid % num_peers
    wg_within_peer = pid // num_peers
    peer = peer_idx
    if peer >= rank:
        peer = peer + 1
    start = wg_within_peer * chunk_per_wg_per_peer
    if start < total_elems:
        remaining = total_elems - start
        count = chunk_per_wg_per_peer
        if remaining < chunk_per_wg_per_peer:
            count = remaining
        shmem_backend.put(src_ptr + start, src_ptr + start, count, peer)
    shmem_backend.quiet()


@requires_shmem
@triton.jit
def my_quiet_kernel():
    shmem_backend.quiet()


@requires_shmem
@triton.jit
def my_fused_matmul_allgather_put_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    m_local,
    n,
    k,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    rank,
    peer,
    block_m: tl.constexpr,
    block_n: tl.constexpr,
    block_k: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * block_m + tl.arange(0, block_m)
    offs_n = pid_n * block_n + tl.arange(0, block_n)
    offs_k = tl.arange(0, block_k)
    acc = tl.zeros((block_m, block_n), dtype=tl.float32)
    k_iter = 0
    while k_iter < k:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + (offs_k[None, :] + k_iter) * stride_ak
        b_ptrs = b_ptr + (offs_k[:, None] + k_iter) * stride_bk + offs_n[None, :] * stride_bn
        a_mask = (offs_m[:, None] < m_local) & ((offs_k[None, :] + k_iter) < k)
        b_mask = ((offs_k[:, None] + k_iter) < k) & (offs_n[None, :] < n)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
        k_iter += block_k
    c = acc.to(tl.float16)
    global_rows = offs_m + rank * m_local
    c_ptrs = c_ptr + global_rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < m_local) & (offs_n[None, :] < n)
    tl.store(c_ptrs, c, mask=c_mask)
    col_start = pid_n * block_n
    valid_cols = tl.minimum(block_n, n - col_start)
    row_base_local = pid_m * block_m
    for i in range(block_m):
        row_local = row_base_local + i
        if row_local < m_local:
            row_global = row_local + rank * m_local
            row_ptr = c_ptr + row_global * stride_cm + col_start * stride_cn
            shmem_backend.put(row_ptr, row_ptr, valid_cols, peer)


@requires_shmem
@triton.jit
def my_fused_matmul_allgather_put_persistent_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    m_local,
    n,
    k,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    rank,
    peer,
    num_pid_n,
    total_tiles,
    block_m: tl.constexpr,
    block_n: tl.constexpr,
    block_k: tl.constexpr,
):
    pid = tl.program_id(0)
    tile_id = pid
    while tile_id < total_tiles:
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        offs_m = pid_m * block_m + tl.arange(0, block_m)
        offs_n = pid_n * block_n + tl.arange(0, block_n)
        offs_k = tl.arange(0, block_k)
        acc = tl.zeros((block_m, block_n), dtype=tl.float32)
        k_iter = 0
        while k_iter < k:
            a_ptrs = a_ptr + offs_m[:, None] * stride_am + (offs_k[None, :] + k_iter) * stride_ak
            b_ptrs = b_ptr + (offs_k[:, None] + k_iter) * stride_bk + offs_n[None, :] * stride_bn
            a_mask = (offs_m[:, None] < m_local) & ((offs_k[None, :] + k_iter) < k)
            b_mask = ((offs_k[:, None] + k_iter) < k) & (offs_n[None, :] < n)
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            b = tl.load(b_ptrs, mask=b_mask, other=0.0)
            acc += tl.dot(a, b)
            k_iter += block_k
        c = acc.to(tl.float16)
        global_rows = offs_m + rank * m_local
        c_ptrs = c_ptr + global_rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < m_local) & (offs_n[None, :] < n)
        tl.store(c_ptrs, c, mask=c_mask)
        col_start = pid_n * block_n
        valid_cols = tl.minimum(block_n, n - col_start)
        row_base_local = pid_m * block_m
        for i in range(block_m):
            row_local = row_base_local + i
            if row_local < m_local:
                row_global = row_local + rank * m_local
                row_ptr = c_ptr + row_global * stride_cm + col_start * stride_cn
                shmem_backend.put(row_ptr, row_ptr, valid_cols, peer)
        tile_id += tl.num_programs(0)



@requires_shmem
@triton.jit
def my_fused_matmul_allgather_put_tritonblas_kernel(
    a_ptr, b_ptr, c_ptr, m_local, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    rank, peer,
    block_m: tl.constexpr, block_n: tl.constexpr, block_k: tl.constexpr, num_sms: tl.constexpr,
):
    a = make_tensor_view(a_ptr, m_local, k, stride_am, stride_ak)
    b = make_tensor_view(b_ptr, k, n, stride_bk, stride_bn)
    gemm = GemmContext(block_m, block_n, block_k, num_sms=num_sms)
    sched = ScheduleContext(m_local, n, k, gemm)
    first, last, step = sched.persistent_tile_range()
    for t in range(first, last, step):
        tile = sched.get_tile_from_idx(t)
        rows, cols = tile.indices()
        c = gemm.reduce_axis(a, b, tile).to(tl.float16)
        out = c_ptr + (rows + rank * m_local)[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(out, c, mask=(rows[:, None] < m_local) & (cols[None, :] < n))
        for i in tl.static_range(0, block_m):
            row = c_ptr + (tile.pid_m * block_m + i + rank * m_local) * stride_cm + tile.pid_n * block_n * stride_cn
            shmem_backend.put(row, row, block_n, peer)


@triton.jit
def my_tritonblas_gemm_only_kernel(
    a_ptr, b_ptr, c_ptr, m_local, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    rank,
    block_m: tl.constexpr, block_n: tl.constexpr, block_k: tl.constexpr, num_sms: tl.constexpr,
):
    a = make_tensor_view(a_ptr, m_local, k, stride_am, stride_ak)
    b = make_tensor_view(b_ptr, k, n, stride_bk, stride_bn)
    gemm = GemmContext(block_m, block_n, block_k, num_sms=num_sms)
    sched = ScheduleContext(m_local, n, k, gemm)
    first, last, step = sched.persistent_tile_range()
    for t in range(first, last, step):
        tile = sched.get_tile_from_idx(t)
        rows, cols = tile.indices()
        c = gemm.reduce_axis(a, b, tile).to(tl.float16)
        out = c_ptr + (rows + rank * m_local)[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(out, c, mask=(rows[:, None] < m_local) & (cols[None, :] < n))


@requires_shmem
@triton.jit
def my_fused_matmul_allgather_bulk_tritonblas_kernel(
    a_ptr, b_ptr, c_ptr, m_local, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    rank, peer, chunk_elems, done_counter_ptr,
    block_m: tl.constexpr, block_n: tl.constexpr, block_k: tl.constexpr, num_sms: tl.constexpr,
):
    a = make_tensor_view(a_ptr, m_local, k, stride_am, stride_ak)
    b = make_tensor_view(b_ptr, k, n, stride_bk, stride_bn)
    gemm = GemmContext(block_m, block_n, block_k, num_sms=num_sms)
    sched = ScheduleContext(m_local, n, k, gemm)
    first, last, step = sched.persistent_tile_range()
    for t in range(first, last, step):
        tile = sched.get_tile_from_idx(t)
        rows, cols = tile.indices()
        c = gemm.reduce_axis(a, b, tile).to(tl.float16)
        out = c_ptr + (rows + rank * m_local)[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(out, c, mask=(rows[:, None] < m_local) & (cols[None, :] < n))
    # The last program to finish sends the whole shard.
    if tl.atomic_add(done_counter_ptr, 1, sem="release", scope="gpu") == num_sms - 1:
        shard = c_ptr + rank * chunk_elems
        shmem_backend.put(shard, shard, chunk_elems, peer)
        shmem_backend.quiet()


class ShmemTritonTest(MultiProcContinuousTest):
    @property
    def device(self) -> torch.device:
        return torch.device(device_type, self.rank)

    def _init(self) -> None:
        device_module.set_device(self.device)
        symm_mem.set_backend("NVSHMEM")

    @requires_triton()
    def test_triton_put(self) -> None:
        self._init()
        group = dist.distributed_c10d._get_default_group().group_name
        src = symm_mem.empty(8, dtype=torch.int64, device=self.device).fill_(self.rank + 1)
        dst = symm_mem.empty(8, dtype=torch.int64, device=self.device).fill_(-1)
        symm_mem.rendezvous(src, group=group)
        symm_mem.rendezvous(dst, group=group)
        dist.barrier()
        if self.rank == 0:
            my_put_kernel[(1,)](dst, src, 8, 1)
        dist.barrier()
        if self.rank == 1:
            torch.testing.assert_close(dst, torch.full_like(dst, 1))

    @requires_triton()
    @parametrize("chunk_per_wg", [64, 1000])
    def test_triton_parallel_put(self, chunk_per_wg: int) -> None:
        self._init()
        group = dist.distributed_c10d._get_default_group().group_name
        total = 4096
        buf = symm_mem.empty(total, dtype=torch.float16, device=self.device).fill_(self.rank)
        symm_mem.rendezvous(buf, group=group)
        dist.barrier()
        if self.rank == 0:
            grid = (triton.cdiv(total, chunk_per_wg),)
            my_parallel_put_quiet_kernel[grid](buf, total, 1, chunk_per_wg=chunk_per_wg)
        dist.barrier()
        if self.rank == 1:
            torch.testing.assert_close(buf, torch.zeros_like(buf))


instantiate_parametrized_tests(ShmemTritonTest)

if __name__ == "__main__":
    run_tests()
