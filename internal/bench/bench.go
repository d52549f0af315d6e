// Package bench measures bandwidth and latency of one-sided operations between ranks,
// for every implementation a backend offers, and checks the data that arrived after
// every measurement. It runs on any backend.Backend; a backend that implements
// backend.Timer (the GPU one: CUDA events) times itself, others are timed by the clock.
package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/units"
)

// Ops are the operations bench knows; latency is a ping-pong of a small put with a
// signal, reported as the half round trip.
var Ops = []string{"put", "get", "put-signal", "latency"}

// Spec is one sweep, identical on every rank.
type Spec struct {
	Ops     []string `json:"ops"`
	Impls   []string `json:"impls"`
	MinSize int64    `json:"min_size"`
	MaxSize int64    `json:"max_size"`
	Factor  int64    `json:"factor"`
	Iters   int      `json:"iters"`
	Warmup  int      `json:"warmup"`
	Reps    int      `json:"reps"`
	Blocks  int      `json:"blocks"`
	Warps   int      `json:"warps"`
	Bidir   bool     `json:"bidir"`
	Matrix  bool     `json:"matrix"`
	Tune    bool     `json:"tune"`
	// Overlap is how many operations may be in flight at once: operation i goes on
	// lane i % Overlap, between buffers of its own, so it need not wait for the
	// previous one (0 or 1: each waits for the last, as one stream does).
	Overlap int `json:"overlap,omitempty"`
	// Graph captures each repetition's timed operations in one CUDA graph and launches
	// that (GraphTimer), so that the CPU's launch cost per operation drops out.
	Graph bool `json:"graph,omitempty"`
	// LatencySize is the message of the latency ping-pong.
	LatencySize int64 `json:"latency_size"`
	// PerIterMax is the largest message that also gets a per-iteration pass: one more
	// checked repetition that times every operation on its own, for p50/p99/max
	// (latency always gets them, from every round). 0 turns the pass off.
	PerIterMax int64 `json:"per_iter_max,omitempty"`
	// TuneWarps are the warp counts --tune tries (from the kernel catalogue).
	TuneWarps []int `json:"tune_warps,omitempty"`
}

// Sizes lists the message sizes of the sweep.
func (s Spec) Sizes() []int64 {
	var out []int64
	for n := s.MinSize; n <= s.MaxSize; n *= s.Factor {
		out = append(out, n)
		if s.Factor <= 1 {
			break
		}
	}
	return out
}

// shiftSlots rotates the source window so that every iteration sends different bytes.
const shiftSlots = 64

// lanes is the number of operations in flight at once.
func (s Spec) lanes() int { return max(s.Overlap, 1) }

// MaxOverlap bounds --overlap: each lane holds its own source and destination buffers.
const MaxOverlap = 8

// HeapBytes is the symmetric heap per rank a sweep needs: per lane a source (with room
// for the shifted windows) and a destination; the signal word; the ping-pong's source,
// destination and clock stamps.
func (s Spec) HeapBytes() int64 {
	a := func(n int64) int64 { return backend.Align(n, backend.HeapAlign) }
	lat := max(s.LatencySize, 8)
	return int64(s.lanes())*(a(s.MaxSize+shiftSlots*16)+a(s.MaxSize)) +
		4*backend.HeapAlign + a(lat+shiftSlots*16) + a(lat) + a(int64(s.latencyRounds()+1)*8)
}

// latencyRounds is how many round trips one latency repetition makes.
func (s Spec) latencyRounds() int { return max(s.Iters*50, 100) }

// Pair is one sender and one receiver.
type Pair struct{ Src, Dst int }

// Pairs lists who talks to whom: rank i with rank i+N/2, or every ordered pair.
func (s Spec) Pairs(n int) [][]Pair {
	if s.Matrix {
		var rounds [][]Pair
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if a != b {
					rounds = append(rounds, []Pair{{a, b}})
				}
			}
		}
		return rounds
	}
	var ps []Pair
	for i := 0; i < n/2; i++ {
		ps = append(ps, Pair{i, i + n/2})
	}
	return [][]Pair{ps}
}

// Supports says whether impl can run op (put-signal and latency need NVSHMEM calls).
func Supports(impl, op string) bool {
	if op == "put-signal" || op == "latency" {
		return impl == "triton" || impl == "cuda" || impl == "memcpy"
	}
	return true
}

