#!/usr/bin/env bash
# Eleventh session: gpu-ext10.sh (torchrun and mpirun start symmem's ranks on one H200,
# two ranks sharing it), then ranks stopped with SIGSTOP under torchrun, which this
# session's lifecycle changes are about: rank 0 stopped at its op with a stall limit
# past the heartbeat call's 5 s deadline, rank 0 stopped before it answered anyone,
# rank 1 stopped while rank 0 runs into --timeout. Each: the exit statuses, what the
# ranks said, and whether any process is left stopped or on the GPU.
# usage: scripts/gpu-ext11.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
bash "$(dirname "$0")/gpu-ext10.sh"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 SYMMEM_TEST_MPG=1
tr=$(command -v torchrun || echo "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")/torchrun")
el() { awk -v s="$1" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }'; }
stopped() { for p in $(pgrep -f "bin/symmem"); do [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" = T ] && { echo "LEFT STOPPED: $p"; kill -KILL $p; }; done; }
st() {  # st NAME FAULT ARGS...: torchrun with SYMMEM_TEST_FAULT=FAULT
  local name=$1 fault=$2; shift 2; local s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=$fault timeout 90 "$tr" --nproc_per_node 2 --no-python bin/symmem run put "$@" > /tmp/o.txt 2>&1; local rc=$?
  grep -a "symmem:\|injected\|Rank 1\|PASS\|FAIL" /tmp/o.txt | grep -av "^\s*$" | cut -c1-230 | tail -6
  echo "-> $name: torchrun rc=$rc in $(el "$s") s"; sleep 1; stopped
  echo "   GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
}
st "rank 0 stopped at its op, --stall-limit 8s" 0:stop --stall-limit 8s --timeout 60s
st "rank 0 stopped before it answered anyone, --stall-limit 3s" 0:stop:init --stall-limit 3s --timeout 60s
st "rank 1 stopped at its op, rank 0 --timeout 6s (stall limit 60s)" 1:stop --stall-limit 60s --timeout 6s
