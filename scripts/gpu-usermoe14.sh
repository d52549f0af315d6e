#!/usr/bin/env bash
# Fourteenth session, on one H200 (two or three ranks sharing it, SYMMEM_TEST_MPG=1;
# times mean nothing): a user's MoE dispatch and combine (examples/moe_all_to_all.py)
# built with `symmem kernels build` and taken by run and bench beside symmem's own
# triton, bf16 and float32, 2 and 3 ranks; the drop and absent faults.
# usage: scripts/gpu-usermoe14.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
s=$EPOCHREALTIME; "$bin" kernels build examples/moe_all_to_all.py --arch 90 --out "$k/moe" > "$k/build.txt" 2>&1
rc=$?; tail -4 "$k/build.txt"; echo "-> kernels build moe_all_to_all: rc=$rc in $(el "$s") s"
[[ $rc == 0 ]] || { grep -A9 "^triton.compiler.errors.CompilationError" "$k/build.txt" | head -60; exit 1; }
tar -C "$k" -czf "$OUT/usermoe14-kernels.tgz" moe 2>/dev/null
"$bin" kernels list "$k/moe" 2>&1 | grep -av "^[├┌└]" | cut -c1-150 | tail -5; echo "-> kernels list: rc=${PIPESTATUS[0]}"
small="--tokens 500 --hidden 1000 --experts 12 --topk 3"
TAILN=6 two run dispatch --kernels "$k/moe" --impl moe-all-to-all
TAILN=6 two run combine --kernels "$k/moe" --impl moe-all-to-all
TAILN=6 two run combine --kernels "$k/moe" --impl moe-all-to-all --dtype float32 $small
TAILN=6 ranks 3 run dispatch --kernels "$k/moe" --impl moe-all-to-all $small --skew 1.2
TAILN=6 ranks 3 run combine --kernels "$k/moe" --impl moe-all-to-all $small --dtype float32
TAILN=10 two bench --kernels "$k/moe" --impl moe-all-to-all,triton --op dispatch,combine --reps 2
TAILN=8 ranks 3 bench --kernels "$k/moe" --impl moe-all-to-all,triton --op dispatch,combine --dtype float32 $small --reps 2
TAILN=6 two bench --kernels "$k/moe" --impl moe-all-to-all --op dispatch,combine --graph --reps 2 $small
TAILN=6 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/moe" --impl moe-all-to-all --op dispatch --reps 2 $small
TAILN=6 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/moe" --impl moe-all-to-all --op combine --reps 2 $small
TAILN=6 SYMMEM_TEST_FAULT=1:absent:1 two bench --kernels "$k/moe" --impl moe-all-to-all --op combine --reps 3 --wait-limit 2s $small
TAILN=4 two bench --kernels "$k/moe" --impl moe-all-to-all --op combine --algo pull $small
left
