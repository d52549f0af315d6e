package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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
		bs, gs := openAll(t, w)
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
	dst, src, err := g.dstSrc(a)
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

// putFlag imitates symmem's put_flag kernel (dst, src, nbytes, flag, value, order,
// peer): nbytes of src into dst on peer, then value into the flag there.
func (g *fakeGPU) putFlag(l fakeLaunch) error {
	a := l.args
	dst, src, err := g.dstSrc(a)
	if err != nil {
		return err
	}
	peer := int(a[6])
	if err := g.move(peer, dst, g.rank, src, int64(a[2])); err != nil {
		return err
	}
	w, err := g.word(peer, a[3])
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(w, a[4])
	return nil
}

// symmem's put-flag kernel lands the data with the flag. The unordered fault launches
// it with the flag alone and the data only once the next barrier is over: the
// receiver, checking as soon as the flag is there, finds the data missing, whether or
// not the ranks' kernels run side by side.
func TestUnorderedPutFlag(t *testing.T) {
	const n = 4096
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*5 + 3)
	}
	for _, impl := range []string{"triton", "cuda"} {
		for _, unordered := range []bool{false, true} {
			w := newWorld(t, 2, 1<<20)
			bs, gs := openAll(t, w)
			bs[0].SetUnordered(unordered)
			var src, dst, flag backend.Buffer // the same offsets on each rank
			for r := range 2 {
				for _, p := range []struct {
					b    *backend.Buffer
					size int64
				}{{&src, n}, {&dst, n}, {&flag, 8}} {
					b, err := bs[r].Alloc(p.size)
					if err != nil {
						t.Fatal(err)
					}
					*p.b = b
				}
			}
			if err := bs[0].Write(src, data); err != nil {
				t.Fatal(err)
			}
			l := backend.Launch{Impl: impl}
			if err := bs[0].PutFlag(dst, src, flag, 7, ops.Fence, 1, l); err != nil {
				t.Fatal(err)
			}
			put := gs[0].launches[len(gs[0].launches)-1]
			want := map[bool]uint64{false: n, true: 0}[unordered]
			if put.kernel != kPutFlag || put.args[2] != want || put.args[4] != 7 || put.args[5] != flagOrders[ops.Fence] {
				t.Errorf("%s, unordered %v: launched %s with %v, want put_flag of %d bytes, value 7, ordered by a fence", impl, unordered, put.kernel, put.args, want)
			}
			got := make([]byte, n)
			arrived := func() bool {
				if err := bs[1].Read(dst, got); err != nil {
					t.Fatal(err)
				}
				return bytes.Equal(got, data)
			}
			if err := bs[1].WaitWord(flag, 7, ops.PutFlag, l); err != nil {
				t.Fatalf("%s, unordered %v: the flag: %v", impl, unordered, err)
			}
			if arrived() == unordered {
				t.Errorf("%s, unordered %v: the data there with the flag: %v, want %v", impl, unordered, unordered, !unordered)
			}
			for r := range 2 {
				if err := bs[r].Barrier(); err != nil {
					t.Fatal(err)
				}
			}
			if !arrived() || len(bs[0].late) != 0 {
				t.Errorf("%s, unordered %v: after the barrier the data is there %v, %d puts still held back", impl, unordered, arrived(), len(bs[0].late))
			}
		}
	}
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
		bs, gs := openAll(t, w)
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
	if want := "put-flag {impl} " + impl + " has no kernel ordered by quiet (it has fence): leave {algo} out or give {algo} fence"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("quiet: %v, want %q", err, want)
	}
}

