#!/usr/bin/env bash
# Small all-reduces on nvidia-h200-x2 after a kernel change: rebuild every kernel into
# kernels/build (kernels-build.tar.gz brings them back) and run from there; then the
# push one-shot next to two-shot and NCCL from 8 KiB to 1 MiB, with and without CUDA
# graphs, its faults (drop: wrong sums; absent: the wait ends on the GPU), and latency.
# usage: scripts/gpu-small.sh [bin/symmem]   (logs in ${OUT:-/tmp}; results in small-results.tar.gz)
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild
for dt in bf16 float32; do
  timeout 60 "$bin" run all-reduce --impl triton --count 100K --dtype $dt 2>&1 | tail -1; echo "-> run all-reduce $dt 100K (push): rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 64K --max-size 64K --reps 2 2>&1 | grep -a "wrong" | tail -2
echo "-> push all-reduce, rank 1 drops: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 64K --max-size 64K --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> push all-reduce, rank 1 absent: rc=${PIPESTATUS[0]} (want 3)"; left
b lat --op latency --impl triton,cuda --reps 5
for g in "" --graph; do
  b ar1$g --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 8 --reps 5 $g
  b ar2$g --op all-reduce --impl triton --algo two-shot --min-size 8K --max-size 1M --factor 8 --reps 5 $g
done
tar -C "$res" -czf "$out/small-results.tar.gz" .
show lat ar1 ar2 ar1--graph ar2--graph
