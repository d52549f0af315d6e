package gpu

import (
	"slices"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// builtin is the registry entry of symmem's own implementation name, as a binary
// builds it (its kernels' manifests read from the embedded catalogue).
func builtin(name string) backend.Impl {
	im, _ := backend.Builtin(Factory{}).ByName(name)
	return im
}

// syncLaunches are the kernels sync.go launches for the signal, put-flag and barrier
// operations, sorted.
var syncLaunches = map[ops.Op][]string{
	ops.Signal:  {kSignalOp, kSignalPingPong, kWaitSignal},
	ops.PutFlag: {kPutFlag, kWaitSignal},
	ops.Barrier: {kBarrierAll, kSyncAll},
}

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
			case syncLaunches[op] != nil:
				// sync.go launches these kernels, whatever the code: the entry (its
				// kernels' manifests) must list each of them.
				has = slices.Equal(slices.Sorted(slices.Values(im.Kernels[op])), syncLaunches[op])
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
