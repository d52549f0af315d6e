#!/usr/bin/env bash
# Eighth session, on nvidia-h200 (one GPU; the two-GPU kind was not lent for an hour):
# the session's new GPU paths on real hardware with one rank: the copy-engine
# collectives' own part by sm_store on its own stream (eager and captured in a graph),
# the --graph path with the ranks' barrier before the clock, the staged reduce-scatter's
# kernel on one rank. Results in one8-results.tar.gz.
# usage: scripts/gpu-one8.sh
set -uo pipefail
if [[ -f ship/bins.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
fi
source "$(dirname "$0")/gpu-lib.sh"
{
for op in broadcast all-gather all-to-all; do
  "$bin" run $op --impl copy-engine --nproc 1 --count 1M 2>&1 | grep -a "PASS\|FAIL\|rror"; echo "-> run $op copy-engine, 1 rank: rc=${PIPESTATUS[0]}"
done
"$bin" run reduce-scatter --nproc 1 --dtype bf16 --count 256K 2>&1 | grep -a "PASS\|FAIL\|rror"; echo "-> run reduce-scatter 1 rank: rc=${PIPESTATUS[0]}"
left
} 2>&1 | tee "$res/checks.txt"
b ce1 --op broadcast,all-gather,all-to-all --impl copy-engine --nproc 1 --min-size 1M --max-size 64M --factor 8 --reps 2
b ce1-graph --op broadcast,all-gather,all-to-all --impl copy-engine --nproc 1 --min-size 1M --max-size 64M --factor 8 --reps 2 --graph
SYMMEM_COPY_OWN=copy b ce1-copy --op broadcast --impl copy-engine --nproc 1 --min-size 64M --max-size 64M --reps 2
b tr1-graph --op all-reduce,reduce-scatter --impl triton --nproc 1 --min-size 1M --max-size 1M --reps 2 --graph
SYMMEM_COPY_OWN=sm:0 timeout 30 "$bin" bench --op broadcast --impl copy-engine --nproc 1 --min-size 1M --max-size 1M --reps 1 2>&1 | grep -a "SYMMEM_COPY_OWN" | head -2
tar -C "$res" -czf "$out/one8-results.tar.gz" .
show ce1 ce1-graph ce1-copy tr1-graph
