"""A deliberately wrong put: it skips the message's last 16 bytes. symmem must catch it
(exit 3, the row named): build it and run it as docs/kernels.md says, on the GPU machine."""

import triton
import triton.language as tl

import nvshmem_device as nv

SYMMEM_KERNELS = {"put": "short_put"}


@triton.jit
def short_put(dst, src, nbytes, chunk, peer):
    off = tl.program_id(0).to(tl.int64) * chunk
    n = tl.minimum(chunk, nbytes - 16 - off)
    if n > 0:
        nv.putmem_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, n, peer)
