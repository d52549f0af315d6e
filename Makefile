# symmem: the few targets a newcomer needs. `make help` lists them.
GO ?= go
BIN := bin/symmem

.PHONY: help build test lint kernels gpu-test startup-bench clean
help: ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
# The commit and its time, for `symmem version` and every result, where go build cannot
# read them itself (a git worktree, GOFLAGS=-buildvcs=false).
BUILDINFO := github.com/symmem/symmem/internal/buildinfo
LDFLAGS := -X $(BUILDINFO).Commit=$(shell git rev-parse HEAD 2>/dev/null) -X $(BUILDINFO).CommitTime=$(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
build: ## build bin/symmem (no CUDA toolkit needed)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/symmem
test: ## run every test, with the race detector but where scripts/test.sh says (CPU backend; no GPU needed)
	scripts/test.sh
lint: ## gofmt, go vet, staticcheck, go mod tidy check (scripts/lint.sh, which .ci/run runs too)
	GO="$(GO)" scripts/lint.sh
kernels: ## rebuild kernels/build on a machine with Triton, the NVSHMEM wheel, nvcc and bin/symmem (it compresses them)
	scripts/build-kernels.sh
gpu-test: build ## on a GPU machine: GPU tests, every op and failure path (scripts/gpu-check.sh)
	$(GO) test -c -tags gpu -o bin/gpu.test ./internal/backend/gpu
	scripts/gpu-check.sh $(BIN)
startup-bench: build ## start-up cost against a Go hello-world: help, a 2-rank put, 200 CPU ranks
	scripts/startup-bench.sh
clean: ## remove build outputs
	rm -rf bin
