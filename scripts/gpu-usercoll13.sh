#!/usr/bin/env bash
# Thirteenth session, on one H200 (two or three ranks sharing it, SYMMEM_TEST_MPG=1;
# times mean nothing): a user's all-reduce kernels (examples/one_shot_all_reduce.py)
# built with `symmem kernels build` and taken by run and bench beside symmem's own,
# bf16 and float32, 2 and 3 ranks; the drop and absent faults; a kernel that leaves a
# peer's part out (examples/wrong_all_reduce.py) failing run and bench (exit 3).
# usage: scripts/gpu-usercoll13.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
s=$EPOCHREALTIME; "$bin" kernels build examples/one_shot_all_reduce.py --arch 90 --out "$k/mine" 2>&1 | tail -5; echo "-> kernels build one_shot_all_reduce: rc=${PIPESTATUS[0]} in $(el "$s") s"
"$bin" kernels list "$k/mine" 2>&1 | grep -av "^[├┌└]" | cut -c1-150 | tail -4; echo "-> kernels list: rc=${PIPESTATUS[0]}"
TAILN=6 two run all-reduce --kernels "$k/mine" --impl one-shot-all-reduce --count 1M --dtype bf16
TAILN=6 two run all-reduce --kernels "$k/mine" --impl one-shot-all-reduce --count 1000003 --dtype float32
TAILN=6 ranks 3 run all-reduce --kernels "$k/mine" --impl one-shot-all-reduce --count 4099 --dtype bf16
TAILN=10 two bench --kernels "$k/mine" --impl one-shot-all-reduce,triton --op all-reduce --min-size 8K --max-size 64M --factor 8 --reps 2
TAILN=8 ranks 3 bench --kernels "$k/mine" --impl one-shot-all-reduce,triton --op all-reduce --dtype float32 --min-size 4K --max-size 4M --factor 32 --reps 2
TAILN=6 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2
TAILN=6 SYMMEM_TEST_FAULT=1:absent:1 two bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 3 --wait-limit 2s
s=$EPOCHREALTIME; "$bin" kernels build examples/wrong_all_reduce.py --arch 90 --out "$k/wrong" 2>&1 | tail -3; echo "-> kernels build wrong_all_reduce: rc=${PIPESTATUS[0]} in $(el "$s") s"
TAILN=5 two run all-reduce --kernels "$k/wrong" --impl wrong-all-reduce --count 1M --dtype bf16
TAILN=5 two bench --kernels "$k/wrong" --impl wrong-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2
TAILN=4 two run all-reduce --kernels "$k/wrong" --impl wrong-all-reduce --count 1M --dtype float32
tar -C "$k" -czf "$OUT/usercoll13-kernels.tgz" mine wrong 2>/dev/null
left
