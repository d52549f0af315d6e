package cpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// openRanks maps a heap of n ranks in this process, each rank a Backend.
func openRanks(t *testing.T, n int) []*Backend {
	t.Helper()
	ShmDir = t.TempDir()
	path := HeapPath("sync")
	if err := Create(path, n, 1<<16); err != nil {
		t.Fatal(err)
	}
	out := make([]*Backend, n)
	for r := range out {
		b, err := Open(path, r, n, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		b.WaitLimit = 200 * time.Millisecond
		t.Cleanup(func() { b.Close() })
		out[r] = b
	}
	return out
}

// alloc carves the same buffers on every rank.
func alloc(t *testing.T, ranks []*Backend, sizes ...int64) []backend.Buffer {
	t.Helper()
	var bufs []backend.Buffer
	for _, b := range ranks {
		bufs = bufs[:0]
		for _, n := range sizes {
			buf, err := b.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, buf)
		}
	}
	return bufs
}

func readWord(t *testing.T, b *Backend, buf backend.Buffer) uint64 {
	t.Helper()
	w := make([]byte, 8)
	if err := b.Read(buf, w); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(w)
}

// A stream of signal rounds leaves the last round's word; sets and adds are told apart.
func TestSignalOpRounds(t *testing.T) {
	ranks := openRanks(t, 2)
	sig := alloc(t, ranks, 8)[0]
	ranks[1].Write(sig, binary.LittleEndian.AppendUint64(nil, 999)) // a set overwrites it
	for k := 1; k <= 4; k++ {
		op, v := ops.SignalRound(k, 5)
		if err := ranks[0].SignalOp(sig, op, v, 1, backend.Launch{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ranks[1].WaitWord(sig, 20, ops.Signal, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	if got := readWord(t, ranks[1], sig); got != ops.SignalWord(4, 5) {
		t.Errorf("after set, add, set, add of 5: %d, want 20", got)
	}
	if err := ranks[0].SignalOp(sig, 3, 1, 1, backend.Launch{}); err == nil {
		t.Error("signal op 3 was accepted")
	}
	err := ranks[1].WaitWord(sig, 21, ops.Signal, backend.Launch{})
	if !errors.Is(err, backend.ErrUndelivered) {
		t.Errorf("a wait for a signal never sent: %v", err)
	}
}

// put-flag lands the data before the flag; the unordered fault lands the flag first
// and the data only once the next barrier is over.
func TestPutFlagOrder(t *testing.T) {
	ranks := openRanks(t, 2)
	bufs := alloc(t, ranks, 64, 64, 8)
	src, dst, flag := bufs[0], bufs[1], bufs[2]
	data := bytes.Repeat([]byte{7}, 64)
	ranks[0].Write(src, data)
	got := make([]byte, 64)
	for i, order := range []string{ops.Fence, ops.Quiet} {
		ranks[1].Write(dst, make([]byte, 64))
		if err := ranks[0].PutFlag(dst, src, flag, uint64(i+1), order, 1, backend.Launch{}); err != nil {
			t.Fatal(err)
		}
		if err := ranks[1].WaitWord(flag, uint64(i+1), ops.PutFlag, backend.Launch{}); err != nil {
			t.Fatal(err)
		}
		if ranks[1].Read(dst, got); !bytes.Equal(got, data) {
			t.Errorf("%s: the data was not there with its flag", order)
		}
	}
	ranks[1].Write(dst, make([]byte, 64))
	ranks[0].SetUnordered(true)
	if err := ranks[0].PutFlag(dst, src, flag, 3, ops.Fence, 1, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	if ranks[1].Read(dst, got); bytes.Equal(got, data) || readWord(t, ranks[1], flag) != 3 {
		t.Error("unordered: the flag did not come before the data")
	}
	var wg sync.WaitGroup
	for _, b := range ranks {
		wg.Add(1)
		go func() { defer wg.Done(); b.Barrier() }()
	}
	wg.Wait()
	if ranks[1].Read(dst, got); !bytes.Equal(got, data) {
		t.Error("unordered: the data never landed after the barrier")
	}
	if err := ranks[0].PutFlag(dst, src, flag, 1, "sideways", 1, backend.Launch{}); err == nil {
		t.Error("an ordering of sideways was accepted")
	}
}

// A barrier round of each variant on 3 ranks sees every stamp; a rank whose barrier
// returns before its stamps land is seen by its peers' checks.
func TestMeet(t *testing.T) {
	ranks := openRanks(t, 3)
	bufs := alloc(t, ranks, 8*ops.MeetSlots(3), 8)
	slots, wrong := bufs[0], bufs[1]
	meet := func(m ops.Meet, round uint64) []error {
		errs := make([]error, len(ranks))
		var wg sync.WaitGroup
		for r, b := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = b.Meet(backend.Meeting{Meet: m, Slots: slots, Wrong: wrong, Round: round}, backend.Launch{})
			}()
		}
		wg.Wait()
		return errs
	}
	for round := uint64(1); round <= 6; round++ {
		m := ops.Meets[round%2]
		for r, err := range meet(m, round) {
			if err != nil {
				t.Fatalf("%s round %d, rank %d: %v", m.Name, round, r, err)
			}
		}
	}
	for r, b := range ranks {
		if w := readWord(t, b, wrong); w != 0 {
			t.Errorf("rank %d missed %d stamps", r, w)
		}
	}
	// Rank 2's barrier returns before its stamps land: each round, its peers miss
	// them, and nobody waits past the meeting.
	ranks[2].SetUnordered(true)
	before := []uint64{readWord(t, ranks[0], wrong), readWord(t, ranks[1], wrong), readWord(t, ranks[2], wrong)}
	for round := uint64(7); round <= 8; round++ {
		for r, err := range meet(ops.Meets[round%2], round) {
			if err != nil {
				t.Fatalf("round %d beside a late barrier, rank %d: %v", round, r, err)
			}
		}
	}
	for r, want := range []uint64{2, 2, 2} { // rank 2 misses its own too
		if got := readWord(t, ranks[r], wrong) - before[r]; got != want {
			t.Errorf("rank %d, beside a barrier that returns before rank 2's stamps land: %d stamps missed, want %d", r, got, want)
		}
	}
	ranks[2].SetUnordered(false)
	if err := ranks[0].Meet(backend.Meeting{Meet: ops.Meets[0], Slots: slots.Slice(0, 8), Wrong: wrong, Round: 8}, backend.Launch{}); err == nil {
		t.Error("slots of one word for 3 ranks were accepted")
	}
}
