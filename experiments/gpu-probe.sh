#!/usr/bin/env bash
# Experiments behind docs/benchmarks.md: NVSHMEM settings at start-up, launch grids for
# the SM-driven puts, and copy-engine transfers split over several streams.
# usage: experiments/gpu-probe.sh [bin/symmem]   (logs to ${OUT:-/tmp})
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
wall() { local s=$EPOCHREALTIME; "$@" >/dev/null 2>&1; local rc=$?; echo "wall $(python3 -c "print(round($EPOCHREALTIME-$s,3))") s rc=$rc"; }
{
  echo "== check-nvshmem"; "$bin" check-nvshmem --smoke -v; echo "rc=$?"
  "$bin" check-nvshmem --json > $out/check.json; echo "rc=$?"
  echo "== start-up, default env"; for i in 1 2 3; do wall "$bin" run put; done; "$bin" run put 2>&1 | tail -1
  echo "== NVSHMEM_DISABLE_NCCL=1"; for i in 1 2 3; do NVSHMEM_DISABLE_NCCL=1 wall "$bin" run put; done; NVSHMEM_DISABLE_NCCL=1 "$bin" run put 2>&1 | tail -1
  echo "== + NVSHMEM_REMOTE_TRANSPORT=none"; for i in 1 2 3; do NVSHMEM_DISABLE_NCCL=1 NVSHMEM_REMOTE_TRANSPORT=none wall "$bin" run put; done
  NVSHMEM_DISABLE_NCCL=1 NVSHMEM_REMOTE_TRANSPORT=none "$bin" run put 2>&1 | tail -1
  echo "== grids"; for b in 128 132 264 528 1056; do for w in 16 32; do "$bin" bench --op put --impl triton --min-size 16M --max-size 256M --factor 16 --blocks $b --warps $w --csv 2>&1 | tail -2 | cut -d, -f1-3,7,8,9,12; done; done
  for b in 132 264 528; do "$bin" bench --op put --impl sm-store,cuda --min-size 16M --max-size 256M --factor 16 --blocks $b --warps 32 --csv 2>&1 | tail -4 | cut -d, -f1-3,7,8,9,12; done
  echo "== copy engine split over streams"
  for k in 1 2 4 8; do "$bin" bench --op put,get --impl copy-engine --min-size 1M --max-size 256M --factor 16 --blocks $k --reps 7 --csv | cut -d, -f1-3,7,9,12,14; done
  echo "== 1M grids"; "$bin" bench --op put --impl triton,cuda --min-size 1M --max-size 1M --tune --csv 2>&1 | tail -3 | cut -d, -f1-3,7,8,9,12
} 2>&1 | tee "$out/gpu-probe.log"
