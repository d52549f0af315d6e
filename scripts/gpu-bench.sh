#!/usr/bin/env bash
# The GPU machine's round: unit GPU tests, the run smoke test, wall times, and the bench
# runs behind docs/benchmarks.md. Logs and results go to ${OUT:-/tmp}.
set -u
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
{
  echo "== gpu tests"; bin/gpu.test -test.v 2>&1 | tail -15
  echo "== run"; for op in put get put-signal; do for impl in triton cuda; do "$bin" run $op --impl $impl --count 3M --dtype float32 --value 2.5 2>&1 | grep -E "Rank|PASS|FAIL|symmem:"; done; done
  for impl in copy-engine sm-store; do "$bin" run put --impl $impl --count 64M 2>&1 | grep -E "Rank|PASS|FAIL|symmem:"; done
  echo "== wall of run put --nproc 2, 5 times"
  for i in 1 2 3 4 5; do s=$(date +%s.%N); "$bin" run put --nproc 2 >/dev/null 2>$out/err.txt; e=$(date +%s.%N); echo "wall $(echo "$e - $s" | bc) s rc=$?"; done
  "$bin" run put --nproc 2 2>&1 | tail -1
  echo "== bench sweep"; "$bin" bench --json --plot $out/bench.svg > $out/bench.json 2>$out/bench.err; echo rc=$?; tail -3 $out/bench.err
  "$bin" bench --op put,latency --min-size 1M --max-size 256M --factor 16 2>&1 | tail -40
  echo "== tune"; "$bin" bench --tune --op put --impl triton,cuda,sm-store --min-size 1M --max-size 256M --factor 16 --reps 3 --json > $out/tune.json 2>&1; echo rc=$?
  "$bin" bench --tune --op put --impl triton,cuda,sm-store --min-size 1M --max-size 256M --factor 16 --reps 3 2>&1 | tail -16
} 2>&1 | tee "$out/gpu-bench.log"
