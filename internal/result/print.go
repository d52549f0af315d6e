package result

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/units"
)

// PrintHeader writes the lines that make a bench result explain itself, each fitted
// to w's width.
func PrintHeader(w io.Writer, res Result) {
	var b strings.Builder
	printHeader(&b, res)
	report.Comments(w, b.String())
}

func printHeader(w io.Writer, res Result) {
	h := res.Header
	fmt.Fprintf(w, "# %s\n", h.Command)
	if h.Provenance != nil {
		fmt.Fprintf(w, "# %s\n", h.Provenance)
	}
	fmt.Fprintf(w, "# backend %s, %d ranks", h.Backend, h.NProc)
	if h.Launcher != "" && h.Launcher != "symmem" {
		fmt.Fprintf(w, " started by %s", h.Launcher)
	}
	if len(h.GPUs) > 0 {
		fmt.Fprintf(w, ", GPUs %s, driver %s, NVSHMEM %s", strings.Join(h.GPUs, " + "), h.Driver, h.NVSHMEM)
	}
	if v, ok := h.Libraries["nccl"]; ok {
		fmt.Fprintf(w, ", NCCL %s", v)
	}
	if h.PeakGBps > 0 {
		fmt.Fprintf(w, ", link %s peak %.0f GB/s per direction", h.Link, h.PeakGBps)
	}
	fmt.Fprintf(w, "\n# iters %d, warmup %d, reps %d", h.Spec.Iters, h.Spec.Warmup, h.Spec.Reps)
	if h.Spec.Overlap > 1 {
		fmt.Fprintf(w, ", overlap %d (operations in flight at once)", h.Spec.Overlap)
	}
	if h.Spec.Graph {
		fmt.Fprint(w, ", one CUDA graph per repetition")
	}
	fmt.Fprintln(w)
	if len(h.Transports) > 0 {
		byHow := map[string][]string{}
		var hows []string
		for pair, how := range h.Transports {
			if byHow[how] == nil {
				hows = append(hows, how)
			}
			byHow[how] = append(byHow[how], pair)
		}
		sort.Strings(hows)
		var parts []string
		for _, how := range hows {
			sort.Strings(byHow[how])
			parts = append(parts, how+" "+strings.Join(byHow[how], " "))
		}
		fmt.Fprintf(w, "# transport: %s (p2p: NVLink or PCIe peer access; remote: NVSHMEM_REMOTE_TRANSPORT)\n", strings.Join(parts, "; "))
	}
	for _, name := range slices.Sorted(maps.Keys(h.Kernels)) {
		k := h.Kernels[name]
		fmt.Fprintf(w, "# user kernels %s: from %s, sources sha256 %s", name, k.Dir, k.Short())
		if k.Triton != "" {
			fmt.Fprintf(w, ", Triton %s", k.Triton)
		}
		fmt.Fprintln(w)
	}
	if h.Timing != "" {
		fmt.Fprintf(w, "# timing: %s\n", h.Timing)
	}
	fmt.Fprintf(w, "# time/min/max us: per operation, the median, least and greatest of %d repetitions' means of %d operations\n", h.Spec.Reps, h.Spec.Iters)
	if h.Spec.PerIterMax > 0 {
		p99 := fmt.Sprintf("p99 from %d or more, so latency only", MinP99Samples)
		if h.Spec.Iters >= MinP99Samples {
			p99 = fmt.Sprintf("p99 from %d or more", MinP99Samples)
		}
		fmt.Fprintf(w, "# 1-op p50/p99/max: %d operations timed one by one, in one more checked repetition of rows up to %s (latency: every round); %s\n",
			h.Spec.Iters, units.FormatSize(h.Spec.PerIterMax), p99)
	}
	wire := false
	for _, r := range res.Rows {
		wire = wire || r.Link != nil
	}
	switch {
	case wire:
		fmt.Fprintf(w, "# wire: raw NVLink traffic in the payload's direction on the sender's links (NVML counters), rows of %s or more per repetition\n",
			units.FormatSize(MinCounted))
	case h.LinkCounters != "":
		fmt.Fprintf(w, "# wire: NVLink counters %s\n", h.LinkCounters)
	}
}

// PrintMatrix shows, for the largest size of put, the bandwidth of every ordered pair.
func PrintMatrix(w io.Writer, res Result) {
	var maxSize int64
	for _, r := range res.Rows {
		if r.Op == ops.Put && r.Size > maxSize {
			maxSize = r.Size
		}
	}
	if maxSize == 0 {
		return // no put measured: the matrix would be empty
	}
	n := res.Header.NProc
	best, wrong := map[[2]int]float64{}, map[[2]int]bool{}
	for _, r := range res.Rows {
		if !r.Trusted() {
			wrong[[2]int{r.Src, r.Dst}] = r.Op == ops.Put && r.Size == maxSize || wrong[[2]int{r.Src, r.Dst}]
			continue
		}
		if r.Op == ops.Put && r.Size == maxSize && r.GBps > best[[2]int{r.Src, r.Dst}] {
			best[[2]int{r.Src, r.Dst}] = r.GBps
		}
	}
	t := report.Table{Title: fmt.Sprintf("put GB/s at %s, best implementation (row: sender, column: receiver)", units.FormatSize(maxSize)), Header: []string{""}}
	for j := 0; j < n; j++ {
		t.Header = append(t.Header, fmt.Sprintf("GPU%d", j))
	}
	for i := 0; i < n; i++ {
		row := []string{fmt.Sprintf("GPU%d", i)}
		for j := 0; j < n; j++ {
			if i == j {
				row = append(row, "-")
			} else if b := best[[2]int{i, j}]; b == 0 && wrong[[2]int{i, j}] {
				row = append(row, "WRONG")
			} else {
				row = append(row, fmt.Sprintf("%.1f", b))
			}
		}
		t.Rows = append(t.Rows, row)
	}
	t.Print(w)
}

// Print writes res for people: the header, a table per operation, and the GPU x GPU
// matrix of a --matrix run.
func Print(w io.Writer, res Result) {
	PrintHeader(w, res)
	for _, t := range Tables(res) {
		t.Print(w)
	}
	if res.Header.Spec.Matrix {
		PrintMatrix(w, res)
	}
	PrintAvgBusBW(w, res)
	if res.Incomplete != nil {
		report.Comment(w, res.Incomplete.String())
	}
}

// PrintAvgBusBW ends a sweep of collectives as nccl-tests ends its own: the mean bus
// bandwidth of the collective rows in GB/s, the line scripts around nccl-tests read.
// A sweep without collectives prints nothing.
func PrintAvgBusBW(w io.Writer, res Result) {
	sum, n := 0.0, 0
	for _, r := range res.Rows {
		if r.Collective() && r.Trusted() && r.BusGBps > 0 {
			sum += r.BusGBps
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "# Avg bus bandwidth    : %g\n", Round(sum/float64(n), 4))
	}
}
