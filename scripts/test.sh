#!/usr/bin/env bash
# The whole test suite, the README's test command: installs what the tests need where it
# is missing (Debian, as root: gcc for the race detector, Open MPI for the test that
# starts a real mpirun job, LLVM's llvm-link and llvm-as for the kernel build's pruned
# libraries), then runs every test with the race detector, printing each
# package's result as it finishes and a line every TEST_TICK seconds (default 20) while
# any runs. Two exceptions, both for time:
# - the processes the CLI's scripts start (launchers and ranks, hundreds of them) are a
#   plain build of symmem ($SYMMEMTEST_BIN): a -race one costs three times the CPU to
#   start, which made internal/cli take 3.5 minutes alone. The scripts' test process,
#   and every test that runs the CLI in-process, keep the race detector; code that runs
#   only in the scripts' processes (an external job's rank 0, the peer watches) does
#   not get it here: `go test -race ./internal/cli` alone runs them as -race binaries.
# - internal/backend/gpu runs without it, but for its tests that start goroutines: the
#   package's own code starts none, and its fake GPU runs each kernel in the caller's
#   goroutine, so the race detector had nothing to watch there but took 7 times as long.
# Last, test/outside: a module of its own that uses the library as a program outside
# symmem does.
# usage: scripts/test.sh [go test flags...]   (default: -race -vet=off -count=1 -timeout 30m '-ldflags=-s -w';
#        TEST_JOBS=N packages at once, default 2)
# One `go test` per package: `go test ./...` prints its packages in import-path order, so
# the slowest package would hold back every line after it.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
cc=$(go env CC)
command -v "${cc%% *}" >/dev/null || need+=(gcc libc6-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
command -v llvm-link >/dev/null && command -v llvm-as >/dev/null || need+=(llvm)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "test.sh: missing ${need[*]}: install them (Debian: apt-get install ${need[*]}) and run again" >&2
    exit 1
  fi
  echo "test.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# -ldflags='-s -w' links without DWARF and the symbol table: a third less CPU for each of
# some 30 test binaries; stack traces and race reports keep their function names and
# lines (they read the runtime's own tables). -vet=off: go test's
# own vet pass is a subset of scripts/lint.sh's `go vet ./...` (which .ci/run runs
# first), and type-checking every package once more cost a fifth of a cold build.
(($#)) || set -- -race -vet=off -count=1 -timeout 30m '-ldflags=-s -w'
# A binary built with -race sleeps a second before it exits; the tests start hundreds
# of processes (launchers, ranks, helpers), each such a binary. Races are still reported.
[[ ${GORACE:-} == *atexit_sleep_ms* ]] || export GORACE="${GORACE:+$GORACE }atexit_sleep_ms=0"
mod=$(go list -m)
# internal/backend/gpu's tests that start goroutines (a go statement in their body) keep
# the race detector; a go statement anywhere else in its tests (a helper) keeps it for all.
gpu="$mod/internal/backend/gpu"
racy=$(awk '/^func / { name = ""; if ($0 ~ /^func Test[A-Za-z0-9_]*\(t \*testing\.T\)/) { split($2, a, "("); name = a[1] } }
  /^(var|const|type) / { name = "" }
  /(^|[^A-Za-z0-9_.])go (func|[A-Za-z_][A-Za-z0-9_.]*\()|\.Go\(|AfterFunc\(|\.Parallel\(\)/ { print (name == "" ? "HELPER" : name) }' internal/backend/gpu/*_test.go |
  sort -u | paste -sd'|')
if [[ $racy == *HELPER* ]]; then
  gpujobs=("$gpu")
else
  gpujobs=("$gpu -run=^($racy)\$" "PLAIN $gpu -skip=^($racy)\$")
fi
pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
running=$(mktemp -d)
plain=$(mktemp -d)
trap 'rm -rf "$running" "$plain"' EXIT
echo "test.sh: $(wc -l <<< "$pkgs") packages, ${TEST_JOBS:-2} at a time (go test $*); building symmem without -race for the scripts' processes"
# The plain build goes first, beside the first job: internal/cli waits for it.
( if go build '-ldflags=-s -w' -o "$plain/symmem" ./cmd/symmem; then touch "$plain/ok"; fi; touch "$plain/done" ) &
builder=$!
export SYMMEMTEST_BIN=$plain
# While packages build and run, a line every TEST_TICK seconds says which are still
# going: each job leaves a file named after its package in $running while it lasts.
(
  while sleep "${TEST_TICK:-20}"; do
    now=$(ls "$running" 2>/dev/null | sed 's/%/\//g; s|^'"$mod"'/||' | paste -sd' ' -)
    echo "test.sh: ${SECONDS} s, still running: ${now:-(starting the next)}"
  done
) &
ticker=$!
trap 'kill "$ticker" "$builder" 2>/dev/null; rm -rf "$running" "$plain"' EXIT
export running
# internal/cli goes first (the longest), then the fake GPU's package; the rest follow on
# whichever job is free. A line starting with PLAIN runs without -race.
{
  printf '%s\n' "$mod/internal/cli" "${gpujobs[@]}"
  grep -vxF -e "$gpu" -e "$mod/internal/cli" <<< "$pkgs"
} | xargs -P "${TEST_JOBS:-2}" -L 1 bash -c '
  n=$1; shift; race=("${@:1:n}"); shift "$n"; flags=("${race[@]}")
  if [[ $1 == PLAIN ]]; then
    shift; flags=()
    for f in "${race[@]}"; do [[ $f == -race ]] || flags+=("$f"); done
  fi
  what=$1
  case ${2:-} in
  -run=*) what+=" (its tests that start goroutines)" ;;
  -skip=*) what+=" (the rest, without -race)" ;;
  esac
  f="$running/${what//\//%}"
  if [[ $1 == */internal/cli ]]; then
    w="$f (waiting for the plain build)"
    touch "$w"
    until [[ -e $SYMMEMTEST_BIN/done ]]; do sleep 1; done
    rm -f "$w"
    [[ -e $SYMMEMTEST_BIN/ok ]] || { echo "test.sh: go build ./cmd/symmem failed (above)" >&2; exit 1; }
  fi
  touch "$f"; go test "${flags[@]}" "$@"; rc=$?; rm -f "$f"; exit $rc' job $# "$@" || {
  echo "test.sh: a package failed (its output is above)" >&2
  exit 1
}
# A module of its own, which depends on symmem as a program outside it does: every
# field of the library's options and specs set from there, and jobs run through them.
echo "test.sh: ${SECONDS} s, test/outside (the library from another module)"
touch "$running/test%outside"
(cd test/outside && go test "$@" ./...) || {
  echo "test.sh: test/outside failed (its output is above)" >&2
  exit 1
}
rm -f "$running/test%outside"
