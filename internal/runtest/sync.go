package runtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// The run tests of signal, put-flag and barrier, whose checks are of an ordering or
// of a word rather than of a buffer of elements alone:
//
//	signal    the sender does signal rounds 1..signalRounds (ops.SignalRound, its value
//	          the step: set, add, set, add) to the receiver's word, which waits once for
//	          the last round's word and must then hold it exactly;
//	put-flag  the sender puts its data, a fence and flag 1, then the same data into a
//	          second destination, a quiet and flag 2; the receiver waits for each flag
//	          and checks that destination's data at once, before any barrier;
//	barrier   every rank meets in a barrier-all round, then a sync-all round, each
//	          checking that every rank's stamp is there.

// signalRounds is how many signal rounds a run sends: enough that a set taken for an
// add (or an add for a set) leaves another word than the last round's.
const signalRounds = 4

// flagged is the element type of the words the signal and barrier tests check.
const flagged = "int64"

// signalTest is the run test of signal: the word's step is the value, a whole number
// of at least 1; --count and --dtype do not apply.
type signalTest struct{}

func (signalTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	if _, err := s.validatePoint(nranks, backendName, reg); err != nil {
		return err
	}
	s.DType, s.Count, s.Bytes = flagged, 1, 8
	if err := s.validatePeer(nranks); err != nil {
		return err
	}
	for r := 0; r < nranks; r++ {
		v := s.valueOf(r)
		if v < 1 || v != math.Trunc(v) || v*signalRounds > 1<<53 {
			return setting.Errorf("%s %g: %s steps its word by the value (rank %d's: %g), a whole number from 1 to %d", setting.Value, s.Value, s.Op, r, v, int64(1<<53)/signalRounds)
		}
	}
	return nil
}

func (signalTest) layout(s Spec, _ int, _ *backend.Registry) (backend.Layout, error) {
	return pointLayout(s, false), nil
}

// signaler is b's signals, through a fault's wrapper.
func signaler(b backend.Backend) (backend.Signaler, error) {
	if sg, ok := b.(backend.Signaler); ok {
		return sg, nil
	}
	return nil, fmt.Errorf("the %s backend has no signal ops", b.Name())
}

// run is one rank's part in a signal run test.
func (signalTest) run(b backend.Backend, lay backend.Layout, s Spec, _ ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	sg, err := signaler(b)
	if err != nil {
		return res, err
	}
	rank := b.Rank()
	sendTo, recvFrom := s.role(rank, b.Size(), false)
	carved, err := lay.Carve(b)
	if err != nil {
		return res, err
	}
	sig := carved.One("sig").Buf
	if err := b.Write(sig, make([]byte, 8)); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	if sendTo >= 0 {
		step := uint64(s.valueOf(rank))
		for k := 1; k <= signalRounds; k++ {
			op, v := ops.SignalRound(k, step)
			if err := sg.SignalOp(sig, op, v, sendTo, s.Launch); err != nil {
				return res, fmt.Errorf("%s to rank %d, round %d: %w", s.Op, sendTo, k, err)
			}
		}
	}
	if recvFrom >= 0 {
		want := ops.SignalWord(signalRounds, uint64(s.valueOf(recvFrom)))
		if err := sg.WaitWord(sig, want, s.Op, s.Launch); err != nil {
			return res, fmt.Errorf("%s %s of %d rounds from rank %d: %w", s.Op, s.Launch.Impl, signalRounds, recvFrom, err)
		}
		lap("op")
		got := make([]byte, 8)
		if err := b.Read(sig, got); err != nil {
			return res, err
		}
		res.From, res.Expected = recvFrom, fmt.Sprint(want)
		res.Received = fmt.Sprint(binary.LittleEndian.Uint64(got))
		if res.Received != res.Expected {
			res.Wrong = 1
		}
		res.OK = res.Wrong == 0
		fmt.Fprintf(out, "Rank %d: received signal=%s after %d rounds (set, add, set, add)\n", rank, res.Received, signalRounds)
		lap("verify")
	}
	return res, b.Barrier()
}

// putFlagTest is the run test of put-flag: a put's, with a second destination for the
// second ordering.
type putFlagTest struct{}

func (putFlagTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	d, err := s.validatePoint(nranks, backendName, reg)
	if err != nil {
		return err
	}
	return s.validateData(nranks, d)
}

func (putFlagTest) layout(s Spec, _ int, _ *backend.Registry) (backend.Layout, error) {
	return pointLayout(s, true), nil
}

