package gpu

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// signalOp imitates signal_op (symmem's and a user's, which kernels.Signatures holds
// to the same contract): op with value to the word at sig on peer, once. A user's that
// sets whatever it is asked (userSetOnly) does not deliver an add.
func (g *fakeGPU) signalOp(l fakeLaunch) error {
	a := l.args
	w, err := g.word(int(a[3]), a[0])
	if err != nil {
		return err
	}
	op, value := a[1], a[2]
	if g.w.userSetOnly && g.w.isUser(l.impl) {
		op = ops.SignalSet
	}
	switch op {
	case ops.SignalSet:
		binary.LittleEndian.PutUint64(w, value)
	case ops.SignalAdd:
		binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)+value)
	default:
		return errors.New("fake: signal_op with an operator NVSHMEM has not")
	}
	return nil
}

// isUser says whether impl is a user's implementation of the world's registry.
func (w *fakeWorld) isUser(impl string) bool { return w.reg.IsUser(impl) }

// A user's signal kernel serves the signal op: each round's set or add lands on the
// peer's word by the user's signal_op (the value and the operator symmem asks), the
// receiver waits with symmem's wait_signal where the user has none, and the word
// holds the last round's value. Bench's ping-pong is the host's: the user has no
// ping-pong kernel of signals. A kernel that sets where it is asked to add leaves
// another word, which the check sees.
func TestUserSignal(t *testing.T) {
	for _, broken := range []bool{false, true} {
		w := newWorld(t, 2, 1<<20)
		bs := make([]*Backend, 2)
		gs := make([]*fakeGPU, 2)
		for r := range 2 {
			bs[r], gs[r] = w.open(t, r, Config{})
		}
		impl := addUser(t, []*fakeWorld{w}, []string{"signal_op"}, false)
		im, _ := w.reg.ByName(impl)
		if got := strings.Join(im.Kernels[ops.Signal], ","); got != "signal_op,wait_signal" {
			t.Fatalf("%s serves signal with %s", impl, got)
		}
		w.userSetOnly = broken
		l := backend.Launch{Impl: impl}
		sig, err := bs[1].Alloc(8)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs[0].Alloc(8); err != nil {
			t.Fatal(err)
		}
		const step, rounds = 5, 4
		for k := 1; k <= rounds; k++ {
			op, v := ops.SignalRound(k, step)
			if err := bs[0].SignalOp(sig, op, v, 1, l); err != nil {
				t.Fatal(err)
			}
			last := gs[0].launches[len(gs[0].launches)-1]
			if last.impl != impl || last.kernel != kSignalOp || !slices.Equal(last.args[:4], []uint64{bs[0].addr(sig), op, v, 1}) || last.dim.Grid != 1 || last.dim.Block != 32 {
				t.Errorf("round %d launched %s/%s x%d of %d threads with %v", k, last.impl, last.kernel, last.dim.Grid, last.dim.Block, last.args)
			}
		}
		want := ops.SignalWord(rounds, step)
		// The check: the wait ends, and the word holds the last round's value.
		werr := bs[1].WaitWord(sig, want, ops.Signal, l)
		got := make([]byte, 8)
		if werr == nil {
			werr = bs[1].Read(sig, got)
		}
		if delivered := werr == nil && binary.LittleEndian.Uint64(got) == want; delivered == broken {
			t.Errorf("broken %v: the word holds %d, want %d (wait: %v)", broken, binary.LittleEndian.Uint64(got), want, werr)
		}
		if waited := gs[1].launches[len(gs[1].launches)-1]; waited.kernel != kWaitSignal || waited.impl != implTriton {
			t.Errorf("the receiver waited with %s/%s, want symmem's wait_signal", waited.impl, waited.kernel)
		}
		if broken {
			continue // rank 1's context trapped
		}
		stamps, err := bs[0].Alloc(8 * (rounds + 2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs[0].SignalPingPong(sig, stamps, rounds, 1, true, l); !errors.Is(err, backend.ErrNoSignalPingPong) {
			t.Errorf("a ping-pong of the user's signals on the device: %v, want ErrNoSignalPingPong", err)
		}
	}
}
