package bench

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
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
	if has(s, inArea(fusedArea)) {
		most, elem := fusedMost(s, n), ops.ElemSize(s.DType)
		l.Add(slotFusedA, most.A*elem, 0)
		l.Add(slotFusedB, most.B*elem, 0)
		l.Add(slotFusedC, most.C*elem, coll.Guard)
		l.Add(slotFusedScratch, most.Scratch*elem, coll.Guard)
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
	slotCollSend     = "coll-send"
	slotCollRecv     = "coll-recv"
	slotCollScratch  = "coll-scratch"
	slotSrc          = "src"
	slotDst          = "dst"
	slotSig          = "sig"
	slotLatSrc       = "lat-src"
	slotLatDst       = "lat-dst"
	slotStamps       = "stamps"
	slotMeetSlots    = "meet-slots"
	slotMeetWrong    = "meet-wrong"
	slotFusedA       = "fused-a"
	slotFusedB       = "fused-b"
	slotFusedC       = "fused-c"
	slotFusedScratch = "fused-scratch"
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
			count += engineOf(op).count(reg, s, op, im, n, rounds)
		}
	}
	return count
}

// variantsOf is how many variants of op im runs in the sweep (1 for an operation
// without variants).
func variantsOf(s result.BenchSpec, op ops.Op, im backend.Impl) int {
	if len(op.Variants(s.Algo)) == 0 {
		return 1
	}
	return len(im.VariantsOf(op, s.Algo))
}

func countPoint(_ *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, _, rounds int) int {
	return variantsOf(s, op, im) * rounds * len(s.Sizes())
}

func countRoundTrip(_ *backend.Registry, _ result.BenchSpec, _ ops.Op, _ backend.Impl, _, rounds int) int {
	return rounds
}

func countMeet(_ *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, _, _ int) int {
	return variantsOf(s, op, im)
}

func countCollective(reg *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, n, _ int) int {
	return len(CollSizes(reg, s, op, im.Name, n)) // those that hold an element per rank, in blocks im can move
}

func countRouted(_ *backend.Registry, _ result.BenchSpec, _ ops.Op, _ backend.Impl, _, _ int) int {
	return 1
}

// Window is Times checked windows of Ops operations of Bytes each, for an estimate of
// a sweep's length.
type Window struct {
	Bytes int64
	Ops   int
	Times int
}

// Windows lists the checked windows that op's measurements with im take on n ranks:
// per measurement --reps windows of --warmup and --iters operations, and one more
// where single operations are timed.
func Windows(reg *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, n int) []Window {
	return engineOf(op).windows(reg, s, op, im, n, len(s.Pairs(n)))
}

// measurement is one measurement's windows at size bytes (perIter: one more, each
// operation timed on its own), times times.
func measurement(s result.BenchSpec, bytes int64, perIter bool, times int) []Window {
	w := []Window{{Bytes: bytes, Ops: s.Warmup + s.Iters, Times: s.Reps * times}}
	if perIter {
		w = append(w, Window{Bytes: bytes, Ops: s.Iters, Times: times})
	}
	return w
}

func pointWindows(_ *backend.Registry, s result.BenchSpec, _ ops.Op, _ backend.Impl, _, rounds int) []Window {
	var w []Window
	for _, size := range s.Sizes() {
		w = append(w, measurement(s, size, size <= s.PerIterMax && s.Lanes() == 1 && !s.Graph, rounds)...)
	}
	return w
}

func roundTripWindows(_ *backend.Registry, s result.BenchSpec, _ ops.Op, _ backend.Impl, _, rounds int) []Window {
	trips := LatencyRounds(s) * 2
	return []Window{{Bytes: s.LatencySize, Ops: trips, Times: rounds * (s.Reps + 1)}}
}

func collWindows(reg *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, n, _ int) []Window {
	var w []Window
	for _, size := range CollSizes(reg, s, op, im.Name, n) {
		w = append(w, measurement(s, size, size <= s.PerIterMax && !s.Graph, 1)...)
	}
	return w
}

func routedWindows(_ *backend.Registry, s result.BenchSpec, _ ops.Op, _ backend.Impl, _, _ int) []Window {
	m := s.MoE
	if m == nil {
		return nil
	}
	return measurement(s, int64(m.Tokens)*int64(m.Hidden)*2*int64(m.TopK), false, 1)
}

func meetWindows(_ *backend.Registry, s result.BenchSpec, op ops.Op, _ backend.Impl, _, _ int) []Window {
	return measurement(s, 8, !s.Graph, max(len(op.Variants(s.Algo)), 1))
}

// ValidatePairs refuses n ranks that the sweep's point operations cannot pair: rank i
// goes with rank i+N/2, so an odd n would leave the last idle (unless every pair is
// measured, --matrix).
func ValidatePairs(s result.BenchSpec, n int) error {
	if n%2 == 1 && !s.Matrix && hasPointOps(s) {
		return setting.Errorf("bench pairs rank i with rank i+N/2: %s %d would leave rank %d idle; use an even %s or %s", setting.NProc, n, n-1, setting.NProc, setting.Matrix)
	}
	return nil
}
