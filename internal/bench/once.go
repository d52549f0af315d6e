package bench

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
)

// measured is what one repetition measured on this rank.
type measured struct {
	us      float64          // time per operation in microseconds (on the driving rank)
	each    []time.Duration  // per-operation times, where taken (latency: round trips)
	wrong   int64            // wrong bytes (on the checking rank)
	checked bool             // whether this rank checked anything
	link    *topo.LinkSample // the links' traffic during warm-ups and timed ops, if counted
}

// window is the part of a source that operation i of measurement seq sends, last being
// the last operation on i's lane: it moves with both, so consecutive operations and
// measurements never send the same bytes. The windows repeat every shiftSlots
// operations, but never the last one's: an earlier operation that sent the same bytes
// (the warm-up of --warmup 1 --iters 64) would leave a destination that passes for the
// last one's, and everything after it would go unchecked. Such an operation sends the
// next window instead.
func window(seq, i, last int, n int64) (off, end int64) {
	off = shift(seq + i)
	if i != last && off == shift(seq+last) {
		off = shift(seq + i + 1)
	}
	return off, off + n
}

// once runs one measurement: warmup + iters operations, timed, then checked. Before
// anything moves, the checking rank fills every destination it will check with the
// complement of what must arrive there, so only bytes this measurement delivered can
// pass. perIter times every operation on its own instead of the stream of them.
// It runs past 80 lines as one sequence (fill, barrier, drive, wait, barrier, check)
// that every rank must walk in step; split, the barriers would hide in helpers.
func (r *Runner) once(op ops.Op, variant string, l backend.Launch, n int64, drive, check, iters int, perIter bool) (measured, error) {
	b, s := r.B, r.S
	seq := r.seq
	r.seq++
	if r.BeforeMeasure != nil {
		r.BeforeMeasure(seq)
	}
	mv := engineOf(op).mv
	if mv.roundTrip != nil {
		peer := drive
		if peer < 0 {
			peer = check // the responder
		}
		return mv.roundTrip(r, op, l, n, peer, iters, seq)
	}
	var sg backend.Signaler
	if mv.ordered {
		var ok bool
		if sg, ok = b.(backend.Signaler); !ok {
			return measured{}, fmt.Errorf("the %s backend has no flags to put", b.Name())
		}
	}
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return measured{}, err
	}
	lanes, total := s.Lanes(), s.Warmup+iters
	// This measurement's turn of buffers.
	place := seq % s.Rotation() * lanes
	srcs, dsts := r.src[place:place+lanes], r.dst[place:place+lanes]
	lasts := lastOps(total, lanes)
	if check >= 0 {
		for k, last := range lasts {
			off, end := window(seq, last, last, n)
			if err := b.Write(dsts[k].Slice(0, n), complement(r.pat(check, k)[off:end])); err != nil {
				return measured{}, err
			}
		}
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	do := func(i int) error {
		l := l
		l.Lane = i % lanes
		off, _ := window(seq, i, lasts[l.Lane], n)
		return mv.issue(b, sg, dsts[l.Lane].Slice(0, n), srcs[l.Lane].Slice(off, n), r.sig, i, variant, drive, l)
	}
	var res measured
	if drive >= 0 {
		var err error
		if res, err = r.drive(do, n, iters, perIter, false); err != nil {
			return measured{}, err
		}
	}
	if mv.wait != nil && check >= 0 {
		if err := mv.wait(b, sg, r.sig, n, total, op, l); err != nil {
			return measured{}, err
		}
	}
	if !mv.ordered {
		if err := b.Barrier(); err != nil {
			return measured{}, err
		}
	}
	if check >= 0 {
		res.checked = true
		got := make([]byte, n)
		for k, last := range lasts {
			if err := b.Read(dsts[k].Slice(0, n), got); err != nil {
				return measured{}, err
			}
			// Operations on one lane run in order: the last one's window is there.
			off, end := window(seq, last, last, n)
			first := r.first
			res.wrong += r.wrongBytes(got, r.pat(check, k)[off:end])
			if first == nil && r.first != nil && len(lasts) > 1 {
				r.first.Where = r.Words.Sprintf("(in lane %d of lanes 0..%d, %s)", k, len(lasts)-1, setting.Overlap)
			}
		}
	}
	if mv.ordered {
		if err := b.Barrier(); err != nil { // as the others' before their check
			return measured{}, err
		}
	}
	// Nobody may start the next measurement (and poison dst) before the check.
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	return res, nil
}

