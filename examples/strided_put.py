"""A user's put and get for symmem that split the message differently from symmem's own.

symmem's put_block gives block b one contiguous chunk, [b*chunk, (b+1)*chunk). These
kernels ignore chunk and interleave: the message is cut into 16 KiB stripes and block b
moves stripes b, b+G, b+2G, ... (G = the grid's blocks), each with one
nvshmemx_putmem_block (getmem_block). Every byte is still moved exactly once, which is
all symmem's checks ask.

Build it on a machine with Triton and the NVSHMEM wheel (from a symmem checkout):

    bin/symmem kernels build examples/strided_put.py --arch 90 --out mykernels

then run and bench it beside symmem's own (docs/kernels.md):

    bin/symmem run put --kernels mykernels --impl strided-put
    bin/symmem bench --kernels mykernels --impl strided-put,triton,copy-engine --op put,get
"""

import triton
import triton.language as tl

import nvshmem_device as nv  # symmem's NVSHMEM bindings (kernels/triton), on the path at build time

# Which function serves which operation; symmem passes each the arguments of its
# signature, by name and in order (docs/kernels.md).
SYMMEM_KERNELS = {"put": "strided_put", "get": "strided_get"}


@triton.jit
def strided_put(dst, src, nbytes, chunk, peer):
    stripe = 16384
    b = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    stripes = (nbytes + stripe - 1) // stripe
    for s in range(b, stripes, grid):
        off = s * stripe
        n = tl.minimum(nbytes - off, stripe)
        nv.putmem_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, n, peer)


@triton.jit
def strided_get(dst, src, nbytes, chunk, peer):
    stripe = 16384
    b = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    stripes = (nbytes + stripe - 1) // stripe
    for s in range(b, stripes, grid):
        off = s * stripe
        n = tl.minimum(nbytes - off, stripe)
        nv.getmem_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, n, peer)
