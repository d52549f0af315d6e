// Package bench measures bandwidth and latency of one-sided operations between ranks,
// for every implementation a backend offers, and checks the data that arrived after
// every measurement. It runs on any backend.Backend; a backend that implements
// backend.Timer (the GPU one: CUDA events) times itself, others are timed by the clock.
package bench

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/units"
)

// LinkCounter reads the NVLink counters of the GPU a rank drives.
type LinkCounter interface {
	Read() (topo.LinkSample, error)
}

// shiftSlots rotates the source window so that every iteration sends different bytes.
const shiftSlots = 64

// MaxOverlap bounds --overlap: each lane holds its own source and destination buffers.
const MaxOverlap = 8

// MaxIters bounds --iters and --warmup (result.MaxIters: a saved result holding more
// is refused too).
const MaxIters = result.MaxIters

// MaxReps bounds --reps: every repetition keeps its time for the row's spread, and a
// count without bound only grew that list until --timeout ended the sweep.
const MaxReps = 100_000

// Validate checks a sweep's numbers.
func Validate(s result.BenchSpec) error {
	for _, name := range s.Ops {
		if op := ops.Op(name); op.Known() && !Measures(op) {
			return setting.Errorf("%s %s: bench does not measure it; symmem run %s checks it", setting.Op, op, op)
		}
	}
	switch {
	case s.MinSize < 1 || s.MaxSize < s.MinSize:
		return setting.Errorf("sizes: need 1 <= %s <= %s (got %s..%s)", setting.MinSize, setting.MaxSize, units.FormatSize(s.MinSize), units.FormatSize(s.MaxSize))
	case s.Factor < 2:
		return setting.Errorf("%s %d: must be 2 or more", setting.Factor, s.Factor)
	case s.Iters < 1 || s.Reps < 1 || s.Warmup < 0:
		return setting.Errorf("%s and %s must be at least 1, %s at least 0", setting.Iters, setting.Reps, setting.Warmup)
	case s.Iters > MaxIters:
		return setting.Errorf("%s %d: give 1 up to %d operations per repetition", setting.Iters, s.Iters, MaxIters)
	case s.Reps > MaxReps:
		return setting.Errorf("%s %d: give 1 up to %d repetitions per row (for a longer window per repetition raise %s)", setting.Reps, s.Reps, MaxReps, setting.Iters)
	case s.Warmup > MaxIters:
		return setting.Errorf("%s %d: give 0 up to %d operations per repetition", setting.Warmup, s.Warmup, MaxIters)
	case s.Blocks < 0 || s.Warps < 0:
		return setting.Errorf("%s and %s must not be negative", setting.Blocks, setting.Warps)
	case s.Overlap < 1 || s.Overlap > MaxOverlap:
		return setting.Errorf("%s %d: use 1 (each operation waits for the last) up to %d", setting.Overlap, s.Overlap, MaxOverlap)
	case s.Overlap > 1 && has(s, inArea(fusedArea)):
		return setting.Errorf("%s %d: the fused operations run one at a time, every rank together: leave %s out or measure them apart", setting.Overlap, s.Overlap, setting.Overlap)
	case s.Overlap > 1 && has(s, func(e engine) bool { return e.mv.ordered }):
		return setting.Errorf("%s %d: put-flag orders one stream of puts, whose last flag says all the data is there: leave %s out", setting.Overlap, s.Overlap, setting.Overlap)
	case s.Tune && s.Matrix:
		return setting.Errorf("%s and %s together would take hours: tune one pair first", setting.Tune, setting.Matrix)
	case s.LatencySize < 1:
		return fmt.Errorf("latency message of %d bytes: must be positive", s.LatencySize)
	}
	return nil
}

// LatencyRounds is how many round trips one latency repetition makes.
func LatencyRounds(s result.BenchSpec) int { return max(s.Iters*50, 100) }

// pattern fills b with the bytes rank r sends from its source buffer of lane k: a
// splitmix64 stream, never periodic and different per rank and lane, so a shifted or
// misdelivered window does not match.
func pattern(r, k int, b []byte) {
	x := uint64(r+1)*0x9E3779B97F4A7C15 + uint64(k)<<40
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		binary.LittleEndian.PutUint64(w[:], z)
		copy(b[i:], w[:])
	}
}

