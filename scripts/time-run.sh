#!/usr/bin/env bash
# Wall time of a whole symmem command, launcher to exit, over N runs: median, min, max.
# usage: scripts/time-run.sh N [symmem args...]   (default: run put --nproc 2)
# e.g.   scripts/time-run.sh 11 run put --nproc 2 --backend cpu
set -euo pipefail
n=${1:-7}; shift || true
bin=${SYMMEM_BIN:-bin/symmem}
[ $# -gt 0 ] || set -- run put --nproc 2
export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1} NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
times=()
for ((i = 0; i < n; i++)); do
  s=$EPOCHREALTIME
  "$bin" "$@" >/dev/null 2>&1 || { echo "run $i failed: $bin $*" >&2; exit 1; }
  e=$EPOCHREALTIME
  times+=("$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.4f", e - s }')")
done
printf '%s\n' "${times[@]}" | sort -n | awk -v cmd="$bin $*" '
  { t[NR] = $1 }
  END { m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "%s: %d runs, median %.3f s, min %.3f s, max %.3f s\n", cmd, NR, m, t[1], t[NR] }'
