#!/usr/bin/env bash
# Seventh session, second call on nvidia-h200-x2: kernels rebuilt with vector-masked
# tails (a short range still moves 16-byte vectors), the push all-reduce on 128 blocks
# of 8 KiB by default, and the copy-engine collectives meeting at the triton barrier
# kernel instead of NVSHMEM's stream barrier. Measures all of it next to NCCL, the
# push grid against the old one, combine by grid, and the faults the new barrier must
# still report. Results in session7b-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: scripts/gpu-session7b.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
for k in reduce_bf16 reduce_push_bf16 combine_bf16 combine_staged_bf16; do
  f=kernels/build/triton.$k.w32.sm80.ptx
  echo "$k: $(grep -oE '(ld|st)\.global(\.nc)?(\.v[24])?\.b[0-9]+' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
done
for op in all-reduce broadcast all-gather; do
  "$bin" run $op 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run $op: rc=${PIPESTATUS[0]}"
done
"$bin" run broadcast --impl copy-engine 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run broadcast copy-engine: rc=${PIPESTATUS[0]}"
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-gather --impl copy-engine --min-size 4M --max-size 4M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> all-gather copy-engine 4M, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op all-gather,all-to-all --impl copy-engine --min-size 4M --max-size 4M --reps 2 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, copy-engine all-gather, all-to-all: rc=${PIPESTATUS[0]} (want 3)"; left
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 2 --reps 3
b ar-graph --op all-reduce --impl triton --min-size 8K --max-size 16M --factor 2 --reps 3 --graph
b ar-graph-nccl --op all-reduce --impl nccl --min-size 8K --max-size 16M --factor 8 --reps 3 --graph
b push-old --op all-reduce --impl triton --algo one-shot --blocks 32 --warps 32 --min-size 64K --max-size 1M --factor 4 --reps 3
b push-4m --op all-reduce --impl triton --algo one-shot --min-size 2M --max-size 4M --factor 2 --reps 3
b ce --op broadcast,all-gather,all-to-all --impl copy-engine,triton,nccl --min-size 1M --max-size 256M --factor 16 --reps 3
b ag512 --op all-gather --impl copy-engine,nccl --min-size 512M --max-size 512M --reps 3
b moe --op dispatch,combine --impl triton --reps 5
b moe-pull --op combine --impl triton --algo pull --reps 5
b moe-pull-w16 --op combine --impl triton --algo pull --warps 16 --reps 3
b moe-staged-w16 --op combine --impl triton --algo staged --warps 16 --reps 3
tar -C "$res" -czf "$out/session7b-results.tar.gz" .
show ar ar-graph ar-graph-nccl push-old push-4m ce ag512 moe moe-pull moe-pull-w16 moe-staged-w16
