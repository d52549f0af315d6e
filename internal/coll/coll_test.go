package coll

import (
	"bytes"
	"testing"

	"github.com/symmem/symmem/internal/ops"
)

// The check values must sum exactly in bfloat16 for every rank count: a sum that
// rounds would make a right result look wrong.
func TestSumsExactInBF16(t *testing.T) {
	for _, n := range []int{2, 3, 7, 8, 64} {
		d := NewData("bf16", ops.Sum, n, 4096)
		s, _ := ops.Op(ops.AllReduce).Shape(4096, n, 2)
		got, err := d.Want(s, 0, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+2 <= len(got); i += 2 {
			var sum float64
			for r := 0; r < n; r++ {
				in := d.Input(r, 3, s.Send)
				sum += float64(ops.FromBF16(uint16(in[i]) | uint16(in[i+1])<<8))
			}
			if v := float64(ops.FromBF16(uint16(got[i]) | uint16(got[i+1])<<8)); v != sum {
				t.Fatalf("%d ranks, element %d: bf16 sum %g, exact %g", n, i/2, v, sum)
			}
		}
	}
}

// Windows move with the measurement: last measurement's output never passes. (Rank 1
// is the root, which a rooted collective leaves something.)
func TestWantMovesWithMeasurement(t *testing.T) {
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.AllToAll, ops.Reduce, ops.Gather, ops.Scatter} {
		dt := ""
		if op.Reduces() {
			dt = "float32"
		}
		d := NewData(dt, ops.Sum, 3, 1<<12)
		s, _ := op.Shape(1<<12, 3, 4)
		a, _ := d.Want(s, 1, 1, 0)
		b, _ := d.Want(s, 1, 1, 1)
		if len(a) == 0 || bytes.Equal(a, b) {
			t.Errorf("%s: measurements 0 and 1 want the same output", op)
		}
	}
}

// A rank that a collective leaves nothing (not reduce's or gather's root) is wanted
// nothing: nil, no error.
func TestWantNothingOffTheRoot(t *testing.T) {
	for _, op := range []ops.Op{ops.Reduce, ops.Gather} {
		d := NewData("float32", ops.Sum, 3, 1<<12)
		s, _ := op.Shape(1<<12, 3, 4)
		for me := range 3 {
			got, err := d.Want(s, me, 2, 0)
			if err != nil || (got == nil) != (me != 2) {
				t.Errorf("%s, root 2: rank %d wants %d bytes (nil: %v), %v", op, me, len(got), got == nil, err)
			}
		}
	}
}

func TestRouting(t *testing.T) {
	m := MoE{Tokens: 64, Hidden: 16, TopK: 4, Experts: 16, Seed: 7}
	rt, err := m.Route(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for s := range rt.Dests {
		for tok, ds := range rt.Dests[s] {
			if len(ds) < 1 || len(ds) > 4 {
				t.Fatalf("rank %d token %d goes to %v", s, tok, ds)
			}
			total += len(ds)
		}
	}
	if total != len(rt.Dispatch) || total != len(rt.Combine) {
		t.Fatalf("%d copies, %d dispatch blocks, %d combine blocks", total, len(rt.Dispatch), len(rt.Combine))
	}
	// Drawn afresh (Route keeps what it drew): the seed alone decides the routing.
	if again := m.route(4, 2); again == rt || !equalRoutes(rt, again) {
		t.Error("the same seed gave another routing")
	}
	m.Seed = 8
	other, _ := m.Route(4, 2)
	if equalRoutes(rt, other) {
		t.Error("another seed gave the same routing")
	}
	m.Skew = 2
	skewed, _ := m.Route(4, 2)
	if skewed.Slots[0] <= skewed.Slots[3] {
		t.Errorf("skewed routing should favour rank 0's experts: slots %v", skewed.Slots)
	}
	if err := (MoE{Tokens: 1, Hidden: 1, TopK: 9, Experts: 8}).Validate(2); err == nil {
		t.Error("top-9 of 8 experts: want an error")
	}
}

func equalRoutes(a, b *Routing) bool {
	if len(a.Dispatch) != len(b.Dispatch) {
		return false
	}
	for i := range a.Dispatch {
		if a.Dispatch[i] != b.Dispatch[i] {
			return false
		}
	}
	return true
}
