package result

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
)

// BenchSpec is one bench sweep, identical on every rank and recorded with its results.
type BenchSpec struct {
	Ops     []string `json:"ops"`
	Impls   []string `json:"impls"`
	MinSize int64    `json:"min_size"`
	MaxSize int64    `json:"max_size"`
	Factor  int64    `json:"factor"`
	Iters   int      `json:"iters"`
	Warmup  int      `json:"warmup"`
	Reps    int      `json:"reps"`
	// Runs is how many runs of the sweep the rows hold (bench --runs, or result files
	// pooled by compare): each run started fresh ranks and buffers, and each row's
	// times_us holds Reps times per run, one run after the other (0 or 1: one run).
	Runs   int  `json:"runs,omitempty"`
	Blocks int  `json:"blocks"`
	Warps  int  `json:"warps"`
	Bidir  bool `json:"bidir"`
	Matrix bool `json:"matrix"`
	Tune   bool `json:"tune"`
	// Overlap is how many operations may be in flight at once: operation i goes on
	// lane i % Overlap, between buffers of its own, so it need not wait for the
	// previous one (0 or 1: each waits for the last, as one stream does).
	Overlap int `json:"overlap,omitempty"`
	// Graph captures each repetition's timed operations in one CUDA graph and launches
	// that (GraphTimer), so that the CPU's launch cost per operation drops out.
	Graph bool `json:"graph,omitempty"`
	// Places is how many source and destination buffers each lane has; measurements
	// take them in turn (0 or 1: one). Where a buffer lands in physical memory (cache
	// sets, pages) moves a CPU copy's time for a whole run, which the repetitions of one
	// buffer never see; taking turns puts that spread inside every run.
	Places int `json:"places,omitempty"`
	// LatencySize is the message of the latency ping-pong.
	LatencySize int64 `json:"latency_size"`
	// PerIterMax is the largest message that also gets a per-iteration pass: one more
	// checked repetition that times every operation on its own, for p50/p99/max
	// (latency always gets them, from every round). 0 turns the pass off.
	PerIterMax int64 `json:"per_iter_max,omitempty"`
	// TuneWarps are the warp counts --tune tries (from the kernel catalogue).
	TuneWarps []int `json:"tune_warps,omitempty"`
	// Collectives: the element type (sums add it; sizes are whole elements per rank),
	// all-reduce's algorithm ("" lets the implementation choose by size), broadcast's
	// root, and the MoE layer dispatch and combine route.
	DType string `json:"dtype,omitempty"`
	// RedOps are the reduction operators all-reduce and reduce-scatter are measured
	// with, a row each (empty: sum).
	RedOps []string  `json:"redops,omitempty"`
	Algo   string    `json:"algo,omitempty"`
	Root   int       `json:"root,omitempty"`
	MoE    *coll.MoE `json:"moe,omitempty"`
	// Matmul is the fused operations' shape, M the largest of the sweep's: it
	// measures M, M/factor, ... (up to FusedSizes shapes, each M a whole number of rows
	// per rank).
	Matmul *ops.Matmul `json:"matmul,omitempty"`
}

// Sizes lists the message sizes of the sweep.
func (s BenchSpec) Sizes() []int64 {
	var out []int64
	for n := s.MinSize; n <= s.MaxSize; n *= s.Factor {
		out = append(out, n)
		if s.Factor <= 1 {
			break
		}
	}
	return out
}

// RunCount is how many runs the rows hold (Runs, at least 1).
func (s BenchSpec) RunCount() int { return max(s.Runs, 1) }

// Rotation is how many buffers of each lane measurements take in turn.
func (s BenchSpec) Rotation() int { return max(s.Places, 1) }

// Lanes is the number of operations in flight at once.
func (s BenchSpec) Lanes() int { return max(s.Overlap, 1) }

// Pair is one sender and one receiver.
type Pair struct{ Src, Dst int }

