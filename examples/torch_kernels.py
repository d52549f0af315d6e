"""Kernels written for torch 2.11's NVSHMEM-for-Triton API: put, get, put with a signal
and the waiting side's kernel, puts ordered by fences before a flag, and a barrier, as
PyTorch's own tests write them.

With torch 2.11 and Triton, `torchrun --nproc_per_node 2 examples/torch_kernels.py` runs
the put. symmem finds the kernels by the NVSHMEM calls they make, matches their
parameters by name (dest, src, nelems, pe, ...), and builds and runs them unchanged,
with torch or without it:

    bin/symmem kernels build --check examples/torch_kernels.py
    bin/symmem kernels build examples/torch_kernels.py --arch 90 --out mykernels
    bin/symmem run put-signal --kernels mykernels --impl torch-kernels
    bin/symmem bench --kernels mykernels --impl torch-kernels,triton --op put,get,put-signal

torch_kernels.symmem.json beside it says what no name can: the value of my_get_kernel's
tl.constexpr nbi, and that its pointers are int64 (nelems counts 8-byte elements).
my_put_with_fence_kernel serves put-flag's fence variant (its two puts each move half
the message), my_barrier_all_kernel barrier's barrier-all:

    bin/symmem run put-flag --kernels mykernels --impl torch-kernels
    bin/symmem run barrier --kernels mykernels --impl torch-kernels
"""

import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import torch.distributed._symmetric_memory._nvshmem_triton as nvshmem
import triton
import triton.language as tl
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
    nbi: tl.constexpr,  # use nonblocking interface if True
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
def my_barrier_all_kernel():
    nvshmem.barrier_all()


def main():
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    symm_mem.set_backend("NVSHMEM")
    group_name = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(group_name)
    nelems = 5
    src = symm_mem.empty(nelems, dtype=torch.int64, device="cuda").fill_(42 + rank)
    dst = symm_mem.empty(nelems, dtype=torch.int64, device="cuda").fill_(-999)
    symm_mem.rendezvous(src, group=group_name)
    symm_mem.rendezvous(dst, group=group_name)
    dist.barrier()
    if rank == 0:
        my_put_kernel[(1,)](dst, src, nelems, 1 - rank)
    dist.barrier()
    if rank == 1:
        print(f"Rank {rank}: received out={dst.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
