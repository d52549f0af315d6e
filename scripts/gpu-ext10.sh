#!/usr/bin/env bash
# Real launchers on one H200 with two ranks sharing it (SYMMEM_TEST_MPG=1): torchrun and
# Open MPI's mpirun start symmem's ranks (this session changed how the store's address,
# port and token are read from their variables), check-nvshmem --smoke under torchrun,
# and a rank killed under torchrun. Times mean nothing (the ranks take turns on the GPU).
# usage: scripts/gpu-ext10.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_TEST_MPG=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tr=$(command -v torchrun || echo "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")/torchrun")
el() { awk -v s="$1" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }'; }
show() { grep -av "^\s*$\|^[├┌└]\|^#\|Warning\|\*\*\*\*\|^W1\|OMP_NUM" | cut -c1-160 | tail -${TAILN:-8}; }
t() {  # t NAME CMD...: run it, show its last lines, its exit status and time
  local name=$1; shift; local s=$EPOCHREALTIME
  timeout 150 "$@" > /tmp/o.txt 2>&1; local rc=$?
  show < /tmp/o.txt; echo "-> $name: rc=$rc in $(el "$s") s"
}
echo "torchrun: $tr"
mpi=(mpirun -np 2 -x NVSHMEM_DISABLE_NVLS -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x SYMMEM_TEST_MPG)
TAILN=5 t "torchrun run put" "$tr" --nproc_per_node 2 --no-python bin/symmem run put
TAILN=12 t "torchrun bench" "$tr" --nproc_per_node 2 --no-python bin/symmem bench --op put,all-reduce,all-gather --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2
TAILN=5 t "mpirun run put" "${mpi[@]}" bin/symmem run put
TAILN=8 t "mpirun bench" "${mpi[@]}" bin/symmem bench --op put,broadcast --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2
TAILN=6 t "torchrun check-nvshmem --smoke" "$tr" --nproc_per_node 2 --no-python bin/symmem check-nvshmem --smoke
SYMMEM_TEST_FAULT=1:kill TAILN=6 t "torchrun, rank 1 killed (want 4 or torchrun's 1)" "$tr" --nproc_per_node 2 --no-python bin/symmem bench --op put --min-size 1M --max-size 1M --reps 2
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
