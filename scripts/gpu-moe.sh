#!/usr/bin/env bash
# One call on nvidia-h200-x2 after kernel sources changed: rebuild every kernel (all
# archs, in parallel) into kernels/build and run from there (SYMMEM_KERNELS_DIR), so a
# binary built elsewhere tries them before they are committed; kernels-build.tar.gz
# holds kernels/build, to unpack into kernels/ and commit. Then: the GPU tests, MoE
# dispatch and combine (run, bench at the default layer, the drop fault), the waits
# bounded on the GPU again, latency, and all-reduce next to NCCL (with and without CUDA
# graphs). Results (JSON) in moe-results.tar.gz.
# usage: scripts/gpu-moe.sh [bin/symmem]   (bin/gpu.test beside it; logs in ${OUT:-/tmp})
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
bin/gpu.test -test.run 'TestSinglePEPut|TestDeviceWaitGivesUp|TestLaunchCost' -test.v 2>&1 | grep -av '^=== \|^PASS\|^ok' | head -40
echo "-> gpu.test: rc=${PIPESTATUS[0]}"; left
for op in dispatch combine; do
  timeout 120 "$bin" run $op --impl triton 2>&1 | tail -3; echo "-> run $op --impl triton (default layer): rc=${PIPESTATUS[0]}"
  timeout 120 "$bin" run $op --impl triton --dtype float32 --tokens 1000 --hidden 7 --experts 12 --topk 3 --skew 1.5 2>&1 | tail -1
  echo "-> run $op float32, odd shape: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op dispatch,combine --impl triton --reps 2 2>&1 | grep -a "wrong" | tail -3
echo "-> MoE drop fault: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op combine --impl triton --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> combine, rank 1 absent: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=0:drop timeout 60 "$bin" run put-signal --impl cuda --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> put-signal cuda, the sender drops: rc=${PIPESTATUS[0]} (want 3)"; left
b moe --op dispatch,combine --impl triton --reps 5
b moe-skew --op dispatch,combine --impl triton --reps 3 --skew 1
b latency --op latency --impl triton,cuda --reps 5
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 16 --reps 3
b ar16 --op all-reduce --impl triton,nccl --min-size 1M --max-size 16M --factor 16 --reps 5
b ar-graph --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 128 --reps 5 --graph
tar -C "$res" -czf "$out/moe-results.tar.gz" .
show moe moe-skew latency ar ar16 ar-graph
