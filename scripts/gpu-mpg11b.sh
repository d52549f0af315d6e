#!/usr/bin/env bash
# gpu-mpg11.sh's three-rank line again with sizes every rank's block divides (48K-12M), and 4 ranks under --graph.
# usage: scripts/gpu-mpg11b.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source scripts/gpu-lib.sh
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
rank0lines() { grep -a "│\|wrong bytes" | grep -av "size │" | awk -F'│' '{ print $2 $3 $5 $6 $7 $8 $14 }'; }
all="all-reduce,all-gather,reduce-scatter,broadcast,all-to-all"; TAILN=30 ranks 3 bench --op $all --impl triton,copy-engine --min-size 48K --max-size 12M --factor 16 --reps 2
TAILN=10 ranks 4 bench --op $all --impl triton --min-size 64K --max-size 4M --factor 64 --reps 2 --graph
