package runtest

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
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
