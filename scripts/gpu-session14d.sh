#!/usr/bin/env bash
# Fourteenth session, on one H200 (two ranks sharing it, SYMMEM_TEST_MPG=1): the scratch
# guard must not fail a healthy implementation: every collective of triton and
# copy-engine (combine staged and pulling, all-reduce one-shot and two-shot, under
# --graph too) and the users' example kernels, 0 wrong.
# usage: scripts/gpu-session14d.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
for f in one_shot_all_reduce push_collectives moe_all_to_all; do
  "$bin" kernels build examples/$f.py --arch 90 --out "$k" > /dev/null 2>&1; echo "-> kernels build $f: rc=$?"
done
small="--tokens 500 --hidden 1000 --experts 12 --topk 3"
TAILN=3 two bench --op collectives --impl triton,copy-engine --min-size 4K --max-size 4M --factor 32 --reps 2 $small
TAILN=3 two bench --op all-reduce --impl triton --algo two-shot --min-size 4K --max-size 4M --factor 32 --reps 2
TAILN=3 two bench --op combine --impl triton --algo staged --reps 2 $small
TAILN=3 two bench --op all-reduce,all-gather,broadcast --impl triton --graph --min-size 4K --max-size 1M --factor 16 --reps 2
TAILN=3 two bench --kernels "$k" --op collectives --impl one-shot-all-reduce,push-collectives,moe-all-to-all --min-size 4K --max-size 4M --factor 32 --reps 2 $small
for f in "$res"/out0.txt; do :; done
grep -h "past the scratch\|wrong bytes" "$res"/out*.txt | head -5
left
