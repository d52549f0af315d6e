#!/usr/bin/env bash
# The triton and copy-engine collectives on the GPU machine, next to NCCL, in one call.
# With BUILD=1 (the default) it first rebuilds the collective kernels
# (kernels/triton/symmem_collectives.py) for every target into kernels/build and runs
# them from there (SYMMEM_KERNELS_DIR), so a binary built elsewhere tries them before
# they are committed; kernels-build.tar.gz then holds kernels/build, to unpack into
# kernels/ and commit. Then: every collective once per implementation (run), the drop
# fault, all-reduce by algorithm and size, every op next to NCCL, CUDA graphs for small
# messages. Results (JSON) in coll-results.tar.gz.
# usage: scripts/gpu-coll.sh [bin/symmem]   (logs in ${OUT:-/tmp})
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild --only symmem_collectives --out kernels/build
for impl in triton copy-engine; do
  for op in all-reduce reduce-scatter all-gather broadcast all-to-all; do
    [[ $impl == copy-engine && ( $op == all-reduce || $op == reduce-scatter ) ]] && continue
    timeout 60 "$bin" run $op --impl $impl --count 1M --dtype bf16 --stall-limit 10s 2>&1 | tail -1
    echo "-> run $op --impl $impl: rc=${PIPESTATUS[0]}"
  done
done
timeout 60 "$bin" run all-reduce --impl triton --count 3M --dtype float32 --stall-limit 10s 2>&1 | tail -1
echo "-> run all-reduce float32 (two-shot): rc=${PIPESTATUS[0]}"
# A rank whose deliveries go to scratch fails the bench (exit 3); it does not hang.
SYMMEM_TEST_FAULT=1:drop:1 timeout 120 "$bin" bench --op all-reduce,all-gather,all-to-all --impl triton,copy-engine \
  --min-size 1M --max-size 1M --reps 2 2>&1 | tail -5
echo "-> drop fault: rc=${PIPESTATUS[0]} (want 3)"
b ar-one-shot --op all-reduce --impl triton --algo one-shot --min-size 8K --max-size 256M --factor 2 --reps 3
b ar-two-shot --op all-reduce --impl triton --algo two-shot --min-size 8K --max-size 256M --factor 2 --reps 3
b ar-nccl --op all-reduce --impl nccl --min-size 8K --max-size 256M --factor 2 --reps 3
b coll --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine,nccl \
  --min-size 1M --max-size 256M --factor 16 --reps 3 --plot "$res/coll.png"
b ag-512M --op all-gather --impl triton,copy-engine,nccl --min-size 512M --max-size 512M --reps 3
b graph --graph --op all-reduce,all-gather --impl triton,nccl --min-size 8K --max-size 1M --factor 8 --reps 3
tar -C "$res" -czf "$out/coll-results.tar.gz" .
show ar-one-shot ar-two-shot ar-nccl coll ag-512M graph
