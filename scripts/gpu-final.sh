#!/usr/bin/env bash
# A last check of the committed binary on the GPU machine (kernels embedded, nothing
# rebuilt): the seed put, the default collective implementation, a rank stopped in the
# middle of a collective, the push collectives at 1-4 MiB and all-reduce across sizes
# next to NCCL. Results in final-results.tar.gz.
# usage: scripts/gpu-final.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
"$bin" run all-reduce --count 1M 2>&1 | grep -a "received\|PASS\|FAIL\|impl"; echo "-> run all-reduce (default impl): rc=${PIPESTATUS[0]}"
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:stop:op timeout 90 "$bin" run all-reduce --count 64M --stall-limit 3s --timeout 60s 2>&1 | tail -2
echo "-> rank 1 stopped during all-reduce: rc=${PIPESTATUS[0]} (want 4) in $(awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }') s"
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op all-reduce,all-gather,all-to-all --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2 2>&1 | tail -4
echo "-> drop fault: rc=${PIPESTATUS[0]} (want 3)"
nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | grep -c . | sed 's/^/GPU processes left: /'
timeout 200 "$bin" bench --op all-gather,broadcast,all-to-all --impl triton,copy-engine,nccl --min-size 1M --max-size 4M --factor 2 --reps 3 --json > "$res/push-small.json" 2> "$res/push-small.err"
echo "-> bench push 1-4M: rc=$?"
timeout 200 "$bin" bench --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 16 --reps 3 --json > "$res/ar-default.json" 2> "$res/ar-default.err"
echo "-> bench all-reduce default algo: rc=$?"
tar -C "$res" -czf "$out/final-results.tar.gz" .
for f in push-small ar-default; do "$bin" bench show "$res/$f.json" 2>&1 | grep -av "^#\|^[├┌└]" | cut -c1-118; done
