#!/usr/bin/env bash
# Thirteenth session, fourth call, on one H200 (two ranks sharing it): a user's
# all-reduce that waits without the wait limit and mailbox (nvshmem_signal_wait_until),
# with rank 1 absent from measurement 1: first run (before the mark) the job ran into
# --timeout; with the mark bench sets after a measurement's first warm-up, the host
# gives up on rank 0's kernel past --wait-limit x 1.5; the bounded example for
# comparison; a plain bench of symmem's own, 0 wrong.
# usage: scripts/gpu-usercoll13d.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
cat > "$k/unbounded_all_reduce.py" <<'PY'
import triton
import triton.language as tl
import nvshmem_device as nv

SYMMEM_KERNELS = {"all-reduce": "unbounded_bf16"}


@triton.jit
def unbounded_bf16(send, recv, scratch, nelem, sig, seq, me, n):
    pid = tl.program_id(0).to(tl.int64)
    grid = tl.num_programs(0).to(tl.int64)
    chunk = ((nelem + grid - 1) // grid + 7) // 8 * 8
    lo = pid * chunk
    m = tl.maximum(tl.minimum(chunk, nelem - lo), 0)
    half = (seq % 2) * n * nelem
    words = sig.to(tl.int64) + pid * n * 8
    for i in range(1, n):
        q = (me + i) % n
        nv.putmem_signal_block(scratch.to(tl.int64) + (half + me * nelem + lo) * 2, send.to(tl.int64) + lo * 2, m * 2,
                               words + me * 8, seq.to(tl.uint64), nv.SIGNAL_SET, q)
    for i in range(1, n):
        q = (me + i) % n
        nv.signal_wait_until(words + q * 8, nv.CMP_GE, seq.to(tl.uint64))
    for start in range(0, m, 1024):
        offs = lo + start + tl.arange(0, 1024)
        mask = offs < lo + m
        acc = tl.zeros([1024], tl.float32)
        for r in range(0, n):
            if r == me:
                acc += tl.load(send + offs, mask=mask, other=0.0).to(tl.float32)
            else:
                acc += tl.load(scratch + half + r * nelem + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(recv + offs, acc.to(tl.bfloat16), mask=mask)
PY
"$bin" kernels build "$k/unbounded_all_reduce.py" --arch 90 --warps 4,32 --out "$k/mine" 2>&1 | grep -av '^wrote' | tail -3; echo "-> build unbounded rc=${PIPESTATUS[0]}"
"$bin" kernels build examples/one_shot_all_reduce.py --arch 90 --warps 4,32 --out "$k/mine" > /dev/null 2>&1; echo "-> build one_shot rc=$?"
TAILN=4 two bench --kernels "$k/mine" --impl unbounded-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2
TAILN=4 SYMMEM_TEST_FAULT=1:absent:1 two bench --kernels "$k/mine" --impl unbounded-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 3 --wait-limit 2s
TAILN=4 SYMMEM_TEST_FAULT=1:absent:1 two bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 3 --wait-limit 2s
TAILN=6 two bench --op put,all-reduce --impl triton --min-size 4K --max-size 16M --factor 64 --reps 2
left
