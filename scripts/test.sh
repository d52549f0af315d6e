#!/usr/bin/env bash
# The whole test suite, the README's test command: installs what the tests need where it
# is missing (Debian, as root: gcc for the race detector, Open MPI for the test that
# starts a real mpirun job), then runs every test with the race detector, printing each
# package's result as it finishes.
# usage: scripts/test.sh [go test flags...]   (default: -race -count=1 -timeout 30m;
#        TEST_JOBS=N packages at once, default 2)
# One `go test` per package: `go test ./...` prints its packages in import-path order, so
# the fake GPU's package (internal/backend/gpu, the slowest) held back every line after
# it.
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
# The two slowest packages start first, one per job: the fake GPU's (internal/backend/gpu,
# about 2 minutes under -race, 1.8 GB at its peak) and internal/cli (which starts
# hundreds of -race processes); the rest follow on whichever job is free.
slow=("$mod/internal/backend/gpu" "$mod/internal/cli")
pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
{
  printf '%s\n' "${slow[@]}"
  grep -vxF -e "${slow[0]}" -e "${slow[1]}" <<< "$pkgs"
} | xargs -P "${TEST_JOBS:-2}" -I{} go test "$@" {} || {
  echo "test.sh: a package failed (its output is above)" >&2
  exit 1
}