// Pairs lists who talks to whom: rank i with rank i+N/2, or every ordered pair.
func (s BenchSpec) Pairs(n int) [][]Pair {
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

// Row is one measurement, as the sender saw it, with the receiver's data check.
type Row struct {
	Op      string `json:"op"`
	Impl    string `json:"impl"`
	Size    int64  `json:"size"`
	Src     int    `json:"src"`
	Dst     int    `json:"dst"`
	Bidir   bool   `json:"bidir,omitempty"`
	Overlap int    `json:"overlap,omitempty"`
	Graph   bool   `json:"graph,omitempty"`
	// Blocks and Warps are the kernel's grid (backend.Shaper); with Warps 0, Blocks
	// counts the copy streams the transfer was split over (the copy engine's grid).
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
	// FirstWrong is where the first wrong byte was seen, for finding what a kernel got
	// wrong (nil when none was).
	FirstWrong *WrongAt `json:"first_wrong,omitempty"`
	// What the sender's NVLinks carried in the payload's direction (NVML counters), for
	// rows of MinCounted bytes or more per repetition.
	Link *LinkTraffic `json:"link,omitempty"`
	// Collectives: how many ranks took part (Src and Dst are -1; each repetition's
	// time is the mean of the ranks' times, as nccl-tests's), the element type, the algorithm, and bus bandwidth
	// as nccl-tests defines it (GBps is its algorithm bandwidth: Size / time). For
	// dispatch and combine, Crossed is the bytes per rank that went to other ranks,
	// and bus bandwidth their rate.
	Ranks   int     `json:"ranks,omitempty"`
	DType   string  `json:"dtype,omitempty"`
	RedOp   string  `json:"redop,omitempty"` // the reduction operator (all-reduce, reduce-scatter)
	Algo    string  `json:"algo,omitempty"`
	Kernel  string  `json:"kernel,omitempty"` // the one kernel that ran it, where it was one (backend.Kerneler)
	BusGBps float64 `json:"busbw,omitempty"`
	Crossed int64   `json:"crossed,omitempty"`
	// Fused operations: the matrix product's shape (Size is the bytes each rank
	// receives), its rate over every rank together, the time of each rank's product
	// alone on that shape (the floor a fused implementation can reach), and whether the
	// implementation is an unfused baseline (the product, then a collective).
	Matmul  *ops.Matmul `json:"matmul,omitempty"`
	TFLOPS  float64     `json:"tflops,omitempty"`
	GemmUS  float64     `json:"gemm_us,omitempty"`
	Unfused bool        `json:"unfused,omitempty"`
}

// WrongAt is the first wrong byte a rank saw in a row: its offset in what the rank
// checked (a collective's output, a transfer's destination window) and up to 8 bytes
// from there, as they were and as they should have been.
type WrongAt struct {
	Rank int    `json:"rank"`
	Byte int64  `json:"byte"`
	Got  string `json:"got"`
	Want string `json:"want"`
	// Where says more where the byte is not in the output of the row's own launch:
	// "past the output" (a guard byte), "in a --tune trial of 4 blocks x 8 warps".
	Where string `json:"where,omitempty"`
}

// WrongAtOf is where got first differs from want, seen by rank; nil if nowhere.
func WrongAtOf(rank int, got, want []byte) *WrongAt {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			end := min(i+8, len(got), len(want))
			return &WrongAt{Rank: rank, Byte: int64(i), Got: hex.EncodeToString(got[i:end]), Want: hex.EncodeToString(want[i:end])}
		}
	}
	return nil
}

// String says it for people: first at rank 1, byte 4096: 0000 where 3f80 belongs (or,
// where no bytes are kept, what Where says).
func (w WrongAt) String() string {
	if w.Got == "" && w.Want == "" {
		return fmt.Sprintf("first at rank %d %s", w.Rank, w.Where)
	}
	where := ""
	if w.Where != "" {
		where = " " + w.Where
	}
	return fmt.Sprintf("first at rank %d, byte %d%s: %s where %s belongs", w.Rank, w.Byte, where, w.Got, w.Want)
}

// RunMedians is the median time per operation of each run a row holds, its
// repetitions being reps a run (BenchSpec.Reps), one run after the other: the samples
// compare judges a change by, since the repetitions of one run share its buffers and
// cores and never see what moves from run to run.
func (r Row) RunMedians(reps int) []float64 {
	if reps < 1 || len(r.TimesUS)%reps != 0 {
		reps = len(r.TimesUS)
	}
	var out []float64
	for i := 0; i+reps <= len(r.TimesUS) && reps > 0; i += reps {
		out = append(out, median(r.TimesUS[i:i+reps]))
	}
	return out
}

