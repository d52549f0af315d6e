package gpu

import (
	"slices"
	"testing"

	"github.com/symmem/symmem/internal/ops"
)

// Every implementation in order is registered, in that order, and its code has what
// its registry entry promises: a mover for put and get, a signaller for put-signal, a
// pinger for latency, a collective for each collective it lists.
func TestImplsHaveWhatTheyServe(t *testing.T) {
	impls := Factory{}.Impls()
	var names []string
	for _, im := range impls {
		names = append(names, im.Name)
	}
	if !slices.Equal(names, order) {
		t.Fatalf("Impls lists %v, want the order %v", names, order)
	}
	for _, im := range impls {
		gi, ok := implOf(im)
		if !ok {
			t.Fatalf("%s: no code", im.Name)
		}
		for op := range im.Kernels {
			var has bool
			switch {
			case op == ops.Put || op == ops.Get:
				_, has = gi.(mover)
			case op == ops.PutSignal:
				_, has = gi.(signaller)
			case op == ops.Latency:
				_, has = gi.(pinger)
			case op.IsCollective():
				_, has = gi.(collective)
			case op.Family() == ops.FamilyFused:
				_, has = gi.(fuser)
			case syncKernels[op] != nil:
				// sync.go launches the kernels the entry lists, whatever the code.
				has = slices.Equal(im.Kernels[op], syncKernels[op])
			default:
				t.Errorf("%s serves %s, which this test does not know", im.Name, op)
				continue
			}
			if !has {
				t.Errorf("%s serves %s in the registry but its code (%T) has no code for it", im.Name, op, gi)
			}
		}
	}
}
