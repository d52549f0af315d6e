"""The 15 kernels of PyTorch's test/distributed/test_nvshmem_triton.py (its 2026 form,
for torch 2.11's NVSHMEM-for-Triton module), as that file declares them: the same
names, parameters and NVSHMEM calls. PyTorch is BSD-3-Clause licensed (Copyright (c)
Facebook, Inc. and its affiliates; see PyTorch's LICENSE). The bodies of
my_barrier_test_kernel and my_sync_test_kernel, which carry the test's own logic, are
written here around the same calls.

symmem's CPU tests run `symmem kernels build --check` on this file: every kernel is either
served (put, get with --const nbi=0,1, put-signal, wait-signal, all-to-all, broadcast,
all-reduce) or listed as not served with the reason.
"""

import triton
import triton.language as tl

import torch.distributed._symmetric_memory._nvshmem_triton as nvshmem
from torch.distributed._symmetric_memory._nvshmem_triton import requires_nvshmem


@requires_nvshmem
@triton.jit
def my_put_kernel(
    dest,
    src,
    nelems,
    pe,
):
    nvshmem.put(dest, src, nelems, pe)


@requires_nvshmem
@triton.jit
def my_get_kernel(
    dest,
    src,
    nelems,
    pe,
    nbi: tl.constexpr,
):
    if nbi:
        nvshmem.get_nbi(dest, src, nelems, pe)
        nvshmem.quiet()
    else:
        nvshmem.get(dest, src, nelems, pe)


@requires_nvshmem
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
    nvshmem.putmem_signal_block(dst, src, size_bytes, signal, sig_val, sig_op, peer)


@requires_nvshmem
@triton.jit
def my_signal_wait_until_kernel(signal, cmp_op, cmp_val):
    nvshmem.signal_wait_until(signal, cmp_op, cmp_val)


@requires_nvshmem
@triton.jit
def my_signal_op_kernel(
    sig_addr,
    signal,
    sig_op,
    peer,
):
    nvshmem.signal_op(sig_addr, signal, sig_op, peer)


@requires_nvshmem
@triton.jit
def my_wait_until_kernel(
    ivar,
    cmp_op,
    cmp_val,
):
    nvshmem.wait_until(ivar, cmp_op, cmp_val)


@requires_nvshmem
@triton.jit
def my_fence_kernel():
    nvshmem.fence()


@requires_nvshmem
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
    nvshmem.put(dst1, src1, nelems, peer)
    nvshmem.fence()
    nvshmem.put(dst2, src2, nelems, peer)
    nvshmem.fence()
    nvshmem.put(flag_dst, flag_src, 1, peer)


@requires_nvshmem
@triton.jit
def my_put_with_quiet_kernel(
    dst,
    src,
    flag_dst,
    flag_src,
    nelems,
    peer,
):
    nvshmem.put(dst, src, nelems, peer)
    nvshmem.quiet()
    nvshmem.put(flag_dst, flag_src, 1, peer)


@requires_nvshmem
@triton.jit
def my_barrier_test_kernel(
    dst,
    src,
    nelems,
):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    if me == 0:
        tl.store(src.to(tl.pointer_type(tl.int32)), 42)
        pe = 1
        while pe < npes:
            nvshmem.put(dst, src, nelems, pe)
            pe += 1
    nvshmem.barrier_all()
    if me != 0:
        got = dst.to(tl.pointer_type(tl.int32))
        tl.store(got, tl.load(got) + 1)


@requires_nvshmem
@triton.jit
def my_barrier_all_kernel():
    nvshmem.barrier_all()


@requires_nvshmem
@triton.jit
def my_sync_test_kernel(
    local_data,
    remote_data,
    nelems,
):
    me = nvshmem.my_pe()
    npes = nvshmem.n_pes()
    tl.store(local_data.to(tl.pointer_type(tl.int32)), me + 100)
    nvshmem.sync_all()
    nvshmem.get(remote_data, local_data, nelems, (me + 1) % npes)


@requires_nvshmem
@triton.jit
def my_alltoall_kernel(
    team_handle,
    dst,
    src,
    nelems_per_pe,
):
    nvshmem.alltoall(team_handle, dst, src, nelems_per_pe)


@requires_nvshmem
@triton.jit
def my_broadcast_kernel(
    team_handle,
    dst,
    src,
    nelems,
    pe_root,
):
    nvshmem.broadcast(team_handle, dst, src, nelems, pe_root)


@requires_nvshmem
@triton.jit
def my_reduce_kernel(
    team_handle,
    dest_tensor,
    source_tensor,
    nreduce,
    operation: tl.constexpr,
):
    nvshmem.reduce(team_handle, dest_tensor, source_tensor, nreduce, operation)