// run is one rank's part in a put-flag run test: setup fills the sources and
// poisons both destinations, as put's.
func (putFlagTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	sg, err := signaler(b)
	if err != nil {
		return res, err
	}
	rank := b.Rank()
	sendTo, recvFrom := s.role(rank, b.Size(), false)
	bufs, want, err := setup(b, lay, s, d, recvFrom, true)
	if err != nil {
		return res, err
	}
	dsts := []backend.Buffer{bufs.dst, bufs.quiet}
	if recvFrom >= 0 {
		if err := b.Write(dsts[1], bytes.Repeat(complement(want), int(s.Count))); err != nil {
			return res, err
		}
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	orders := s.variants() // fence, then quiet (those the implementation runs)
	if sendTo >= 0 {
		for i, order := range orders {
			if err := sg.PutFlag(dsts[i], bufs.src, bufs.sig, uint64(i+1), order, sendTo, s.Launch); err != nil {
				return res, fmt.Errorf("%s (%s) to rank %d: %w", s.Op, order, sendTo, err)
			}
		}
	}
	if recvFrom < 0 {
		return res, b.Barrier()
	}
	got := make([]byte, s.Bytes)
	var seen []string
	for i, order := range orders {
		// The data is checked as soon as its flag is there: a barrier before the check
		// would complete the puts and hide an ordering that failed.
		if err := sg.WaitWord(bufs.sig, uint64(i+1), s.Op, s.Launch); err != nil {
			return res, fmt.Errorf("%s %s (%s) of %d x %s from rank %d: %w", s.Op, s.Launch.Impl, order, s.Count, s.DType, recvFrom, err)
		}
		if err := b.Read(dsts[i], got); err != nil {
			return res, err
		}
		wrong := countWrong(got, want)
		res.Wrong += wrong
		seen = append(seen, fmt.Sprintf("%s: %s", order, formatElems(d, got)))
	}
	lap("op+verify")
	res.From, res.Expected, res.OK = recvFrom, d.Format(want), res.Wrong == 0
	res.Received = strings.Join(seen, "; ")
	fmt.Fprintf(out, "Rank %d: received out=%s once each flag was there\n", rank, res.Received)
	return res, b.Barrier()
}

// meetTest is the run test of barrier: every rank's words are one element each;
// --count and --dtype do not apply.
type meetTest struct{}

func (meetTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	if err := s.validateEveryRank(); err != nil {
		return err
	}
	if err := s.validateImpl(backendName, reg); err != nil {
		return err
	}
	s.DType, s.Count, s.Bytes = flagged, int64(nranks), 8*int64(nranks)
	return nil
}

func (meetTest) layout(_ Spec, nranks int, _ *backend.Registry) (backend.Layout, error) {
	var l backend.Layout
	l.Add("slots", 8*ops.MeetSlots(nranks), 0)
	l.Add("wrong", 8, 0)
	return l, nil
}

// run is one rank's part in a barrier run test: a round of each variant.
func (meetTest) run(b backend.Backend, lay backend.Layout, s Spec, _ ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	mt, ok := b.(backend.Meeter)
	if !ok {
		return res, fmt.Errorf("the %s backend has no barrier rounds", b.Name())
	}
	me, n := b.Rank(), b.Size()
	res.From, res.Peers = me, "all"
	carved, err := lay.Carve(b)
	if err != nil {
		return res, err
	}
	slots, wrongWord := carved.One("slots").Buf, carved.One("wrong").Buf
	if err := b.Write(slots, make([]byte, slots.Size)); err != nil {
		return res, err
	}
	if err := b.Write(wrongWord, make([]byte, 8)); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	var seen []string
	var before uint64
	for i, m := range ops.Meets {
		if !slices.Contains(s.variants(), m.Name) {
			continue // a variant the implementation does not run
		}
		start := time.Now()
		if err := mt.Meet(backend.Meeting{Meet: m, Slots: slots, Wrong: wrongWord, Round: uint64(i + 1)}, s.Launch); err != nil {
			return res, fmt.Errorf("%s %s (%s): %w", s.Op, s.Launch.Impl, m.Name, err)
		}
		if err := b.Quiet(); err != nil {
			return res, err
		}
		res.Timings[m.Name] = float64(time.Since(start).Microseconds()) / 1000
		w := make([]byte, 8)
		if err := b.Read(wrongWord, w); err != nil {
			return res, err
		}
		total := binary.LittleEndian.Uint64(w)
		seen = append(seen, fmt.Sprintf("%s: %d of %d stamps", m.Name, uint64(n)-min(total-before, uint64(n)), n))
		before = total
	}
	res.Wrong = int64(before)
	res.OK = res.Wrong == 0
	res.Expected = fmt.Sprintf("%d stamps", n)
	res.Received = strings.Join(seen, ", ")
	fmt.Fprintf(out, "Rank %d: saw %s\n", me, res.Received)
	lap("verify")
	return res, b.Barrier()
}
