#!/usr/bin/env bash
# Everything the GPU machine checks before a release: GPU unit tests, every run op and
# implementation, error paths, an external-launcher job, check-nvshmem, start-up wall
# times, the bench runs behind docs/benchmarks.md (scripts/gpu-bench.sh) and an ncu profile
# of the Triton put kernel.
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
  sec "bench (scripts/gpu-bench.sh: key sizes, overlap, graphs, sweep, bidir, corrupt check)"
  OUT=$out scripts/gpu-bench.sh "$bin" | grep -vE "^(│|├|└|┌)"
  sec "tune"; "$bin" bench --tune --op put,put-signal --impl triton,cuda,sm-store --min-size 1M --max-size 256M --factor 16 --reps 5
  sec "matrix"; "$bin" bench --op put --impl triton --min-size 64M --max-size 64M --matrix --reps 3
  # ncu does not follow the workers symmem re-executes: profile rank 0 started directly
  # under ncu, the job joined through torchrun's variables (docs/benchmarks.md).
  sec "ncu"; ncu --version | tail -1
  export WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29720
  RANK=1 LOCAL_RANK=1 "$bin" run put --backend nvshmem --count 256M > /dev/null 2>&1 &
  RANK=0 LOCAL_RANK=0 timeout 200 ncu --clock-control none -k regex:put_block -c 1 \
    --metrics gpu__time_duration.sum,nvltx__bytes.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,nvlrx__bytes.sum,dram__bytes_read.sum \
    --section SpeedOfLight --section MemoryWorkloadAnalysis "$bin" run put --backend nvshmem --count 256M > $out/ncu-triton.txt 2>&1; echo "rc=$?"; wait
  grep -E "Duration|Throughput|Mem Busy|nvltx|nvlrx|dram__bytes" $out/ncu-triton.txt | head -20
} 2>&1 | tee "$out/gpu-all.log"
