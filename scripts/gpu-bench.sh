#!/usr/bin/env bash
# The bench runs behind docs/benchmarks.md's figures, as JSON (render them with
# `symmem bench show FILE`): key sizes one operation at a time and with 2 in flight,
# the full sweep, CUDA graphs, both directions at once, and a corrupted-delivery check.
# Every step runs even when one before it failed; the script exits 1 at the end, listing
# the steps that failed (a status other than 0, or other than 3 for the corrupt check).
# usage: [ONLY=REGEX] scripts/gpu-bench.sh [bin/symmem]   (results in ${OUT:-/tmp}/bench-results.tar.gz)
set -uo pipefail
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
res=$(mktemp -d) || exit 1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
key="--op put,get,put-signal,latency --min-size 1M --max-size 256M --factor 16 --reps 7"
failed=()
# ONLY=REGEX runs the steps whose name matches it.
skip() { [[ -n "${ONLY:-}" && ! $1 =~ $ONLY ]]; }
# check NAME WANT RC START: print NAME's status and time; a status other than WANT fails it.
check() {
  awk -v n="$1" -v s="$4" -v e="$EPOCHREALTIME" -v rc="$3" 'BEGIN { printf "%s: rc=%d in %.1f s\n", n, rc, e - s }'
  if (($3 != $2)); then
    echo "FAILED: $1: rc=$3, want $2"
    failed+=("$1 (rc=$3, want $2)")
  fi
}
# step NAME CMD...: run CMD (at most 240 s), its stdout into NAME.json; it must exit 0.
step() {
  local name=$1; shift
  skip "$name" && return
  local s=$EPOCHREALTIME rc
  timeout 240 "$@" > "$res/$name.json"; rc=$?
  check "$name" 0 $rc "$s"
}
{
  step key "$bin" bench $key --json --plot "$res/key.png"
  step key-overlap2 "$bin" bench $key --overlap 2 --json
  step sweep "$bin" bench --json --plot "$res/sweep.svg"
  step graph-small "$bin" bench --graph --op put,get,put-signal --min-size 8 --max-size 1M --factor 8 --json
  step graph-key "$bin" bench --graph $key --json
  step graph-key-overlap2 "$bin" bench --graph --overlap 2 --op put --min-size 1M --max-size 256M --factor 16 --reps 7 --json
  step bidir "$bin" bench --op put --impl triton,copy-engine --min-size 16M --max-size 256M --factor 16 --bidir --reps 3 --json
  # Collectives through NCCL (the nccl implementation), the sizes of issue 13's table.
  step coll-nccl "$bin" bench --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl nccl --min-size 8K --max-size 512M --factor 4 --reps 5 --json --plot "$res/coll.png"
  step coll-nccl-graph "$bin" bench --graph --op all-reduce --impl nccl --min-size 8K --max-size 1M --factor 8 --json
  # A rank whose NCCL output is sent to scratch must fail the bench (exit 3), not hang.
  if ! skip coll-drop; then
    s=$EPOCHREALTIME
    SYMMEM_TEST_FAULT=1:drop:1 timeout 240 "$bin" bench --op all-reduce,all-gather --impl nccl --min-size 1M --max-size 1M --reps 2 2>&1 | tail -4
    check coll-drop 3 "${PIPESTATUS[0]}" "$s"
  fi
  # Wrong bytes delivered must fail the bench: exit 3 (internal/exitcode).
  if ! skip corrupt; then
    s=$EPOCHREALTIME
    SYMMEM_TEST_FAULT=1:corrupt timeout 240 "$bin" bench --overlap 2 --op put --impl triton --min-size 1M --max-size 1M --reps 2 2>&1 | tail -4
    check corrupt 3 "${PIPESTATUS[0]}" "$s"
  fi
  apps=$(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader) || failed+=("nvidia-smi")
  echo "${apps:-(no process on any GPU)}"
  if grep -qF -- "$(basename "$bin")" <<< "$apps"; then
    echo "FAILED: processes of $bin left on a GPU"
    failed+=("leftover GPU processes")
  fi
  if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
  fi
} 2>&1 | tee "$res/gpu-bench.log"
rc=${PIPESTATUS[0]}
tar -C "$res" -czf "$out/bench-results.tar.gz" . || rc=1
exit $rc
