#!/usr/bin/env bash
# Failure paths and start-up on the GPU machine (logs to ${OUT:-/tmp}).
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
t() { local s=$EPOCHREALTIME; "$@"; local rc=$?; awk -v s="$s" -v e="$EPOCHREALTIME" -v rc=$rc 'BEGIN { printf "-> rc=%d in %.2f s\n", rc, e - s }'; }
{
  echo "== faults on GPUs"
  SYMMEM_TEST_FAULT=1:crash t "$bin" run put 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=0:exit t "$bin" run put-signal 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=1:kill t "$bin" run get 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=1:hang t "$bin" run put --timeout 5s 2>&1 | grep -E "failed|symmem:|rc="
  echo "== errors"
  t "$bin" run put-signal --impl copy-engine 2>&1 | grep -E "symmem:|rc="
  t "$bin" run put --backend nvshmem --nvshmem-lib /nonexistent/libnvshmem_host.so.3 2>&1 | grep -E "symmem:|rc="
  t "$bin" run put --nproc 3 --backend nvshmem 2>&1 | grep -E "symmem:|rc="
  t "$bin" bench --impl memcpy 2>&1 | grep -E "symmem:|rc="
  nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | head -3; echo "(no leftover GPU processes above)"
  echo "== start-up"
  scripts/time-run.sh 9 run put --nproc 2
  "$bin" run put --nproc 2 2>&1 | tail -1
  echo "== ncu"
  timeout 100 ncu --target-processes all --clock-control none -k regex:put_block -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    "$bin" run put --count 256M > $out/ncu.txt 2>&1; echo "ncu rc=$?"
  grep -E "PROF|Duration|Throughput|Memory \[%\]|Mem Busy|Max Bandwidth|Mem Pipes|L2|DRAM|put_block|ERR" $out/ncu.txt | head -30
} 2>&1 | tee "$out/gpu-final.log"
