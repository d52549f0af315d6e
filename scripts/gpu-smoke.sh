#!/usr/bin/env bash
# Run the binary's own GPU checks on a machine with GPUs and NVSHMEM; logs go to ${OUT:-/tmp}.
# usage: scripts/gpu-smoke.sh [bin/symmem]
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
run() { echo "\$ $*"; "$@"; echo "rc=$?"; }
{
  run "$bin" version
  run "$bin" run put --nproc 2
  run "$bin" run get --nproc 2
  run "$bin" run put-signal --nproc 2
  for impl in cuda copy-engine sm-store; do run "$bin" run put --nproc 2 --impl $impl --count 1M; done
  run "$bin" run get --nproc 2 --impl cuda --count 1M
  run "$bin" run put-signal --nproc 2 --impl cuda --count 3M --dtype float32 --value 2.5
  run "$bin" run put --nproc 2 --count 64M --dtype int32 --value 7
  run "$bin" run put --nproc 2 --json
  run "$bin" run put --nproc 3
  run "$bin" run put --nproc 2 --backend cpu
  for i in 1 2 3 4 5; do /usr/bin/time -f "wall %e s" "$bin" run put --nproc 2 2>&1 | tail -2; done
} 2>&1 | tee "$out/gpu-smoke.log"
