#!/usr/bin/env bash
# What the session that added collectives, NCCL, user kernels and the stall watch could
# not run (it had no device time): one call on the two-GPU machine checks all of it.
#   NCCL bindings on the real library, every collective with --impl nccl, the nccl
#   bench sweep and its drop check (gpu-bench.sh's coll steps), a user's Triton kernel
#   built, run and benched beside triton and copy-engine, a wrong one caught, and a rank
#   stopped (SIGSTOP) named within --stall-limit on the GPUs.
# Build here first: go build -o bin/symmem ./cmd/symmem &&
#   go test -c -tags gpu -o bin/nccl-gpu.test ./internal/nccl
# usage: scripts/gpu-next.sh [bin/symmem]   (logs and the user's kernels in ${OUT:-/tmp})
set -uo pipefail
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
failed=()
# step WANT NAME CMD...: run CMD (at most 300 s); its exit status must be WANT.
step() {
  local want=$1 name=$2; shift 2
  local s=$EPOCHREALTIME rc
  timeout 300 "$@"; rc=$?
  awk -v n="$name" -v s="$s" -v e="$EPOCHREALTIME" -v rc=$rc 'BEGIN { printf "-> %s: rc=%d in %.2f s\n", n, rc, e - s }'
  if ((rc != want)); then
    echo "FAILED: $name: rc=$rc, want $want"
    failed+=("$name (rc=$rc, want $want)")
  fi
}
{
  echo "== NCCL"
  step 0 "nccl bindings on libnccl" bin/nccl-gpu.test -test.v
  step 0 "check-nvshmem names NCCL" sh -c "'$bin' check-nvshmem | grep -E 'nccl|NCCL'"
  for op in all-reduce all-gather reduce-scatter broadcast all-to-all; do
    step 0 "run $op --impl nccl" "$bin" run $op --impl nccl --count 1M --dtype bf16
  done
  step 0 "coll steps of gpu-bench.sh" env ONLY=coll OUT="$out" scripts/gpu-bench.sh "$bin"

  echo "== a user's Triton kernel"
  rm -rf "$out/mykernels" "$out/wrongk"
  step 0 "kernels build strided_put" "$bin" kernels build examples/strided_put.py --arch 90 --out "$out/mykernels"
  step 0 "kernels list" "$bin" kernels list "$out/mykernels"
  step 0 "run put --impl strided-put" "$bin" run put --kernels "$out/mykernels" --impl strided-put
  step 0 "run get --impl strided-put" "$bin" run get --kernels "$out/mykernels" --impl strided-put --count 64M
  step 0 "bench beside triton and copy-engine" "$bin" bench --kernels "$out/mykernels" --impl strided-put,triton,copy-engine \
    --op put,get --min-size 1M --max-size 256M --factor 16 --reps 7
  step 0 "kernels build wrong_put" "$bin" kernels build examples/wrong_put.py --arch 90 --out "$out/wrongk"
  step 3 "a kernel that writes wrong bytes fails run (exit 3)" "$bin" run put --kernels "$out/wrongk" --impl wrong-put --count 1M
  step 3 "and bench (exit 3)" "$bin" bench --kernels "$out/wrongk" --impl wrong-put --op put --min-size 1M --max-size 1M --reps 2
  tar -C "$out" -czf "$out/user-kernels.tar.gz" mykernels wrongk 2> /dev/null

  echo "== a stopped rank on the GPUs"
  step 4 "SIGSTOP at op, named within --stall-limit" env SYMMEM_TEST_FAULT=1:stop:op "$bin" run put --stall-limit 3s --timeout 60s
  step 4 "SIGSTOP in NVSHMEM's init" env SYMMEM_TEST_FAULT=1:stop:init "$bin" run put --stall-limit 3s --timeout 60s
  apps=$(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader)
  echo "${apps:-(no process on any GPU)}"
  if grep -qF -- "$(basename "$bin")" <<< "$apps"; then failed+=("leftover GPU processes"); fi

  if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
  fi
  echo "every step passed"
} 2>&1 | tee "$out/gpu-next.log"
exit "${PIPESTATUS[0]}"
