package bench

import (
	"encoding/binary"
	"fmt"
	"github.com/symmem/symmem/internal/result"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// latency runs a ping-pong of n bytes with a signal and returns the half round trip.
// Each side sends a window of its own pattern into the other's destination, which was
// filled with the complement of that window first, with the round's number in its
// first 8 bytes: each round's number is checked as its signal comes, and the whole
// payload after the last round.
func (r *Runner) latency(l backend.Launch, n int64, peer, iters, seq int) (measured, error) {
	b := r.B
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return measured{}, err
	}
	off, end := window(seq, 0, 0, n)
	src, dst := r.latSrc.Slice(0, n), r.latDst.Slice(0, n)
	if peer >= 0 {
		if err := b.Write(src, r.pat(b.Rank(), 0)[off:end]); err != nil {
			return measured{}, err
		}
		if err := b.Write(dst, complement(r.pat(peer, 0)[off:end])); err != nil {
			return measured{}, err
		}
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
	if dev, ok := b.(backend.PingPonger); ok {
		pp, err = dev.PingPong(dst, src, r.sig, r.stamps, n, rounds, peer, initiator, l)
	} else {
		pp, err = pingPong(b, dst, src, r.sig, n, rounds, peer, initiator, l)
	}
	if err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	// After the last round the peer's payload is there, its first 8 bytes holding the
	// last round's number; every earlier round was checked as its signal came.
	want := append([]byte(nil), r.pat(peer, 0)[off:end]...)
	binary.LittleEndian.PutUint64(want, uint64(rounds))
	got := make([]byte, n)
	if err := b.Read(dst, got); err != nil {
		return measured{}, err
	}
	res := measured{checked: true, wrong: r.wrongBytes(got, want) + 8*int64(pp.Late)}
	if pp.Late > 0 && r.first == nil {
		// Which rounds came late is not kept: their numbers were checked as their signals came.
		r.first = &result.WrongAt{Rank: b.Rank(), Where: fmt.Sprintf("(the round number: %d of %d rounds found an earlier round's there when their signal came)", pp.Late, rounds)}
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

// pingPong is the ping-pong from the host, for backends that have no device one. Like
// the device's, every round carries its number in the payload's first 8 bytes, and
// each side checks it once the round's signal is there.
func pingPong(b backend.Backend, dst, src, sig backend.Buffer, n int64, rounds, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	var res backend.PingPongResult
	if n < 8 {
		return res, fmt.Errorf("ping-pong of %d bytes: each round carries its number in 8 bytes; send 8 or more", n)
	}
	tag, got := make([]byte, 8), make([]byte, 8)
	send := func(v uint64) error {
		binary.LittleEndian.PutUint64(tag, v)
		if err := b.Write(src.Slice(0, 8), tag); err != nil {
			return err
		}
		return b.PutSignal(dst, src, sig, peer, l)
	}
	receive := func(v uint64) error {
		if err := b.WaitSignal(sig, n, int(v), l); err != nil {
			return fmt.Errorf("round %d of %d: %w", v, rounds, err)
		}
		if err := b.Read(dst.Slice(0, 8), got); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(got) != v {
			res.Late++
		}
		return nil
	}
	start := time.Now()
	last := start
	for i := 0; i < rounds; i++ {
		v := uint64(i + 1)
		if initiator {
			if err := send(v); err != nil {
				return res, err
			}
			if err := receive(v); err != nil {
				return res, err
			}
			now := time.Now()
			res.Rounds = append(res.Rounds, now.Sub(last))
			last = now
		} else {
			if err := receive(v); err != nil {
				return res, err
			}
			if err := send(v); err != nil {
				return res, err
			}
		}
	}
	res.Total = time.Since(start)
	return res, nil
}
