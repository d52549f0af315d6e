#!/usr/bin/env bash
# The closing check of the sixth session on nvidia-h200-x2: rebuild the CUDA kernels (the
# Triton ones are committed as built) into kernels/build and run from there; the seed
# put; the waits bounded on the GPU (cuda and triton put-signal, a rank absent from a
# collective); latency; all-reduce at the target sizes next to NCCL (with and without
# CUDA graphs); MoE at the default layer. Results in final6-results.tar.gz.
# usage: scripts/gpu-final6.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
for impl in cuda triton; do
  s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=0:drop timeout 60 "$bin" run put-signal --impl $impl --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
  echo "-> put-signal $impl, the sender drops: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
done
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> all-reduce 1M (push), rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op latency --impl triton --iters 2 --reps 3 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> latency triton, rank 1 drops: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-gather,combine --impl triton --min-size 4M --max-size 4M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> all-gather 4M, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op all-reduce,dispatch,combine --impl triton --min-size 64K --max-size 64K --reps 2 2>&1 | grep -a "wrong bytes$\|wrong bytes arrived" | tail -4
echo "-> drop fault, all-reduce 64K (push), dispatch, combine: rc=${PIPESTATUS[0]} (want 3)"; left
b lat --op latency --impl triton,cuda --reps 5
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 16M --factor 128 --reps 5
b ar-2s --op all-reduce --impl triton --algo two-shot --min-size 8K --max-size 1M --factor 128 --reps 5
b ar-graph --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 128 --reps 5 --graph
b moe --op dispatch,combine --impl triton --reps 5
tar -C "$res" -czf "$out/final6-results.tar.gz" .
show lat ar ar-2s ar-graph moe
