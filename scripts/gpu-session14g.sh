#!/usr/bin/env bash
# Fourteenth session, on one H200 (two ranks sharing it, SYMMEM_TEST_MPG=1): triton's
# reduce-scatter in a sweep from 4 bytes (the sizes whose blocks are not whole 16-byte
# vectors left out of its rows), and run refusing such a --count before any rank starts.
# usage: scripts/gpu-session14g.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
TAILN=10 two bench --op reduce-scatter,all-reduce --impl triton --min-size 4 --max-size 64 --reps 1 --iters 2
TAILN=3 two run reduce-scatter --impl triton --count 4099 --dtype bf16
TAILN=3 two run reduce-scatter --impl triton --count 4104 --dtype bf16
left