// Row is one measurement, as the sender saw it, with the receiver's data check.
type Row struct {
	Op      string    `json:"op"`
	Impl    string    `json:"impl"`
	Size    int64     `json:"size"`
	Src     int       `json:"src"`
	Dst     int       `json:"dst"`
	Bidir   bool      `json:"bidir,omitempty"`
	Overlap int       `json:"overlap,omitempty"`
	Graph   bool      `json:"graph,omitempty"`
	Blocks  int       `json:"blocks,omitempty"`
	Warps   int       `json:"warps,omitempty"`
	TimesUS []float64 `json:"times_us"` // one per repetition: time per operation
	MedUS   float64   `json:"time_us"`
	MinUS   float64   `json:"min_us"`
	MaxUS   float64   `json:"max_us"`
	GBps    float64   `json:"gbps"`
	PeakPct float64   `json:"peak_pct,omitempty"`
	// PerIter holds per-operation statistics (latency: per round trip, halved), where
	// they were taken.
	PerIter *IterStats `json:"per_iter,omitempty"`
	Wrong   int64      `json:"wrong"`
	Checked bool       `json:"checked"`
	// What the sender's NVLinks carried in the payload's direction (NVML counters), for
	// rows of MinCounted bytes or more per repetition.
	Link *LinkTraffic `json:"link,omitempty"`
}

// IterStats summarises the time of single operations, in microseconds.
type IterStats struct {
	N     int     `json:"n"`
	P50US float64 `json:"p50_us"`
	P99US float64 `json:"p99_us"`
	MaxUS float64 `json:"max_us"`
}

// iterStats computes IterStats of ds, each scaled by scale (0.5: half round trips).
func iterStats(ds []time.Duration, scale float64) *IterStats {
	if len(ds) == 0 {
		return nil
	}
	us := make([]float64, len(ds))
	for i, d := range ds {
		us[i] = float64(d.Nanoseconds()) / 1e3 * scale
	}
	sort.Float64s(us)
	// nearest rank: the smallest value with at least p of the samples at or below it
	at := func(p float64) float64 { return us[max(int(math.Ceil(p*float64(len(us))))-1, 0)] }
	return &IterStats{N: len(us), P50US: at(0.50), P99US: at(0.99), MaxUS: us[len(us)-1]}
}

// LinkTraffic is NVLink traffic measured around a row's operations (warm-ups and
// timed ones, every counted repetition).
type LinkTraffic struct {
	PayloadBytes uint64 `json:"payload_bytes"`
	DataBytes    uint64 `json:"data_bytes"`
	RawBytes     uint64 `json:"raw_bytes"`
	// WirePerByte is the raw bytes per payload byte; WireGBps the raw rate on the
	// links while the row ran at its median GB/s (GB/s x WirePerByte).
	WirePerByte float64 `json:"wire_per_byte"`
	WireGBps    float64 `json:"wire_gbps"`
}

// LinkCounter reads the NVLink counters of the GPU a rank drives.
type LinkCounter interface {
	Read() (topo.LinkSample, error)
}

// MinCounted is the least payload per repetition whose link traffic is reported: the
// counters tick in KiB and also see the job's own small messages.
const MinCounted = 16 << 20

func (l *LinkTraffic) add(payload uint64, d topo.LinkSample, get bool) {
	data, raw := d.DataTx, d.RawTx
	if get { // the payload comes in
		data, raw = d.DataRx, d.RawRx
	}
	l.PayloadBytes += payload
	l.DataBytes += data
	l.RawBytes += raw
	if l.PayloadBytes > 0 {
		l.WirePerByte = float64(l.RawBytes) / float64(l.PayloadBytes)
	}
}

// Key identifies a row across ranks and across result files.
func (r Row) Key() string {
	k := fmt.Sprintf("%s/%s/%d/%d->%d/%v", r.Op, r.Impl, r.Size, r.Src, r.Dst, r.Bidir)
	if r.Overlap > 1 {
		k += fmt.Sprintf("/overlap%d", r.Overlap)
	}
	if r.Graph {
		k += "/graph"
	}
	return k
}

// PairLabel is how tables show the pair: 0->1, or 0<->1 for --bidir.
func (r Row) PairLabel() string {
	if r.Bidir {
		return fmt.Sprintf("%d<->%d", r.Src, r.Dst)
	}
	return fmt.Sprintf("%d->%d", r.Src, r.Dst)
}

