#!/usr/bin/env bash
# Which kernel ran each all-reduce row (the tables' kernel column), two ranks sharing
# the one H200 (SYMMEM_TEST_MPG=1): LL128 forced, then by size as shipped, one by one and
# under --graph. Times mean nothing (the ranks take turns on the GPU).
# usage: scripts/gpu-mpg10d.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source "$(dirname "$0")/gpu-lib.sh"
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
rank0lines() { grep -a "│" | awk -F'│' '{ print $2 $3 $5 $6 $7 $8 $14 }'; }
SYMMEM_LL128=1 two bench --op all-reduce --impl triton --min-size 4K --max-size 16M --factor 4 --reps 2
SYMMEM_LL128=1 two bench --op all-reduce --impl triton --min-size 4K --max-size 16M --factor 16 --reps 2 --graph
two bench --op all-reduce,reduce-scatter,all-gather --impl triton,copy-engine --min-size 4K --max-size 16M --factor 16 --reps 2
two bench --op all-reduce --impl triton --algo two-shot --min-size 1M --max-size 1M --reps 2
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
