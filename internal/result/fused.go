package result

import (
	"fmt"
	"strconv"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/units"
)

// fusedTable shows a fused operation's rows: the shape, the time, its rate, the bytes
// each rank received, the speed-up over the best unfused baseline at that shape, and
// the matrix product alone (the floor a fused implementation can reach).
func fusedTable(res Result, op string, x extras, _ bool) report.Table {
	t := report.Table{Title: ops.Op(op).Title(),
		Header:   []string{"M", "N", "K", "ranks", "dtype", "impl", "time us", "min us", "max us", "TFLOP/s", "moved", "GB/s", "speed-up", "GEMM us", "wrong"},
		Optional: []string{"1-op p99", "1-op p50", "1-op max", "min us", "max us", "ranks", "GB/s", "dtype", "moved"}}
	t.Header = append(t.Header, x.header()...)
	type shape struct {
		m ops.Matmul
		d string
	}
	best := map[shape]float64{} // the least time of an unfused baseline, by shape
	for _, r := range res.Rows {
		if r.Op == op && r.Unfused && r.Matmul != nil && r.MedUS > 0 {
			k := shape{*r.Matmul, r.DType}
			if b, ok := best[k]; !ok || r.MedUS < b {
				best[k] = r.MedUS
			}
		}
	}
	for _, r := range res.Rows {
		if r.Op != op || r.Matmul == nil {
			continue
		}
		dash := func(v float64, prec int) string {
			if v <= 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', prec, 64)
		}
		speedup := "-"
		if b, ok := best[shape{*r.Matmul, r.DType}]; ok && r.MedUS > 0 {
			speedup = fmt.Sprintf("%.2fx", b/r.MedUS)
		}
		impl := r.Impl
		if r.Unfused {
			impl += " (unfused)"
		}
		row := []string{strconv.Itoa(r.Matmul.M), strconv.Itoa(r.Matmul.N), strconv.Itoa(r.Matmul.K), strconv.Itoa(r.Ranks), r.DType, impl,
			fmtUS(r.MedUS), fmtUS(r.MinUS), fmtUS(r.MaxUS), dash(r.TFLOPS, 3), units.FormatSize(r.Size), dash(r.GBps, 1), speedup, dash(r.GemmUS, 2), wrongCell(r)}
		t.Rows = append(t.Rows, append(row, x.cells(r)...))
	}
	return t
}
