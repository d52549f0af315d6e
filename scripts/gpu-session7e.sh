#!/usr/bin/env bash
# Seventh session on nvidia-h200-x2: kernels rebuilt with the LL all-reduce (reduce_ll_*,
# up to 64 KiB: data and flag in one 8-byte store, no fence, no barrier) and the
# two-shot all-reduce in steps (SYMMEM_STAGED_STEPS). LL against the push kernel
# (SYMMEM_LL=0), with and without CUDA graphs, bf16 and float32; its faults; two-shot
# by steps and warps at 16, 64 and 256 MiB; the drop fault with steps. Results in
# session7e-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: scripts/gpu-session7e.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
grep -ai "error\|Traceback" "$out/build.log" | head -20
for k in reduce_ll_bf16 reduce_staged_bf16; do
  f=kernels/build/triton.$k.w32.sm80.ptx
  echo "$k: $(grep -oE '(ld|st)\.(global|volatile\.global)(\.nc)?(\.v[24])?\.[bu][0-9]+' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
done
{
"$bin" run all-reduce 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run all-reduce: rc=${PIPESTATUS[0]}"
"$bin" run all-reduce --dtype float32 --nproc 2 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run all-reduce float32: rc=${PIPESTATUS[0]}"
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 8K --max-size 64K --factor 8 --reps 2 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, LL all-reduce 8K and 64K: rc=${PIPESTATUS[0]} (want 3)"; left
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 8K --max-size 8K --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> LL all-reduce 8K, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
SYMMEM_STAGED_STEPS=4 SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 16M --max-size 16M --reps 2 --warps 16 2>&1 | grep -a "wrong bytes$" | tail -1
echo "-> drop fault, two-shot 16M in 4 steps: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
b ll --op all-reduce --impl triton,nccl --min-size 4K --max-size 64K --factor 2 --reps 5
SYMMEM_LL=0 b push --op all-reduce --impl triton --min-size 4K --max-size 64K --factor 2 --reps 5
b ll-graph --op all-reduce --impl triton,nccl --min-size 4K --max-size 64K --factor 2 --reps 5 --graph
SYMMEM_LL=0 b push-graph --op all-reduce --impl triton --min-size 4K --max-size 64K --factor 2 --reps 5 --graph
b ll-f32 --op all-reduce --impl triton --dtype float32 --min-size 8K --max-size 64K --factor 8 --reps 3
for st in 1 2 4 8; do
  for w in 32 16; do
    SYMMEM_STAGED_STEPS=$st b "steps$st-w$w" --op all-reduce --impl triton --algo two-shot --min-size 16M --max-size 256M --factor 4 --reps 3 --warps $w
  done
done
tar -C "$res" -czf "$out/session7e-results.tar.gz" .
show ll push ll-graph push-graph ll-f32
for f in "$res"/steps*.json; do echo "== $(basename $f)"; "$bin" bench show "$f" 2>&1 | grep -a 'M │' | cut -c1-100; done
