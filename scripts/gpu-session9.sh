#!/usr/bin/env bash
# Ninth session on nvidia-h200-x2 (no rebuild: the binary embeds the kernels
# gpu-build9.sh built): the LL128 all-reduce (SYMMEM_LL128=1) checked (run, a soak of
# single checked operations, the drop fault, an absent rank) and timed against the push
# and LL kernels (SYMMEM_LL128=0) and NCCL, one by one and under --graph; then the
# eighth session's unmeasured rows: the small all-reduces under --graph with the ranks
# meeting before the clock, the broadcast's own part on its own stream, all-gather's own
# part by a 32-block kernel. Results (JSON) in s9-results.tar.gz, saved after every bench.
# usage: [QUICK=1] scripts/gpu-session9.sh   (QUICK: checks and the LL128 rows only)
set -uo pipefail
if [[ -f ship/bins.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
fi
if [[ -f ship/gtest.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/gtest.tar.xz').extractall('bin')" || exit 1
fi
source "$(dirname "$0")/gpu-lib.sh"
save() { tar -C "$res" -czf "$out/s9-results.tar.gz" .; }
{
[[ -x bin/gpu.test ]] && SYMMEM_WANT_NVLINK=1 bin/gpu.test -test.run TestNVLinkProbe -test.v 2>&1 | grep -a "NVLink\|PASS\|FAIL" | head -3
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
for a in "--count 512K --dtype bf16" "--count 256K --dtype float32" "--count 4100 --dtype bf16" "--count 1M --dtype bf16"; do
  SYMMEM_LL128=1 "$bin" run all-reduce $a 2>&1 | grep -a "PASS\|FAIL"; echo "-> run all-reduce LL128 $a: rc=${PIPESTATUS[0]}"
done
s=$EPOCHREALTIME
SYMMEM_LL128=1 timeout 200 "$bin" bench --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 8 --iters 1 --reps 300 --timeout 3m 2>&1 | grep -a "wrong\|│" | tail -6
echo "-> LL128 soak, 300 single operations a size, each checked: rc=${PIPESTATUS[0]} in $(el $s) s"
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, LL128 1M: rc=${PIPESTATUS[0]} (want 3)"; left
s=$EPOCHREALTIME
SYMMEM_LL128=1 SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> LL128 1M, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
} 2>&1 | tee "$res/checks.txt"
save
SYMMEM_LL128=1 b ll128 --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 2 --reps 5; save
SYMMEM_LL128=0 b push --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 2 --reps 5; save
SYMMEM_LL128=1 b ll128-graph --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 2 --reps 5 --graph; save
SYMMEM_LL128=0 b push-graph --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 2 --reps 5 --graph; save
for w in 4 16; do SYMMEM_LL128=1 b ll128-w$w --op all-reduce --impl triton --algo one-shot --min-size 4K --max-size 16M --factor 4 --reps 5 --warps $w; done; save
SYMMEM_LL128=1 b ll128-f32 --op all-reduce --impl triton --algo one-shot --dtype float32 --min-size 64K --max-size 16M --factor 4 --reps 5; save
if [[ ${QUICK:-0} != 1 ]]; then
  b bc --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3; save
  SYMMEM_COPY_OWN=copy b bc-ce --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3; save
  b ag --op all-gather,all-to-all --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3; save
  SYMMEM_COPY_OWN=sm:32 b ag-sm32 --op all-gather,all-to-all --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3; save
fi
show ll128 push ll128-graph push-graph ll128-w4 ll128-w16 ll128-f32 bc bc-ce ag ag-sm32
