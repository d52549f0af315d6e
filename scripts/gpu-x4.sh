#!/usr/bin/env bash
# Four GPUs (nvidia-h200-x4), with the kernels embedded in the binary: the topology and
# check-nvshmem's smoke test, the ring tests of put/get/put-signal on 4 ranks, the
# GPU x GPU matrix (every ordered pair alone) and the ring (every rank sending at once),
# every collective and MoE next to NCCL on 4 ranks, start-up, and a rank killed
# mid-bench. Results in x4-results.tar.gz.
# usage: scripts/gpu-x4.sh [bin/symmem]
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
{
nvidia-smi topo -m 2>&1 | head -8
"$bin" check-nvshmem --smoke 2>&1 | tail -25; echo "-> check-nvshmem --smoke: rc=${PIPESTATUS[0]}"
for op in put get put-signal all-reduce; do
  "$bin" run $op --nproc 4 2>&1 | grep -av "^\[[0-9]\] *$" | tail -14; echo "-> run $op --nproc 4: rc=${PIPESTATUS[0]}"
done
SYMMEM_BIN=$bin bash scripts/time-run.sh 7 run put --nproc 4
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=2:kill timeout 60 "$bin" bench --nproc 4 --op all-reduce --impl triton --min-size 64M --max-size 64M --reps 5 2>&1 | grep -a "rank 2\|symmem:" | tail -3
echo "-> rank 2 killed mid-bench on 4 GPUs: rc=${PIPESTATUS[0]} in $(el $s) s"; left; ps -eo pid,comm | grep -c symmem
} 2>&1 | tee "$res/checks.txt"
b matrix --op put --matrix --nproc 4 --impl copy-engine,triton --min-size 256M --max-size 256M --reps 3
b ring --op put,get --nproc 4 --impl copy-engine,triton --min-size 16M --max-size 256M --factor 16 --reps 3
b coll4 --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine,nccl --nproc 4 --min-size 1M --max-size 256M --factor 16 --reps 3
b ar4 --op all-reduce --impl triton,nccl --nproc 4 --min-size 8K --max-size 256M --factor 8 --reps 3
b moe4 --op dispatch,combine --impl triton --nproc 4 --reps 3
tar -C "$res" -czf "$out/x4-results.tar.gz" .
show matrix ring coll4 ar4 moe4
