#!/usr/bin/env bash
# Everything the GPU machine checks before a release: GPU unit tests, every run op and
# implementation, error paths, an external-launcher job, check-nvshmem, start-up wall
# times, the bench sweep behind docs/benchmarks.md and an ncu profile of the put kernels.
# usage: scripts/gpu-all.sh [bin/symmem]   (logs and results in ${OUT:-/tmp})
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
sec() { echo; echo "== $*"; }
{
  sec "gpu unit tests"; bin/gpu.test -test.v 2>&1 | grep -E "^(=== RUN|--- |PASS|FAIL|ok)|gpu_test"
  sec "run, every op and implementation"
  "$bin" run put --nproc 2; echo "rc=$?"
  for op in put get put-signal; do for impl in triton cuda; do
    "$bin" run $op --impl $impl --count 3M --dtype float32 --value 2.5 2>&1 | grep -E "Rank|PASS|FAIL|symmem:"; done; done
  for op in put get; do for impl in copy-engine sm-store; do "$bin" run $op --impl $impl --count 64M --dtype bf16 --value -1.5 2>&1 | grep -E "Rank|PASS|FAIL|symmem:"; done; done
  "$bin" run put --pattern ring --dtype int32 --value 40 --count 1K 2>&1 | grep -E "Rank|PASS|FAIL|│ "
  "$bin" run put-signal --json 2>/dev/null | grep -E '"ok"|"received"|"backend"'
  sec "faults and errors (each must end within seconds, except the hang: --timeout)"
  t() { local s=$EPOCHREALTIME; "$@"; local rc=$?; awk -v s="$s" -v e="$EPOCHREALTIME" -v rc=$rc 'BEGIN { printf "-> rc=%d in %.2f s\n", rc, e - s }'; }
  SYMMEM_TEST_FAULT=1:crash t "$bin" run put 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=0:exit t "$bin" run put-signal 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=1:kill t "$bin" run get 2>&1 | grep -E "failed|symmem:|rc="
  SYMMEM_TEST_FAULT=1:hang t "$bin" run put --timeout 5s 2>&1 | grep -E "failed|symmem:|rc="
  t "$bin" run put-signal --impl copy-engine 2>&1 | grep -E "symmem:|rc="
  t "$bin" run put --backend nvshmem --nvshmem-lib /nonexistent/libnvshmem_host.so.3 2>&1 | grep -E "symmem:|rc="
  t "$bin" run put --nproc 3 --backend nvshmem 2>&1 | grep -E "symmem:|rc="
  nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | head -3; echo "(no leftover GPU processes above)"
  sec "external launcher (torchrun variables, by hand)"
  RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 "$bin" run put --backend nvshmem > $out/ext1.txt 2>&1 &
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 "$bin" run put --backend nvshmem; echo "rc=$?"; wait; cat $out/ext1.txt
  sec "check-nvshmem"; "$bin" check-nvshmem --smoke; echo "rc=$?"; "$bin" check-nvshmem --json > $out/check.json; echo "rc=$?"
  sec "start-up"; scripts/time-run.sh 9 run put --nproc 2
  "$bin" run put --nproc 2 2>&1 | tail -1
  sec "bench sweep"; "$bin" bench --json --plot $out/bench.svg > $out/bench.json; echo "rc=$?"
  "$bin" bench --plot $out/bench.png --op put,get,put-signal,latency --min-size 1M --max-size 256M --factor 16 --reps 7 | tee $out/bench-key.txt
  sec "tune"; "$bin" bench --tune --op put,put-signal --impl triton,cuda,sm-store --min-size 1M --max-size 256M --factor 16 --reps 5
  sec "bidir and matrix"; "$bin" bench --op put --impl triton,copy-engine --min-size 256M --max-size 256M --bidir --reps 3
  "$bin" bench --op put --impl triton --min-size 64M --max-size 64M --matrix --reps 3
  sec "ncu"; ncu --version | tail -1
  timeout 200 ncu --target-processes all --clock-control none -k regex:put_block --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    "$bin" bench --op put --impl triton --min-size 256M --max-size 256M --reps 1 --iters 3 --warmup 3 > $out/ncu-triton.txt 2>&1; echo "rc=$?"
  grep -E "Duration|Throughput|Memory \[%\]|DRAM|Registers|Block Size|Grid Size|Achieved Occupancy|L2 Cache|Mem Busy|Max Bandwidth|Warning|OPT" $out/ncu-triton.txt | head -40
  timeout 120 ncu --target-processes all --clock-control none -k regex:sm_store --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    "$bin" bench --op put --impl sm-store --min-size 256M --max-size 256M --reps 1 --iters 3 --warmup 3 > $out/ncu-smstore.txt 2>&1; echo "rc=$?"
  grep -E "Duration|Throughput|Memory \[%\]|Mem Busy|Max Bandwidth" $out/ncu-smstore.txt | head -12
} 2>&1 | tee "$out/gpu-all.log"
