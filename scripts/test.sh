#!/usr/bin/env bash
# The whole test suite, the README's test command: installs what the tests need where it
# is missing (Debian, as root: gcc for the race detector, Open MPI for the test that
# starts a real mpirun job), then runs every test with the race detector.
# usage: scripts/test.sh [go test flags...]   (default: -race -count=1 -timeout 30m: the
# fake GPU's package takes about 5 minutes under the race detector on 2 cores)
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
exec go test "$@" ./...
