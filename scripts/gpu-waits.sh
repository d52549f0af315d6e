#!/usr/bin/env bash
# Waits bounded on the GPU (issue 12) and the launch cost of kernels that call NVSHMEM
# (issue 13, point 7), in one call on nvidia-h200-x2. Each fault must end on the device
# at the wait limit (2 s here) with the wait named, exit 3, and leave no process on a
# GPU. Then latency and all-reduce as before (the new wait loops must cost nothing),
# and small puts and all-reduces with and without CU_CTX_LMEM_RESIZE_TO_MAX.
# usage: scripts/gpu-waits.sh [bin/symmem]   (bin/gpu.test beside it; logs in ${OUT:-/tmp})
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
bin/gpu.test -test.run 'TestSinglePEPut|TestDeviceWaitGivesUp' -test.v 2>&1 | grep -av '^=== \|^PASS\|^ok' | head -30
echo "-> gpu.test: rc=${PIPESTATUS[0]}"; left
for impl in triton cuda; do
  s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=0:drop timeout 60 "$bin" run put-signal --impl $impl --wait-limit 2s > "$res/ps-$impl.log" 2>&1
  rc=$?; grep -a "gave up\|never\|failed" "$res/ps-$impl.log" | tail -3
  echo "-> put-signal $impl, the sender drops: rc=$rc (want 3) in $(el $s) s"; left
  s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op latency --impl $impl --iters 2 --reps 3 --wait-limit 2s > "$res/lat-$impl.log" 2>&1
  rc=$?; grep -a "gave up\|never\|failed" "$res/lat-$impl.log" | tail -3
  echo "-> latency $impl, rank 1 drops from measurement 1: rc=$rc (want 3) in $(el $s) s"; left
done
for op in all-reduce all-gather; do
  s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op $op --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s > "$res/absent-$op.log" 2>&1
  rc=$?; grep -a "gave up\|never\|failed" "$res/absent-$op.log" | tail -4
  echo "-> $op triton, rank 1 absent from measurement 1: rc=$rc (want 3) in $(el $s) s"; left
done
b latency --op latency --impl triton,cuda --reps 5
b allreduce --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 16 --reps 3
for f in 0 0x10; do
  SYMMEM_TEST_CTX_FLAGS=$f b small-put-$f --op put --impl triton,cuda,sm-store,copy-engine --min-size 8 --max-size 8 --iters 200 --reps 5
  SYMMEM_TEST_CTX_FLAGS=$f b small-put-graph-$f --op put --impl triton,sm-store --min-size 8 --max-size 8 --iters 200 --reps 5 --graph
  SYMMEM_TEST_CTX_FLAGS=$f b small-ar-$f --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 128 --reps 5
done
tar -C "$res" -czf "$out/waits-results.tar.gz" .
show latency allreduce small-put-0 small-put-0x10 small-put-graph-0 small-put-graph-0x10 small-ar-0 small-ar-0x10
