#!/usr/bin/env bash
# Twelfth session: a rank stopped before it told anyone its pid (SYMMEM_TEST_FAULT's
# phase start: before it dials or hosts the store), under real launchers on one H200
# (two ranks sharing it, GPU backend): the rank that runs into --timeout finds it among
# its launcher's children and kills it, so the launcher ends at once instead of after
# its own grace period. With symmem's search the rank says `killing rank N`; torchrun's
# and mpirun's exit statuses and times, and whether any process is left stopped or on
# the GPU. Then the eleventh session's torchrun cases again (gpu-ext11.sh).
# usage: scripts/gpu-ext12.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 SYMMEM_TEST_MPG=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
tr=$(command -v torchrun || echo "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")/torchrun")
mpi=(mpirun -np 2 -x NVSHMEM_DISABLE_NVLS -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x SYMMEM_TEST_MPG -x SYMMEM_TEST_FAULT)
el() { awk -v s="$1" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }'; }
stopped() { for p in $(pgrep -f "bin/symmem"); do [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" = T ] && { echo "LEFT STOPPED: $p"; kill -KILL $p; }; done; }
st() {  # st NAME FAULT LAUNCHER...: the launcher runs `symmem run put --timeout 6s` with SYMMEM_TEST_FAULT=FAULT
  local name=$1 fault=$2; shift 2; local s=$EPOCHREALTIME
  SYMMEM_TEST_FAULT=$fault timeout 120 "$@" ${SYM:-bin/symmem} run put --timeout 6s > /tmp/o.txt 2>&1; local rc=$?
  grep -a "symmem:\|injected\|Rank 1\|PASS\|FAIL" /tmp/o.txt | cut -c1-200 | tail -5
  echo "-> $name: rc=$rc in $(el "$s") s"; sleep 1; stopped
  echo "   GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
}
st "torchrun, rank 1 stopped at start" 1:stop:start "$tr" --nproc_per_node 2 --no-python
st "torchrun, rank 0 stopped at start" 0:stop:start "$tr" --nproc_per_node 2 --no-python
st "mpirun, rank 1 stopped at start" 1:stop:start "${mpi[@]}"
st "mpirun, rank 0 stopped at start" 0:stop:start "${mpi[@]}"
# The same stop made from outside, so that a binary without the phase start (SYM=an
# older one) can be compared: the launcher starts a shell that stops itself as rank S
# before it execs symmem (it is rank S all the same: the launcher's child, its variables).
sw() {  # sw NAME S LAUNCHER...
  local name=$1 r=$2; shift 2; local s=$EPOCHREALTIME
  timeout 120 "$@" sh -c 'if [ "${RANK:-$OMPI_COMM_WORLD_RANK}" = '"$r"' ]; then kill -STOP $$; fi; exec '"${SYM:-bin/symmem}"' run put --timeout 6s' > /tmp/o.txt 2>&1; local rc=$?
  grep -a "symmem:\|Rank 1\|PASS\|FAIL" /tmp/o.txt | cut -c1-200 | tail -5
  echo "-> $name: rc=$rc in $(el "$s") s"; sleep 1; stopped
  for p in $(pgrep -f "kill -STOP"); do [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" = T ] && { echo "LEFT STOPPED: $p (sh)"; kill -KILL $p; }; done
}
# (Under torchrun the shell's stop did not hold on the H200: both ranks passed; not
# looked into, the phase start above covers torchrun.)
sw "mpirun, rank 1 stopped before symmem started" 1 "${mpi[@]}"
[[ ${SKIP11:-0} == 1 ]] || bash "$(dirname "$0")/gpu-ext11.sh"
