#!/usr/bin/env bash
# Two ranks on one GPU (NVSHMEM's multiple-processes-per-GPU mode), started by hand with
# torchrun's variables (local ranks 0 and 1 of one node; each process sees the one GPU,
# so both drive it: gpu.GPUIndex): an attempt to run the LL128 kernel's logic on real
# hardware when only one GPU is lent. NVSHMEM refuses it (status 3, limited MPG), and
# symmem says so.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
export SYMMEM_STORE_TOKEN=0123456789abcdef0123456789abcdef
port=29600
two() {  # two ARGS...: both ranks, rank 1's output after rank 0's
  port=$((port+2))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=mpg \
      timeout 90 bin/symmem "$@" --launcher torchrun --backend nvshmem > /tmp/out$r.txt 2>&1 &
  done
  wait
  cat /tmp/out0.txt | grep -av "^\s*$" | tail -25; echo "-- rank 1:"; tail -5 /tmp/out1.txt
}
two run put
SYMMEM_LL128=1 two run all-reduce --count 512K --dtype bf16
SYMMEM_LL128=1 two run all-reduce --count 1M --dtype float32
SYMMEM_LL128=1 two bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 4 --reps 3
SYMMEM_LL128=1 two bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 8 --iters 1 --reps 100
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=0:drop:1 two bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=1:absent:1 two bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .
