#!/usr/bin/env bash
# After gpu-mpg10.sh: the LL128 all-reduce replayed in CUDA graphs (its launch count,
# the lines' flag, comes from the GPU's own counter, so a replayed graph must still
# alternate halves and match flags), with two ranks sharing the one H200
# (SYMMEM_TEST_MPG=1); then every collective once that way, and the one-rank GPU tests
# of this session's gpu.test. Times mean nothing (the ranks take turns on the GPU).
# usage: scripts/gpu-mpg10b.sh   (nvidia-h200; ship/ holds bins.tar.xz and gtest.tar.xz)
source "$(dirname "$0")/gpu-lib.sh"
for f in ship/bins.tar.xz ship/gtest.tar.xz; do
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall('bin')" "$f" || exit 1
done
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
SYMMEM_LL128=1 TAILN=9 two bench --graph --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 4 --reps 3
SYMMEM_LL128=1 TAILN=5 two bench --graph --op all-reduce --impl triton --algo one-shot --dtype float32 --min-size 8K --max-size 8M --factor 32 --reps 3
SYMMEM_LL128=1 TAILN=5 two bench --overlap 2 --op all-reduce --impl triton --algo one-shot --min-size 64K --max-size 4M --factor 64 --reps 3
SYMMEM_LL128=1 TAILN=22 two bench --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2
TAILN=6 two bench --op dispatch,combine --impl triton --tokens 256 --reps 2
s=$EPOCHREALTIME
unset SYMMEM_TEST_MPG SYMMEM_STORE_TOKEN
bin/gpu.test -test.run 'TestDriverFacts|TestSinglePEPut|TestDeviceWaitGivesUp|TestLaunchCost|TestNVLinkProbe' -test.v 2>&1 | grep -a "^--- \|^ok\|^FAIL\|^PASS\|us/op" | head -30
echo "-> gpu.test (one rank): in $(awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }') s"
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
