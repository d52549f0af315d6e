#!/usr/bin/env bash
# Twelfth session, on one H200 (two ranks sharing it, SYMMEM_TEST_MPG=1; times mean
# nothing): a user's Triton kernels built with `symmem kernels build` and taken by run
# and bench (the session moved the checks of a --kernels directory to internal/input,
# with size bounds), a kernel that writes wrong bytes failing run and bench (exit 3), and
# a tampered directory (a sidecar that is a named pipe) refused at once (exit 2).
# usage: scripts/gpu-kern12.sh   (nvidia-h200; ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
export SYMMEM_TEST_MPG=1
k=$(mktemp -d)
s=$EPOCHREALTIME; "$bin" kernels build examples/strided_put.py --arch 90 --out "$k/mine" 2>&1 | tail -3; echo "-> kernels build strided_put: rc=${PIPESTATUS[0]} in $(el "$s") s"
"$bin" kernels list "$k/mine" 2>&1 | grep -av "^[├┌└]" | cut -c1-150 | tail -6; echo "-> kernels list: rc=${PIPESTATUS[0]}"
two run put --kernels "$k/mine" --impl strided-put --count 1M
two run get --kernels "$k/mine" --impl strided-put --count 4M
TAILN=8 two bench --kernels "$k/mine" --impl strided-put,triton,copy-engine --op put,get --min-size 1M --max-size 16M --factor 16 --reps 2
s=$EPOCHREALTIME; "$bin" kernels build examples/wrong_put.py --arch 90 --out "$k/wrong" 2>&1 | tail -2; echo "-> kernels build wrong_put: rc=${PIPESTATUS[0]} in $(el "$s") s"
TAILN=4 two run put --kernels "$k/wrong" --impl wrong-put --count 1M
TAILN=4 two bench --kernels "$k/wrong" --impl wrong-put --op put --min-size 1M --max-size 1M --reps 2
cp -r "$k/mine" "$k/tampered"; f=$(ls "$k/tampered"/*.json | head -1); rm "$f"; mkfifo "$f"
s=$EPOCHREALTIME; timeout 20 "$bin" kernels list "$k/tampered" 2>&1 | tail -2 | cut -c1-250; echo "-> kernels list of a directory with a named pipe for a sidecar: rc=${PIPESTATUS[0]} in $(el "$s") s (want 2, at once)"
left
