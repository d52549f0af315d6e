#!/usr/bin/env bash
# Two ranks on one GPU (NVSHMEM's limited multiple-processes-per-GPU mode, let through by
# SYMMEM_TEST_MPG=1), started by hand with torchrun's variables: the LL128 all-reduce's
# Triton kernel run with a peer on real hardware, for its logic (flags, tiles, halves,
# slots, the wait and its give-up), when the two-GPU machine is not lent. The ranks'
# kernels take turns on the GPU, so times mean nothing; every byte is checked as ever.
# usage: scripts/gpu-mpg10.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source "$(dirname "$0")/gpu-lib.sh"
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
TAILN=4 two run put
for a in "--count 512K --dtype bf16" "--count 256K --dtype float32" "--count 4100 --dtype bf16" "--count 8M --dtype bf16"; do
  SYMMEM_LL128=1 TAILN=3 two run all-reduce $a
done
SYMMEM_LL128=1 two bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 4 --reps 3 --dtype bf16
SYMMEM_LL128=1 TAILN=8 two bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 8 --iters 1 --reps 100
SYMMEM_LL128=1 TAILN=6 two bench --op all-reduce --impl triton --algo one-shot --dtype float32 --min-size 8K --max-size 8M --factor 32 --reps 3
SYMMEM_LL128=1 TAILN=3 two bench --op all-reduce --impl triton --warps 4 --algo one-shot --min-size 64K --max-size 4M --factor 64 --reps 3
SYMMEM_LL128=1 TAILN=3 two bench --op all-reduce --impl triton --warps 16 --algo one-shot --min-size 64K --max-size 4M --factor 64 --reps 3
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=0:drop:1 TAILN=3 two bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2
echo "(drop: want rc 3)"
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=1:absent:1 TAILN=3 two bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
echo "(absent rank 1: want rc 3, rank 0 gave up)"
# The kernels timed on two GPUs before, for comparison on this shared GPU.
SYMMEM_LL128=0 TAILN=10 two bench --op all-reduce --impl triton --min-size 4K --max-size 16M --factor 16 --reps 3
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
