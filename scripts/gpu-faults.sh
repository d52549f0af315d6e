#!/usr/bin/env bash
# Faults at the point of delivery on the GPUs: every op and implementation with rank 0's
# transfers dropped (SYMMEM_TEST_FAULT=0:drop[:N]) must fail with exit 3 and name the
# row; a corrupted read-back must too. Exits non-zero when any case does not.
# usage: scripts/gpu-faults.sh [bin/symmem]
set -u
bin=${1:-bin/symmem}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
failed=0
# expect WANT_RC FAULT ARGS...: run symmem with the fault, show the lines that name the
# failure, and check the exit status.
expect() {
  local want=$1 fault=$2; shift 2
  local s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=$fault timeout 120 "$bin" "$@" > /tmp/fault.out 2>&1
  local rc=$?
  local took; took=$(awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }')
  grep -E 'wrong bytes|never delivered|WRONG|wrong elements' /tmp/fault.out | grep -v '^\[' | head -6 | sed 's/^/    /'
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $fault symmem $*: rc=$rc, want $want ($took s)"; tail -5 /tmp/fault.out | sed 's/^/    /'; failed=1
  else
    echo "ok:   $fault symmem $*: rc=$rc ($took s)"
  fi
}
impls=triton,cuda,copy-engine,sm-store
expect 3 0:drop:1 bench --op put,get --impl $impls --min-size 1M --max-size 16M --factor 16 --reps 2
expect 3 0:drop:1 bench --op put --impl $impls --min-size 1M --max-size 1M --reps 2 --overlap 2
expect 3 0:drop:1 bench --op put --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2 --graph
expect 3 0:drop:1 bench --op put-signal --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
expect 3 0:drop:1 bench --op put-signal --impl cuda --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
expect 3 0:drop:1 bench --op latency --impl triton --reps 3 --wait-limit 2s
expect 3 0:drop:1 bench --op latency --impl cuda --reps 3 --wait-limit 2s
expect 3 1:corrupt bench --op put --impl triton --min-size 1M --max-size 1M --reps 2
for op in put get; do for impl in triton cuda copy-engine sm-store; do
  expect 3 0:drop run $op --impl $impl --count 1M
done; done
expect 3 0:drop run put-signal --impl triton --wait-limit 2s
expect 3 0:drop run put-signal --impl cuda --wait-limit 2s
# and without a fault, the same commands pass
expect 0 "" bench --op put,get,put-signal,latency --impl $impls --min-size 1M --max-size 1M --reps 2
nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | head -3; echo "(no leftover GPU processes above)"
exit $failed
