package runtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/kernels/kernelstest"
)

// signal and barrier check words of their own, whatever --count and --dtype say;
// put-flag takes a second destination for its second ordering.
func TestValidateSyncOps(t *testing.T) {
	s := Spec{Op: ops.Signal, Count: 8, Value: 5, Peer: 1}
	if err := s.Validate(2, backend.CPU, own); err != nil {
		t.Fatal(err)
	}
	if s.DType != "int64" || s.Bytes != 8 || s.Pattern != "pair" || s.Launch.Impl != "memcpy" {
		t.Errorf("signal: %+v", s)
	}
	for _, v := range []float64{0, 0.5, -3} {
		s := Spec{Op: ops.Signal, Count: 8, Value: v, Peer: 1}
		if err := s.Validate(2, backend.CPU, own); err == nil || !strings.Contains(err.Error(), "steps its word by the value") {
			t.Errorf("signal of value %g: %v", v, err)
		}
	}
	b := Spec{Op: ops.Barrier, Count: 8}
	if err := b.Validate(4, backend.CPU, own); err != nil {
		t.Fatal(err)
	}
	if b.Pattern != "all" || b.Bytes != 32 {
		t.Errorf("barrier on 4 ranks: %+v", b)
	}
	if lay, _ := b.Layout(4, own); lay.Heap() < 8*ops.MeetSlots(4)+8 {
		t.Errorf("barrier's layout takes %d bytes", lay.Heap())
	}
	b = Spec{Op: ops.Barrier, Pattern: "ring"}
	if err := b.Validate(4, backend.CPU, own); err == nil || !strings.Contains(err.Error(), "involves every rank") {
		t.Errorf("barrier in a ring: %v", err)
	}
	p := Spec{Op: ops.PutFlag, Count: 100, Value: 5, Peer: 1}
	if err := p.Validate(2, backend.CPU, own); err != nil {
		t.Fatal(err)
	}
	lay, _ := p.Layout(2, own)
	if lay.Heap() < 3*100 {
		t.Errorf("put-flag's layout takes %d bytes: no room for both destinations", lay.Heap())
	}
}

// fakeUserDir is the registry with impl's catalogue of kernels ks (kernelstest.Dir).
func fakeUserDir(t *testing.T, impl string, ks ...string) *backend.Registry {
	t.Helper()
	c, err := kernels.LoadDir(kernelstest.Dir(t, impl, ks...))
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A run tests the variants of put-flag and barrier the implementation runs: a user's
// with put-flag's fence kernel alone tests fence, one with barrier_all alone
// barrier-all, and the run says so; symmem's own run both.
func TestRunTestsTheVariantsTheImplRuns(t *testing.T) {
	ureg := fakeUserDir(t, "mine", "put_flag_fence", "barrier_all")
	for _, tc := range []struct {
		op   ops.Op
		want []string
	}{{ops.PutFlag, []string{ops.Fence}}, {ops.Barrier, []string{ops.BarrierAll}}} {
		s := Spec{Op: tc.op, Count: 100, Peer: 1, Launch: backend.Launch{Impl: "mine"}}
		if err := s.Validate(2, backend.NVSHMEM, ureg); err != nil || !slices.Equal(s.Variants, tc.want) {
			t.Errorf("%s of mine: variants %v (%v), want %v", tc.op, s.Variants, err, tc.want)
		}
		s = Spec{Op: tc.op, Count: 100, Peer: 1}
		if err := s.Validate(2, backend.CPU, own); err != nil || s.Variants != nil {
			t.Errorf("%s of memcpy: variants %v (%v), want every one", tc.op, s.Variants, err)
		}
	}
	_, outs := runOnCPUWith(t, Spec{Op: ops.PutFlag, Count: 100, Value: 5, Peer: 1, Variants: []string{ops.Fence}}, false, nil)
	if !strings.Contains(outs[1], "received out=fence: ") || strings.Contains(outs[1], "quiet") {
		t.Errorf("put-flag of fence alone: %q", outs[1])
	}
	res, outs := runOnCPUWith(t, Spec{Op: ops.Barrier, Variants: []string{ops.BarrierAll}}, false, nil)
	if !strings.Contains(outs[0], "saw barrier-all: 2 of 2 stamps\n") || !res[0].OK {
		t.Errorf("barrier-all alone: %q", outs[0])
	}
}
