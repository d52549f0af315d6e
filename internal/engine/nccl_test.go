package engine

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/runtest"
)

// A named NCCL window implementation the NCCL here cannot serve is refused before any
// rank starts, with the library's reason; a sweep that names none leaves it out of its
// defaults with a note instead of failing for an NCCL it did not ask for.
func TestPlanNCCLWindowImpls(t *testing.T) {
	var asked [][]string
	f := oldNCCL{asked: &asked}
	var note bytes.Buffer
	e := &Engine{factory: f, reg: own, opts: Options{HeapSize: 64 << 30, NCCLLib: "/x/libnccl.so.2"}, backend: backend.NVSHMEM, nproc: 2, Stderr: &note}
	_, err := e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 10, Launch: backend.Launch{Impl: "nccl-device"}})
	if err == nil || !strings.Contains(err.Error(), "needs NCCL 2.28 or newer") {
		t.Errorf("run impl nccl-device on 2.27: %v", err)
	}
	if _, err := e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 10, Launch: backend.Launch{Impl: "nccl-symm"}}); err != nil {
		t.Errorf("run impl nccl-symm on 2.27: %v", err)
	}
	spec := BenchDefaults
	spec.Ops, spec.DType, spec.MaxSize = []string{ops.AllReduce}, "bf16", 1<<20
	spec.Impls = []string{"triton", "nccl-device"}
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "needs NCCL 2.28") {
		t.Errorf("bench impl triton,nccl-device on 2.27: %v", err)
	}
	spec.Impls = nil
	j, err := e.PlanBench(spec)
	if err != nil {
		t.Fatalf("bench with impl left out: %v", err)
	}
	if slices.Contains(j.Bench.Impls, "nccl-device") || !slices.Contains(j.Bench.Impls, "nccl-symm") {
		t.Errorf("defaulted impls %v: want nccl-symm and not nccl-device", j.Bench.Impls)
	}
	if e.Reports() && !strings.Contains(note.String(), "leaving out impl nccl-device: impl nccl-device: NCCL 2.27.3 has no device API") {
		t.Errorf("note: %q", note.String())
	}
	// A dry run starts nothing and asks no library about named ones.
	asked = nil
	e.opts.DryRun = true
	spec.Impls = []string{"nccl-device"}
	if _, err := e.PlanBench(spec); err != nil || len(asked) != 0 {
		t.Errorf("dry run: %v, asked %v", err, asked)
	}
}

// oldNCCL is the GPU backend's factory where NCCL is 2.27: no device API.
type oldNCCL struct {
	gpu.Factory
	asked *[][]string
}

func (f oldNCCL) CheckLibraries(impls []string, lib string) error {
	*f.asked = append(*f.asked, impls)
	if slices.Contains(impls, "nccl-device") {
		return errors.New("impl nccl-device: NCCL 2.27.3 has no device API: it needs NCCL 2.28 or newer")
	}
	return nil
}
