#!/usr/bin/env bash
# Seventh session, last call on nvidia-h200-x2: push_ll copies the rank's own part
# itself (one launch per small collective instead of a copy and a launch); the Triton
# modules rebuilt; its runs and drop fault; all-gather, broadcast, all-to-all from
# 64 KiB to 1 MiB next to NCCL and to the push kernel (SYMMEM_LL=0). Results in
# final7b-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: ONLY=symmem_collectives,symmem_moe scripts/gpu-final7b.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
grep -ai "error\|Traceback" "$out/build.log" | head -20
{
for op in all-gather broadcast all-to-all; do
  "$bin" run $op 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run $op: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op all-gather,all-to-all --impl triton --min-size 64K --max-size 64K --reps 2 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, push_ll 64K: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
b pll --op all-gather,broadcast,all-to-all --impl triton,nccl --min-size 64K --max-size 1M --factor 4 --reps 5
SYMMEM_LL=0 b pll-off --op all-gather,broadcast,all-to-all --impl triton --min-size 64K --max-size 1M --factor 4 --reps 5
tar -C "$res" -czf "$out/final7b-results.tar.gz" .
show pll pll-off
