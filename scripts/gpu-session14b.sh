#!/usr/bin/env bash
# Fourteenth session, on one H200: check-nvshmem's row for building your own kernels
# where Triton and the NVSHMEM wheel are installed; kernels build from outside a
# checkout once more (Python now in a process group of its own); a build interrupted
# by SIGINT and one by SIGTERM after 3 s must leave no Python behind.
# usage: scripts/gpu-session14b.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
repo=$PWD
bin=$repo/bin/symmem
s=$EPOCHREALTIME; "$bin" check-nvshmem --json > "$res/check.json"; echo "-> check-nvshmem: rc=$? in $(el "$s") s"
python3 -c "import json; d=json.load(open('$res/check.json')); print([c for c in d['checks'] if c['name']=='building your own']); print(d.get('build_tools'))"
"$bin" check-nvshmem 2>&1 | grep -A2 "building your own" | cut -c1-200
k=$(mktemp -d)
cd "$k" || exit 1
s=$EPOCHREALTIME; "$bin" kernels build "$repo/examples/push_collectives.py" --arch 90 --out "$k/out" > build.txt 2>&1
echo "-> kernels build push_collectives: rc=$? in $(el "$s") s, $(ls "$k/out" | grep -c 'cubin$') cubins"
for sig in INT TERM; do
  rm -rf "$k/out2"
  s=$EPOCHREALTIME
  "$bin" kernels build "$repo/examples/push_collectives.py" --arch 80,90,100 --out "$k/out2" > "build-$sig.txt" 2>&1 &
  pid=$!
  sleep 3
  echo "python processes during the build: $(pgrep -fc build-kernels.py)"
  kill -$sig $pid
  wait $pid; rc=$?
  sleep 1
  echo "-> kernels build, SIG$sig after 3 s: rc=$rc in $(el "$s") s; python processes left: $(pgrep -fc build-kernels.py); build directories left: $(ls /tmp | grep -c '^symmem-build-')"
  tail -2 "build-$sig.txt" | cut -c1-200
done
left
