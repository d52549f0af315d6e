#!/usr/bin/env bash
# Three and four ranks sharing the one H200 (SYMMEM_TEST_MPG=1, torchrun's variables):
# the LL128 all-reduce with n-1 slots a block (slot s-(s>r) of every peer), its float32
# form and graphs, and the collectives that change with the rank count. Times mean
# nothing (the ranks take turns on the GPU); every byte is checked.
# usage: scripts/gpu-mpg10c.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source "$(dirname "$0")/gpu-lib.sh"
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
for n in 3 4; do
  SYMMEM_LL128=1 TAILN=6 ranks $n run all-reduce --count 300K --dtype bf16
  SYMMEM_LL128=1 TAILN=7 ranks $n bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 2M --factor 8 --reps 3
  SYMMEM_LL128=1 TAILN=5 ranks $n bench --op all-reduce --impl triton --algo one-shot --dtype float32 --min-size 8K --max-size 1M --factor 128 --reps 3 --graph
  SYMMEM_LL128=1 TAILN=5 ranks $n bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 1M --factor 16 --iters 1 --reps 50
  SYMMEM_LL128=1 SYMMEM_TEST_FAULT=$((n-1)):drop:1 TAILN=3 ranks $n bench --op all-reduce --impl triton --algo one-shot --min-size 1M --max-size 1M --reps 2
  echo "(drop by rank $((n-1)): want rc 3 on rank 0)"
done
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
