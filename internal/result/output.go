package result

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/units"
)

// Header makes a result file explain itself.
type Header struct {
	Command string   `json:"command"`
	Backend string   `json:"backend"`
	GPUs    []string `json:"gpus,omitempty"`
	Driver  string   `json:"driver,omitempty"`
	NVSHMEM string   `json:"nvshmem,omitempty"`
	// Libraries are what the backend opened beyond NVSHMEM, by name: "nccl":
	// "2.27.3 (/path/libnccl.so.2)".
	Libraries map[string]string `json:"libraries,omitempty"`
	Link      string            `json:"link,omitempty"`
	PeakGBps  float64           `json:"link_peak_gbps,omitempty"`
	// LinkCounters says why rows carry no NVLink traffic, on a GPU backend.
	LinkCounters string `json:"link_counters,omitempty"`
	// Transports says, per pair, whether the data went over NVLink/PCIe peer access
	// ("p2p") or NVSHMEM's remote transport ("remote").
	Transports map[string]string `json:"transports,omitempty"`
	// Timing says what the clock covered (remote completion included or not); Clock
	// which clock it was: "cuda-events" or "wall".
	Timing string `json:"timing,omitempty"`
	Clock  string `json:"clock,omitempty"`
	NProc  int    `json:"nproc"`
	// Launcher names who started the ranks: symmem, torchrun, openmpi, slurm, pmi.
	Launcher string    `json:"launcher,omitempty"`
	Spec     BenchSpec `json:"spec"`
	// Kernels says where each user's implementation in the sweep came from (--kernels
	// DIR), by name: two results of one name built from other sources measured other
	// code.
	Kernels map[string]KernelSource `json:"user_kernels,omitempty"`
}

// KernelSource is where a user's implementation came from: the directory, the sha256
// of the sources its kernels were built from (as their sidecars record it), and the
// Triton that built them.
type KernelSource struct {
	Dir    string `json:"dir"`
	Source string `json:"source_sha256"`
	Triton string `json:"triton,omitempty"`
}

// Short is the source hashes as messages show them: each cut to 12 characters.
func (k KernelSource) Short() string {
	hs := strings.Split(k.Source, ",")
	for i, h := range hs {
		if len(h) > 12 {
			hs[i] = h[:12]
		}
	}
	return strings.Join(hs, ",")
}

// Build is the sources and the Triton that built them, as messages show them.
func (k KernelSource) Build() string {
	if k.Triton == "" {
		return k.Short()
	}
	return k.Short() + " (Triton " + k.Triton + ")"
}

// Result is what `bench --json` prints and `bench compare` reads.
type Result struct {
	Header Header `json:"header"`
	Rows   []Row  `json:"rows"`
	OK     bool   `json:"ok"`
}

// SetPeaks fills the link's nominal peak for the header (between rank 0 and its
// partner) and every row's share of its pair's peak; peak and label come from the
// topology (0 and "" where unknown).
func (r *Result) SetPeaks(peak func(a, b int) float64, label func(a, b int) string) {
	partner := r.Header.NProc / 2
	r.Header.PeakGBps = peak(0, partner)
	if r.Header.NProc > 1 {
		r.Header.Link = label(0, partner)
	}
	for i := range r.Rows {
		if row := &r.Rows[i]; row.Collective() {
			// Bus bandwidth is what each rank's links carried: a share of one link's peak
			// only on two ranks; elsewhere the share of rank 0's link to its partner.
			if r.Header.PeakGBps > 0 && row.BusGBps > 0 {
				row.PeakPct = row.BusGBps / r.Header.PeakGBps * 100
			}
			continue
		}
		if p := peak(r.Rows[i].Src, r.Rows[i].Dst); p > 0 && r.Rows[i].GBps > 0 {
			r.Rows[i].PeakPct = r.Rows[i].GBps / p * 100
		}
	}
}

// Tables renders one table per operation. Where NVLink counters were read, two more
// columns show the links' raw rate and the raw bytes they carried per payload byte.
func Tables(res Result) []report.Table {
	var tables []report.Table
	for _, o := range ops.All() {
		op := string(o)
		if o.IsCollective() {
			if t := collectiveTable(res, op); len(t.Rows) > 0 {
				tables = append(tables, t)
			}
			continue
		}
		t := report.Table{Title: op, Header: []string{"size", "pair", "impl", "grid", "time us", "min us", "max us", "GB/s", "% peak", "wrong"}}
		if op == "latency" {
			t.Title = "latency (half round trip of a put with signal)"
		}
		x := extrasOf(res, op)
		t.Header = append(t.Header, x.header()...)
		for _, r := range res.Rows {
			if r.Op != op {
				continue
			}
			grid := "-"
			switch {
			case r.Impl == "copy-engine" && r.Blocks > 0:
				grid = fmt.Sprintf("%d stream", r.Blocks)
				if r.Blocks > 1 {
					grid += "s"
				}
			case r.Blocks > 0:
				grid = fmt.Sprintf("%dx%dw", r.Blocks, r.Warps)
			}
			pair := r.PairLabel()
			gbps, pct := "-", "-"
			if r.GBps > 0 {
				gbps = strconv.FormatFloat(r.GBps, 'f', 1, 64)
				if r.PeakPct > 0 {
					pct = strconv.FormatFloat(r.PeakPct, 'f', 0, 64)
				}
			}
			row := []string{units.FormatSize(r.Size), pair, r.Impl, grid, fmtUS(r.MedUS), fmtUS(r.MinUS), fmtUS(r.MaxUS), gbps, pct, wrongCell(r)}
			t.Rows = append(t.Rows, append(row, x.cells(r)...))
		}
		if len(t.Rows) > 0 {
			tables = append(tables, t)
		}
	}
	return tables
}