// Finish computes the median, min, max and bandwidth.
func (r *Row) Finish() {
	if len(r.TimesUS) == 0 {
		return
	}
	t := append([]float64(nil), r.TimesUS...)
	sort.Float64s(t)
	r.MinUS, r.MaxUS = t[0], t[len(t)-1]
	if len(t)%2 == 1 {
		r.MedUS = t[len(t)/2]
	} else {
		r.MedUS = (t[len(t)/2-1] + t[len(t)/2]) / 2
	}
	if r.Op != "latency" && r.MedUS > 0 {
		r.GBps = float64(r.Size) / (r.MedUS * 1e3)
	}
	if r.Link != nil {
		r.Link.WireGBps = r.GBps * r.Link.WirePerByte
	}
}

// Merge combines the rows of all ranks: times from the sender, wrong counts from the
// rank that checked the data.
func Merge(perRank [][]Row) []Row {
	byKey := map[string]*Row{}
	var order []string
	for _, rows := range perRank {
		for _, r := range rows {
			k := r.Key()
			m, ok := byKey[k]
			if !ok {
				c := r
				c.TimesUS, c.Wrong, c.Checked = nil, 0, false
				byKey[k] = &c
				order = append(order, k)
				m = &c
			}
			if len(r.TimesUS) > 0 {
				m.TimesUS, m.Blocks, m.Warps, m.Link, m.PerIter = r.TimesUS, r.Blocks, r.Warps, r.Link, r.PerIter
			}
			m.Wrong += r.Wrong
			m.Checked = m.Checked || r.Checked
		}
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		r := *byKey[k]
		r.Finish()
		out = append(out, r)
	}
	return out
}

// Shaper is a backend that can say which grid it launches for n bytes.
type Shaper interface {
	Shape(n int64, l backend.Launch) (blocks, warps int)
}

// GraphTimer is a backend that can capture a stream of operations in a CUDA graph and
// time one launch of it.
type GraphTimer interface {
	TimeGraph(iters int, op func(i int) error) (time.Duration, error)
}

// PingPonger is a backend that runs a whole ping-pong on the device: each side puts
// its src into the other's dst with a signal; the initiator also returns the time of
// every round trip (stamps is scratch for them: iters+1 words).
type PingPonger interface {
	PingPong(dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool, l backend.Launch) (time.Duration, []time.Duration, error)
}

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
	B        backend.Backend
	S        Spec
	Progress func() // called on rank 0 after each measurement
	// Links, where set, reads this rank's NVLink counters around every timed loop
	// of MinCounted bytes or more (Row.Link).
	Links LinkCounter
	// Tamper, a test hook, may change what the receiver read back before the check.
	Tamper func(got []byte)
	// BeforeMeasure, where set, is called on every rank before each measurement (each
	// checked window: repetitions, tuning trials, per-iteration passes), numbered from
	// 0. The drop fault hooks in here.
	BeforeMeasure func(seq int)
	src, dst      []backend.Buffer // one per lane
	sig           backend.Buffer
	// the latency ping-pong's buffers, and the scratch for the device's clock stamps
	latSrc, latDst, stamps backend.Buffer
	patterns               map[[2]int][]byte
	seq                    int // measurements so far
}

