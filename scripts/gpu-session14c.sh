#!/usr/bin/env bash
# Fourteenth session, on one H200: what kernels build says when a user's kernel does
# not compile (a literal 0 where a binding takes an int64; a name that is not there).
# usage: scripts/gpu-session14c.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
k=$(mktemp -d)
sed 's/nothing = tl.full(\[\], 0, tl.int64)/nothing = 0/' examples/moe_all_to_all.py > "$k/literal_zero.py"
sed 's/nv.fence()/nv.no_such_binding()/' examples/moe_all_to_all.py > "$k/no_such.py"
for f in literal_zero no_such; do
  grep -c "nothing = 0\|no_such_binding" "$k/$f.py"
  s=$EPOCHREALTIME; "$bin" kernels build "$k/$f.py" --arch 90 --warps 4,8 --out "$k/out-$f" > "$k/$f.out" 2> "$k/$f.err"
  echo "-> kernels build $f: rc=$? in $(el "$s") s; stderr $(wc -l < "$k/$f.err") lines, $(grep -c Traceback "$k/$f.err") stacks; its last line:"
  tail -1 "$k/$f.err"
  grep "^FAILED" "$k/$f.out" | head -2
done
