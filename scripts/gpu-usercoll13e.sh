#!/usr/bin/env bash
# Thirteenth session, fifth call, on one H200 (two ranks sharing it): where a user's
# kernel went wrong, as bench now says it (first_wrong): wrong_all_reduce.py (each rank
# leaves its peer's part out) and the drop fault on push_collectives.py's all-gather.
# usage: scripts/gpu-usercoll13e.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
"$bin" kernels build examples/wrong_all_reduce.py --arch 90 --warps 4,32 --out "$k/mine" > /dev/null 2>&1; echo "-> build wrong rc=$?"
"$bin" kernels build examples/push_collectives.py --arch 90 --warps 4,32 --out "$k/mine" > /dev/null 2>&1; echo "-> build push rc=$?"
rank0lines() { grep -av "^\s*$\|^[├┌└│]\|^#" | cut -c1-220; }
TAILN=3 two bench --kernels "$k/mine" --impl wrong-all-reduce --op all-reduce --min-size 1M --max-size 1M --reps 2
TAILN=3 SYMMEM_TEST_FAULT=1:drop two bench --kernels "$k/mine" --impl push-collectives --op all-gather --min-size 1M --max-size 1M --reps 2
left
