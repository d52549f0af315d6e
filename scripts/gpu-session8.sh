#!/usr/bin/env bash
# Eighth session, first call on nvidia-h200-x2, no kernel rebuild. Two binaries side by
# side (carried packed in ship/bins.tar.xz: bin/symmem and bin/gpu.test from the
# working tree, bin/symmem-old and bin/gpu-old.test from the commit before):
# - the host's launch path: kernel launches, copies and events called through
#   purego.SyscallN (no reflection), a kernel's selection kept (no catalogue search per
#   launch), no allocation per launch: TestLaunchCost and small all-reduces, old and new;
# - the copy-engine collectives copying the rank's own part with the sm_store kernel
#   (default) or with the copy engine beside the peers' copies (SYMMEM_COPY_OWN=copy);
# - the 1 MiB all-reduce's grid, launched one by one and under --graph.
# Results in s8-results.tar.gz.
# usage: scripts/gpu-session8.sh
set -uo pipefail
if [[ -f ship/bins.tar.xz ]]; then
  python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
fi
source "$(dirname "$0")/gpu-lib.sh"
old=bin/symmem-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | head -2
lscpu | grep -a "Model name" | head -1
{
for t in gpu-old gpu; do
  echo "== bin/$t.test TestLaunchCost"
  timeout 120 bin/$t.test -test.run 'TestLaunchCost$' -test.v 2>&1 | grep -a "us/op\|FAIL\|ok\|PASS" | sed 's/^ *//'
done
"$bin" run put 2>&1 | grep -a "Rank 1\|PASS\|FAIL"; echo "-> run put: rc=${PIPESTATUS[0]}"
for op in broadcast all-gather all-to-all; do
  "$bin" run $op --impl copy-engine 2>&1 | grep -a "PASS\|FAIL"; echo "-> run $op copy-engine: rc=${PIPESTATUS[0]}"
done
SYMMEM_TEST_FAULT=0:drop:1 timeout 60 "$bin" bench --op broadcast,all-gather --impl copy-engine --min-size 1M --max-size 1M --reps 2 --root 0 2>&1 | grep -a "wrong bytes$" | tail -2
echo "-> drop fault, copy-engine: rc=${PIPESTATUS[0]} (want 3)"; left
} 2>&1 | tee "$res/checks.txt"
# The launch path, old and new binaries alternating.
for r in 1 2; do
  bin=$old b ar-old$r --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5
  b ar-new$r --op all-reduce --impl triton,nccl --min-size 4K --max-size 16M --factor 4 --reps 5
done
b small-new --op all-gather,reduce-scatter,broadcast,all-to-all --impl triton,nccl --min-size 1M --max-size 1M --reps 5
bin=$old b small-old --op all-gather,reduce-scatter,broadcast,all-to-all --impl triton,nccl --min-size 1M --max-size 1M --reps 5
# The own part: kernel (default) against the copy engine.
for r in 1 2; do
  b bc-sm$r --op broadcast --impl copy-engine,nccl --min-size 256M --max-size 256M --reps 3
  SYMMEM_COPY_OWN=copy b bc-ce$r --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3
done
b bc-sm-graph --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3 --graph
b bc-sm-b2 --op broadcast --impl copy-engine --min-size 256M --max-size 256M --reps 3 --blocks 2
b ag-sm --op all-gather,all-to-all --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3
SYMMEM_COPY_OWN=copy b ag-ce --op all-gather,all-to-all --impl copy-engine --min-size 256M --max-size 512M --factor 2 --reps 3
# The 1 MiB all-reduce's grid.
for g in "" "--graph"; do
  for cfg in "" "--warps 4" "--blocks 32" "--blocks 32 --warps 4" "--blocks 16 --warps 16"; do
    b "ar1m${g:+-graph}$(echo $cfg | tr -d ' -')" --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 5 $g $cfg
  done
done
tar -C "$res" -czf "$out/s8-results.tar.gz" .
show ar-old1 ar-new1 ar-old2 ar-new2 small-new small-old bc-sm1 bc-ce1 bc-sm2 bc-ce2 bc-sm-graph bc-sm-b2 ag-sm ag-ce
for f in "$res"/ar1m*.json; do n=$(basename "$f" .json); echo "== $n"; "$bin" bench show "$f" 2>&1 | grep -a "all-reduce" | cut -c1-140; done
