#!/usr/bin/env bash
# The whole test suite, the README's test command: installs what the tests need where it
# is missing (Debian, as root: gcc for the race detector, Open MPI for the test that
# starts a real mpirun job), then runs every test with the race detector, printing each
# package's result as it finishes.
# usage: scripts/test.sh [go test flags...]   (default: -race -count=1 -timeout 30m;
#        TEST_JOBS=N packages at once, default 2)
# One `go test` per package: `go test ./...` prints its packages in import-path order, so
# the slowest package would hold back every line after it.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
cc=$(go env CC)
command -v "${cc%% *}" >/dev/null || need+=(gcc libc6-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "test.sh: missing ${need[*]}: install them (Debian: apt-get install ${need[*]}) and run again" >&2
    exit 1
  fi
  echo "test.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
(($#)) || set -- -race -count=1 -timeout 30m
# A binary built with -race sleeps a second before it exits; the tests start hundreds
# of processes (launchers, ranks, helpers), each such a binary. Races are still reported.
[[ ${GORACE:-} == *atexit_sleep_ms* ]] || export GORACE="${GORACE:+$GORACE }atexit_sleep_ms=0"
mod=$(go list -m)
# The fake GPU's package (internal/backend/gpu, the slowest by far) runs as four
# quarters, its tests dealt out by name (three -run lists, then -skip of all three, so a
# test nobody listed still runs): with halves, its second half ran alone for the last
# 100 s while the other job sat idle. Its first quarter and internal/cli (which starts
# hundreds of -race processes) start first, its other quarters next; the rest follow on
# whichever job is free.
gpu="$mod/internal/backend/gpu"
names=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' internal/backend/gpu/*_test.go | sort)
quarter() { awk -v q="$1" 'NR % 4 == q' <<< "$names" | paste -sd'|'; }
q1=$(quarter 1) q2=$(quarter 2) q3=$(quarter 3)
pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
echo "test.sh: $(wc -l <<< "$pkgs") packages, ${TEST_JOBS:-2} at a time (go test $*); $gpu reports once a quarter"
# While packages build and run, a line every TEST_TICK seconds (default 20) says which
# are still going: each job leaves a file named after its package in $running while
# it lasts.
running=$(mktemp -d)
trap 'rm -rf "$running"' EXIT
(
  while sleep "${TEST_TICK:-20}"; do
    now=$(ls "$running" 2>/dev/null | sed 's/%/\//g; s|^'"$mod"'/||' | paste -sd' ' -)
    echo "test.sh: ${SECONDS} s, still running: ${now:-(starting the next)}"
  done
) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null; rm -rf "$running"' EXIT
export running
{
  printf '%s\n' "$gpu -run=^($q1)\$" "$mod/internal/cli" "$gpu -run=^($q2)\$" "$gpu -run=^($q3)\$" "$gpu -skip=^($q1|$q2|$q3)\$"
  grep -vxF -e "$gpu" -e "$mod/internal/cli" <<< "$pkgs"
} | xargs -P "${TEST_JOBS:-2}" -L 1 bash -c '
  n=$1; shift; flags=("${@:1:n}"); pkg=("${@:n+1}")
  q=${pkg[1]#*(}; q="quarter from ${q%%|*}"; [[ ${pkg[1]:-} == -skip* ]] && q="last quarter"
  f="$running/${pkg[0]//\//%}${pkg[1]:+ ($q)}"
  touch "$f"; go test "${flags[@]}" "${pkg[@]}"; rc=$?; rm -f "$f"; exit $rc' job $# "$@" || {
  echo "test.sh: a package failed (its output is above)" >&2
  exit 1
}
