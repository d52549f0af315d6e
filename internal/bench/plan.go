package bench

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

// A sweep's plan: its buffers (Layout), the heap they take (HeapBytes) and its rows
// (Count), derived here alone; the launcher plans once and every rank carves the
// layout it was given.

// Layout is the sweep's symmetric buffers on n ranks (reg sizes a user's scratch), in
// the order every rank carves them: the collectives' send buffer (with every place an
// operation reads its input from, coll.Place), output and scratch (each with its
// guard, coll.Guard), then each lane's source and destination in every place, the
// signal, and the latency ping-pong's buffers and clock stamps.
func Layout(reg *backend.Registry, s result.BenchSpec, n int) (backend.Layout, error) {
	var l backend.Layout
	if hasCollectives(s) {
		most, err := collectiveBytes(s, n)
		if err != nil {
			return l, err
		}
		l.Add(slotCollSend, most+coll.PlaceSlack, 0)
		l.Add(slotCollRecv, most, coll.Guard)
		l.Add(slotCollScratch, scratchBytes(reg, s, most, n), coll.Guard)
	}
	if hasMeets(s) {
		l.Add(slotMeetSlots, 8*ops.MeetSlots(n), 0)
		l.Add(slotMeetWrong, 8, 0)
	}
	if hasPointOps(s) {
		for range s.Lanes() * s.Rotation() {
			l.Add(slotSrc, s.MaxSize+shiftSlots*16, 0)
			l.Add(slotDst, s.MaxSize, 0)
		}
		lat := max(s.LatencySize, 8)
		l.Add(slotSig, 8, 0)
		l.Add(slotLatSrc, lat+shiftSlots*16, 0)
		l.Add(slotLatDst, lat, 0)
		l.Add(slotStamps, int64(LatencyRounds(s)+2)*8, 0)
		l.Slack = 3 * backend.HeapAlign // what the heap held beyond its buffers before it was a layout
	}
	return l, nil
}

// The names of a sweep's buffers in its Layout.
const (
	slotCollSend    = "coll-send"
	slotCollRecv    = "coll-recv"
	slotCollScratch = "coll-scratch"
	slotSrc         = "src"
	slotDst         = "dst"
	slotSig         = "sig"
	slotLatSrc      = "lat-src"
	slotLatDst      = "lat-dst"
	slotStamps      = "stamps"
	slotMeetSlots   = "meet-slots"
	slotMeetWrong   = "meet-wrong"
)

// HeapBytes is the symmetric heap per rank the sweep's Layout takes on n ranks.
func HeapBytes(reg *backend.Registry, s result.BenchSpec, n int) (int64, error) {
	l, err := Layout(reg, s, n)
	return l.Heap(), err
}

// Count counts a sweep's measurements on n ranks, or (rows) its rows: a round measures
// its pairs at once, a row each; it walks the ops, implementations and sizes as the
// sweep does.
func Count(reg *backend.Registry, s result.BenchSpec, n int, rows bool) int {
	count, rounds := 0, len(s.Pairs(n))
	if rows {
		rounds = 0
		for _, r := range s.Pairs(n) {
			rounds += len(r)
		}
	}
	for _, opName := range s.Ops {
		op := ops.Op(opName)
		for _, name := range s.Impls {
			im, ok := reg.ByName(name)
			if !ok || !im.Supports(op) {
				continue
			}
			variants := len(im.VariantsOf(op, s.Algo))
			if len(op.Variants(s.Algo)) == 0 {
				variants = 1
			}
			switch {
			case op.Kind() == ops.Sync:
				count += variants
			case op.Routed():
				count++
			case op.IsCollective():
				count += len(CollSizes(reg, s, op, name, n)) // those that hold an element per rank, in blocks name can move
			case op.Kind() == ops.PingPong:
				count += rounds
			default:
				count += variants * rounds * len(s.Sizes())
			}
		}
	}
	return count
}
