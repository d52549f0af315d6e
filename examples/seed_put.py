"""The seed's put kernel, as a PyTorch user has it (torch 2.8's NVSHMEM-for-Triton API).

Rank 0 writes 8 bytes of 5 into rank 1 with nvshmem.putmem_block from a Triton kernel;
rank 1 prints `Rank 1: received out=[5, 5, 5, 5, 5, 5, 5, 5]`. With torch 2.8 and Triton
(torch 2.11 has neither putmem_block nor enable_triton):

    torchrun --nproc_per_node 2 examples/seed_put.py

symmem builds and runs the same kernel, unchanged, with torch 2.11 or without torch:

    bin/symmem kernels build examples/seed_put.py --out mykernels
    bin/symmem run put --kernels mykernels --impl seed-put

numel and peer are tl.constexpr: symmem builds the kernel for the sizes given with
--sizes (8 bytes by default) and for every peer up to rank 7; BLOCK_SIZE, which the body
never reads, is given any value, and the build says so (docs/kernels.md, "Kernels
written for PyTorch").
"""

import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import torch.distributed._symmetric_memory._nvshmem_triton as nvshmem
import triton
import triton.language as tl


@triton.jit
def put_kernel(
    dst_ptr,
    src_ptr,
    numel: tl.constexpr,
    peer: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    nvshmem.putmem_block(dst_ptr, src_ptr, numel, peer)


def main():
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    symm_mem.set_backend("NVSHMEM")
    nvshmem_lib = nvshmem.enable_triton()
    group_name = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(group_name)

    msg_size_bytes = 8
    BLOCK_SIZE = 8
    dtype = torch.int8
    numel = msg_size_bytes // dtype.itemsize
    val = 5
    inp = symm_mem.empty(numel, dtype=dtype, device="cuda").fill_(val)
    out = symm_mem.empty(numel, dtype=dtype, device="cuda").fill_(-1)
    inp_hdl = symm_mem.rendezvous(inp, group=group_name)
    out_hdl = symm_mem.rendezvous(out, group=group_name)

    peer = 1 - rank
    if rank == 0:
        dst_ptr = out_hdl.buffer_ptrs[rank]
        src_ptr = inp_hdl.buffer_ptrs[rank]
        put_kernel[(1, 1, 1)](dst_ptr, src_ptr, numel=numel, peer=peer, BLOCK_SIZE=BLOCK_SIZE, extern_libs=nvshmem_lib)

    dist.barrier()
    if rank == 1:
        print(f"Rank {rank}: received out={out.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
