#!/usr/bin/env bash
# Eleventh session, one H200 shared by the ranks (SYMMEM_TEST_MPG=1; times mean
# nothing): every collective and algorithm after each operation of a measurement began
# reading its input from its own place in the send buffer (coll.Place, 256 bytes
# apart), on real kernels: one by one, under --graph, 2 and 3 ranks, every byte checked;
# the drop fault still caught.
# usage: scripts/gpu-mpg11.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
source "$(dirname "$0")/gpu-lib.sh"
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
rank0lines() { grep -a "│\|wrong bytes" | grep -av "size │" | awk -F'│' '{ print $2 $3 $5 $6 $7 $8 $14 }'; }
all="all-reduce,all-gather,reduce-scatter,broadcast,all-to-all"
TAILN=40 two bench --op $all --impl triton,copy-engine --min-size 4K --max-size 16M --factor 16 --reps 2
TAILN=20 two bench --graph --op $all --impl triton,copy-engine --min-size 4K --max-size 4M --factor 32 --reps 2
SYMMEM_LL128=1 TAILN=8 two bench --op all-reduce --impl triton --min-size 4K --max-size 16M --factor 16 --reps 2 --warmup 1 --iters 3
TAILN=8 two bench --op all-reduce --impl triton --algo two-shot --min-size 64K --max-size 16M --factor 16 --reps 2 --dtype float32
TAILN=8 two bench --op reduce-scatter --impl triton --algo pull --min-size 64K --max-size 16M --factor 16 --reps 2
TAILN=6 two bench --op dispatch,combine --impl triton --tokens 256 --reps 2
TAILN=6 two bench --op combine --impl triton --algo staged --tokens 256 --reps 2
TAILN=30 ranks 3 bench --op $all --impl triton,copy-engine --min-size 48K --max-size 12M --factor 16 --reps 2
TAILN=4 ranks 3 bench --op dispatch,combine --impl triton --tokens 128 --reps 2
SYMMEM_TEST_FAULT=1:drop:1 TAILN=8 two bench --op all-reduce,all-gather,broadcast --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2
echo "(drop: want rc 3)"
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
