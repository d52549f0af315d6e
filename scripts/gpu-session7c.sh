#!/usr/bin/env bash
# Seventh session, third call on nvidia-h200-x2: the push all-reduce with slots sized
# by the rank count (2 ranks: up to 16 MiB one-shot) against two-shot from 1 to 16 MiB,
# combine pulling by default, the copy-engine barrier kernel's faults, broadcast under
# CUDA graphs, and the tables at every size next to NCCL. Results in
# session7c-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: scripts/gpu-session7c.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
for k in reduce_push_bf16 combine_bf16; do
  f=kernels/build/triton.$k.w32.sm80.ptx
  echo "$k: $(grep -oE '(ld|st)\.global(\.nc)?(\.v[24])?\.b[0-9]+' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
done
{
for a in "all-reduce" "broadcast --impl copy-engine" "all-gather --impl copy-engine" "combine"; do
  "$bin" run $a 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run $a: rc=${PIPESTATUS[0]}"
done
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-gather --impl copy-engine --min-size 4M --max-size 4M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> all-gather copy-engine 4M, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-gather,all-to-all,all-reduce,combine --impl copy-engine,triton --min-size 4M --max-size 4M --reps 2 2>&1 | grep -a "wrong bytes$" | tail -6
echo "-> drop fault, copy-engine all-gather, all-to-all; triton all-reduce 4M (push), combine: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
b push --op all-reduce --impl triton --algo one-shot --min-size 1M --max-size 16M --factor 2 --reps 3
b two --op all-reduce --impl triton --algo two-shot --min-size 1M --max-size 16M --factor 2 --reps 3
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 2 --reps 3
b ar-graph --op all-reduce --impl triton --min-size 8K --max-size 1M --factor 2 --reps 5 --graph
b bc-graph --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3 --graph
b moe --op dispatch,combine --impl triton --reps 5
tar -C "$res" -czf "$out/session7c-results.tar.gz" .
show push two ar ar-graph bc-graph moe
