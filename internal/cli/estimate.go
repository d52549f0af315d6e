package cli

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/ops"
)

// costModel is what bench --dry-run assumes of a backend to estimate a sweep's length:
// start-up, a fixed cost per checked window (fill, barriers, the check's set-up), an
// operation's latency and rate, and the rate at which a receiver checks what came.
// They are round figures of what this machine's kind measured, not a promise.
type costModel struct {
	start     time.Duration
	perWindow time.Duration
	latency   time.Duration
	gbps      float64
	checkGBps float64
	sumGBps   float64 // where an op sums (all-reduce, reduce-scatter, combine): the adds' rate
}

// costs: the CPU backend's from default sweeps on a 2-core VM (a 4M put ~1 GB/s with
// its copies and checks); the GPU's from the H200 runs in docs/benchmarks.md.
var costs = map[string]costModel{
	backend.CPU:     {start: 200 * time.Millisecond, perWindow: 2 * time.Millisecond, latency: time.Microsecond, gbps: 3, checkGBps: 1, sumGBps: 0.6},
	backend.NVSHMEM: {start: 3 * time.Second, perWindow: time.Millisecond, latency: 10 * time.Microsecond, gbps: 300, checkGBps: 10, sumGBps: 1000},
}

// estimate is how long j's sweep should take, measured as bench measures: per
// measurement --reps checked windows of --warmup and --iters operations, one more
// where single operations are timed, each window's receiver checking its bytes. A
// stall past --timeout between measurements ends it however long it was meant to be.
func estimate(j engine.Job) time.Duration {
	s := *j.Bench
	m, ok := costs[j.Backend]
	if !ok {
		m = costs[backend.CPU]
	}
	total := m.start
	sums := false
	window := func(bytes int64, n int) time.Duration {
		rate := m.gbps
		if sums {
			rate = 1 / (1/m.gbps + 1/m.sumGBps)
		}
		per := m.latency + time.Duration(float64(bytes)/(rate*1e9)*float64(time.Second))
		check := time.Duration(float64(bytes) / (m.checkGBps * 1e9) * float64(time.Second))
		return m.perWindow + time.Duration(n)*per + check
	}
	measure := func(bytes int64, perIter bool) time.Duration {
		d := time.Duration(s.Reps) * window(bytes, s.Warmup+s.Iters)
		if perIter {
			d += window(bytes, s.Iters)
		}
		return d
	}
	rounds := len(s.Pairs(j.NProc))
	for _, op := range s.Ops {
		for _, impl := range s.Impls {
			o := ops.Op(op)
			im, ok := j.Registry().ByName(impl)
			if !ok || !im.Supports(o) {
				continue
			}
			sums = o.Reduces()
			switch {
			case o.Routed():
				moe := s.MoE
				if moe == nil {
					continue
				}
				total += measure(int64(moe.Tokens)*int64(moe.Hidden)*2*int64(moe.TopK), false)
			case o.Kind() == ops.Sync: // a row per variant, no sizes
				total += time.Duration(max(len(o.Variants(s.Algo)), 1)) * measure(8, !s.Graph)
			case o.IsCollective():
				for _, size := range bench.CollSizes(j.Registry(), s, o, impl, j.NProc) {
					total += measure(size, size <= s.PerIterMax && !s.Graph)
				}
			case o.RoundTrip():
				total += time.Duration(rounds) * (time.Duration(s.Reps)*window(s.LatencySize, bench.LatencyRounds(s)*2) + window(s.LatencySize, bench.LatencyRounds(s)*2))
			default:
				for _, size := range s.Sizes() {
					total += time.Duration(rounds) * measure(size, size <= s.PerIterMax && s.Lanes() == 1 && !s.Graph)
				}
			}
		}
	}
	return total
}

// fmtEstimate says an estimate as people read it: "about 40 s", "about 3 min".
func fmtEstimate(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("about %.1f s", d.Seconds())
	case d < 2*time.Minute:
		return fmt.Sprintf("about %.0f s", d.Seconds())
	}
	return fmt.Sprintf("about %.0f min", d.Minutes())
}
