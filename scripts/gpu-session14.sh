#!/usr/bin/env bash
# Fourteenth session, on one H200 (ranks sharing it, SYMMEM_TEST_MPG=1; times mean
# nothing): kernels build from outside a checkout (the binary's embedded build script)
# for the put example, the MoE example and the all-reduce example; then the users'
# collectives and MoE kernels once more after their launch paths were made one
# (run, bench, a drop fault), and a bench --dry-run of a GPU sweep beside a real one.
# usage: scripts/gpu-session14.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
repo=$PWD
bin=$repo/bin/symmem
k=$(mktemp -d)
(
  cd "$k" || exit 1
  for f in strided_put moe_all_to_all one_shot_all_reduce; do
    s=$EPOCHREALTIME; "$bin" kernels build "$repo/examples/$f.py" --arch 90 --out "$k/out" > "$k/build-$f.txt" 2>&1
    rc=$?; tail -1 "$k/build-$f.txt"; echo "-> kernels build $f from $k (no checkout here): rc=$rc in $(el "$s") s"
    [[ $rc == 0 ]] || grep -A9 "^triton.compiler.errors.CompilationError\|^symmem:" "$k/build-$f.txt" | head -20
  done
  ls /tmp | grep -c "^symmem-build-" | sed 's/^/build directories left in \/tmp: /'
)
"$bin" kernels list "$k/out" 2>&1 | grep -av "^[├┌└]" | cut -c1-150 | tail -4
small="--tokens 500 --hidden 1000 --experts 12 --topk 3"
TAILN=5 two run put --kernels "$k/out" --impl strided-put
TAILN=5 two run dispatch --kernels "$k/out" --impl moe-all-to-all $small
TAILN=5 ranks 3 run combine --kernels "$k/out" --impl moe-all-to-all $small --dtype float32
TAILN=5 two run all-reduce --kernels "$k/out" --impl one-shot-all-reduce --count 1000003 --dtype bf16
TAILN=8 two bench --kernels "$k/out" --impl moe-all-to-all,triton --op dispatch,combine,all-reduce --reps 2 $small --min-size 64K --max-size 4M --factor 8
TAILN=8 two bench --kernels "$k/out" --impl one-shot-all-reduce,triton --op all-reduce --reps 2 --min-size 64K --max-size 4M --factor 8
TAILN=4 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/out" --impl moe-all-to-all --op combine --reps 2 $small
TAILN=4 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/out" --impl one-shot-all-reduce --op all-reduce --reps 2 --min-size 1M --max-size 1M
"$bin" bench --dry-run --backend nvshmem --kernels "$k/out" --nproc 8 --op all-reduce,dispatch,combine --impl one-shot-all-reduce,moe-all-to-all,triton,nccl --min-size 1M 2>&1 | tail -9
left
