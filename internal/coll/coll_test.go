package coll

import (
	"bytes"
	"testing"

	"github.com/symmem/symmem/internal/backend"
)

func TestShapeOf(t *testing.T) {
	for _, c := range []struct {
		op                       string
		size                     int64
		n                        int
		bytes, send, recv, block int64
	}{
		{backend.OpAllReduce, 1 << 20, 3, 1 << 20, 1 << 20, 1 << 20, 1 << 20},
		{backend.OpAllGather, 1000, 3, 996, 332, 996, 332},
		{backend.OpReduceScatter, 1000, 4, 992, 992, 248, 248},
		{backend.OpAllToAll, 64, 3, 60, 60, 60, 20},
		{backend.OpBroadcast, 6, 4, 4, 4, 4, 4},
	} {
		s, err := ShapeOf(c.op, c.size, c.n, 4)
		if err != nil {
			t.Fatal(err)
		}
		if s.Bytes != c.bytes || s.Send != c.send || s.Recv != c.recv || s.Block != c.block {
			t.Errorf("%s %d over %d: got %+v", c.op, c.size, c.n, s)
		}
	}
	if _, err := ShapeOf(backend.OpAllGather, 8, 4, 4); err == nil {
		t.Error("8 bytes over 4 ranks of float32: want an error")
	}
}

func TestBusFactor(t *testing.T) {
	if f := BusFactor(backend.OpAllReduce, 4); f != 1.5 {
		t.Errorf("all-reduce over 4: %g, want 1.5", f)
	}
	if f := BusFactor(backend.OpAllGather, 2); f != 0.5 {
		t.Errorf("all-gather over 2: %g, want 0.5", f)
	}
	if f := BusFactor(backend.OpBroadcast, 8); f != 1 {
		t.Errorf("broadcast: %g, want 1", f)
	}
}

// The check values must sum exactly in bfloat16 for every rank count: a sum that
// rounds would make a right result look wrong.
func TestSumsExactInBF16(t *testing.T) {
	for _, n := range []int{2, 3, 7, 8, 64} {
		d := NewData("bf16", n, 4096)
		s, _ := ShapeOf(backend.OpAllReduce, 4096, n, 2)
		got, err := d.Want(s, 0, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+2 <= len(got); i += 2 {
			var sum float64
			for r := 0; r < n; r++ {
				in := d.Input(r, 3, s.Send)
				sum += float64(FromBF16(uint16(in[i]) | uint16(in[i+1])<<8))
			}
			if v := float64(FromBF16(uint16(got[i]) | uint16(got[i+1])<<8)); v != sum {
				t.Fatalf("%d ranks, element %d: bf16 sum %g, exact %g", n, i/2, v, sum)
			}
		}
	}
}

// Windows move with the measurement: last measurement's output never passes.
func TestWantMovesWithMeasurement(t *testing.T) {
	for _, op := range []string{backend.OpAllReduce, backend.OpAllGather, backend.OpReduceScatter, backend.OpBroadcast, backend.OpAllToAll} {
		dt := ""
		if backend.Reduces(op) {
			dt = "float32"
		}
		d := NewData(dt, 3, 1<<12)
		s, _ := ShapeOf(op, 1<<12, 3, 4)
		a, _ := d.Want(s, 1, 0, 0)
		b, _ := d.Want(s, 1, 0, 1)
		if bytes.Equal(a, b) {
			t.Errorf("%s: measurements 0 and 1 want the same output", op)
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
