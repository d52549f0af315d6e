#!/usr/bin/env bash
# After gpu-mpg10.sh: the LL128 all-reduce replayed in CUDA graphs (its launch count,
# the lines' flag, comes from the GPU's own counter, so a replayed graph must still
# alternate halves and match flags), with two ranks sharing the one H200
# (SYMMEM_TEST_MPG=1); then every collective once that way, and the one-rank GPU tests
# of this session's gpu.test. Times mean nothing (the ranks take turns on the GPU).
# usage: scripts/gpu-mpg10b.sh   (nvidia-h200; ship/ holds bins.tar.xz and gtest.tar.xz)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
for f in ship/bins.tar.xz ship/gtest.tar.xz; do
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall('bin')" "$f" || exit 1
done
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef SYMMEM_TEST_MPG=1
port=29700
two() {  # two ARGS...: both ranks; rank 0's last lines, then rank 1's
  port=$((port+2))
  local s=$EPOCHREALTIME pids=() rc=()
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=mpg \
      timeout 200 bin/symmem "$@" --launcher torchrun --backend nvshmem > /tmp/out$r.txt 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; rc+=($?); done
  grep -av "^\s*$\|^[├┌└]\|^#" /tmp/out0.txt | cut -c1-150 | tail -${TAILN:-12}
  echo "-- rank 1: $(grep -av '^\s*$' /tmp/out1.txt | tail -2 | tr '\n' ' ' | cut -c1-300)"
  echo "-> $*: rc=${rc[*]} in $(awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }') s"
}
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
