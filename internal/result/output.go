package result

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/buildinfo"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/kernels"
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
	// Provenance says what made the result, where and when.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Provenance traces a result to what made it: symmem's version and commit, the kernel
// catalogue it ran, the host and the start time (the command line, GPUs, driver and
// libraries are in the header beside it).
type Provenance struct {
	Symmem  buildinfo.Info `json:"symmem"`
	Kernels string         `json:"kernels_sha256"`
	Host    string         `json:"host"`
	Started string         `json:"started"` // RFC 3339, UTC
}

// NewProvenance is this process's provenance for a job started at start.
func NewProvenance(start time.Time) *Provenance {
	host, _ := os.Hostname()
	return &Provenance{Symmem: buildinfo.Read(), Kernels: kernels.Default().Hash(), Host: host, Started: start.UTC().Format(time.RFC3339)}
}

// String says it in a line: symmem dev (commit ...) go1.26 linux/amd64, kernels
// 885975429c02, host gpu1, started 2026-01-02T03:04:05Z.
func (p Provenance) String() string {
	k := p.Kernels
	if len(k) > 12 {
		k = k[:12]
	}
	return fmt.Sprintf("%s, kernels %s, host %s, started %s", p.Symmem, k, p.Host, p.Started)
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
	// Incomplete, set on a sweep that ended before its last row, says what ended it.
	Incomplete *Incomplete `json:"incomplete,omitempty"`
}

// Incomplete says why a result holds fewer rows than its sweep planned: a stall past
// --timeout, an interruption, a failed rank. Its rows are as good as a whole run's.
type Incomplete struct {
	Reason  string `json:"reason"`
	Rows    int    `json:"rows"`
	Planned int    `json:"planned"`
}

// String says it for people: "incomplete: 12 of 40 rows; interrupted by SIGINT".
func (i Incomplete) String() string {
	return fmt.Sprintf("incomplete: %d of %d rows; %s", i.Rows, i.Planned, i.Reason)
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
				row.PeakPct = Round(row.BusGBps/r.Header.PeakGBps*100, 2)
			}
			continue
		}
		if p := peak(r.Rows[i].Src, r.Rows[i].Dst); p > 0 && r.Rows[i].GBps > 0 {
			r.Rows[i].PeakPct = Round(r.Rows[i].GBps/p*100, 2)
		}
	}
}

// Tables renders one table per operation. Where NVLink counters were read, two more
// columns show the links' raw rate and the raw bytes they carried per payload byte.
func Tables(res Result) []report.Table {
	var tables []report.Table
	for _, o := range ops.All() {
		op := string(o)
		named := slices.ContainsFunc(res.Rows, func(r Row) bool { return r.Op == op && r.Kernel != "" })
		if t := opTable(res, op, extrasOf(res, op), named); len(t.Rows) > 0 {
			tables = append(tables, t)
		}
	}
	return tables
}

// opTable is op's table of res's rows, with the columns x and named (a kernel's) say.
func opTable(res Result, op string, x extras, named bool) report.Table {
	return kindOf(op).table(res, op, x, named)
}