// Runner runs a sweep on one rank.
type Runner struct {
	B   backend.Backend
	S   result.BenchSpec
	Reg *backend.Registry // which implementation serves which op
	// Layout is the sweep's buffers as the launcher planned them (Layout); empty, the
	// runner plans them itself.
	Layout   backend.Layout
	Progress func() // called on rank 0 after each measurement
	// Words name the settings the rows say their first wrong byte was seen in ("in a
	// --tune trial").
	Words setting.Words
	// Measured, where set, gets every measurement's rows on every rank as soon as they
	// are taken (none on a rank that took no part), so that a sweep that ends early
	// still has them.
	Measured func(rows []result.Row)
	// Links, where set, reads this rank's NVLink counters around every timed loop
	// of result.MinCounted bytes or more (result.Row.Link).
	Links LinkCounter
	// Tamper, a test hook, may change what the receiver read back before the check.
	Tamper func(got []byte)
	// first is where this rank saw the row's first wrong byte (wrongBytes).
	first *result.WrongAt
	// BeforeMeasure, where set, is called on every rank before each measurement (each
	// checked window: repetitions, tuning trials, per-iteration passes), numbered from
	// 0. The drop fault hooks in here.
	BeforeMeasure func(seq int)
	src, dst      []backend.Buffer // one per lane
	sig           backend.Buffer
	// the latency ping-pong's buffers, and the scratch for the device's clock stamps
	latSrc, latDst, stamps backend.Buffer
	// barrier rounds' slots and wrong-stamp count, and the rounds so far
	meetSlots, meetWrong backend.Buffer
	meetRound            uint64
	patterns             map[[2]int][]byte
	seq                  int // measurements so far
	coll                 *collectives
	fused                *fused
}

// Run performs the sweep and returns this rank's rows.
func (r *Runner) Run() ([]result.Row, error) {
	if err := r.setup(); err != nil {
		return nil, err
	}
	return r.sweep()
}

// hasPointOps says whether the sweep measures any operation between two ranks.
func hasPointOps(s result.BenchSpec) bool { return has(s, inArea(pointArea)) }

// setup allocates the sweep's buffers (identically on every rank) and writes the
// sources' patterns.
func (r *Runner) setup() error {
	b, s := r.B, r.S
	lay := r.Layout
	if len(lay.Slots) == 0 {
		var err error
		if lay, err = Layout(r.Reg, s, b.Size()); err != nil {
			return err
		}
	}
	carved, err := lay.Carve(b)
	if err != nil {
		return err
	}
	if hasCollectives(s) {
		if err := r.setupCollectives(carved); err != nil {
			return err
		}
	}
	if has(s, inArea(fusedArea)) {
		r.setupFused(carved)
	}
	if hasMeets(s) {
		r.meetSlots, r.meetWrong = carved.One(slotMeetSlots).Buf, carved.One(slotMeetWrong).Buf
	}
	if !hasPointOps(s) {
		return nil
	}
	// Lane k's buffers in place p are src[p*lanes+k], dst[p*lanes+k].
	for _, rg := range carved[slotSrc] {
		r.src = append(r.src, rg.Buf)
	}
	for _, rg := range carved[slotDst] {
		r.dst = append(r.dst, rg.Buf)
	}
	if l, ok := b.(backend.Laner); ok {
		if err := l.Lanes(s.Lanes()); err != nil {
			return err
		}
	}
	r.sig, r.latSrc, r.latDst, r.stamps = carved.One(slotSig).Buf, carved.One(slotLatSrc).Buf, carved.One(slotLatDst).Buf, carved.One(slotStamps).Buf
	r.patterns = map[[2]int][]byte{}
	for i, src := range r.src {
		if err := b.Write(src, r.pat(b.Rank(), i%s.Lanes())); err != nil {
			return err
		}
	}
	return nil
}

