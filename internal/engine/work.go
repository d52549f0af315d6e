package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/runtest"
)

// runOps is a rank's part in a run test.
func (r *rank) runOps(j Job, fault *Fault, out io.Writer) (result.RankResult, error) {
	if p, ok := r.backend.(backend.Preloader); ok {
		t := time.Now()
		if err := p.Preload(j.Run.Op, j.Run.Bytes, j.Run.Launch); err != nil {
			return result.RankResult{}, err
		}
		r.timings["load"] = ms(time.Since(t))
	}
	if b, ok := r.backend.(backend.Breakdowner); ok {
		for k, v := range b.Breakdown() {
			r.timings["init."+k] = v
		}
	}
	fault.Trigger(r.info.Rank, "op")
	if err := fault.Slow(r.info.Rank, r.backend); err != nil {
		return result.RankResult{}, err
	}
	drop, err := fault.DropHook(r.info.Rank, r.backend)
	if err != nil {
		return result.RankResult{}, err
	}
	if drop != nil {
		if fault.From > 0 {
			return result.RankResult{}, badInput("%s: run makes one measurement (number 0): %s:%d would do nothing; use %s or %s:0", EnvFault, fault.Mode, fault.From, fault.Mode, fault.Mode)
		}
		drop(0)
	}
	b := r.backend
	if t := fault.Tamper(r.info.Rank); t != nil {
		b = corrupting{b, t}
	}
	res, err := runtest.Run(b, j.Layout, *j.Run, out)
	for k, v := range r.timings {
		res.Timings[k] = v
	}
	return res, err
}

// benchRank is one rank's report of a sweep.
type benchRank struct {
	Rows    []result.Row `json:"rows"`
	Timing  string       `json:"timing"`
	Clock   string       `json:"clock"`
	GPU     string       `json:"gpu,omitempty"`
	NVSHMEM string       `json:"nvshmem,omitempty"`
	Driver  string       `json:"driver,omitempty"`
	// Links says why this rank's NVLink counters were not read, if they were not.
	Links string `json:"links,omitempty"`
	// Transports says how this rank reaches each rank it sends to ("p2p", "remote").
	Transports map[string]string `json:"transports,omitempty"`
	// Libraries names what the backend opened beyond NVSHMEM (NCCL).
	Libraries map[string]string `json:"libraries,omitempty"`
}

// runBench is a rank's part in a sweep.
func (r *rank) runBench(ctx context.Context, j Job, fault *Fault) (benchRank, error) {
	var out benchRank
	fault.Trigger(r.info.Rank, "op")
	run := &bench.Runner{B: r.backend, S: *j.Bench, Reg: j.reg, Layout: j.Layout, Words: j.words(), Progress: func() { r.store.Add(ctx, "progress", 1) }}
	// The corrupt fault goes to the checks only: wrapping the backend would hide the
	// GPU backend's timers and lanes.
	run.Tamper = fault.Tamper(r.info.Rank)
	if err := fault.Slow(r.info.Rank, r.backend); err != nil {
		return out, err
	}
	var err error
	if run.BeforeMeasure, err = fault.DropHook(r.info.Rank, r.backend); err != nil {
		return out, err
	}
	if at := fault.AtMeasure(r.info.Rank); at != nil {
		run.BeforeMeasure = at
	}
	if d, ok := r.backend.(backend.Describer); ok {
		out.GPU, out.NVSHMEM, out.Driver = d.Describe()
		// NVLink counters show what the links carried for each row; a machine without
		// NVLink or NVML just goes without.
		if l, ok := j.factory.(backend.Linker); ok {
			if c, err := l.Counters(d.PCIBusID()); err == nil {
				defer c.Close()
				run.Links = c
			} else {
				out.Links = err.Error()
			}
		}
	}
	r.publishAsMeasured(ctx, run, out)
	if out.Rows, err = run.Run(); err != nil {
		return out, err
	}
	if t, ok := r.backend.(backend.Transporter); ok {
		out.Transports = map[string]string{}
		for _, row := range out.Rows {
			if row.Src == r.info.Rank {
				out.Transports[row.PairLabel()] = t.Transport(row.Dst)
			}
		}
	}
	if l, ok := r.backend.(backend.Librarian); ok {
		out.Libraries = l.Libraries()
	}
	out.Timing, out.Clock = run.TimingNote(), run.Clock()
	return out, nil
}

// publishAsMeasured puts this rank's part of the header into the store before the
// sweep, and each measurement's rows as they are taken (feed merges them on the
// launcher): a sweep that times out, is interrupted or loses a rank keeps what it
// measured. A row that cannot be published is only missing from such a partial
// result, never a reason to fail the sweep.
func (r *rank) publishAsMeasured(ctx context.Context, run *bench.Runner, info benchRank) {
	info.Timing, info.Clock = run.TimingNote(), run.Clock()
	if b, err := json.Marshal(info); err == nil {
		r.store.Set(ctx, feedKey("info", r.info.Rank, -1), b)
	}
	seq := 0
	run.Measured = func(rows []result.Row) {
		if b, err := json.Marshal(rows); err == nil {
			r.store.Set(ctx, feedKey("rows", r.info.Rank, seq), b)
		}
		seq++
	}
}

// Rows is how many rows a sweep's result holds (0 for a run): a collective's one per
// size (those that hold an element per rank) and implementation, the MoE ops' one per
// implementation, a point-to-point op's one per pair, size and implementation (latency:
// per pair), every pair of a round measured at once.
func (j Job) Rows() int {
	if j.Bench == nil {
		return 0
	}
	return bench.Count(j.reg, *j.Bench, j.NProc, true)
}

