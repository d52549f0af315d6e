#!/usr/bin/env bash
# The last call of the sixth session on nvidia-h200-x2: rebuild every kernel into
# kernels/build (kernels-build.tar.gz brings them back) and run from there; the GPU
# tests; MoE dispatch and combine (staged and pull) with their faults; latency;
# all-reduce across sizes next to NCCL (with and without CUDA graphs); the copy-engine
# broadcast and all-gather split over several copy engines (--blocks).
# usage: scripts/gpu-session6.sh [bin/symmem]   (results in session6-results.tar.gz)
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
bin/gpu.test -test.run 'TestSinglePEPut|TestDeviceWaitGivesUp|TestLaunchCost' -test.v 2>&1 | grep -a "^---\|gave up\|ended in\|us/op\|FAIL\|rror" | head -20
echo "-> gpu.test: rc=${PIPESTATUS[0]}"; left
for op in dispatch combine; do
  timeout 120 "$bin" run $op --impl triton 2>&1 | tail -1; echo "-> run $op --impl triton (default layer): rc=${PIPESTATUS[0]}"
  timeout 120 "$bin" run $op --impl triton --dtype float32 --tokens 1000 --hidden 7 --experts 12 --topk 3 --skew 1.5 2>&1 | tail -1
  echo "-> run $op float32, odd shape: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op combine --impl triton --reps 2 2>&1 | grep -a "wrong" | tail -2
echo "-> staged combine, rank 1 drops: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op combine --impl triton --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> staged combine, rank 1 absent: rc=${PIPESTATUS[0]} (want 3)"; left
b moe --op dispatch,combine --impl triton --reps 5
b moe-pull --op combine --impl triton --algo pull --reps 5
b moe-skew --op dispatch,combine --impl triton --reps 3 --skew 1
b lat --op latency --impl triton,cuda --reps 5
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 8 --reps 3
b ar-graph --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 8 --reps 5 --graph
b bc --op broadcast,all-gather --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3
b bc2 --op broadcast,all-gather --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3 --blocks 2
b bc4 --op broadcast,all-gather --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3 --blocks 4
tar -C "$res" -czf "$out/session6-results.tar.gz" .
show moe moe-pull moe-skew lat ar ar-graph bc bc2 bc4