// collectiveTable shows one collective's rows as nccl-tests does: algorithm and bus
// bandwidth; for dispatch and combine the bytes that crossed to other ranks.
func collectiveTable(res Result, op string) report.Table {
	t := report.Table{Title: op + " (time: mean over ranks; algbw, busbw as nccl-tests)",
		Header: []string{"size", "ranks", "dtype", "impl", "algo", "time us", "min us", "max us", "algbw GB/s", "busbw GB/s", "% peak", "wrong"}}
	moe := ops.Op(op).IsMoE()
	if moe {
		t.Title = op + " (MoE all-to-all-v; time: mean over ranks; busbw: bytes that crossed to other ranks / time)"
		t.Header = append(t.Header[:10:10], "crossed/rank", "% peak", "wrong")
	}
	x := extrasOf(res, op)
	t.Header = append(t.Header, x.header()...)
	// The kernel that ran a row, where the backend named one: the algorithm alone does
	// not say (one-shot all-reduce is the LL, push or LL128 kernel by size).
	named := slices.ContainsFunc(res.Rows, func(r Row) bool { return r.Op == op && r.Kernel != "" })
	if named {
		t.Header = slices.Insert(t.Header, 5, "kernel")
	}
	for _, r := range res.Rows {
		if r.Op != op {
			continue
		}
		dash := func(v float64, prec int) string {
			if v <= 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', prec, 64)
		}
		algo := r.Algo
		if algo == "" {
			algo = "-"
		}
		dt := r.DType
		if dt == "" {
			dt = "-"
		}
		row := []string{units.FormatSize(r.Size), strconv.Itoa(r.Ranks), dt, r.Impl, algo, fmtUS(r.MedUS), fmtUS(r.MinUS), fmtUS(r.MaxUS),
			dash(r.GBps, 1), dash(r.BusGBps, 1)}
		if named {
			k := r.Kernel
			if k == "" {
				k = "-"
			}
			row = slices.Insert(row, 5, k)
		}
		if moe {
			row = append(row, units.FormatSize(r.Crossed))
		}
		row = append(row, dash(r.PeakPct, 0), wrongCell(r))
		t.Rows = append(t.Rows, append(row, x.cells(r)...))
	}
	return t
}

// extras are the columns an operation's table has where some of its rows carry them:
// per-operation statistics and the links' traffic.
type extras struct{ each, wire bool }

func extrasOf(res Result, op string) extras {
	var x extras
	for _, r := range res.Rows {
		x.each = x.each || r.Op == op && r.PerIter != nil
		x.wire = x.wire || r.Op == op && r.Link != nil
	}
	return x
}

func (x extras) header() []string {
	var h []string
	if x.each {
		h = append(h, "p50 us", "p99 us", "worst us")
	}
	if x.wire {
		h = append(h, "wire GB/s", "wire/payload")
	}
	return h
}

func (x extras) cells(r Row) []string {
	var c []string
	switch {
	case x.each && r.PerIter != nil:
		c = append(c, fmtUS(r.PerIter.P50US), fmtUS(r.PerIter.P99US), fmtUS(r.PerIter.MaxUS))
	case x.each:
		c = append(c, "-", "-", "-")
	}
	switch {
	case x.wire && r.Link != nil:
		c = append(c, strconv.FormatFloat(r.Link.WireGBps, 'f', 1, 64), strconv.FormatFloat(r.Link.WirePerByte, 'f', 3, 64))
	case x.wire:
		c = append(c, "-", "-")
	}
	return c
}

// wrongCell is a row's wrong bytes, "-" where no rank checked its data.
func wrongCell(r Row) string {
	if !r.Checked {
		return "-"
	}
	return strconv.FormatInt(r.Wrong, 10)
}

func fmtUS(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// CSV writes every row.
func CSV(w io.Writer, res Result) error {
	t := report.Table{Header: []string{"op", "impl", "size", "src", "dst", "bidir", "blocks", "warps", "time_us", "min_us", "max_us", "gbps", "peak_pct", "wrong",
		"overlap", "wire_gbps", "wire_per_byte", "p50_us", "p99_us", "worst_us", "ranks", "dtype", "algo", "busbw", "crossed", "kernel"}}
	for _, r := range res.Rows {
		wireGBps, perByte := "", ""
		if r.Link != nil {
			wireGBps, perByte = f3(r.Link.WireGBps), strconv.FormatFloat(r.Link.WirePerByte, 'f', 4, 64)
		}
		p50, p99, worst := "", "", ""
		if p := r.PerIter; p != nil {
			p50, p99, worst = f3(p.P50US), f3(p.P99US), f3(p.MaxUS)
		}
		t.Rows = append(t.Rows, []string{r.Op, r.Impl, strconv.FormatInt(r.Size, 10), strconv.Itoa(r.Src), strconv.Itoa(r.Dst),
			strconv.FormatBool(r.Bidir), strconv.Itoa(r.Blocks), strconv.Itoa(r.Warps), f3(r.MedUS), f3(r.MinUS), f3(r.MaxUS),
			f3(r.GBps), f3(r.PeakPct), strconv.FormatInt(r.Wrong, 10), strconv.Itoa(max(r.Overlap, 1)), wireGBps, perByte, p50, p99, worst,
			strconv.Itoa(r.Ranks), r.DType, r.Algo, f3(r.BusGBps), strconv.FormatInt(r.Crossed, 10), r.Kernel})
	}
	return t.CSV(w)
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// CheckPlotFile says whether Plot can write file (its extension picks the format), so
// that a bad name is refused before a sweep runs.
func CheckPlotFile(file string) error {
	if ext := strings.ToLower(filepath.Ext(file)); ext != ".png" && ext != ".svg" {
		return fmt.Errorf("--plot %s: use a .png or .svg file name", file)
	}
	return nil
}
