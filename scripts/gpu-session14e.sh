#!/usr/bin/env bash
# Fourteenth session, on one H200 (two ranks sharing it, SYMMEM_TEST_MPG=1): a user's
# kernels given exactly the scratch they are promised at every size (the guard right
# after it): the examples' all-reduce, all-gather and MoE kernels over several sizes,
# 0 wrong; the build's compile workers now set their parent-death signal.
# usage: scripts/gpu-session14e.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
for f in one_shot_all_reduce push_collectives moe_all_to_all; do
  s=$EPOCHREALTIME; "$bin" kernels build examples/$f.py --arch 90 --out "$k" > "$k/$f.log" 2>&1; echo "-> kernels build $f: rc=$? in $(el "$s") s"
done
small="--tokens 500 --hidden 1000 --experts 12 --topk 3"
TAILN=4 two bench --kernels "$k" --op all-reduce,all-gather,reduce-scatter,dispatch,combine --impl one-shot-all-reduce,push-collectives,moe-all-to-all,triton --min-size 4K --max-size 16M --factor 8 --reps 2 $small
TAILN=4 ranks 3 bench --kernels "$k" --op all-reduce,all-to-all,combine --dtype float32 --impl one-shot-all-reduce,push-collectives,moe-all-to-all --min-size 4K --max-size 4M --factor 16 --reps 2 $small
TAILN=3 two run all-reduce --kernels "$k" --impl one-shot-all-reduce --count 4099
left
