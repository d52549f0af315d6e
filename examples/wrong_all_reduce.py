"""A deliberately wrong all-reduce: it leaves the last peer's part out of every sum
(on two ranks, each rank's output is its own input). symmem must catch it (exit 3,
the wrong elements counted): build it and run it as docs/kernels.md says."""

import triton
import triton.language as tl

import nvshmem_device as nv

SYMMEM_KERNELS = {"all-reduce": "skip_last_bf16"}


@triton.jit
def skip_last_bf16(send, recv, scratch, nelem, sig, seq, me, n, limit_ns, mailbox):
    pid = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    chunk = ((nelem + grid - 1) // grid + 7) // 8 * 8
    lo = pid * chunk
    m = tl.maximum(tl.minimum(chunk, nelem - lo), 0)
    for start in range(0, m, 1024):
        offs = lo + start + tl.arange(0, 1024)
        mask = offs < lo + m
        tl.store(recv + offs, tl.load(send + offs, mask=mask, other=0.0), mask=mask)
