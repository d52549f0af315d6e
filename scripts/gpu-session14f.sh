#!/usr/bin/env bash
# Fourteenth session, on one H200 (two ranks sharing it, SYMMEM_TEST_MPG=1): run now
# guards the output and the scratch; no healthy implementation may touch them: every
# collective of triton, copy-engine and the users' examples with counts that are not
# whole 16-byte vectors, every all-reduce algorithm, dispatch and combine.
# usage: scripts/gpu-session14f.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
rank0lines() { grep -a "PASS\|FAIL\|past the\|wrong"; }
k=$(mktemp -d)
for f in one_shot_all_reduce push_collectives moe_all_to_all; do
  "$bin" kernels build examples/$f.py --arch 90 --out "$k" > /dev/null 2>&1; echo "-> kernels build $f: rc=$?"
done
fails=0
one() { TAILN=2 two "$@" > "$res/one.txt" 2>&1; r=$?; grep -q "rc=0 0" "$res/one.txt" || { fails=$((fails+1)); cat "$res/one.txt"; }; }
for op in all-reduce reduce-scatter all-gather all-to-all broadcast; do
  for c in 4099 1000003; do
    one run $op --impl triton --count $c --dtype bf16
    one run $op --kernels "$k" --impl $([[ $op == all-reduce ]] && echo one-shot-all-reduce || echo push-collectives) --count $c --dtype bf16
  done
done
for c in 4099 1000003 33554435; do one run all-reduce --impl triton --count $c --dtype float32; done
for op in all-gather all-to-all broadcast; do one run $op --impl copy-engine --count 1000003 --dtype bf16; done
for op in dispatch combine; do one run $op --impl triton; one run $op --kernels "$k" --impl moe-all-to-all; done
echo "runs that did not pass on both ranks: $fails"
left