// wrongBytes counts the bytes of got that differ from want, after the Tamper hook, and
// keeps where the row's first wrong byte was.
func (r *Runner) wrongBytes(got, want []byte) int64 {
	if r.Tamper != nil {
		r.Tamper(got)
	}
	var wrong int64
	for i := range got {
		if got[i] != want[i] {
			wrong++
		}
	}
	if wrong > 0 && r.first == nil {
		r.first = result.WrongAtOf(r.B.Rank(), got, want)
	}
	return wrong
}

func complement(b []byte) []byte {
	c := make([]byte, len(b))
	for i := range b {
		c[i] = ^b[i]
	}
	return c
}

// drive runs the driving rank's warm-ups and timed operations: every operation up to
// its remote completion (Quiet) is inside the timed region. together: every rank runs
// the same operations (collectives), and under --graph they meet once the graphs are
// captured, before the clock starts.
func (r *Runner) drive(do func(i int) error, n int64, iters int, perIter, together bool) (measured, error) {
	b, s := r.B, r.S
	// The counters cover the warm-ups too (the links are idle before them, after the
	// barrier), so that nothing has to wait between warm-ups and timed operations.
	// Under --bidir a GPU's links also carry the responses to the peer's traffic.
	count := r.Links != nil && n*int64(iters) >= result.MinCounted && !s.Bidir && !perIter
	var before topo.LinkSample
	if count {
		var err error
		if before, err = r.Links.Read(); err != nil {
			count = false
		}
	}
	for i := 0; i < s.Warmup; i++ {
		if err := do(i); err != nil {
			return measured{}, err
		}
		if p, ok := b.(backend.Progresser); ok && i == 0 {
			if err := p.MarkProgress(); err != nil {
				return measured{}, err
			}
		}
	}
	timed := func(i int) error { return do(s.Warmup + i) }
	var res measured
	var d time.Duration
	var err error
	gt, graph := r.B.(backend.GraphTimer)
	t, timer := b.(backend.Timer)
	switch {
	case s.Graph && !graph:
		return measured{}, fmt.Errorf("the %s backend cannot capture CUDA graphs", b.Name())
	case perIter && timer:
		res.each, err = t.TimeEach(iters, timed)
	case perIter:
		res.each = make([]time.Duration, iters)
		for i := 0; i < iters && err == nil; i++ {
			start := time.Now()
			if err = timed(i); err == nil {
				err = b.Quiet()
			}
			res.each[i] = time.Since(start)
		}
	case s.Graph:
		var ready func() error
		if together {
			ready = r.B.Barrier
		}
		d, err = gt.TimeGraph(iters, timed, ready)
	case timer:
		d, err = t.TimeOps(iters, timed)
	default:
		start := time.Now()
		for i := 0; i < iters && err == nil; i++ {
			err = timed(i)
		}
		if err == nil {
			err = b.Quiet()
		}
		d = time.Since(start)
	}
	if err != nil {
		return measured{}, err
	}
	for _, e := range res.each {
		d += e
	}
	if err := b.Quiet(); err != nil {
		return measured{}, err
	}
	if count {
		if after, err := r.Links.Read(); err == nil {
			delta := after.Sub(before)
			res.link = &delta
		}
	}
	res.us = float64(d.Nanoseconds()) / 1e3 / float64(iters)
	return res, nil
}

// lastOps returns, for each lane that ran any of ops operations (numbered from 0, op i
// on lane i % lanes), the number of the last one it ran.
func lastOps(ops, lanes int) []int {
	var last []int
	for k := 0; k < lanes && k < ops; k++ {
		last = append(last, k+(ops-1-k)/lanes*lanes)
	}
	return last
}
