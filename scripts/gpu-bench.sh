#!/usr/bin/env bash
# The runs that make docs/benchmarks.md's figures, each result under the name it has in
# docs/results/ (render one with `symmem bench show FILE`): point to point and latency,
# every collective next to NCCL, MoE dispatch and combine, start-up and the host's launch
# cost on two GPUs; the same on four where there are four; users' example kernels where
# Triton and the NVSHMEM wheel are installed; an ncu profile of the Triton put where ncu
# is. Then the bench's own check: a corrupted delivery must fail it (exit 3).
# Figures need a GPU per rank: on fewer than two GPUs it stops (scripts/gpu-check.sh
# checks correctness on one).
# Every step runs even when one before it failed; the script exits 1 at the end, listing
# the steps that failed.
# usage: [ONLY=REGEX] scripts/gpu-bench.sh [bin/symmem]
#        (results in ${OUT:-/tmp}/results/, and as ${OUT:-/tmp}/bench-results.tar.gz)
set -uo pipefail
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
res=$out/results
mkdir -p "$res" || exit 1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ngpu=$(nvidia-smi -L | grep -c '^GPU')
if ((ngpu < 2)); then
  echo "gpu-bench.sh: $ngpu GPU(s) here; the figures need one GPU per rank, two at least" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{ print tolower($NF) }')
x2=$gpu"x2" x4=$gpu"x4"
key="--op put,get,put-signal,latency --min-size 1M --max-size 256M --factor 16 --reps 7"
all=all-reduce,all-gather,reduce-scatter,broadcast,all-to-all
failed=()

