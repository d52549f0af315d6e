package engine

import (
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
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

// Estimate is how long j's sweep should take, measured as bench measures: per
// measurement --reps checked windows of --warmup and --iters operations, one more
// where single operations are timed, each window's receiver checking its bytes. A
// stall past --timeout between measurements ends it however long it was meant to be.
func (j Job) Estimate() time.Duration {
	if j.Bench == nil {
		return 0
	}
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
	for _, op := range s.Ops {
		for _, impl := range s.Impls {
			o := ops.Op(op)
			im, ok := j.reg.ByName(impl)
			if !ok || !im.Supports(o) {
				continue
			}
			sums = o.CombineType(s.DType) != ""
			for _, w := range bench.Windows(j.reg, s, o, im, j.NProc) {
				total += time.Duration(w.Times) * window(w.Bytes, w.Ops)
			}
		}
	}
	return total
}