// pointTable shows the rows of an operation between pairs of ranks: size, pair,
// bandwidth (latency: time alone).
func pointTable(res Result, op string, x extras, _ bool) report.Table {
	t := report.Table{Title: ops.Op(op).Title(), Header: []string{"size", "pair", "impl", "grid", "time us", "min us", "max us", "GB/s", "% peak", "wrong"},
		Optional: []string{"wire/payload", "1-op p99", "grid", "1-op p50", "% peak", "1-op max", "min us", "max us"}}
	variants := len(ops.Op(op).Algos()) > 0 && ops.Op(op).Variants("") != nil
	if variants { // an ordering (put-flag's fence or quiet) is a row of its own
		t.Header = slices.Insert(t.Header, 3, "algo")
	}
	t.Header = append(t.Header, x.header()...)
	for _, r := range res.Rows {
		if r.Op != op {
			continue
		}
		grid := "-"
		switch {
		case r.Blocks > 0 && r.Warps == 0:
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
		if variants {
			row = slices.Insert(row, 3, r.Algo)
		}
		t.Rows = append(t.Rows, append(row, x.cells(r)...))
	}
	return t
}

// collectiveTable shows one collective's rows as nccl-tests does: algorithm and bus
// bandwidth; for a MoE all-to-all-v (dispatch, combine: routed) the bytes that crossed
// to other ranks.
func collectiveTable(res Result, op string, x extras, named, routed bool) report.Table {
	t := report.Table{Title: op + " (time: mean over ranks; algbw, busbw in GB/s as nccl-tests)",
		Header:   []string{"size", "ranks", "dtype", "impl", "algo", "time us", "min us", "max us", "algbw", "busbw", "% peak", "wrong"},
		Optional: []string{"wire/payload", "kernel", "1-op p99", "1-op p50", "% peak", "ranks", "dtype", "1-op max", "min us", "max us", "algo"}}
	if routed {
		t.Title = op + " (MoE all-to-all-v; time: mean over ranks; busbw: GB/s of the bytes that crossed to other ranks)"
		t.Header = append(t.Header[:10:10], "crossed/rank", "% peak", "wrong")
	}
	t.Header = append(t.Header, x.header()...)
	// The kernel that ran a row, where the backend named one: the algorithm alone does
	// not say (one-shot all-reduce is the LL, push or LL128 kernel by size).
	if named {
		t.Header = slices.Insert(t.Header, 5, "kernel")
	}
	// The reduction's operator where the sweep names one (--redop all gives a row each
	// at every size); a sweep of sums shows none.
	reduces := ops.Op(op).Takes(ops.RedOpSetting) && (len(res.Header.Spec.RedOps) > 0 ||
		slices.ContainsFunc(res.Rows, func(r Row) bool { return r.Op == op && r.RedOp != "" && r.RedOp != ops.Sum.Name }))
	if reduces {
		t.Header = slices.Insert(t.Header, 3, "redop")
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
		if reduces {
			red := r.RedOp
			if red == "" {
				red = ops.Sum.Name // recorded before rows named their operator
			}
			row = slices.Insert(row, 3, red)
		}
		if routed {
			row = append(row, units.FormatSize(r.Crossed))
		}
		row = append(row, dash(r.PeakPct, 0), wrongCell(r))
		t.Rows = append(t.Rows, append(row, x.cells(r)...))
	}
	return t
}

// meetTable shows a barrier's rows: one per variant, timed on every rank, with no
// size or bandwidth to speak of.
func meetTable(res Result, op string, x extras) report.Table {
	t := report.Table{Title: ops.Op(op).Title(), Header: []string{"ranks", "impl", "variant", "time us", "min us", "max us", "wrong"},
		Optional: []string{"1-op p99", "1-op p50"}}
	t.Header = append(t.Header, x.header()...)
	for _, r := range res.Rows {
		if r.Op != op {
			continue
		}
		row := []string{strconv.Itoa(r.Ranks), r.Impl, r.Algo, fmtUS(r.MedUS), fmtUS(r.MinUS), fmtUS(r.MaxUS), wrongCell(r)}
		t.Rows = append(t.Rows, append(row, x.cells(r)...))
	}
	return t
}

// extras are the columns an operation's table has where some of its rows carry them:
// single-operation statistics (p99 where enough operations were timed for one) and the
// links' traffic.
type extras struct{ each, p99, wire bool }

func extrasOf(res Result, op string) extras {
	var x extras
	for _, r := range res.Rows {
		x.each = x.each || r.Op == op && r.PerIter != nil
		x.p99 = x.p99 || r.Op == op && r.PerIter != nil && r.PerIter.P99US > 0
		x.wire = x.wire || r.Op == op && r.Link != nil
	}
	return x
}

func (x extras) header() []string {
	var h []string
	if x.each {
		h = append(h, "1-op p50")
		if x.p99 {
			h = append(h, "1-op p99")
		}
		h = append(h, "1-op max")
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
		c = append(c, fmtUS(r.PerIter.P50US))
		if x.p99 {
			c = append(c, dashUS(r.PerIter.P99US))
		}
		c = append(c, fmtUS(r.PerIter.MaxUS))
	case x.each:
		c = append(c, "-", "-")
		if x.p99 {
			c = append(c, "-")
		}
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

// dashUS is v as fmtUS shows it, "-" where it is 0 (left out).
func dashUS(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmtUS(v)
}

func fmtUS(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// CSV writes every row.
func CSV(w io.Writer, res Result) error {
	c := NewCSVStream(w)
	return c.Finish(res)
}

var csvHeader = []string{"op", "impl", "size", "src", "dst", "bidir", "blocks", "warps", "time_us", "min_us", "max_us", "gbps", "peak_pct", "wrong",
	"overlap", "wire_gbps", "wire_per_byte", "p50_us", "p99_us", "worst_us", "ranks", "dtype", "algo", "busbw", "crossed", "kernel", "redop",
	"m", "n", "k", "tflops", "gemm_us"}

func csvRow(r Row) []string {
	wireGBps, perByte := "", ""
	if r.Link != nil {
		wireGBps, perByte = f3(r.Link.WireGBps), strconv.FormatFloat(r.Link.WirePerByte, 'f', 4, 64)
	}
	p50, p99, worst := "", "", ""
	if p := r.PerIter; p != nil {
		p50, p99, worst = f3(p.P50US), opt(p.P99US, f3), f3(p.MaxUS)
	}
	// A field that does not apply is empty, not 0: a collective has no pair, a
	// point-to-point row no ranks, latency no bandwidth, an automatic grid no size.
	src, dst, ranks := strconv.Itoa(r.Src), strconv.Itoa(r.Dst), ""
	if r.Collective() {
		src, dst, ranks = "", "", strconv.Itoa(r.Ranks)
	}
	wrong := ""
	if r.Checked {
		wrong = strconv.FormatInt(r.Wrong, 10)
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	// A fused operation's shape, its rate and its GEMM alone (size is the bytes it moves).
	m, n, k := "", "", ""
	if r.Matmul != nil {
		m, n, k = strconv.Itoa(r.Matmul.M), strconv.Itoa(r.Matmul.N), strconv.Itoa(r.Matmul.K)
	}
	return []string{r.Op, r.Impl, strconv.FormatInt(r.Size, 10), src, dst,
		strconv.FormatBool(r.Bidir), opt(float64(r.Blocks), count), opt(float64(r.Warps), count), num(r.MedUS), num(r.MinUS), num(r.MaxUS),
		opt(r.GBps, num), opt(r.PeakPct, num), wrong, strconv.Itoa(max(r.Overlap, 1)), wireGBps, perByte, p50, p99, worst,
		ranks, r.DType, r.Algo, opt(r.BusGBps, num), opt(float64(r.Crossed), count), r.Kernel, r.RedOp,
		m, n, k, opt(r.TFLOPS, num), opt(r.GemmUS, num)}
}

// opt is v formatted by f, or empty where v is 0 (it does not apply).
func opt(v float64, f func(float64) string) string {
	if v == 0 {
		return ""
	}
	return f(v)
}

// CSVStream writes a sweep's rows as CSV while it runs: the header line, then each row
// as it lands, so that a sweep stopped early leaves every row it measured.
type CSVStream struct {
	out     io.Writer
	w       *csv.Writer
	printed int
	started bool
}

// NewCSVStream writes onto w.
func NewCSVStream(w io.Writer) *CSVStream { return &CSVStream{out: w, w: csv.NewWriter(w)} }

// Add writes the rows of res (the result so far) not written yet.
func (c *CSVStream) Add(res Result) error {
	if !c.started {
		c.started = true
		// What made the rows, as "#" lines before the header (pandas: comment="#").
		if h := res.Header; h.Command != "" || h.Provenance != nil {
			var lines []string
			if h.Command != "" {
				lines = append(lines, "# "+h.Command)
			}
			if p := h.Provenance; p != nil {
				lines = append(lines, "# "+p.String())
			}
			c.w.Flush()
			if _, err := io.WriteString(c.out, strings.Join(lines, "\n")+"\n"); err != nil {
				return err
			}
		}
		if err := c.w.Write(csvHeader); err != nil {
			return err
		}
	}
	for ; c.printed < len(res.Rows); c.printed++ {
		if err := c.w.Write(csvRow(res.Rows[c.printed])); err != nil {
			return err
		}
	}
	c.w.Flush()
	return c.w.Error()
}

// Finish writes what is left of res.
func (c *CSVStream) Finish(res Result) error { return c.Add(res) }

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// CheckPlotFile says whether Plot can write file (its extension picks the format), so
// that a bad name is refused before a sweep runs.
func CheckPlotFile(file string) error {
	if ext := strings.ToLower(filepath.Ext(file)); ext != ".png" && ext != ".svg" {
		return setting.Errorf("%s %s: use a .png or .svg file name", setting.Plot, file)
	}
	return nil
}