// sweep measures every operation, implementation and size.
func (r *Runner) sweep() ([]result.Row, error) {
	var rows []result.Row
	for _, name := range r.S.Ops {
		op := ops.Op(name)
		var ims []backend.Impl
		for _, impl := range r.S.Impls {
			if im, ok := r.Reg.ByName(impl); ok && im.Supports(op) {
				ims = append(ims, im)
			}
		}
		rs, err := engineOf(op).sweep(r, op, ims)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// eachImpl is a sweep of op that measures each implementation in turn with one.
func eachImpl(one func(r *Runner, op ops.Op, im backend.Impl) ([]result.Row, error)) func(r *Runner, op ops.Op, ims []backend.Impl) ([]result.Row, error) {
	return func(r *Runner, op ops.Op, ims []backend.Impl) ([]result.Row, error) {
		var rows []result.Row
		for _, im := range ims {
			rs, err := one(r, op, im)
			if err != nil {
				return nil, err
			}
			rows = append(rows, rs...)
		}
		return rows, nil
	}
}

// sweepPoint measures a point operation with im: every variant (those im runs; bench
// took an implementation with none of --algo's: no row), size (a round trip: the
// latency size) and round of pairs.
func sweepPoint(r *Runner, op ops.Op, im backend.Impl) ([]result.Row, error) {
	s := r.S
	sizes := s.Sizes()
	if engineOf(op).roundTrip {
		sizes = []int64{s.LatencySize}
	}
	variants := im.VariantsOf(op, s.Algo)
	if len(op.Variants(s.Algo)) == 0 {
		variants = []string{""}
	}
	var rows []result.Row
	for _, variant := range variants {
		for _, n := range sizes {
			for _, round := range s.Pairs(r.B.Size()) {
				r.first = nil
				rs, err := r.measure(op, im.Name, variant, n, round)
				if err != nil {
					return nil, fmt.Errorf("%s %s %s %s: %w", strings.TrimSpace(string(op)+" "+variant), im.Name, units.FormatSize(n), roundName(round), err)
				}
				rows = append(rows, r.done(r.withFirst(rs))...)
			}
		}
	}
	return rows, nil
}

// sweepCollective measures a collective with im under every operator of the sweep it
// serves, at every size it can hold (a routed one: its layer's).
func sweepCollective(r *Runner, op ops.Op, im backend.Impl) ([]result.Row, error) {
	var rows []result.Row
	for _, red := range r.redOps(op) {
		if !im.ServesRedOp(red) {
			continue // an implementation bench took itself (PlanBench refused a named one)
		}
		for _, n := range r.collSizes(op, im.Name) {
			r.first = nil
			rs, err := r.measureCollective(op, red, im.Name, n)
			if err != nil {
				return nil, fmt.Errorf("%s%s %s %s: %w", op, redSuffix(op, red), im.Name, units.FormatSize(n), err)
			}
			rows = append(rows, r.done(r.withFirst(rs))...)
		}
	}
	return rows, nil
}

// sweepMeet measures a meeting in every variant im runs.
func sweepMeet(r *Runner, op ops.Op, im backend.Impl) ([]result.Row, error) {
	var rows []result.Row
	for _, variant := range im.VariantsOf(op, r.S.Algo) {
		r.first = nil
		rs, err := r.measureMeet(op, im.Name, variant)
		if err != nil {
			return nil, fmt.Errorf("%s %s %s: %w", op, im.Name, variant, err)
		}
		rows = append(rows, r.done(r.withFirst(rs))...)
	}
	return rows, nil
}

// done hands a measurement's rows on (Measured, Progress) and returns them.
func (r *Runner) done(rs []result.Row) []result.Row {
	if r.Measured != nil {
		r.Measured(rs)
	}
	if r.Progress != nil && r.B.Rank() == 0 {
		r.Progress()
	}
	return rs
}

// withFirst gives the row just measured where its first wrong byte was seen here.
func (r *Runner) withFirst(rs []result.Row) []result.Row {
	if len(rs) == 1 && r.first != nil {
		rs[0].FirstWrong = r.first
	}
	return rs
}

// Clock names the clock this runner's rows are timed with: "cuda-events" where the
// backend times itself, "wall" where the host's clock does.
func (r *Runner) Clock() string {
	if _, ok := r.B.(backend.Timer); ok {
		return "cuda-events"
	}
	return "wall"
}

// TimingNote says how this runner's rows are timed, for the result header.
func (r *Runner) TimingNote() string {
	_, timer := r.B.(backend.Timer)
	clock := "the wall clock"
	switch {
	case r.S.Graph:
		clock = "CUDA events around one CUDA graph launch per repetition"
	case timer:
		clock = "CUDA events"
	}
	return clock + " around the operations and the quiet that completes them remotely; latency: half the round trip"
}

func roundName(round []result.Pair) string {
	var ps []string
	for _, p := range round {
		ps = append(ps, fmt.Sprintf("%d->%d", p.Src, p.Dst))
	}
	return strings.Join(ps, ",")
}

func (r *Runner) pat(rank, lane int) []byte {
	if p, ok := r.patterns[[2]int{rank, lane}]; ok {
		return p
	}
	p := make([]byte, r.S.MaxSize+shiftSlots*16)
	pattern(rank, lane, p)
	r.patterns[[2]int{rank, lane}] = p
	return p
}

// role says what this rank does in a round: the peer it drives (or -1), and the peer
// whose data it must check (or -1).
func (r *Runner) role(pulls bool, round []result.Pair) (drive, check int) {
	me := r.B.Rank()
	drive, check = -1, -1
	for _, p := range round {
		switch {
		case pulls && p.Src == me:
			drive, check = p.Dst, p.Dst // the initiator reads the peer's data
		case pulls && r.S.Bidir && p.Dst == me:
			drive, check = p.Src, p.Src
		case !pulls && p.Src == me:
			drive = p.Dst
			if r.S.Bidir {
				check = p.Dst
			}
		case !pulls && p.Dst == me:
			check = p.Src
			if r.S.Bidir {
				drive = p.Src
			}
		}
	}
	return drive, check
}

func shift(i int) int64 { return int64(i%shiftSlots) * 16 }

// measure measures op (in variant, where it has variants) at n bytes on the pairs of
// round.
func (r *Runner) measure(op ops.Op, impl, variant string, n int64, round []result.Pair) ([]result.Row, error) {
	b, s, e := r.B, r.S, engineOf(op)
	drive, check := r.role(e.mv.pulls, round)
	base := backend.Launch{Impl: impl, Blocks: s.Blocks, Warps: s.Warps}
	if p, ok := b.(backend.Preloader); ok {
		// Kernels, NCCL's window and device communicator: made on every rank (the
		// receiver's buffers move into the window too) before anything is timed.
		if err := p.Preload(op, n, base); err != nil {
			return nil, err
		}
	}
	l := base
	var tuneWrong int64
	if s.Tune && !e.roundTrip {
		best, wrong, err := r.tune(op, impl, variant, n, base, drive, check)
		if err != nil {
			return nil, err
		}
		l, tuneWrong = best, wrong
	}
	row := result.Row{Op: string(op), Impl: impl, Algo: variant, Size: n, Bidir: s.Bidir, Blocks: l.Blocks, Warps: l.Warps, Wrong: tuneWrong}
	if !e.roundTrip && s.Lanes() > 1 {
		row.Overlap = s.Lanes()
	}
	row.Graph = s.Graph && !e.roundTrip
	if sh, ok := b.(backend.Shaper); ok && !e.roundTrip {
		row.Blocks, row.Warps = sh.Shape(n, l)
	}
	// A round trip is timed on its initiator, the lower rank of the pair.
	timing := e.roundTrip && (drive >= 0 && b.Rank() < drive || check >= 0 && b.Rank() < check) || !e.roundTrip && drive >= 0
	var perIter []time.Duration
	for rep := 0; rep < s.Reps; rep++ {
		res, err := r.once(op, variant, l, n, drive, check, s.Iters, false)
		if err != nil {
			return nil, err
		}
		perIter = append(perIter, res.each...)
		if res.link != nil {
			if row.Link == nil {
				row.Link = &result.LinkTraffic{}
			}
			data, raw := res.link.DataTx, res.link.RawTx
			if e.mv.pulls { // the payload comes in
				data, raw = res.link.DataRx, res.link.RawRx
			}
			row.Link.Add(uint64(n)*uint64(s.Warmup+s.Iters), data, raw)
		}
		if timing {
			row.TimesUS = append(row.TimesUS, res.us)
		}
		row.Wrong += res.wrong
		row.Checked = row.Checked || res.checked
	}
	if !e.roundTrip && n <= s.PerIterMax && s.Lanes() == 1 && !s.Graph {
		// One more checked repetition, each operation timed on its own.
		res, err := r.once(op, variant, l, n, drive, check, s.Iters, true)
		if err != nil {
			return nil, err
		}
		perIter = res.each
		row.Wrong += res.wrong
	}
	scale := 1.0
	if e.roundTrip {
		scale = 0.5 // half round trips, like the row's time
	}
	if timing {
		row.PerIter = result.IterStatsOf(perIter, scale)
	}
	return rowsOf(row, round, b.Rank()), nil
}

// rowsOf is row for each pair of round that rank me took part in; result.Merge joins
// the sender's and the receiver's.
func rowsOf(row result.Row, round []result.Pair, me int) []result.Row {
	var rows []result.Row
	for _, p := range round {
		if p.Src != me && p.Dst != me {
			continue
		}
		rr := row
		rr.Src, rr.Dst = p.Src, p.Dst
		rows = append(rows, rr)
	}
	return rows
}
