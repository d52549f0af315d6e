#!/usr/bin/env bash
# The bench runs behind docs/benchmarks.md's figures, as JSON (render them with
# `symmem bench show FILE`): key sizes one operation at a time and with 2 in flight,
# the full sweep, CUDA graphs, both directions at once, and a corrupted-delivery check.
# usage: [ONLY=REGEX] scripts/gpu-bench.sh [bin/symmem]   (results in ${OUT:-/tmp}/bench-results.tar.gz)
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
res=$(mktemp -d)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
key="--op put,get,put-signal,latency --min-size 1M --max-size 256M --factor 16 --reps 7"
# ONLY=REGEX runs the steps whose name matches it.
step() { local name=$1; shift; [[ -n "${ONLY:-}" && ! $name =~ $ONLY ]] && return; local s=$EPOCHREALTIME; timeout 240 "$@" > "$res/$name.json"; local rc=$?
  awk -v n="$name" -v s="$s" -v e="$EPOCHREALTIME" -v rc=$rc 'BEGIN { printf "%s: rc=%d in %.1f s\n", n, rc, e - s }'; }
{
  step key "$bin" bench $key --json --plot "$res/key.png"
  step key-overlap2 "$bin" bench $key --overlap 2 --json
  step sweep "$bin" bench --json --plot "$res/sweep.svg"
  step graph-small "$bin" bench --graph --op put,get,put-signal --min-size 8 --max-size 1M --factor 8 --json
  step graph-key "$bin" bench --graph $key --json
  step graph-key-overlap2 "$bin" bench --graph --overlap 2 --op put --min-size 1M --max-size 256M --factor 16 --reps 7 --json
  step bidir "$bin" bench --op put --impl triton,copy-engine --min-size 16M --max-size 256M --factor 16 --bidir --reps 3 --json
  SYMMEM_TEST_FAULT=1:corrupt "$bin" bench --overlap 2 --op put --impl triton --min-size 1M --max-size 1M --reps 2 2>&1 | tail -4; echo "corrupt: rc=${PIPESTATUS[0]} (want 3)"
  nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | head -3; echo "(no leftover GPU processes above)"
} 2>&1 | tee "$res/gpu-bench.log"
tar -C "$res" -czf "$out/bench-results.tar.gz" .
