#!/usr/bin/env bash
# Everything the GPU machine checks before a release: GPU unit tests, every run op and
# implementation, error paths, an external-launcher job, check-nvshmem, start-up wall
# times, the bench runs behind docs/benchmarks.md (scripts/gpu-bench.sh) and an ncu profile
# of the Triton put kernel.
# Every step runs even when one before it failed; each checks its exit status (the fault
# and error cases: the status they must end with), and the script exits 1 at the end,
# listing the steps that failed, when any did.
# usage: scripts/gpu-all.sh [bin/symmem]   (logs and results in ${OUT:-/tmp})
set -uo pipefail
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
sec() { echo; echo "== $*"; }
failed=()
# step WANT NAME CMD...: run CMD; its exit status must be WANT.
step() {
  local want=$1 name=$2; shift 2
  local s=$EPOCHREALTIME rc
  "$@"; rc=$?
  awk -v n="$name" -v s="$s" -v e="$EPOCHREALTIME" -v rc=$rc 'BEGIN { printf "-> %s: rc=%d in %.2f s\n", n, rc, e - s }'
  if ((rc != want)); then
    echo "FAILED: $name: rc=$rc, want $want"
    failed+=("$name (rc=$rc, want $want)")
  fi
}
# show ERE CMD...: CMD's output (stdout and stderr), only the lines matching ERE; CMD's status.
show() { local re=$1; shift; "$@" 2>&1 | { grep -E -- "$re" || true; }; return "${PIPESTATUS[0]}"; }
# hide ERE CMD...: CMD's output without the lines matching ERE; CMD's status.
hide() { local re=$1; shift; "$@" 2>&1 | { grep -vE -- "$re" || true; }; return "${PIPESTATUS[0]}"; }
# last N CMD...: the last N lines of CMD's output; CMD's status.
last() { local n=$1; shift; "$@" 2>&1 | tail -n "$n"; return "${PIPESTATUS[0]}"; }
# to FILE CMD...: CMD's stdout into FILE; CMD's status.
to() { local f=$1; shift; "$@" > "$f"; }
# into FILE CMD...: CMD's stdout and stderr into FILE; CMD's status.
into() { local f=$1; shift; "$@" > "$f" 2>&1; }
# noleft: no process of this symmem binary is left on a GPU.
noleft() {
  local apps
  apps=$(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader) || return 1
  echo "${apps:-(no process on any GPU)}"
  ! grep -qF -- "$(basename "$bin")" <<< "$apps"
}
{
  sec "gpu unit tests"
  step 0 "gpu.test" show "^(=== RUN|--- |PASS|FAIL|ok)|gpu_test" bin/gpu.test -test.v

  sec "run, every op and implementation"
  step 0 "run put" "$bin" run put --nproc 2
  for op in put get put-signal; do for impl in triton cuda; do
    step 0 "run $op --impl $impl" show "Rank|PASS|FAIL|symmem:" "$bin" run $op --impl $impl --count 3M --dtype float32 --value 2.5
  done; done
  for op in put get; do for impl in copy-engine sm-store; do
    step 0 "run $op --impl $impl" show "Rank|PASS|FAIL|symmem:" "$bin" run $op --impl $impl --count 64M --dtype bf16 --value -1.5
  done; done
  step 0 "run put --pattern ring" show "Rank|PASS|FAIL|│ " "$bin" run put --pattern ring --dtype int32 --value 40 --count 1K
  step 0 "run put-signal --json" show '"ok"|"received"|"backend"' "$bin" run put-signal --json

  sec "faults and errors (each must end within seconds, except the hang: --timeout)"
  # Exit status (internal/exitcode): 2 bad input, 4 a rank failed, 5 timeout, 7 no GPU backend.
  step 4 "fault 1:crash" show "failed|symmem:" env SYMMEM_TEST_FAULT=1:crash "$bin" run put
  step 4 "fault 0:exit" show "failed|symmem:" env SYMMEM_TEST_FAULT=0:exit "$bin" run put-signal
  step 4 "fault 1:kill" show "failed|symmem:" env SYMMEM_TEST_FAULT=1:kill "$bin" run get
  step 5 "fault 1:hang" show "failed|symmem:" env SYMMEM_TEST_FAULT=1:hang "$bin" run put --timeout 5s
  step 2 "put-signal --impl copy-engine" show "symmem:" "$bin" run put-signal --impl copy-engine
  step 7 "--nvshmem-lib missing" show "symmem:" "$bin" run put --backend nvshmem --nvshmem-lib /nonexistent/libnvshmem_host.so.3
  ngpu=$(nvidia-smi -L | grep -c '^GPU')
  step 7 "--nproc $((ngpu + 1)) on $ngpu GPUs" show "symmem:" "$bin" run put --nproc $((ngpu + 1)) --backend nvshmem
  step 0 "no leftover GPU processes" noleft
  step 0 "drop and corrupt faults at the point of delivery" scripts/gpu-faults.sh "$bin"

  sec "external launcher (torchrun variables, by hand)"
  ext=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29600)
  env "${ext[@]}" RANK=1 LOCAL_RANK=1 "$bin" run put --backend nvshmem > "$out/ext1.txt" 2>&1 &
  rank1=$!
  step 0 "external launcher, rank 0" env "${ext[@]}" RANK=0 LOCAL_RANK=0 "$bin" run put --backend nvshmem
  step 0 "external launcher, rank 1" wait $rank1
  cat "$out/ext1.txt"

  sec "check-nvshmem"
  step 0 "check-nvshmem --smoke" "$bin" check-nvshmem --smoke
  step 0 "check-nvshmem --json" to "$out/check.json" "$bin" check-nvshmem --json

  sec "start-up"
  step 0 "time-run.sh" env SYMMEM_BIN="$bin" scripts/time-run.sh 9 run put --nproc 2
  step 0 "run put, timings" last 1 "$bin" run put --nproc 2

  sec "bench (scripts/gpu-bench.sh: key sizes, overlap, graphs, sweep, bidir, corrupt check)"
  step 0 "gpu-bench.sh" hide "^(│|├|└|┌)" env OUT="$out" scripts/gpu-bench.sh "$bin"

  sec "tune"
  step 0 "bench --tune" "$bin" bench --tune --op put,put-signal --impl triton,cuda,sm-store --min-size 1M --max-size 256M --factor 16 --reps 5
  sec "matrix"
  step 0 "bench --matrix" "$bin" bench --op put --impl triton --min-size 64M --max-size 64M --matrix --reps 3

  # ncu does not follow the workers symmem re-executes: profile rank 0 started directly
  # under ncu, the job joined through torchrun's variables (docs/benchmarks.md).
  sec "ncu"
  step 0 "ncu --version" last 1 ncu --version
  ext=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29720)
  env "${ext[@]}" RANK=1 LOCAL_RANK=1 "$bin" run put --backend nvshmem --count 256M > /dev/null 2>&1 &
  rank1=$!
  step 0 "ncu, rank 0" into "$out/ncu-triton.txt" env "${ext[@]}" RANK=0 LOCAL_RANK=0 timeout 200 ncu --clock-control none -k regex:put_block -c 1 \
    --metrics gpu__time_duration.sum,nvltx__bytes.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,nvlrx__bytes.sum,dram__bytes_read.sum \
    --section SpeedOfLight --section MemoryWorkloadAnalysis "$bin" run put --backend nvshmem --count 256M
  step 0 "ncu, rank 1" wait $rank1
  step 0 "ncu metrics in $out/ncu-triton.txt" grep -m 20 -E "Duration|Throughput|Mem Busy|nvltx|nvlrx|dram__bytes" "$out/ncu-triton.txt"

  sec "summary"
  if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
  fi
  echo "every step passed"
} 2>&1 | tee "$out/gpu-all.log"
exit "${PIPESTATUS[0]}"
