"""The Triton kernels symmem ships, compiled ahead of time by scripts/build-kernels.py.

Every data kernel splits nbytes into chunks of `chunk` bytes, one per program (block):
block b moves bytes [b*chunk, min((b+1)*chunk, nbytes)). Pointers are symmetric
addresses from nvshmem_malloc; `peer` is the remote PE.
"""

import triton
import triton.language as tl

import nvshmem_device as nv


@triton.jit
def put_block(dst, src, nbytes, chunk, peer):
    off = tl.program_id(0).to(tl.int64) * chunk
    n = tl.minimum(chunk, nbytes - off)
    if n > 0:
        nv.putmem_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, n, peer)


@triton.jit
def get_block(dst, src, nbytes, chunk, peer):
    off = tl.program_id(0).to(tl.int64) * chunk
    n = tl.minimum(chunk, nbytes - off)
    if n > 0:
        nv.getmem_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, n, peer)


@triton.jit
def put_signal_block(dst, src, nbytes, chunk, sig, peer):
    # Every block adds 1 to the peer's signal once its chunk has landed, so the receiver
    # waits for the signal to reach (its value before) + number of blocks.
    off = tl.program_id(0).to(tl.int64) * chunk
    n = tl.minimum(chunk, nbytes - off)
    nv.putmem_signal_block(dst.to(tl.int64) + off, src.to(tl.int64) + off, tl.maximum(n, 0),
                           sig.to(tl.int64), tl.full([], 1, tl.uint64), nv.SIGNAL_ADD, peer)


@triton.jit
def wait_signal(sig, value):
    nv.signal_wait_until(sig.to(tl.int64), nv.CMP_GE, value)


@triton.jit
def global_timer():
    # The GPU's nanosecond clock (%globaltimer), for per-round stamps.
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.uint64,
                                     is_pure=False, pack=1)


@triton.jit
def pingpong(dst, src, sig, nbytes, iters, peer, initiator, stamps):
    # One block. The initiator puts src into the peer's dst with a signal and waits for
    # the answer; the other side waits, then puts its own src into the initiator's dst.
    # Every round carries its number in the payload's first 8 bytes, and each side checks,
    # once the round's signal is there, that its dst holds this round's number: data that
    # did not arrive (or arrived after its signal) is counted in stamps[iters+1]; the host
    # checks the rest of the payload after the run. Signals count up, so no reset is
    # needed between rounds; the host zeroes them before a run. The initiator stamps the
    # clock before the first round and after each round into stamps[0..iters].
    tag_in = dst.to(tl.pointer_type(tl.uint64))
    tag_out = src.to(tl.pointer_type(tl.uint64))
    wrong = tl.full([], 0, tl.uint64)
    if initiator != 0:
        tl.store(stamps, global_timer())
    for i in range(iters):
        v = (i + 1).to(tl.uint64)
        if initiator != 0:
            tl.store(tag_out, v)
            tl.debug_barrier()
            nv.putmem_signal_block(dst.to(tl.int64), src.to(tl.int64), nbytes, sig.to(tl.int64),
                                   v, nv.SIGNAL_SET, peer)
            nv.signal_wait_until(sig.to(tl.int64), nv.CMP_GE, v)
            tl.store(stamps + i + 1, global_timer())
            wrong += (tl.load(tag_in, volatile=True) != v).to(tl.uint64)
        else:
            nv.signal_wait_until(sig.to(tl.int64), nv.CMP_GE, v)
            wrong += (tl.load(tag_in, volatile=True) != v).to(tl.uint64)
            tl.store(tag_out, v)
            tl.debug_barrier()
            nv.putmem_signal_block(dst.to(tl.int64), src.to(tl.int64), nbytes, sig.to(tl.int64),
                                   v, nv.SIGNAL_SET, peer)
    tl.store(stamps + iters + 1, wrong)


# name -> (function, ordered signature). Explicit signatures keep Triton from folding an
# argument that happens to equal 1 into a constant (the seed kernel lost `peer` that way).
KERNELS = {
    "put_block": (put_block, {"dst": "*i8", "src": "*i8", "nbytes": "i64", "chunk": "i64", "peer": "i32"}),
    "get_block": (get_block, {"dst": "*i8", "src": "*i8", "nbytes": "i64", "chunk": "i64", "peer": "i32"}),
    "put_signal_block": (put_signal_block, {"dst": "*i8", "src": "*i8", "nbytes": "i64", "chunk": "i64",
                                            "sig": "*u64", "peer": "i32"}),
    "wait_signal": (wait_signal, {"sig": "*u64", "value": "u64"}),
    "pingpong": (pingpong, {"dst": "*i8", "src": "*i8", "sig": "*u64", "nbytes": "i64", "iters": "i32",
                            "peer": "i32", "initiator": "i32", "stamps": "*u64"}),
}
