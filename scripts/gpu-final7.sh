#!/usr/bin/env bash
# The closing run of the seventh session on nvidia-h200-x2: the kernels rebuilt (push_ll
# is new: all-gather, broadcast and all-to-all of small messages in LL form) and run
# from the build; the seed put; push_ll's runs and faults, and against the push kernel
# (SYMMEM_LL=0); all-reduce at every size next to NCCL, with and without CUDA graphs;
# every collective next to NCCL with a plot; MoE at the default layer. Results (JSON and the plot) in final7-results.tar.gz; kernels in
# kernels-build.tar.gz.
# usage: scripts/gpu-final7.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
grep -ai "error\|Traceback" "$out/build.log" | head -20
echo "push_ll: $(grep -oE '(ld|st)\.(global|volatile\.global)(\.nc)?(\.v[24])?\.[bu][0-9]+' kernels/build/triton.push_ll.w4.sm80.ptx | sort | uniq -c | tr -s ' \n' ' ')"
{
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
for op in all-gather broadcast all-to-all; do
  "$bin" run $op 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run $op: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op all-gather,broadcast,all-to-all --impl triton --min-size 64K --max-size 512K --factor 8 --reps 2 2>&1 | grep -a "wrong bytes$" | tail -6
echo "-> drop fault, push_ll 64K and 512K: rc=${PIPESTATUS[0]} (want 3)"; left
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-gather --impl triton --min-size 64K --max-size 64K --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> push_ll all-gather 64K, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
} 2>&1 | tee "$res/checks.txt"
b pll --op all-gather,broadcast,all-to-all --impl triton,nccl --min-size 64K --max-size 1M --factor 2 --reps 5
SYMMEM_LL=0 b pll-off --op all-gather,broadcast,all-to-all --impl triton --min-size 64K --max-size 1M --factor 2 --reps 5
b ar --op all-reduce --impl triton,nccl --min-size 4K --max-size 256M --factor 2 --reps 3
b ar-graph --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5 --graph
b coll --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine,nccl --min-size 1M --max-size 256M --factor 16 --reps 3 --plot "$res/coll.png"
b moe --op dispatch,combine --impl triton --reps 5
tar -C "$res" -czf "$out/final7-results.tar.gz" .
show pll pll-off ar ar-graph coll moe
