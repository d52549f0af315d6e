#!/usr/bin/env bash
# Seventh session, last call on nvidia-h200-x2, with the kernels embedded in the binary:
# the seed put, copy-engine collectives with a lone copy on the stream itself
# (broadcast with and without CUDA graphs), combine's pull by warps (A/B, twice), the
# 16 MiB two-shot all-reduce by grid, and start-up. Results in session7d-results.tar.gz.
# usage: scripts/gpu-session7d.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
{
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
SYMMEM_BIN=$bin bash scripts/time-run.sh 9 run put --nproc 2
} 2>&1 | tee "$res/checks.txt"
b ce --op broadcast,all-gather,all-to-all --impl copy-engine,triton,nccl --min-size 1M --max-size 256M --factor 16 --reps 3
b bc-graph --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3 --graph
for i in 1 2; do
  b comb-w32-$i --op combine --impl triton --warps 32 --reps 5
  b comb-w16-$i --op combine --impl triton --warps 16 --reps 5
done
for g in "--warps 32" "--warps 16" "--warps 8" "--blocks 64" "--blocks 64 --warps 16"; do
  b "ar16-${g// /}" --op all-reduce --impl triton --algo two-shot --min-size 16M --max-size 16M --reps 5 $g
done
b ar-graph16 --op all-reduce --impl triton --min-size 16M --max-size 16M --reps 5 --graph
tar -C "$res" -czf "$out/session7d-results.tar.gz" .
show ce bc-graph comb-w32-1 comb-w16-1 comb-w32-2 comb-w16-2
for f in "$res"/ar16-*.json "$res"/ar-graph16.json; do echo "$(basename $f): $("$bin" bench show "$f" 2>&1 | grep -a '16M' | cut -c1-120)"; done