// median is the median of ts (which it leaves as it is).
func median(ts []float64) float64 {
	t := slices.Clone(ts)
	sort.Float64s(t)
	if len(t)%2 == 1 {
		return t[len(t)/2]
	}
	return (t[len(t)/2-1] + t[len(t)/2]) / 2
}

// Collective says whether the row measured a collective (every rank took part).
func (r Row) Collective() bool { return r.Ranks > 0 }

// IterStats summarises the time of single operations, in microseconds: N of them, each
// timed on its own. P99US is left out (0) below MinP99Samples: the 99th percentile of 20
// operations is their slowest.
type IterStats struct {
	N     int     `json:"n"`
	P50US float64 `json:"p50_us"`
	P99US float64 `json:"p99_us,omitempty"`
	MaxUS float64 `json:"max_us"`
}

// MinP99Samples is the fewest single operations a p99 is given from: at least one
// operation above it.
const MinP99Samples = 100

// IterStatsOf computes IterStats of ds, each scaled by scale (0.5: half round trips).
func IterStatsOf(ds []time.Duration, scale float64) *IterStats {
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
	st := &IterStats{N: len(us), P50US: Round(at(0.50), TimeDecimals), MaxUS: Round(us[len(us)-1], TimeDecimals)}
	if len(us) >= MinP99Samples {
		st.P99US = Round(at(0.99), TimeDecimals)
	}
	return st
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

// MinCounted is the least payload per repetition whose link traffic is reported: the
// counters tick in KiB and also see the job's own small messages.
const MinCounted = 16 << 20

// Add counts what the links carried while payload bytes moved: data and raw bytes in
// the payload's direction.
func (l *LinkTraffic) Add(payload, data, raw uint64) {
	l.PayloadBytes += payload
	l.DataBytes += data
	l.RawBytes += raw
	if l.PayloadBytes > 0 {
		l.WirePerByte = Round(float64(l.RawBytes)/float64(l.PayloadBytes), TimeDecimals)
	}
}

// RowKey names one measurement: what bench merges the ranks' reports of into one row,
// and what compare matches the rows of two results by. A field that tells two
// measurements apart belongs here, and both see it.
type RowKey struct {
	Op      string `json:"op"`
	Impl    string `json:"impl"`
	Size    int64  `json:"size"`
	Src     int    `json:"src"`
	Dst     int    `json:"dst"`
	Bidir   bool   `json:"bidir,omitempty"`
	Overlap int    `json:"overlap,omitempty"`
	Graph   bool   `json:"graph,omitempty"`
	// Collectives: how many ranks took part, the element type, the algorithm.
	Ranks int    `json:"ranks,omitempty"`
	DType string `json:"dtype,omitempty"`
	Algo  string `json:"algo,omitempty"`
	// RedOp is a reduction's operator other than sum (files from before rows named
	// their operator summed).
	RedOp string `json:"redop,omitempty"`
	// Matmul is a fused operation's shape.
	Matmul ops.Matmul `json:"matmul,omitzero"`
}

// Key identifies a row across ranks and across result files: an overlap of 1 is none,
// and only collectives have ranks, element types and algorithms.
func (r Row) Key() RowKey {
	k := RowKey{Op: r.Op, Impl: r.Impl, Size: r.Size, Src: r.Src, Dst: r.Dst, Bidir: r.Bidir, Graph: r.Graph}
	if r.Overlap > 1 {
		k.Overlap = r.Overlap
	}
	if r.Matmul != nil {
		k.Matmul = *r.Matmul
	}
	if r.Collective() {
		k.Ranks, k.DType, k.Algo = r.Ranks, r.DType, r.Algo
	} else if r.Algo != "" {
		k.Algo = r.Algo // a variant (put-flag's ordering)
	}
	if r.RedOp != "sum" {
		k.RedOp = r.RedOp
	}
	return k
}

// Trusted says whether the row's data was checked and right: only then do its figures
// mean anything (plots, matrices and comparisons leave the others out).
func (r Row) Trusted() bool { return r.Checked && r.Wrong == 0 }

// PairLabel is how tables show the pair: 0->1, or 0<->1 for --bidir.
func (r Row) PairLabel() string { return r.Key().PairLabel() }

// PairLabel is how tables show the pair: 0->1, 0<->1 for --bidir, 3 ranks for a
// collective.
func (k RowKey) PairLabel() string {
	if k.Ranks > 0 {
		return fmt.Sprintf("%d ranks", k.Ranks)
	}
	if k.Bidir {
		return fmt.Sprintf("%d<->%d", k.Src, k.Dst)
	}
	return fmt.Sprintf("%d->%d", k.Src, k.Dst)
}

// Finish computes the median, min, max and bandwidth.
func (r *Row) Finish() {
	if len(r.TimesUS) == 0 {
		return
	}
	// Rounded to what the figures resolve (0.1 ns; 1 MB/s), not printed to 17 digits.
	for i, v := range r.TimesUS {
		r.TimesUS[i] = Round(v, TimeDecimals)
	}
	t := append([]float64(nil), r.TimesUS...)
	sort.Float64s(t)
	r.MinUS, r.MaxUS = t[0], t[len(t)-1]
	if len(t)%2 == 1 {
		r.MedUS = t[len(t)/2]
	} else {
		r.MedUS = (t[len(t)/2-1] + t[len(t)/2]) / 2
	}
	if k := kindOf(r.Op); !k.roundTrip && r.MedUS > 0 {
		r.GBps = float64(r.Size) / (r.MedUS * 1e3)
		switch {
		case k.crossed:
			// The bytes that crossed to other ranks, over the time (none: no bus
			// bandwidth to speak of).
			r.BusGBps = float64(r.Crossed) / (r.MedUS * 1e3)
		case k.bus && r.Collective():
			r.BusGBps = r.GBps * ops.Op(r.Op).BusFactor(r.Ranks)
		}
		if r.Matmul != nil {
			r.TFLOPS = RoundSig(ops.Op(r.Op).Flops(*r.Matmul, r.Ranks)/(r.MedUS*1e6), RateDigits)
		}
	}
	r.MedUS, r.GBps, r.BusGBps = Round(r.MedUS, TimeDecimals), RoundSig(r.GBps, RateDigits), RoundSig(r.BusGBps, RateDigits)
	if r.Link != nil {
		r.Link.WireGBps = r.GBps * r.Link.WirePerByte
		if r.Collective() {
			// A collective's payload on the links is what bus bandwidth counts.
			r.Link.WireGBps = r.BusGBps * r.Link.WirePerByte
		}
	}
}

// TimeDecimals are the decimals results keep of times (us: 0.1 ns, below any clock's
// resolution per operation); RateDigits the significant digits of rates, which a time
// of 4 or 5 digits supports (a rate of 0.0002 GB/s keeps its digits too).
const (
	TimeDecimals = 4
	RateDigits   = 6
)

// Round is v rounded to decimals places.
func Round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// RoundSig is v rounded to digits significant digits.
func RoundSig(v float64, digits int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	return Round(v, digits-1-int(math.Floor(math.Log10(math.Abs(v)))))
}

// Merge combines the rows of all ranks: times from the sender, wrong counts from the
// rank that checked the data.
func Merge(perRank [][]Row) []Row {
	byKey := map[RowKey]*Row{}
	timed := map[RowKey]int{} // collectives: how many ranks' times are summed
	var order []RowKey
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
			switch {
			case r.Collective() && len(r.TimesUS) > 0:
				// Every rank times a collective; a repetition's time is their mean, as
				// nccl-tests reports it by default (its -a 1).
				if timed[k] == 0 {
					// Per-operation statistics and link traffic: the first rank's (rank 0's).
					m.TimesUS, m.PerIter, m.Link = make([]float64, len(r.TimesUS)), r.PerIter, r.Link
				}
				for i := range min(len(m.TimesUS), len(r.TimesUS)) {
					m.TimesUS[i] += r.TimesUS[i]
				}
				timed[k]++
			case len(r.TimesUS) > 0:
				m.TimesUS, m.Blocks, m.Warps, m.Link, m.PerIter = slices.Clone(r.TimesUS), r.Blocks, r.Warps, r.Link, r.PerIter
			}
			m.Wrong += r.Wrong
			m.Checked = m.Checked || r.Checked
			if m.FirstWrong == nil {
				m.FirstWrong = r.FirstWrong // the lowest rank's
			}
		}
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		r := *byKey[k]
		for i := range r.TimesUS {
			if timed[k] > 0 {
				r.TimesUS[i] /= float64(timed[k])
			}
		}
		r.Finish()
		out = append(out, r)
	}
	return out
}
