#!/usr/bin/env bash
# The closing run of the eighth session on nvidia-h200-x2 (no kernel rebuild: the
# binary embeds the kernels gpu-session8b.sh built): the seed put; the copy-engine
# collectives with the own part by a kernel beside them, and their drop fault; the
# small all-reduces under --graph with the ranks meeting before the clock; every
# collective next to NCCL with a plot; reduce-scatter staged against pull up to 32 MiB;
# the own part by kernel against the copy engine; MoE at the
# default layer. Results (JSON and the plot) in final8-results.tar.gz, saved after
# every bench.
# usage: [QUICK=1] scripts/gpu-final8.sh   (QUICK: the checks, the graph and own-part rows only)
set -uo pipefail
if [[ -f ship/bins.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
fi
source "$(dirname "$0")/gpu-lib.sh"
save() { tar -C "$res" -czf "$out/final8-results.tar.gz" .; }
{
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
for op in broadcast all-gather all-to-all; do
  "$bin" run $op --impl copy-engine --count 1M 2>&1 | grep -a "PASS\|FAIL"; echo "-> run $op copy-engine, 1M elements: rc=${PIPESTATUS[0]}"
done
for op in reduce-scatter all-reduce; do
  "$bin" run $op --dtype bf16 --count 256K 2>&1 | grep -a "PASS\|FAIL"; echo "-> run $op bf16, 256K elements: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op broadcast,all-gather,all-to-all --impl copy-engine --min-size 16M --max-size 16M --reps 2 --root 0 2>&1 | grep -a "wrong bytes$" | tail -3
echo "-> drop fault, copy-engine with the own part by kernel: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
b ar-graph --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5 --graph; save
for w in 8 16; do b ll-w$w --op all-reduce --impl triton --min-size 4K --max-size 16K --factor 2 --reps 5 --graph --warps $w; done; save
b bc --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3; save
b bc-graph --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3 --graph; save
SYMMEM_COPY_OWN=copy b bc-ce --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3; save
SYMMEM_COPY_OWN=copy b bc-ce-graph --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3 --graph; save
[[ ${QUICK:-0} == 1 ]] || b ar --op all-reduce --impl triton,nccl --min-size 4K --max-size 256M --factor 2 --reps 3; save
[[ ${QUICK:-0} == 1 ]] || b coll --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine,nccl --min-size 1M --max-size 256M --factor 16 --reps 3 --plot "$res/coll.png"; save
[[ ${QUICK:-0} == 1 ]] || b small --op all-gather,reduce-scatter,broadcast,all-to-all --impl triton,nccl --min-size 64K --max-size 1M --factor 4 --reps 5; save
[[ ${QUICK:-0} == 1 ]] || b rs --op reduce-scatter --impl triton --algo staged --min-size 8M --max-size 32M --factor 2 --reps 3; save
[[ ${QUICK:-0} == 1 ]] || b rs-pull --op reduce-scatter --impl triton,nccl --algo pull --min-size 8M --max-size 32M --factor 2 --reps 3; save
b ag --op all-gather,all-to-all --impl copy-engine,nccl --min-size 256M --max-size 512M --factor 2 --reps 3; save
SYMMEM_COPY_OWN=sm:32 b ag-sm32 --op all-gather,all-to-all --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3; save
[[ ${QUICK:-0} == 1 ]] || b moe --op dispatch,combine --impl triton --reps 5; save
[[ ${QUICK:-0} == 1 ]] || b moe2 --op dispatch,combine --impl triton --reps 5; save
show ar-graph ll-w8 ll-w16 bc bc-graph bc-ce bc-ce-graph ar coll small rs rs-pull ag ag-sm32 moe moe2