# ONLY=REGEX runs the steps whose name matches it.
skip() { [[ -n "${ONLY:-}" && ! $1 =~ $ONLY ]]; }
# check NAME WANT RC START: print NAME's status and time; a status other than WANT fails it.
check() {
  awk -v n="$1" -v s="$4" -v e="$EPOCHREALTIME" -v rc="$3" 'BEGIN { printf "%s: rc=%d in %.1f s\n", n, rc, e - s }'
  if (($3 != $2)); then
    echo "FAILED: $1: rc=$3, want $2"
    failed+=("$1 (rc=$3, want $2)")
  fi
}
# b NAME [VAR=VALUE...] ARGS...: `symmem bench ARGS --json` (at most 300 s), the result in
# NAME.json; it must exit 0.
b() {
  local name=$1 vars=() s=$EPOCHREALTIME rc
  shift
  skip "$name" && return
  while [[ $1 == [A-Z]*=* ]]; do vars+=("$1"); shift; done
  env "${vars[@]}" timeout 300 "$bin" bench "$@" --timeout 5m --json > "$res/$name.json"; rc=$?
  check "$name" 0 $rc "$s"
}
{
  # Point to point and latency, two GPUs.
  b p2p-key-$x2 $key --plot "$res/p2p-key-$x2.png"
  b p2p-key-overlap2-$x2 $key --overlap 2
  b p2p-key-graph-$x2 --graph $key
  b p2p-key-graph-overlap2-$x2 --graph --overlap 2 --op put --min-size 1M --max-size 256M --factor 16 --reps 7
  b p2p-small-graph-$x2 --graph --op put,get,put-signal --min-size 8 --max-size 1M --factor 8
  b p2p-bidir-$x2 --op put --impl triton,copy-engine --min-size 16M --max-size 256M --factor 16 --bidir --reps 3
  b p2p-sweep-$x2 --plot "$res/p2p-sweep-$x2.svg"

  # Collectives next to NCCL, two GPUs.
  b allreduce-sweep-$x2 --op all-reduce --impl triton,nccl --min-size 4K --max-size 256M --factor 2 --reps 3
  b allreduce-small-$x2 --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5
  b allreduce-graph-$x2 --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5 --graph
  b collectives-$x2 --op $all --impl triton,copy-engine,nccl --min-size 1M --max-size 256M --factor 16 --reps 3 --plot "$res/collectives-$x2.png"
  b collectives-small-$x2 --op all-gather,broadcast,all-to-all --impl triton,nccl --min-size 64K --max-size 1M --factor 4 --reps 5
  b collectives-small-push-$x2 SYMMEM_LL=0 --op all-gather,broadcast,all-to-all --impl triton --min-size 64K --max-size 1M --factor 4 --reps 5
  b allgather-512M-$x2 --op all-gather --impl triton,copy-engine,nccl --min-size 512M --max-size 512M --reps 3
  b reducescatter-$x2 --op reduce-scatter --impl triton,nccl --min-size 256K --max-size 32M --factor 2 --reps 3
  b reducescatter-pull-$x2 --op reduce-scatter --impl triton --algo pull --min-size 256K --max-size 32M --factor 2 --reps 3
  b moe-$x2 --op dispatch,combine --impl triton --reps 5

  # Four GPUs, where there are four.
  if ((ngpu >= 4)); then
    b p2p-matrix-$x4 --op put --matrix --nproc 4 --impl copy-engine,triton --min-size 256M --max-size 256M --reps 3
    b p2p-pairs-$x4 --op put,get --nproc 4 --impl copy-engine,triton --min-size 16M --max-size 256M --factor 16 --reps 3
    b collectives-$x4 --op $all --impl triton,copy-engine,nccl --nproc 4 --min-size 1M --max-size 256M --factor 16 --reps 3
    b allreduce-$x4 --op all-reduce --impl triton,nccl --nproc 4 --min-size 8K --max-size 256M --factor 8 --reps 3
    b moe-$x4 --op dispatch,combine --impl triton --nproc 4 --reps 3
  fi

  # Users' example kernels beside triton and nccl (symmem kernels build needs Triton and
  # the NVSHMEM wheel).
  if ! skip user && python3 -c 'import triton' 2> /dev/null; then
    k=$(mktemp -d)
    for f in one_shot_all_reduce push_collectives moe_all_to_all; do
      s=$EPOCHREALTIME
      "$bin" kernels build examples/$f.py --out "$k" > "$res/build-$f.log" 2>&1
      check "kernels build $f" 0 $? "$s"
    done
    b user-allreduce-$x2 --kernels "$k" --op all-reduce --impl one-shot-all-reduce,triton,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
    b user-reducescatter-$x2 --kernels "$k" --op reduce-scatter --impl push-collectives,triton,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
    b user-push-$x2 --kernels "$k" --op all-gather,all-to-all,broadcast --impl push-collectives,triton,copy-engine,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
    b user-moe-$x2 --kernels "$k" --op dispatch,combine --impl moe-all-to-all,triton --reps 5
  fi

  # Start-up, launcher to exit, and the host's time per launch.
  if ! skip startup; then
    s=$EPOCHREALTIME
    env SYMMEM_BIN="$bin" scripts/time-run.sh 9 run put --nproc 2 | tee "$res/startup-$x2.txt"
    check startup 0 "${PIPESTATUS[0]}" "$s"
    "$bin" run put --nproc 2 2>&1 | tail -1 | tee -a "$res/startup-$x2.txt"
  fi
  if ! skip launch-cost && [[ -x bin/gpu.test ]]; then
    s=$EPOCHREALTIME
    bin/gpu.test -test.run TestLaunchCost -test.v 2>&1 | grep -a 'us/op' | tee "$res/launch-cost-$gpu.txt"
    check launch-cost 0 "${PIPESTATUS[0]}" "$s"
  fi

  # ncu does not follow the workers symmem re-executes: rank 0 runs directly under ncu,
  # the job joined through torchrun's variables.
  if ! skip ncu && command -v ncu > /dev/null; then
    ext=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29720)
    env "${ext[@]}" RANK=1 LOCAL_RANK=1 "$bin" run put --backend nvshmem --count 256M > /dev/null 2>&1 &
    rank1=$!
    s=$EPOCHREALTIME
    env "${ext[@]}" RANK=0 LOCAL_RANK=0 timeout 200 ncu --clock-control none -k regex:put_block -c 1 \
      --metrics gpu__time_duration.sum,nvltx__bytes.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,nvlrx__bytes.sum,dram__bytes_read.sum \
      --section SpeedOfLight --section MemoryWorkloadAnalysis "$bin" run put --backend nvshmem --count 256M > "$res/ncu-put-triton.txt" 2>&1
    check ncu 0 $? "$s"
    wait $rank1
    grep -m 20 -E "Duration|Throughput|Mem Busy|nvltx|nvlrx|dram__bytes" "$res/ncu-put-triton.txt"
  fi

  # Wrong bytes delivered must fail the bench: exit 3 (internal/exitcode).
  if ! skip corrupt; then
    s=$EPOCHREALTIME
    SYMMEM_TEST_FAULT=1:corrupt timeout 240 "$bin" bench --overlap 2 --op put --impl triton --min-size 1M --max-size 1M --reps 2 2>&1 | tail -4
    check corrupt 3 "${PIPESTATUS[0]}" "$s"
  fi
  apps=$(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader) || failed+=("nvidia-smi")
  echo "${apps:-(no process on any GPU)}"
  if grep -qF -- "$(basename "$bin")" <<< "$apps"; then
    echo "FAILED: processes of $bin left on a GPU"
    failed+=("leftover GPU processes")
  fi
  if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
  fi
} 2>&1 | tee "$out/gpu-bench.log"
rc=${PIPESTATUS[0]}
tar -C "$res" -czf "$out/bench-results.tar.gz" . || rc=1
exit $rc
