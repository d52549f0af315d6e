package gpu

import (
	"bytes"
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

// userPutFlag imitates a user's put-flag kernel as kernels.Signatures promises it:
// nbytes of src into dst on peer, then value into the flag on peer, put from flag_src
// (which holds value after it). userFlagHalf puts half the data.
func (g *fakeGPU) userPutFlag(l fakeLaunch) error {
	a := l.args
	dst, err := g.sym(a[0])
	if err != nil {
		return err
	}
	src, err := g.sym(a[1])
	if err != nil {
		return err
	}
	n, value, peer := int64(a[2]), a[5], int(a[6])
	if g.w.userFlagHalf {
		n /= 2
	}
	if err := g.move(peer, dst, g.rank, src, n); err != nil {
		return err
	}
	from, err := g.word(g.rank, a[4])
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(from, value)
	to, err := g.word(peer, a[3])
	if err != nil {
		return err
	}
	copy(to, from)
	return nil
}

// A user's put-flag kernels serve put-flag, a variant each: PutFlag launches the
// kernel of the ordering asked with the data, the flag, a word of the lane's own to
// put the flag from, the value and the peer; the receiver waits with the user's
// wait_flag, and the data is there when the flag is. An implementation with the fence
// kernel alone runs that variant only, and says so when asked for quiet. A kernel
// that puts half the data fails the check.
func TestUserPutFlag(t *testing.T) {
	for _, broken := range []bool{false, true} {
		w := newWorld(t, 2, 1<<20)
		bs := make([]*Backend, 2)
		gs := make([]*fakeGPU, 2)
		for r := range 2 {
			bs[r], gs[r] = w.open(t, r, Config{})
		}
		impl := addUser(t, []*fakeWorld{w}, []string{"put_flag_fence", "put_flag_quiet", "wait_flag"}, false)
		im, _ := w.reg.ByName(impl)
		if got := strings.Join(im.Kernels[ops.PutFlag], ","); got != "put_flag_fence,put_flag_quiet,wait_flag" || strings.Join(im.VariantsOf(ops.PutFlag, ""), ",") != "fence,quiet" {
			t.Fatalf("%s serves put-flag with %s, variants %v", impl, got, im.Variants)
		}
		w.userFlagHalf = broken
		const n = 4096
		var bufs [2][3]backend.Buffer // src, dst, flag on each rank (the same offsets)
		for r := range 2 {
			for i, size := range []int64{n, n, 8} {
				b, err := bs[r].Alloc(size)
				if err != nil {
					t.Fatal(err)
				}
				bufs[r][i] = b
			}
		}
		src, dst, flag := bufs[0][0], bufs[1][1], bufs[1][2]
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		if err := bs[0].Write(src, data); err != nil {
			t.Fatal(err)
		}
		for i, order := range []string{ops.Fence, ops.Quiet} {
			l := backend.Launch{Impl: impl, Lane: 0}
			if err := bs[1].Write(dst, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			value := uint64(i + 1)
			if err := bs[0].PutFlag(bufs[0][1], src, bufs[0][2], value, order, 1, l); err != nil {
				t.Fatal(err)
			}
			put := gs[0].launches[len(gs[0].launches)-1]
			flagSrc := uint64(bs[0].sync) + uint64(userFlagOff(2))
			if want := []uint64{bs[0].addr(bufs[0][1]), bs[0].addr(src), n, bs[0].addr(bufs[0][2]), flagSrc, value, 1}; put.kernel != "put_flag_"+order ||
				!slices.Equal(put.args[:7], want) || put.dim.Grid != 1 {
				t.Errorf("%s: launched %s x%d with %v, want put_flag_%s x1 with %v", order, put.kernel, put.dim.Grid, put.args, order, want)
			}
			// The check: once the flag is there, so is the data.
			err := bs[1].WaitWord(flag, value, ops.PutFlag, l)
			got := make([]byte, n)
			if err == nil {
				err = bs[1].Read(dst, got)
			}
			if ok := err == nil && bytes.Equal(got, data); ok == broken {
				t.Errorf("broken %v, %s: the data arrived %v (%v)", broken, order, ok, err)
			}
			if waited := gs[1].launches[len(gs[1].launches)-1]; waited.kernel != kWaitFlag || waited.impl != impl {
				t.Errorf("%s: the receiver waited with %s/%s, want the user's wait_flag", order, waited.impl, waited.kernel)
			}
		}
	}
	// The fence kernel alone: put-flag's fence variant only.
	w := newWorld(t, 2, 1<<20)
	b, _ := w.open(t, 0, Config{})
	w.open(t, 1, Config{})
	impl := addUser(t, []*fakeWorld{w}, []string{"put_flag_fence"}, false)
	im, _ := w.reg.ByName(impl)
	if got := strings.Join(im.Kernels[ops.PutFlag], ","); got != "put_flag_fence,wait_signal" || strings.Join(im.VariantsOf(ops.PutFlag, ""), ",") != "fence" {
		t.Errorf("%s serves put-flag with %s, variants %v", impl, got, im.Variants)
	}
	buf, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	err = b.PutFlag(buf, buf, buf.Slice(0, 8), 1, ops.Quiet, 1, backend.Launch{Impl: impl})
	if want := "put-flag impl " + impl + " has no kernel ordered by quiet (it has fence): leave algo out or give algo fence"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("quiet: %v, want %q", err, want)
	}
}
