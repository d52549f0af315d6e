package result

import (
	"io"

	"github.com/symmem/symmem/internal/report"
)

// Stream prints a sweep for people while it runs, as nccl-tests prints its lines: the
// header when the first rows land, then each row as it lands, in a table per
// operation whose columns are fixed from the sweep's plan (a row without a column's
// figure shows "-"), so that a sweep stopped early has shown every row it measured.
type Stream struct {
	w       io.Writer
	started bool
	printed int // rows of the result printed so far
	// shown are the keys of the rows printed: the last result, merged from each rank's
	// whole list, may hold them in another order than the measurements that streamed
	// (a round's pairs are one measurement, but each rank lists its own pairs' rows
	// together), so what is left is told by key, not by position.
	shown map[RowKey]bool
	op    string // the operation whose table is open
	x     extras
	named bool
	tbl   *report.Stream
	err   error
}

// NewStream prints onto w.
func NewStream(w io.Writer) *Stream { return &Stream{w: w} }

// Add prints the rows of res not printed yet (res is the result so far).
func (s *Stream) Add(res Result) error {
	if s.err != nil || len(res.Rows) <= s.printed {
		return s.err
	}
	if !s.started {
		PrintHeader(s.w, res)
		s.started = true
	}
	if s.shown == nil {
		s.shown = map[RowKey]bool{}
	}
	for _, r := range res.Rows {
		if s.shown[r.Key()] {
			continue
		}
		if r.Op != s.op || s.tbl == nil {
			s.close()
			s.open(res.Header, r.Op)
		}
		if s.err != nil {
			return s.err
		}
		// A row is drawn alone, but for the unfused baselines shown before it, which
		// its speed-up is over (fused operations).
		var with []Row
		for _, b := range res.Rows {
			if b.Op == r.Op && b.Unfused && s.shown[b.Key()] {
				with = append(with, b)
			}
		}
		one := opTable(Result{Header: res.Header, Rows: append(with, r)}, r.Op, s.x, s.named)
		if err := s.tbl.Append(one.Rows[len(one.Rows)-1]); err != nil {
			s.err = err
			return err
		}
		s.printed++
		s.shown[r.Key()] = true
	}
	return nil
}

// Finish prints what is left of res, ends the last table, and says so where res is
// incomplete.
func (s *Stream) Finish(res Result) error {
	if err := s.Add(res); err != nil {
		return err
	}
	if !s.started {
		PrintHeader(s.w, res)
	}
	s.close()
	if res.Header.Spec.Matrix && len(res.Rows) > 0 {
		PrintMatrix(s.w, res)
	}
	PrintAvgBusBW(s.w, res)
	if res.Incomplete != nil {
		report.Comment(s.w, res.Incomplete.String())
	}
	return s.err
}

func (s *Stream) open(h Header, op string) {
	s.op, s.x, s.named = op, plannedExtras(h, op), h.Backend == gpuBackend && kindOf(op).kernels
	t := opTable(Result{Header: h}, op, s.x, s.named)
	widths := make([]int, len(t.Header))
	implWidth := 0
	for _, name := range h.Spec.Impls {
		implWidth = max(implWidth, len(name)+2)
	}
	for i, name := range t.Header {
		widths[i] = columnWidths[name]
		if name == "impl" {
			widths[i] = max(widths[i], implWidth)
		}
	}
	s.tbl, s.err = report.StartStream(s.w, t, widths)
}

func (s *Stream) close() {
	if s.tbl != nil && s.err == nil {
		s.err = s.tbl.Close()
	}
	s.tbl = nil
}

// columnWidths are the widths, padding included, that the cells bench writes fit in
// (a header wider than its figures sets its own).
var columnWidths = map[string]int{
	"size": 6, "pair": 8, "impl": 8, "grid": 10, "time us": 9, "min us": 9, "max us": 9, "GB/s": 8, "% peak": 8, "wrong": 7,
	"1-op p50": 10, "1-op p99": 10, "1-op max": 10, "ranks": 7, "dtype": 9, "redop": 7, "algo": 10, "variant": 13, "kernel": 18,
	"algbw": 8, "busbw": 8, "crossed/rank": 14,
	"M": 9, "N": 8, "K": 8, "TFLOP/s": 9, "moved": 8, "speed-up": 10, "GEMM us": 9,
}

// plannedExtras are the extra columns op's rows will have, from the sweep's plan:
// single-operation statistics where a size gets the per-operation pass, the links'
// traffic where a GPU's NVLink counters are read and a size is large enough to count.
func plannedExtras(h Header, op string) extras {
	s, k := h.Spec, kindOf(op)
	each := s.PerIterMax > 0 && !s.Graph && (k.roundTrip || s.MinSize <= s.PerIterMax && (k.everyRank || s.Lanes() == 1))
	wire := h.Backend == gpuBackend && h.LinkCounters == "" && s.MaxSize >= MinCounted && !k.roundTrip
	samples := s.Iters
	if k.roundTrip {
		samples = MinP99Samples // every round is timed, and there are at least 100 (bench.LatencyRounds)
	}
	return extras{each: each, p99: samples >= MinP99Samples, wire: wire}
}

// gpuBackend is the name the GPU backend gives its results (backend.NVSHMEM; result
// sits below the backends and imports none of them).
const gpuBackend = "nvshmem"
