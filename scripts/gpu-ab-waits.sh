#!/usr/bin/env bash
# A/B of builds of the wait loop on the same machine, back to back (kb7.tgz, kb8.tgz:
# earlier builds of kernels/build, packed, when present): the working tree's kernels,
# rebuilt here, against them. Then the faults that must end on the GPU.
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild
builds=("$PWD/kernels/build:now")
for old in kb7 kb8; do
  [[ -f $old.tgz ]] && mkdir -p /tmp/$old && tar -C /tmp/$old -xzf $old.tgz && builds+=("/tmp/$old/build:$old")
done
"$bin" run put 2>&1 | grep -a "Rank 1"; echo "-> run put: rc=${PIPESTATUS[0]}"
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op combine,all-reduce --impl triton --min-size 64K --max-size 64K --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> combine, rank 1 absent: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=1:drop:1 timeout 60 "$bin" bench --op latency --impl triton --iters 2 --reps 3 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> latency triton, rank 1 drops: rc=${PIPESTATUS[0]} (want 3)"; left
SYMMEM_TEST_FAULT=0:drop timeout 60 "$bin" run put-signal --impl triton --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> put-signal triton, the sender drops: rc=${PIPESTATUS[0]} (want 3)"; left
for round in 1 2; do
for k in "${builds[@]}"; do
  dir=${k%%:*}; name=${k##*:}
  echo "== $name (round $round)"
  SYMMEM_KERNELS_DIR=$dir timeout 120 "$bin" bench --op latency --impl triton --reps 5 2>&1 | grep -a "│   8B" | cut -c1-80
  SYMMEM_KERNELS_DIR=$dir timeout 120 "$bin" bench --op combine --impl triton --reps 3 2>&1 | grep -a "│  56M" | cut -c1-100
  SYMMEM_KERNELS_DIR=$dir timeout 120 "$bin" bench --op all-reduce --impl triton --min-size 8K --max-size 8K --reps 5 --graph 2>&1 | grep -a "│   8K" | cut -c1-100
done
done
