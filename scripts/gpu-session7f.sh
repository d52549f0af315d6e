#!/usr/bin/env bash
# Seventh session on nvidia-h200-x2, with the kernels embedded in the binary: the LL
# all-reduce against the push kernel (SYMMEM_LL=0) back to back, twice, with and
# without CUDA graphs; the two-shot all-reduce by steps (SYMMEM_STAGED_STEPS) and
# warps at 16, 64 and 256 MiB; the drop fault with steps. Results in
# session7f-results.tar.gz.
# usage: scripts/gpu-session7f.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
{
SYMMEM_STAGED_STEPS=4 SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 16M --max-size 16M --reps 2 --warps 16 2>&1 | grep -a "wrong bytes$" | tail -1
echo "-> drop fault, two-shot 16M in 4 steps: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
for i in 1 2; do
  b ll-$i --op all-reduce --impl triton,nccl --min-size 4K --max-size 64K --factor 4 --reps 5
  SYMMEM_LL=0 b push-$i --op all-reduce --impl triton --min-size 4K --max-size 64K --factor 4 --reps 5
  b ll-graph-$i --op all-reduce --impl triton,nccl --min-size 4K --max-size 64K --factor 4 --reps 5 --graph
  SYMMEM_LL=0 b push-graph-$i --op all-reduce --impl triton --min-size 4K --max-size 64K --factor 4 --reps 5 --graph
done
for st in 1 2 4 8; do
  for w in 32 16; do
    SYMMEM_STAGED_STEPS=$st b "steps$st-w$w" --op all-reduce --impl triton --algo two-shot --min-size 16M --max-size 256M --factor 4 --reps 3 --warps $w
  done
done
tar -C "$res" -czf "$out/session7f-results.tar.gz" .
for f in ll-1 push-1 ll-graph-1 push-graph-1 ll-2 push-2 ll-graph-2 push-graph-2; do
  echo "== $f"; "$bin" bench show "$res/$f.json" 2>&1 | grep -a 'K │' | cut -c1-90
done
for f in "$res"/steps*.json; do echo "== $(basename $f)"; "$bin" bench show "$f" 2>&1 | grep -a 'M │' | cut -c1-115; done
