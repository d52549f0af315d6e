package bench

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// latency runs a ping-pong of n bytes with a signal and returns the half round trip.
// Each side sends a window of its own pattern into the other's destination, which was
// filled with the complement of that window first: both sides check what arrived.
func (r *Runner) latency(l backend.Launch, n int64, peer, iters, seq int) (measured, error) {
	b := r.B
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return measured{}, err
	}
	off, end := window(seq, 0, n)
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
	rounds := latencyRounds(r.S)
	var d time.Duration
	var each []time.Duration
	var err error
	if pp, ok := b.(PingPonger); ok {
		d, each, err = pp.PingPong(dst, src, r.sig, r.stamps, n, rounds, peer, initiator, l)
	} else {
		d, each, err = pingPong(b, dst, src, r.sig, n, rounds, peer, initiator, l)
	}
	if err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	got := make([]byte, n)
	if err := b.Read(dst, got); err != nil {
		return measured{}, err
	}
	res := measured{checked: true, wrong: r.wrongBytes(got, r.pat(peer, 0)[off:end])}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	if initiator {
		res.us = float64(d.Nanoseconds()) / 1e3 / float64(rounds) / 2
		res.each = each
	}
	return res, nil
}

// pingPong is the ping-pong from the host, for backends that have no device one.
func pingPong(b backend.Backend, dst, src, sig backend.Buffer, n int64, rounds, peer int, initiator bool, l backend.Launch) (time.Duration, []time.Duration, error) {
	each := make([]time.Duration, 0, rounds)
	start := time.Now()
	last := start
	for i := 0; i < rounds; i++ {
		if initiator {
			if err := b.PutSignal(dst, src, sig, peer, l); err != nil {
				return 0, nil, err
			}
			if err := b.WaitSignal(sig, n, i+1, l); err != nil {
				return 0, nil, fmt.Errorf("round %d of %d: %w", i+1, rounds, err)
			}
			now := time.Now()
			each = append(each, now.Sub(last))
			last = now
		} else {
			if err := b.WaitSignal(sig, n, i+1, l); err != nil {
				return 0, nil, fmt.Errorf("round %d of %d: %w", i+1, rounds, err)
			}
			if err := b.PutSignal(dst, src, sig, peer, l); err != nil {
				return 0, nil, err
			}
		}
	}
	if !initiator {
		each = nil
	}
	return time.Since(start), each, nil
}
