#!/usr/bin/env bash
# MoE dispatch and combine with the guard after the output (coll.Guard), two and three
# ranks sharing the one H200 (SYMMEM_TEST_MPG=1; times mean nothing).
# usage: scripts/gpu-mpg11d.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source scripts/gpu-lib.sh
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
rank0lines() { grep -a "│\|wrong bytes" | grep -av "size │" | awk -F'│' '{ print $2 $3 $5 $6 $7 $8 $14 }'; }
TAILN=6 two bench --op dispatch,combine --impl triton --tokens 256 --reps 2
TAILN=6 two bench --op combine --impl triton --algo staged --tokens 256 --reps 2
TAILN=4 ranks 3 bench --op dispatch,combine --impl triton --tokens 128 --reps 2
TAILN=4 two bench --op dispatch,combine --impl triton --tokens 256 --reps 2 --graph
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
