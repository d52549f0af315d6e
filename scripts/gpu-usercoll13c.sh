#!/usr/bin/env bash
# Thirteenth session, third call, on one H200 (two ranks sharing it): the review's
# fixes to a user's collectives: run without --dtype (the default type), --blocks 200
# and --algo refused before any rank starts, the result header naming where the user's
# kernels came from, a compare of two builds noting it.
# usage: scripts/gpu-usercoll13c.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
# runjson OUT ARGS...: two ranks under torchrun's variables, rank 0's stdout (the JSON) to OUT.
runjson() {
  local out=$1 r; shift
  port=$((${port:-29700} + 2))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=j$port \
      timeout 200 "$bin" "$@" --launcher torchrun --backend nvshmem > "$k/o$r.json" 2> "$k/e$r.txt" &
  done
  wait
  cp "$k/o0.json" "$out"; tail -n 2 "$k/e0.txt" "$k/e1.txt" | cut -c1-200
}
"$bin" kernels build examples/one_shot_all_reduce.py --arch 90 --warps 4,32 --out "$k/mine" > /dev/null 2>&1; echo "-> build rc=$?"
TAILN=5 two run all-reduce --kernels "$k/mine" --impl one-shot-all-reduce
TAILN=2 two run all-reduce --kernels "$k/mine" --impl one-shot-all-reduce --blocks 200
TAILN=2 two bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --algo one-shot
runjson "$k/a.json" bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2 --json
grep -a -A4 '"user_kernels"' "$k/a.json" | head -6
sed 's/^BLOCK = tl.constexpr(1024)/BLOCK = tl.constexpr(2048)/' examples/one_shot_all_reduce.py > "$k/one_shot_all_reduce.py"
"$bin" kernels build "$k/one_shot_all_reduce.py" --arch 90 --warps 4,32 --out "$k/mine" > /dev/null 2>&1; echo "-> rebuild (BLOCK 2048) rc=$?"
runjson "$k/b.json" bench --kernels "$k/mine" --impl one-shot-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2 --json
"$bin" bench compare "$k/a.json" "$k/b.json" 2>&1 | tail -6; echo "-> compare rc=${PIPESTATUS[0]}"
"$bin" bench show "$k/b.json" 2>&1 | grep -a '^#' | head -8
left
