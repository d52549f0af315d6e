#!/usr/bin/env bash
# Thirteenth session, second call, on one H200 (two or three ranks sharing it,
# SYMMEM_TEST_MPG=1; times mean nothing): a user's reduce-scatter, all-gather,
# all-to-all and broadcast (examples/push_collectives.py) and all-reduce
# (examples/one_shot_all_reduce.py) run and benched beside symmem's own on 2 and 3
# ranks, under --graph too; the drop fault on each op; an element type the
# implementation has no kernel for refused before any rank starts (exit 2).
# usage: scripts/gpu-usercoll13b.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
s=$EPOCHREALTIME; "$bin" kernels build examples/push_collectives.py --arch 90 --out "$k/mine" 2>&1 | grep -av '^wrote' | tail -5; echo "-> kernels build push_collectives: rc=${PIPESTATUS[0]} in $(el "$s") s"
s=$EPOCHREALTIME; "$bin" kernels build examples/one_shot_all_reduce.py --arch 90 --out "$k/mine" 2>&1 | grep -av '^wrote' | tail -5; echo "-> kernels build one_shot_all_reduce: rc=${PIPESTATUS[0]} in $(el "$s") s"
"$bin" kernels list "$k/mine" 2>&1 | grep -a 'push-collectives\|one-shot' | cut -c1-120 | sort -u | head -12; echo "-> kernels list: rc=${PIPESTATUS[0]}"
for op in reduce-scatter all-gather all-to-all broadcast; do
  TAILN=5 two run $op --kernels "$k/mine" --impl push-collectives --count 1000016 --dtype bf16
  TAILN=5 ranks 3 run $op --kernels "$k/mine" --impl push-collectives --count 4104 --dtype float32
done
TAILN=14 two bench --kernels "$k/mine" --impl push-collectives,triton --op reduce-scatter,all-gather,all-to-all,broadcast --min-size 8K --max-size 32M --factor 64 --reps 2
TAILN=14 ranks 3 bench --kernels "$k/mine" --impl push-collectives,one-shot-all-reduce --op all-reduce,reduce-scatter,all-gather,all-to-all,broadcast --dtype float32 --min-size 12K --max-size 3M --factor 16 --reps 2
TAILN=10 two bench --kernels "$k/mine" --impl one-shot-all-reduce,push-collectives --op all-reduce,all-gather --min-size 4K --max-size 1M --factor 16 --reps 3 --graph
for op in reduce-scatter all-gather all-to-all broadcast; do
  TAILN=3 SYMMEM_TEST_FAULT=0:drop two bench --kernels "$k/mine" --impl push-collectives --op $op --min-size 1M --max-size 1M --reps 2
done
"$bin" kernels build examples/wrong_all_reduce.py --arch 90 --out "$k/wrong" > /dev/null 2>&1
s=$EPOCHREALTIME; "$bin" run all-reduce --kernels "$k/wrong" --impl wrong-all-reduce --nproc 1 --dtype float32 2>&1 | tail -2; echo "-> run --dtype float32 of a bf16-only user all-reduce: rc=${PIPESTATUS[0]} in $(el "$s") s (want 2, before any rank)"
left