// Run performs the sweep and returns this rank's rows.
func (r *Runner) Run() ([]Row, error) {
	b, s := r.B, r.S
	r.src, r.dst = make([]backend.Buffer, s.lanes()), make([]backend.Buffer, s.lanes())
	var err error
	for k := range r.src {
		if r.src[k], err = b.Alloc(s.MaxSize + shiftSlots*16); err != nil {
			return nil, err
		}
		if r.dst[k], err = b.Alloc(s.MaxSize); err != nil {
			return nil, err
		}
	}
	if l, ok := b.(backend.Laner); ok {
		if err := l.Lanes(s.lanes()); err != nil {
			return nil, err
		}
	}
	if r.sig, err = b.Alloc(8); err != nil {
		return nil, err
	}
	lat := max(s.LatencySize, 8)
	if r.latSrc, err = b.Alloc(lat + shiftSlots*16); err != nil {
		return nil, err
	}
	if r.latDst, err = b.Alloc(lat); err != nil {
		return nil, err
	}
	if r.stamps, err = b.Alloc(int64(s.latencyRounds()+1) * 8); err != nil {
		return nil, err
	}
	r.patterns = map[[2]int][]byte{}
	for k, src := range r.src {
		if err := b.Write(src, r.pat(b.Rank(), k)); err != nil {
			return nil, err
		}
	}
	var rows []Row
	for _, op := range s.Ops {
		for _, impl := range s.Impls {
			if !Supports(impl, op) {
				continue
			}
			sizes := s.Sizes()
			if op == "latency" {
				sizes = []int64{s.LatencySize}
			}
			for _, n := range sizes {
				for _, round := range s.Pairs(b.Size()) {
					rs, err := r.measure(op, impl, n, round)
					if err != nil {
						return nil, fmt.Errorf("%s %s %s %s: %w", op, impl, units.FormatSize(n), roundName(round), err)
					}
					rows = append(rows, rs...)
					if r.Progress != nil && b.Rank() == 0 {
						r.Progress()
					}
				}
			}
		}
	}
	return rows, nil
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

func roundName(round []Pair) string {
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
func (r *Runner) role(op string, round []Pair) (drive, check int) {
	me := r.B.Rank()
	drive, check = -1, -1
	for _, p := range round {
		switch {
		case op == "get" && p.Src == me:
			drive, check = p.Dst, p.Dst // the initiator reads the peer's data
		case op == "get" && r.S.Bidir && p.Dst == me:
			drive, check = p.Src, p.Src
		case op != "get" && p.Src == me:
			drive = p.Dst
			if r.S.Bidir {
				check = p.Dst
			}
		case op != "get" && p.Dst == me:
			check = p.Src
			if r.S.Bidir {
				drive = p.Src
			}
		}
	}
	return drive, check
}

func shift(i int) int64 { return int64(i%shiftSlots) * 16 }

func (r *Runner) measure(op, impl string, n int64, round []Pair) ([]Row, error) {
	b, s := r.B, r.S
	drive, check := r.role(op, round)
	base := backend.Launch{Impl: impl, Blocks: s.Blocks, Warps: s.Warps}
	if impl == "memcpy" {
		base.Impl = ""
	}
	l := base
	if s.Tune && op != "latency" {
		best, err := r.tune(op, impl, n, base, drive, check)
		if err != nil {
			return nil, err
		}
		l = best
	}
	row := Row{Op: op, Impl: impl, Size: n, Bidir: s.Bidir, Blocks: l.Blocks, Warps: l.Warps}
	if op != "latency" && s.lanes() > 1 {
		row.Overlap = s.lanes()
	}
	row.Graph = s.Graph && op != "latency"
	if sh, ok := b.(Shaper); ok && op != "latency" {
		row.Blocks, row.Warps = sh.Shape(n, l)
	}
	timing := op == "latency" && (drive >= 0 && b.Rank() < drive || check >= 0 && b.Rank() < check) || op != "latency" && drive >= 0
	var perIter []time.Duration
	for rep := 0; rep < s.Reps; rep++ {
		res, err := r.once(op, l, n, drive, check, s.Iters, false)
		if err != nil {
			return nil, err
		}
		perIter = append(perIter, res.each...)
		if res.link != nil {
			if row.Link == nil {
				row.Link = &LinkTraffic{}
			}
			row.Link.add(uint64(n)*uint64(s.Warmup+s.Iters), *res.link, op == "get")
		}
		if timing {
			row.TimesUS = append(row.TimesUS, res.us)
		}
		row.Wrong += res.wrong
		row.Checked = row.Checked || res.checked
	}
	if op != "latency" && n <= s.PerIterMax && s.lanes() == 1 && !s.Graph {
		// One more checked repetition, each operation timed on its own.
		res, err := r.once(op, l, n, drive, check, s.Iters, true)
		if err != nil {
			return nil, err
		}
		perIter = res.each
		row.Wrong += res.wrong
	}
	scale := 1.0
	if op == "latency" {
		scale = 0.5 // half round trips, like the row's time
	}
	if timing {
		row.PerIter = iterStats(perIter, scale)
	}
	var rows []Row
	me := b.Rank()
	for _, p := range round {
		// A rank reports the rows it took part in; Merge joins sender and receiver.
		if p.Src != me && p.Dst != me {
			continue
		}
		rr := row
		rr.Src, rr.Dst = p.Src, p.Dst
		rows = append(rows, rr)
	}
	return rows, nil
}

// tune tries launch shapes with one short repetition each and returns the fastest.
// Every rank walks the same list, so the barriers inside stay matched.
func (r *Runner) tune(op, impl string, n int64, base backend.Launch, drive, check int) (backend.Launch, error) {
	if impl == "memcpy" {
		return base, nil
	}
	warps := r.S.TuneWarps
	if len(warps) == 0 {
		warps = []int{4, 8, 16, 32}
	}
	maxBlocks := 128
	if impl == "copy-engine" {
		// blocks = streams the copy is split over; warps do not apply
		warps, maxBlocks = []int{0}, 8
	}
	best, bestT := base, -1.0
	for blocks := 1; blocks <= maxBlocks; blocks *= 2 {
		if int64(blocks-1)*16 >= n {
			break
		}
		for _, w := range warps {
			l := base
			l.Blocks, l.Warps = blocks, w
			res, err := r.once(op, l, n, drive, check, max(r.S.Iters/2, 2), false)
			if err != nil {
				return base, err
			}
			// The driver's time decides; share it so every rank picks the same.
			t, err := r.agree(res.us, drive >= 0)
			if err != nil {
				return base, err
			}
			if bestT < 0 || t < bestT {
				best, bestT = l, t
			}
		}
	}
	return best, nil
}

// agree makes every rank see the driving rank's measurement, through the symmetric
// signal word (rank 0 drives in every tuned round).
func (r *Runner) agree(t float64, driving bool) (float64, error) {
	b := r.B
	var buf [8]byte
	if b.Rank() == 0 {
		binary.LittleEndian.PutUint64(buf[:], uint64(t*1e3))
		for p := 1; p < b.Size(); p++ {
			if err := b.Write(r.latSrc.Slice(0, 8), buf[:]); err != nil {
				return 0, err
			}
			if err := b.Put(r.latSrc.Slice(0, 8), r.latSrc.Slice(0, 8), p, backend.Launch{Impl: "triton"}); err != nil {
				// the CPU backend ignores Impl; a GPU put of 8 bytes always works
				return 0, err
			}
		}
		if err := b.Quiet(); err != nil {
			return 0, err
		}
	}
	if err := b.Barrier(); err != nil {
		return 0, err
	}
	if err := b.Read(r.latSrc.Slice(0, 8), buf[:]); err != nil {
		return 0, err
	}
	if err := b.Barrier(); err != nil {
		return 0, err
	}
	return float64(binary.LittleEndian.Uint64(buf[:])) / 1e3, nil
}

// result is what one repetition measured on this rank.
type result struct {
	us      float64          // time per operation in microseconds (on the driving rank)
	each    []time.Duration  // per-operation times, where taken (latency: round trips)
	wrong   int64            // wrong bytes (on the checking rank)
	checked bool             // whether this rank checked anything
	link    *topo.LinkSample // the links' traffic during warm-ups and timed ops, if counted
}

// window is the part of a source that operation i of measurement seq sends: it moves
// with both, so consecutive operations and measurements never send the same bytes.
func window(seq, i int, n int64) (off, end int64) {
	off = shift(seq + i)
	return off, off + n
}

// once runs one measurement: warmup + iters operations, timed, then checked. Before
// anything moves, the checking rank fills every destination it will check with the
// complement of what must arrive there, so only bytes this measurement delivered can
// pass. perIter times every operation on its own instead of the stream of them.
func (r *Runner) once(op string, l backend.Launch, n int64, drive, check, iters int, perIter bool) (result, error) {
	b, s := r.B, r.S
	seq := r.seq
	r.seq++
	if r.BeforeMeasure != nil {
		r.BeforeMeasure(seq)
	}
	if op == "latency" {
		peer := drive
		if peer < 0 {
			peer = check // the responder
		}
		return r.latency(l, n, peer, iters, seq)
	}
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return result{}, err
	}
	lanes, total := s.lanes(), s.Warmup+iters
	if check >= 0 {
		for k, last := range lastOps(total, lanes) {
			off, end := window(seq, last, n)
			if err := b.Write(r.dst[k].Slice(0, n), complement(r.pat(check, k)[off:end])); err != nil {
				return result{}, err
			}
		}
	}
	if err := b.Barrier(); err != nil {
		return result{}, err
	}
	do := func(i int) error {
		l := l
		l.Lane = i % lanes
		off, _ := window(seq, i, n)
		dst, src := r.dst[l.Lane].Slice(0, n), r.src[l.Lane].Slice(off, n)
		switch op {
		case "put":
			return b.Put(dst, src, drive, l)
		case "get":
			return b.Get(dst, src, drive, l)
		default:
			return b.PutSignal(dst, src, r.sig, drive, l)
		}
	}
	var res result
	if drive >= 0 {
		var err error
		if res, err = r.drive(do, n, iters, perIter); err != nil {
			return result{}, err
		}
	}
	if op == "put-signal" && check >= 0 {
		if err := b.WaitSignal(r.sig, n, total, l); err != nil {
			return result{}, err
		}
	}
	if err := b.Barrier(); err != nil {
		return result{}, err
	}
	if check >= 0 {
		res.checked = true
		got := make([]byte, n)
		for k, last := range lastOps(total, lanes) {
			if err := b.Read(r.dst[k].Slice(0, n), got); err != nil {
				return result{}, err
			}
			// Operations on one lane run in order: the last one's window is there.
			off, end := window(seq, last, n)
			res.wrong += r.wrongBytes(got, r.pat(check, k)[off:end])
		}
	}
	// Nobody may start the next measurement (and poison dst) before the check.
	if err := b.Barrier(); err != nil {
		return result{}, err
	}
	return res, nil
}

// wrongBytes counts the bytes of got that differ from want, after the Tamper hook.
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
// its remote completion (Quiet) is inside the timed region.
func (r *Runner) drive(do func(i int) error, n int64, iters int, perIter bool) (result, error) {
	b, s := r.B, r.S
	// The counters cover the warm-ups too (the links are idle before them, after the
	// barrier), so that nothing has to wait between warm-ups and timed operations.
	// Under --bidir a GPU's links also carry the responses to the peer's traffic.
	count := r.Links != nil && n*int64(iters) >= MinCounted && !s.Bidir && !perIter
	var before topo.LinkSample
	if count {
		var err error
		if before, err = r.Links.Read(); err != nil {
			count = false
		}
	}
	for i := 0; i < s.Warmup; i++ {
		if err := do(i); err != nil {
			return result{}, err
		}
	}
	timed := func(i int) error { return do(s.Warmup + i) }
	var res result
	var d time.Duration
	var err error
	gt, graph := r.B.(GraphTimer)
	t, timer := b.(backend.Timer)
	switch {
	case s.Graph && !graph:
		return result{}, fmt.Errorf("the %s backend cannot capture CUDA graphs", b.Name())
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
		d, err = gt.TimeGraph(iters, timed)
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
		return result{}, err
	}
	for _, e := range res.each {
		d += e
	}
	if err := b.Quiet(); err != nil {
		return result{}, err
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

// latency runs a ping-pong of n bytes with a signal and returns the half round trip.
// Each side sends a window of its own pattern into the other's destination, which was
// filled with the complement of that window first: both sides check what arrived.
func (r *Runner) latency(l backend.Launch, n int64, peer, iters, seq int) (result, error) {
	b := r.B
	if err := b.Write(r.sig, make([]byte, 8)); err != nil {
		return result{}, err
	}
	off, end := window(seq, 0, n)
	src, dst := r.latSrc.Slice(0, n), r.latDst.Slice(0, n)
	if peer >= 0 {
		if err := b.Write(src, r.pat(b.Rank(), 0)[off:end]); err != nil {
			return result{}, err
		}
		if err := b.Write(dst, complement(r.pat(peer, 0)[off:end])); err != nil {
			return result{}, err
		}
	}
	if err := b.Barrier(); err != nil {
		return result{}, err
	}
	if peer < 0 {
		if err := b.Barrier(); err != nil {
			return result{}, err
		}
		return result{}, b.Barrier()
	}
	initiator := b.Rank() < peer
	rounds := r.S.latencyRounds()
	var d time.Duration
	var each []time.Duration
	var err error
	if pp, ok := b.(PingPonger); ok {
		d, each, err = pp.PingPong(dst, src, r.sig, r.stamps, n, rounds, peer, initiator, l)
	} else {
		d, each, err = pingPong(b, dst, src, r.sig, n, rounds, peer, initiator, l)
	}
	if err != nil {
		return result{}, err
	}
	if err := b.Barrier(); err != nil {
		return result{}, err
	}
	got := make([]byte, n)
	if err := b.Read(dst, got); err != nil {
		return result{}, err
	}
	res := result{checked: true, wrong: r.wrongBytes(got, r.pat(peer, 0)[off:end])}
	if err := b.Barrier(); err != nil {
		return result{}, err
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
