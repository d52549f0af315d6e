#!/usr/bin/env bash
# The guard after every collective's output (coll.Guard: what a kernel writes past its
# output counts as wrong), on real kernels: gpu-mpg11.sh and gpu-mpg11b.sh again, then
# sizes that end mid-vector and mid-line (8200 and 12296 bytes, 1M+16), where a kernel
# storing its last vector or 128-byte line whole would spoil the guard. Ranks share the
# one H200 (SYMMEM_TEST_MPG=1; times mean nothing).
# usage: scripts/gpu-mpg11c.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
d=$(dirname "$0")
bash "$d/gpu-mpg11.sh"; bash "$d/gpu-mpg11b.sh"
source "$d/gpu-lib.sh"
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
rank0lines() { grep -a "│\|wrong bytes" | grep -av "size │" | awk -F'│' '{ print $2 $3 $5 $6 $7 $8 $14 }'; }
for s in 8200 12296 1048592; do
  SYMMEM_LL128=1 TAILN=2 two bench --op all-reduce --impl triton --min-size $s --max-size $s --reps 2
  SYMMEM_LL128=0 TAILN=12 two bench --op all-reduce,all-gather,broadcast,all-to-all --impl triton,copy-engine --min-size $s --max-size $s --reps 2
done
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