// meet imitates a barrier round (barrier_all, sync_all: symmem's and a user's, held
// to one contract): once every rank has launched it, each rank's stamp lands (bit 0
// of meet) in its word of every rank's slots (barrier_all) or of its own (sync_all),
// in rank order, and each rank counts into wrong the stamps it does not see: after
// every rank's where it meets (bit 1), else only those that landed before its own
// call (the fake's ranks take turns). A user's kernel that meets nobody
// (userNoMeet) meets no one.
func (g *fakeGPU) meet(l fakeLaunch) error {
	w := g.w
	w.meetCalls = append(w.meetCalls, stagedCall{g, l})
	if len(w.meetCalls) < w.size {
		return nil
	}
	calls := w.meetCalls
	w.meetCalls = nil
	first := calls[0].l
	for _, c := range calls {
		a := c.l.args
		if c.l.kernel != first.kernel || a[2] != first.args[2] || a[3] != uint64(c.g.rank) || a[4] != uint64(w.size) || c.l.dim.Grid != 1 {
			return fmt.Errorf("fake: rank %d launched %s x%d with %v, rank %d %s with %v", c.g.rank, c.l.kernel, c.l.dim.Grid, a, calls[0].g.rank, first.kernel, first.args)
		}
	}
	rnd, n := first.args[2], w.size
	slot := func(owner, of int) ([]byte, error) {
		off, err := calls[owner].g.sym(calls[owner].l.args[0])
		if err != nil {
			return nil, err
		}
		return w.bytes(owner, off+8*ops.MeetSlot(of, n, rnd), 8)
	}
	count := func(c stagedCall) error {
		var bad uint64
		for p := range n {
			owner := c.g.rank // barrier_all: every stamp in this rank's slots
			if c.l.kernel == kSyncAll {
				owner = p // sync_all: each rank's stamp fetched from its own
			}
			b, err := slot(owner, p)
			if err != nil {
				return err
			}
			if binary.LittleEndian.Uint64(b) != ops.MeetStamp(p, rnd) {
				bad++
			}
		}
		word, err := c.g.word(c.g.rank, c.l.args[1])
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(word, binary.LittleEndian.Uint64(word)+bad)
		return nil
	}
	meets := func(c stagedCall) bool { return c.l.args[5]&2 != 0 && !(w.userNoMeet && w.isUser(c.l.impl)) }
	for _, c := range calls {
		if c.l.args[5]&1 != 0 {
			for owner := range n {
				if c.l.kernel == kSyncAll && owner != c.g.rank {
					continue
				}
				b, err := slot(owner, c.g.rank)
				if err != nil {
					return err
				}
				binary.LittleEndian.PutUint64(b, ops.MeetStamp(c.g.rank, rnd))
			}
		}
		if !meets(c) {
			if err := count(c); err != nil {
				return err
			}
		}
	}
	for _, c := range calls {
		if meets(c) {
			if err := count(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// A user's barrier kernel serves barrier's variant of its NVSHMEM call: Meet launches
// it with symmem's barrier arguments (the slots, the wrong count, the round, this
// rank, the ranks, what to do), one block, and every rank sees every stamp of the
// round; an implementation with barrier_all alone runs barrier-all only. A kernel
// that meets nobody leaves stamps unseen, which the wrong count shows.
func TestUserBarrier(t *testing.T) {
	for _, broken := range []bool{false, true} {
		const n = 3
		w := newWorld(t, n, 1<<20)
		bs := make([]*Backend, n)
		gs := make([]*fakeGPU, n)
		for r := range n {
			bs[r], gs[r] = w.open(t, r, Config{})
		}
		impl := addUser(t, []*fakeWorld{w}, []string{"barrier_all"}, false)
		im, _ := w.reg.ByName(impl)
		if got := strings.Join(im.Kernels[ops.Barrier], ","); got != "barrier_all" || strings.Join(im.VariantsOf(ops.Barrier, ""), ",") != ops.BarrierAll {
			t.Fatalf("%s serves barrier with %s, variants %v", impl, got, im.Variants)
		}
		w.userNoMeet = broken
		var slots, wrong [n]backend.Buffer
		for r := range n {
			var err error
			if slots[r], err = bs[r].Alloc(8 * ops.MeetSlots(n)); err != nil {
				t.Fatal(err)
			}
			if wrong[r], err = bs[r].Alloc(8); err != nil {
				t.Fatal(err)
			}
		}
		var missed uint64
		for round := uint64(1); round <= 2; round++ {
			for r := range n {
				m := backend.Meeting{Meet: ops.Meets[0], Slots: slots[r], Wrong: wrong[r], Round: round}
				if err := bs[r].Meet(m, backend.Launch{Impl: impl}); err != nil {
					t.Fatal(err)
				}
				l := gs[r].launches[len(gs[r].launches)-1]
				want := []uint64{bs[r].addr(slots[r]), bs[r].addr(wrong[r]), round, uint64(r), n, 3}
				if l.impl != impl || l.kernel != kBarrierAll || !slices.Equal(l.args[:6], want) || l.dim.Grid != 1 {
					t.Errorf("rank %d, round %d: launched %s/%s x%d with %v, want %v", r, round, l.impl, l.kernel, l.dim.Grid, l.args, want)
				}
			}
		}
		// The check: the stamps every rank did not see.
		for r := range n {
			got := make([]byte, 8)
			if err := bs[r].Read(wrong[r], got); err != nil {
				t.Fatal(err)
			}
			missed += binary.LittleEndian.Uint64(got)
		}
		if (missed > 0) != broken {
			t.Errorf("broken %v: %d stamps not seen", broken, missed)
		}
	}
}

// openAll opens every rank of w on its fake GPU.
func openAll(t *testing.T, w *fakeWorld) ([]*Backend, []*fakeGPU) {
	bs, gs := make([]*Backend, w.size), make([]*fakeGPU, w.size)
	for r := range w.size {
		bs[r], gs[r] = w.open(t, r, Config{})
	}
	return bs, gs
}
