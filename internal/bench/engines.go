package bench

import (
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

// engine is how bench measures the operations of one family (ops.Family). The sweep
// looks an operation's engine up once (engineOf); everything else it needs of the
// operation it asks the operation: its shape, delivery, settings and bus factor.
type engine struct {
	// sweep measures op with each of the implementations ims at every size, variant
	// and round of the sweep, handing each measurement's rows on (Runner.done).
	sweep func(r *Runner, op ops.Op, ims []backend.Impl) ([]result.Row, error)
	// count counts those measurements on n ranks, rounds being the pairs' rounds (or
	// the pairs, counting rows).
	count func(reg *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, n, rounds int) int
	// windows lists the checked windows those measurements take (Windows).
	windows func(reg *backend.Registry, s result.BenchSpec, op ops.Op, im backend.Impl, n, rounds int) []Window
	// area is the part of the sweep's layout its operations take.
	area area
	// routed: its operations are sized by the MoE layer (one size: its tokens).
	routed bool
	// roundTrip: a round trip between two ranks at the latency size, timed on the
	// initiator: no tuning, lanes, graphs or per-operation pass of its own.
	roundTrip bool
	// mv moves a point operation's data (point engines).
	mv mover
}

// area is a part of the sweep's layout.
type area int

const (
	pointArea area = iota // sources, destinations, signal and the latency buffers
	collArea              // the collectives' input, output and scratch
	meetArea              // the barrier rounds' slots
	fusedArea             // the fused operations' A, B, C and scratch
)

// mover is how a point operation moves its data and how the checking rank knows it
// has landed.
type mover struct {
	// pulls: the payload flows from the peer to the initiator (get).
	pulls bool
	// ordered: the checking rank checks as soon as wait returns, before any barrier
	// (a barrier would complete the puts and hide an ordering that failed); it needs
	// the backend's signals (put-flag).
	ordered bool
	// issue is operation i of a measurement, between this rank and peer.
	issue func(b backend.Backend, sg backend.Signaler, dst, src, sig backend.Buffer, i int, variant string, peer int, l backend.Launch) error
	// wait, where set, is what the checking rank waits for before it reads, after total
	// operations of n bytes.
	wait func(b backend.Backend, sg backend.Signaler, sig backend.Buffer, n int64, total int, op ops.Op, l backend.Launch) error
	// roundTrip is one measurement of a round-trip operation with peer.
	roundTrip func(r *Runner, op ops.Op, l backend.Launch, n int64, peer, iters, seq int) (measured, error)
}

// engines are the families' engines, filled in by init: their sweeps look engines up
// in turn.
var engines map[ops.Family]engine

func init() {
	engines = map[ops.Family]engine{
		ops.FamilyPut: pointEngine(mover{issue: func(b backend.Backend, _ backend.Signaler, dst, src, _ backend.Buffer, _ int, _ string, peer int, l backend.Launch) error {
			return b.Put(dst, src, peer, l)
		}}),
		ops.FamilyGet: pointEngine(mover{pulls: true, issue: func(b backend.Backend, _ backend.Signaler, dst, src, _ backend.Buffer, _ int, _ string, peer int, l backend.Launch) error {
			return b.Get(dst, src, peer, l)
		}}),
		ops.FamilyPutSignal: pointEngine(mover{
			issue: func(b backend.Backend, _ backend.Signaler, dst, src, sig backend.Buffer, _ int, _ string, peer int, l backend.Launch) error {
				return b.PutSignal(dst, src, sig, peer, l)
			},
			wait: func(b backend.Backend, _ backend.Signaler, sig backend.Buffer, n int64, total int, _ ops.Op, l backend.Launch) error {
				return b.WaitSignal(sig, n, total, l)
			}}),
		ops.FamilyPutFlag: pointEngine(mover{ordered: true,
			issue: func(_ backend.Backend, sg backend.Signaler, dst, src, sig backend.Buffer, i int, variant string, peer int, l backend.Launch) error {
				return sg.PutFlag(dst, src, sig, uint64(i+1), variant, peer, l)
			},
			// The last flag, then the data at once.
			wait: func(_ backend.Backend, sg backend.Signaler, sig backend.Buffer, _ int64, total int, op ops.Op, l backend.Launch) error {
				return sg.WaitWord(sig, uint64(total), op, l)
			}}),
		ops.FamilyLatency: roundTripEngine(func(r *Runner, _ ops.Op, l backend.Launch, n int64, peer, iters, seq int) (measured, error) {
			return r.latency(l, n, peer, iters, seq)
		}),
		ops.FamilySignal: roundTripEngine(func(r *Runner, op ops.Op, l backend.Launch, _ int64, peer, _, _ int) (measured, error) {
			return r.signalLatency(op, l, peer)
		}),
		ops.FamilyCollective: {area: collArea, sweep: eachImpl(sweepCollective), count: countCollective, windows: collWindows},
		ops.FamilyRouted:     {area: collArea, routed: true, sweep: eachImpl(sweepCollective), count: countRouted, windows: routedWindows},
		ops.FamilyMeeting:    {area: meetArea, sweep: eachImpl(sweepMeet), count: countMeet, windows: meetWindows},
		ops.FamilyFused:      {area: fusedArea, sweep: sweepFused, count: countFused, windows: fusedWindows},
	}
}

func pointEngine(mv mover) engine {
	return engine{area: pointArea, mv: mv, sweep: eachImpl(sweepPoint), count: countPoint, windows: pointWindows}
}

func roundTripEngine(f func(r *Runner, op ops.Op, l backend.Launch, n int64, peer, iters, seq int) (measured, error)) engine {
	return engine{area: pointArea, roundTrip: true, mv: mover{roundTrip: f}, sweep: eachImpl(sweepPoint), count: countRoundTrip, windows: roundTripWindows}
}

// Measures says whether bench measures op (get-add is checked by run alone).
func Measures(op ops.Op) bool { return op.Known() && engineOf(op).sweep != nil }

// engineOf is how op is measured.
func engineOf(op ops.Op) engine { return engines[op.Family()] }

// has says whether the sweep measures an operation whose engine says yes.
func has(s result.BenchSpec, yes func(engine) bool) bool {
	return slices.ContainsFunc(s.Ops, func(o string) bool { return ops.Op(o).Known() && yes(engineOf(ops.Op(o))) })
}

// inArea says yes for the engines that take area a of the layout.
func inArea(a area) func(engine) bool { return func(e engine) bool { return e.area == a } }

// Rows says what rows the operations names give a sweep.
type Rows struct {
	// PerSize: some have a row with a bandwidth at each of the sweep's sizes (not a
	// round trip's time, a MoE layer's one size or a meeting); Split: some of those
	// split each size into a block per rank, so the sizes are those that give every
	// rank an element.
	PerSize, Split bool
	// RoundTrips: some are timed as round trips (LatencyRounds a repetition).
	RoundTrips bool
}

// RowsOf says what rows the operations names give a sweep.
func RowsOf(names []string) Rows {
	var rs Rows
	for _, name := range names {
		op := ops.Op(name)
		if !op.Known() {
			continue
		}
		e := engineOf(op)
		rs.Split = rs.Split || sized(e)
		rs.PerSize = rs.PerSize || sized(e) || e.area == pointArea && !e.roundTrip
		rs.RoundTrips = rs.RoundTrips || e.roundTrip
	}
	return rs
}
