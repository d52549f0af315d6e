package cpu

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// Signals, flags and barrier rounds (backend.Signaler, backend.Meeter) over the shared
// heap. A store's order is the program's here (x86-TSO, and Go's sequentially
// consistent atomics): the fence and the quiet of put-flag both come down to the flag's
// atomic store after the copy, and a barrier round's stamps to atomic stores before
// the arrival.

var (
	_ backend.Signaler  = (*Backend)(nil)
	_ backend.Meeter    = (*Backend)(nil)
	_ backend.Unorderer = (*Backend)(nil)
)

// SetUnordered drops the orderings operations promise (a test fault at the point of
// delivery; see backend.Unorderer).
func (b *Backend) SetUnordered(unordered bool) { b.unordered = unordered }

// lateCopy is put-flag's data that the unordered fault holds back.
type lateCopy struct {
	peer int
	dst  backend.Buffer
	data []byte
}

// deliverLate lands the data the unordered fault held back (after a barrier).
func (b *Backend) deliverLate() {
	for _, c := range b.late {
		copy(b.region(c.peer, c.dst), c.data)
	}
	b.late = nil
}

// SignalOp sets or adds to sig on peer. The drop fault skips it.
func (b *Backend) SignalOp(sig backend.Buffer, op, value uint64, peer int, _ backend.Launch) error {
	if err := b.checkPeer(peer); err != nil {
		return err
	}
	if op != ops.SignalSet && op != ops.SignalAdd {
		return fmt.Errorf("signal op %d: use ops.SignalSet (%d) or ops.SignalAdd (%d)", op, ops.SignalSet, ops.SignalAdd)
	}
	if b.drop {
		return nil
	}
	w := b.word(peer, sig)
	if op == ops.SignalSet {
		atomic.StoreUint64(w, value)
	} else {
		atomic.AddUint64(w, value)
	}
	return nil
}

// PutFlag copies src into dst on peer, then stores value into flag there. The drop
// fault skips both; the unordered fault stores the flag first and holds the data back
// until the next barrier is over.
func (b *Backend) PutFlag(dst, src, flag backend.Buffer, value uint64, order string, peer int, _ backend.Launch) error {
	if err := b.checkPeer(peer); err != nil {
		return err
	}
	if order != ops.Fence && order != ops.Quiet {
		return fmt.Errorf("put-flag ordered by %q: use %s or %s", order, ops.Fence, ops.Quiet)
	}
	switch {
	case b.drop:
		return nil
	case b.unordered:
		atomic.StoreUint64(b.word(peer, flag), value)
		b.late = append(b.late, lateCopy{peer: peer, dst: dst, data: append([]byte(nil), b.region(b.rank, src)...)})
		return nil
	}
	copy(b.region(peer, dst), b.region(b.rank, src))
	atomic.StoreUint64(b.word(peer, flag), value)
	return nil
}

// WaitWord waits until word here holds value or more. The limit runs from the word's
// last change, as WaitSignal's.
func (b *Backend) WaitWord(word backend.Buffer, value uint64, op ops.Op, _ backend.Launch) error {
	what := "flag"
	if op.Bare() {
		what = "signal"
	}
	return b.waitAtLeast(b.word(b.rank, word), value, func(v uint64, limit time.Duration) string {
		return fmt.Sprintf("rank %d: waiting for its %s to reach %d: it holds %d, unchanged for %s", b.rank, what, value, v, limit)
	})
}

// waitAtLeast spins until *w reaches value, bounded by the wait limit from the last
// change of *w; past it, the error says what (given the value seen and the limit)
// and wraps backend.ErrUndelivered.
func (b *Backend) waitAtLeast(w *uint64, value uint64, what func(seen uint64, limit time.Duration) string) error {
	limit := b.WaitLimit
	if limit <= 0 {
		limit = backend.DefaultWaitLimit
	}
	bo := backoff{crowded: b.crowded}
	last, since := atomic.LoadUint64(w), time.Now()
	for v := last; v < value; v = atomic.LoadUint64(w) {
		if stopped.Load() {
			return fmt.Errorf("%s: %w", what(v, time.Since(since).Round(time.Millisecond)), ErrStopped)
		}
		if v != last {
			last, since = v, time.Now()
		} else if bo.n%64 == 0 && time.Since(since) > limit {
			return fmt.Errorf("%s: %w", what(v, limit), backend.ErrUndelivered)
		}
		bo.wait()
	}
	return nil
}

// Meet is one barrier round: the stamps, then every rank's arrival counted on a word
// of the header (a rank's round k is over once the word reaches k times the ranks:
// none can arrive for round k+1 before all have for round k), bounded by the wait
// limit, then the check. The drop fault skips this rank's stamps; the unordered
// fault skips its arrival and its wait, so its peers' waits run out.
func (b *Backend) Meet(m backend.Meeting, _ backend.Launch) error {
	n := b.size
	if m.Slots.Size < 8*ops.MeetSlots(n) || m.Wrong.Size < 8 || m.Round == 0 {
		return fmt.Errorf("barrier round %d: slots of %d bytes and a wrong word of %d for %d ranks: need round >= 1, %d and 8 bytes",
			m.Round, m.Slots.Size, m.Wrong.Size, n, 8*ops.MeetSlots(n))
	}
	// slot is the word of p's stamp on rank owner.
	slot := func(owner, p int) *uint64 { return b.word(owner, m.Slots.Slice(8*ops.MeetSlot(p, n, m.Round), 8)) }
	stamp := func() {
		for owner := 0; owner < n; owner++ {
			if m.Meet.Pushes || owner == b.rank {
				atomic.StoreUint64(slot(owner, b.rank), ops.MeetStamp(b.rank, m.Round))
			}
		}
	}
	if !b.drop && !b.unordered {
		stamp()
	}
	b.meets++
	arrived := (*uint64)(unsafe.Pointer(&b.mem[offMeet]))
	atomic.AddUint64(arrived, 1)
	err := b.waitAtLeast(arrived, b.meets*uint64(n), func(v uint64, limit time.Duration) string {
		missing := b.meets*uint64(n) - v
		return fmt.Sprintf("rank %d: %s round %d: %d of %d ranks never came in %s", b.rank, m.Meet.Name, m.Round, missing, n, limit)
	})
	if err != nil {
		return err
	}
	// The unordered fault's stamps land once the meeting after theirs is over: every
	// peer has checked their round by then, and found them missing.
	if b.lateStamp != nil {
		b.lateStamp()
	}
	b.lateStamp = nil
	if !b.drop && b.unordered {
		b.lateStamp = stamp
	}
	var wrong uint64
	for p := 0; p < n; p++ {
		owner := b.rank
		if !m.Meet.Pushes {
			owner = p
		}
		if atomic.LoadUint64(slot(owner, p)) != ops.MeetStamp(p, m.Round) {
			wrong++
		}
	}
	atomic.AddUint64(b.word(b.rank, m.Wrong), wrong)
	return nil
}
