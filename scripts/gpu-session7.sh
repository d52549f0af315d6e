#!/usr/bin/env bash
# Seventh session, first call on nvidia-h200-x2: the sum kernels rebuilt with the
# alignment hint on the pointer (they moved 2-byte scalars before), their PTX's vector
# accesses counted, then every op that sums measured next to NCCL: all-reduce at every
# size (default choice, one-shot pull, two-shot), under CUDA graphs at small sizes,
# reduce-scatter, MoE dispatch and combine (staged and pull). Results in
# session7-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: scripts/gpu-session7.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
for k in reduce_bf16 reduce_staged_bf16 reduce_push_bf16 combine_bf16 combine_staged_bf16; do
  f=kernels/build/triton.$k.w32.sm80.ptx
  echo "$k: $(grep -oE '(ld|st)\.global(\.nc)?(\.v[24])?\.b[0-9]+' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
done
"$bin" run all-reduce 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run all-reduce: rc=${PIPESTATUS[0]}"
b ar --op all-reduce --impl triton,nccl --min-size 8K --max-size 256M --factor 2 --reps 3
b ar-1s --op all-reduce --impl triton --algo one-shot --min-size 1M --max-size 256M --factor 16 --reps 3
b ar-2s --op all-reduce --impl triton --algo two-shot --min-size 8K --max-size 1M --factor 8 --reps 3
b ar-graph --op all-reduce --impl triton,nccl --min-size 8K --max-size 1M --factor 8 --reps 5 --graph
b rs --op reduce-scatter --impl triton,nccl --min-size 1M --max-size 256M --factor 16 --reps 3
b moe --op dispatch,combine --impl triton --reps 5
b moe-pull --op combine --impl triton --algo pull --reps 5
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op all-reduce,combine --impl triton --min-size 16M --max-size 16M --reps 2 2>&1 | grep -a "wrong bytes$\|wrong bytes arrived" | tail -3
echo "-> drop fault, all-reduce 16M (two-shot), combine: rc=${PIPESTATUS[0]} (want 3)"; left
tar -C "$res" -czf "$out/session7-results.tar.gz" .
show ar ar-1s ar-2s ar-graph rs moe moe-pull