// Registry is the implementations the job was planned with (the built-in ones and
// those of --kernels).
func (j Job) Registry() *backend.Registry { return j.reg }

// RowsOf is how many of the sweep's rows are op's.
func (j Job) RowsOf(op string) int {
	if j.Bench == nil {
		return 0
	}
	s := *j.Bench
	s.Ops = []string{op}
	return bench.Count(j.reg, s, j.NProc, true)
}

// steps is how many measurements rank 0 reports as progress in a sweep: one per
// round of pairs.
func steps(reg *backend.Registry, s result.BenchSpec, n int) int {
	return bench.Count(reg, s, n, false)
}

// merge turns the ranks' raw reports into the job's outcome.
func (e *Engine) merge(j Job, raw [][]byte, finalize []float64) (*Outcome, error) {
	switch j.Kind {
	case KindRun:
		rep := result.RunReport{Op: string(j.Run.Op), Impl: j.Run.Launch.Impl, Pattern: j.Run.Pattern, Backend: j.Backend, BackendNote: j.BackendNote,
			Launcher: e.Launcher(), NProc: j.NProc, DType: j.Run.DType, RedOp: j.Run.RedOp, Count: j.Run.Count, Bytes: j.Run.Bytes,
			WallMS: ms(time.Since(e.start)), ProbeMS: ms(e.probe)}
		for i, b := range raw {
			var res result.RankResult
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, fmt.Errorf("rank %d's result: %w", i, err)
			}
			if i < len(finalize) {
				res.Timings["finalize"] = finalize[i]
			}
			rep.Results = append(rep.Results, res)
		}
		rep.Summarize()
		return &Outcome{Run: &rep}, nil
	case KindBench:
		res, err := e.mergeBench(j, raw)
		return &Outcome{Bench: res}, err
	}
	return nil, fmt.Errorf("unknown job kind %q", j.Kind)
}

func (e *Engine) mergeBench(j Job, raw [][]byte) (*result.Result, error) {
	ranks, err := parseBenchRanks(raw)
	if err != nil {
		return nil, err
	}
	res := assemble(j, e.Launcher(), ranks, peaksOf(j))
	return &res, nil
}

// parseBenchRanks reads the ranks' reports of a sweep.
func parseBenchRanks(raw [][]byte) ([]benchRank, error) {
	out := make([]benchRank, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("rank %d's result: %w", i, err)
		}
	}
	return out, nil
}

// assemble makes one result of the ranks' reports (they word what they say with the
// job's Words); peaks, where not nil, fills in the links' nominal peaks.
func assemble(j Job, launcher string, ranks []benchRank, peaks func(*result.Result)) result.Result {
	res := result.Result{Header: result.Header{Backend: j.Backend, NProc: j.NProc, Spec: *j.Bench, Launcher: launcher}}
	var perRank [][]result.Row
	for i, br := range ranks {
		perRank = append(perRank, br.Rows)
		if i == 0 {
			res.Header.Timing, res.Header.Clock = br.Timing, br.Clock
		}
		if br.Links != "" && res.Header.LinkCounters == "" {
			res.Header.LinkCounters = fmt.Sprintf("not read on rank %d: %s", i, br.Links)
		}
		for pair, how := range br.Transports {
			if res.Header.Transports == nil {
				res.Header.Transports = map[string]string{}
			}
			res.Header.Transports[pair] = how
		}
		for name, what := range br.Libraries {
			if res.Header.Libraries == nil {
				res.Header.Libraries = map[string]string{}
			}
			res.Header.Libraries[name] = what
		}
		if br.GPU != "" {
			res.Header.GPUs = append(res.Header.GPUs, br.GPU)
			res.Header.NVSHMEM, res.Header.Driver = br.NVSHMEM, br.Driver
		}
	}
	res.Rows = result.Merge(perRank)
	res.Header.Kernels = userSources(j.reg, j.Bench.Impls)
	if peaks != nil {
		peaks(&res)
	}
	res.OK = len(res.RowFailures()) == 0
	return res
}

// peaksOf asks the backend's factory once for the links' nominal peaks and returns
// what sets them on a result (nil where the backend has none to read).
func peaksOf(j Job) func(*result.Result) {
	l, ok := j.factory.(backend.Linker)
	if !ok {
		return nil
	}
	peak, label, err := l.Peaks()
	if err != nil {
		return nil
	}
	return func(res *result.Result) { res.SetPeaks(peak, label) }
}

// userSources says where the user's implementations among impls came from (nil when
// there are none).
func userSources(reg *backend.Registry, impls []string) map[string]result.KernelSource {
	var out map[string]result.KernelSource
	for _, name := range impls {
		c, user := reg.Catalog(name)
		if !user {
			continue
		}
		k := result.KernelSource{Dir: c.Dir}
		var srcs, tritons []string
		for _, a := range c.Artifacts {
			if a.Impl != name {
				continue
			}
			if !slices.Contains(srcs, a.SourceSHA256) {
				srcs = append(srcs, a.SourceSHA256)
			}
			if a.TritonVersion != "" && !slices.Contains(tritons, a.TritonVersion) {
				tritons = append(tritons, a.TritonVersion)
			}
		}
		k.Source, k.Triton = strings.Join(srcs, ","), strings.Join(tritons, ",")
		if out == nil {
			out = map[string]result.KernelSource{}
		}
		out[name] = k
	}
	return out
}
