#!/usr/bin/env bash
# The project's lint, defined here only: `make lint` and .ci/run both call it.
# gofmt, go vet, staticcheck, go mod tidy, in this module and in test/outside; any
# finding fails it (exit 1).
# usage: scripts/lint.sh   (GO=/path/to/go picks the go command)
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

echo "lint: gofmt"
# Every .go file outside hidden folders (.git, .whl, ...), tracked or not; no git needed.
unformatted=$(find . -path './.*' -prune -o -name '*.go' -type f -print0 | xargs -0 -r gofmt -l)
if [[ -n $unformatted ]]; then
  echo "gofmt -w needed on:"
  echo "$unformatted"
  exit 1
fi

echo "lint: go vet"
"$go" vet ./...

echo "lint: staticcheck"
"$go" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "lint: go mod tidy -diff"
"$go" mod tidy -diff

# test/outside is a module of its own (a program that depends on symmem): ./... above
# stops at its go.mod.
echo "lint: test/outside: go vet, staticcheck, go mod tidy -diff"
(
  cd test/outside
  "$go" vet ./...
  "$go" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
  "$go" mod tidy -diff
)

echo "lint: ok"
