#!/usr/bin/env bash
# Eighth session, second call on nvidia-h200-x2: reduce_push takes a stride, so that
# reduce-scatter runs staged (each rank puts each peer's block into that peer's staging
# area, waits once, sums locally) up to pushAuto a block, pulling above; the Triton
# modules rebuilt and run from the build. Also: the copy-engine broadcast's own part
# copied by a kernel of K blocks (SYMMEM_COPY_OWN=sm:K) against the copy engine; the
# small all-reduces under --graph with the faster launch path.
# Results in s8b-results.tar.gz; kernels in kernels-build.tar.gz.
# usage: ONLY=symmem_collectives,symmem_moe scripts/gpu-session8b.sh
set -uo pipefail
if [[ -f ship/bins.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
fi
source "$(dirname "$0")/gpu-lib.sh"
rebuild ${ONLY:+--only $ONLY}
grep -ai "error\|Traceback" "$out/build.log" | head -20
echo "reduce_push: $(grep -oE '(ld|st)\.global(\.nc)?(\.v[24])?\.[bu][0-9]+' kernels/build/triton.reduce_push_bf16.w8.sm80.ptx | sort | uniq -c | tr -s ' \n' ' ')"
which nsys ncu 2>&1 | head -2; ls /usr/local/cuda/bin 2>/dev/null | tr '\n' ' ' | cut -c1-300; echo
{
for op in reduce-scatter all-reduce; do
  "$bin" run $op 2>&1 | grep -a "PASS\|FAIL"; echo "-> run $op: rc=${PIPESTATUS[0]}"
done
"$bin" run reduce-scatter --count 1M --dtype bf16 2>&1 | grep -a "PASS\|FAIL"; echo "-> run reduce-scatter 1M bf16 elements a block: rc=${PIPESTATUS[0]}"
SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op reduce-scatter,all-reduce --impl triton --min-size 1M --max-size 1M --reps 2 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, staged reduce-scatter and push all-reduce 1M: rc=${PIPESTATUS[0]} (want 3)"; left
s=$EPOCHREALTIME
SYMMEM_TEST_FAULT=1:absent:1 timeout 60 "$bin" bench --op reduce-scatter --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s 2>&1 | grep -a "gave up" | tail -1
echo "-> staged reduce-scatter 1M, rank 1 absent: rc=${PIPESTATUS[0]} (want 3) in $(el $s) s"; left
} 2>&1 | tee "$res/checks.txt"
for r in 1 2; do
  b rs$r --op reduce-scatter --impl triton,nccl --min-size 256K --max-size 32M --factor 2 --reps 3
  b rs-pull$r --op reduce-scatter --impl triton --algo pull --min-size 256K --max-size 32M --factor 2 --reps 3
done
b rs-f32 --op reduce-scatter --impl triton,nccl --dtype float32 --min-size 1M --max-size 16M --factor 4 --reps 3
b ar-graph --op all-reduce --impl triton,nccl --min-size 4K --max-size 1M --factor 2 --reps 5 --graph
b ar --op all-reduce --impl triton,nccl --min-size 4K --max-size 256M --factor 4 --reps 3
b bc --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3
for k in 4 8 16 32; do
  SYMMEM_COPY_OWN=sm:$k b bc-sm$k --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3
done
b bc2 --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3
tar -C "$res" -czf "$out/s8b-results.tar.gz" .
show rs1 rs-pull1 rs2 rs-pull2 rs-f32 ar-graph ar bc bc-sm4 bc-sm8 bc-sm16 bc-sm32 bc2
