package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

// hasMeets says whether the sweep measures barrier rounds.
func hasMeets(s result.BenchSpec) bool { return has(s, inArea(meetArea)) }

// signalLatency runs a ping-pong of signals alone (ops.Signal) and returns the half
// round trip: round k of each side does ops.SignalRound(k, 1) to the other's word and
// waits for its own to reach k, which must then hold k exactly (a set taken for an
// add, or an add for a set, leaves another value). It meets the other ranks as often
// as latency does.
func (r *Runner) signalLatency(op ops.Op, l backend.Launch, peer int) (measured, error) {
	b := r.B
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	if peer < 0 {
		if err := b.Barrier(); err != nil {
			return measured{}, err
		}
		return measured{}, b.Barrier()
	}
	initiator := b.Rank() < peer
	rounds := LatencyRounds(r.S)
	var pp backend.PingPongResult
	var err error
	dev, ok := b.(backend.SignalPingPonger)
	if ok {
		pp, err = dev.SignalPingPong(r.sig, r.stamps, rounds, peer, initiator, l)
	}
	if !ok || errors.Is(err, backend.ErrNoSignalPingPong) {
		sg, ok := b.(backend.Signaler)
		if !ok {
			return measured{}, fmt.Errorf("the %s backend has no signal ops", b.Name())
		}
		pp, err = signalPingPong(b, sg, r.sig, op, rounds, peer, initiator, l)
	}
	if err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	// After the last round the word holds the last round's number; every earlier
	// round's was checked as it came.
	want := make([]byte, 8)
	binary.LittleEndian.PutUint64(want, ops.SignalWord(rounds, 1))
	got := make([]byte, 8)
	if err := b.Read(r.sig, got); err != nil {
		return measured{}, err
	}
	res := measured{checked: true, wrong: r.wrongBytes(got, want) + 8*int64(pp.Late)}
	if pp.Late > 0 && r.first == nil {
		r.first = &result.WrongAt{Rank: b.Rank(), Where: fmt.Sprintf("(the signal word: %d of %d rounds found another value than the round's once it had reached it)", pp.Late, rounds)}
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	if initiator {
		res.us = float64(pp.Total.Nanoseconds()) / 1e3 / float64(rounds) / 2
		res.each = pp.Rounds
	}
	return res, nil
}

// signalPingPong is the signal ping-pong from the host, for backends that have no
// device one.
func signalPingPong(b backend.Backend, sg backend.Signaler, sig backend.Buffer, op ops.Op, rounds, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	var res backend.PingPongResult
	got := make([]byte, 8)
	send := func(k int) error {
		o, v := ops.SignalRound(k, 1)
		return sg.SignalOp(sig, o, v, peer, l)
	}
	receive := func(k int) error {
		want := ops.SignalWord(k, 1)
		if err := sg.WaitWord(sig, want, op, l); err != nil {
			return fmt.Errorf("round %d of %d: %w", k, rounds, err)
		}
		if err := b.Read(sig, got); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(got) != want {
			res.Late++
		}
		return nil
	}
	start := time.Now()
	last := start
	for k := 1; k <= rounds; k++ {
		if initiator {
			if err := send(k); err != nil {
				return res, err
			}
			if err := receive(k); err != nil {
				return res, err
			}
			now := time.Now()
			res.Rounds = append(res.Rounds, now.Sub(last))
			last = now
			continue
		}
		if err := receive(k); err != nil {
			return res, err
		}
		if err := send(k); err != nil {
			return res, err
		}
	}
	res.Total = time.Since(start)
	return res, nil
}

// measureMeet measures barrier rounds of one variant: every rank times its own rounds
// and counts the stamps it did not see; the row's time is the ranks' mean (Merge).
func (r *Runner) measureMeet(op ops.Op, impl, variant string) ([]result.Row, error) {
	b, s := r.B, r.S
	mt, ok := b.(backend.Meeter)
	if !ok {
		return nil, fmt.Errorf("the %s backend has no barrier rounds", b.Name())
	}
	meet, err := ops.LookupMeet(variant)
	if err != nil {
		return nil, err
	}
	l := backend.Launch{Impl: impl, Blocks: s.Blocks, Warps: s.Warps}
	if p, ok := b.(backend.Preloader); ok {
		if err := p.Preload(op, 0, l); err != nil {
			return nil, err
		}
	}
	row := result.Row{Op: string(op), Impl: impl, Algo: variant, Src: -1, Dst: -1, Ranks: b.Size(), Graph: s.Graph}
	for rep := 0; rep < s.Reps; rep++ {
		res, err := r.onceMeet(mt, meet, l, false)
		if err != nil {
			return nil, err
		}
		row.TimesUS = append(row.TimesUS, res.us)
		row.Wrong += res.wrong
		row.Checked = true
	}
	if s.MinSize <= s.PerIterMax && !s.Graph {
		res, err := r.onceMeet(mt, meet, l, true)
		if err != nil {
			return nil, err
		}
		row.Wrong += res.wrong
		row.PerIter = result.IterStatsOf(res.each, 1)
	}
	return []result.Row{row}, nil
}

// onceMeet is one checked measurement of barrier rounds: warm-ups and timed rounds,
// each with fresh stamps that every rank checks as the round ends (Meeting), then the
// count of stamps not seen, in bytes (8 a stamp).
func (r *Runner) onceMeet(mt backend.Meeter, meet ops.Meet, l backend.Launch, perIter bool) (measured, error) {
	b := r.B
	seq := r.seq
	r.seq++
	if r.BeforeMeasure != nil {
		r.BeforeMeasure(seq)
	}
	if err := b.Write(r.meetWrong, make([]byte, 8)); err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	first := r.meetRound + 1
	do := func(i int) error {
		r.meetRound++
		return mt.Meet(backend.Meeting{Meet: meet, Slots: r.meetSlots, Wrong: r.meetWrong, Round: r.meetRound}, l)
	}
	res, err := r.drive(do, 0, r.S.Iters, perIter, true)
	if err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	got := make([]byte, 8)
	if err := b.Read(r.meetWrong, got); err != nil {
		return measured{}, err
	}
	missed := binary.LittleEndian.Uint64(got)
	res.wrong, res.checked = 8*int64(missed), true
	if missed > 0 && r.first == nil {
		r.first = &result.WrongAt{Rank: b.Rank(), Where: fmt.Sprintf("(%d stamps not there after rounds %d..%d of %s)", missed, first, r.meetRound, meet.Name)}
	}
	return res, b.Barrier()
}
