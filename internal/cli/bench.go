package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/kernels"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/store"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/internal/units"
)

// BenchOptions are `symmem bench`'s settings.
type BenchOptions struct {
	JobOptions
	Ops              []string
	Impls            []string
	MinSize, MaxSize units.Size
	Factor           int64
	Iters, Warmup    int
	Reps             int
	Blocks, Warps    int
	Overlap          int
	Graph            bool
	Bidir, Matrix    bool
	Tune             bool
	JSON, CSV        bool
	Plot             string
	maxSizeChanged   bool
}

// NewCmdBench builds `symmem bench` and `symmem bench compare`.
func NewCmdBench(streams IO) *cobra.Command {
	opts := &BenchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure bandwidth and latency across message sizes and implementations",
		Long: `Bench sweeps message sizes from --min-size to --max-size for each operation (put,
get, put-signal: bandwidth; latency: a ping-pong of a small put with a signal, reported
as the half round trip) and each implementation:

  triton       the prebuilt Triton kernels calling NVSHMEM device functions
  cuda         the same operations in CUDA C against the NVSHMEM device library
  copy-engine  cuMemcpyDtoDAsync into the peer's mapping (nvshmem_ptr)
  sm-store     a kernel storing straight into the peer's mapping
  memcpy       the CPU backend's copies over shared memory

Times come from CUDA events around --iters back-to-back operations (the clock on the
CPU backend); the table shows the median of --reps repetitions with min and max. Every
iteration sends a different window of a per-rank pattern, and the receiver checks its
buffer after each repetition: any wrong byte fails the run (exit 3).

--overlap N lets N operations be in flight at once: operation i is queued on stream
i % N, between a source and a destination of its own, so it need not wait for the
previous one to finish (as NVSHMEM perftest's put_bw issues non-blocking puts). The time
per operation is then the whole stream's time divided by --iters; every stream's last
destination is checked.

--graph captures each repetition's timed operations into one CUDA graph and times one
launch of it (as nccl-tests -G does): the same kernels and copies, without the CPU
launching each one, which is what limits small messages.`,
		Example: `  symmem bench
  symmem bench --op put --impl triton,copy-engine --min-size 1M --max-size 256M --plot bw.svg
  symmem bench --tune --op put --impl triton --min-size 1M --max-size 256M --factor 16
  symmem bench --overlap 2 --op put --min-size 1M --max-size 256M --factor 16
  symmem bench --graph --op put --max-size 1M
  symmem bench --json > new.json && symmem bench compare old.json new.json --threshold 5%`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.maxSizeChanged = cmd.Flags().Changed("max-size")
			return runBench(cmd.Context(), opts, streams)
		},
	}
	opts.addFlags(cmd, 4<<30)
	f := cmd.Flags()
	f.StringSliceVar(&opts.Ops, "op", bench.Ops, "operations: put, get, put-signal, latency")
	f.StringSliceVar(&opts.Impls, "impl", nil, "implementations (default: all this backend supports)")
	opts.MinSize, opts.MaxSize = 4, 256<<20
	f.Var(&opts.MinSize, "min-size", "smallest message (K, M, G suffixes)")
	f.Var(&opts.MaxSize, "max-size", "largest message (default 256M on GPUs, 4M on the CPU backend)")
	f.Int64Var(&opts.Factor, "factor", 2, "size multiplier between steps")
	f.IntVar(&opts.Iters, "iters", 20, "timed operations per repetition")
	f.IntVar(&opts.Warmup, "warmup", 5, "untimed operations before each repetition")
	f.IntVar(&opts.Reps, "reps", 5, "repetitions per row (the table shows their median)")
	f.IntVar(&opts.Blocks, "blocks", 0, "GPU blocks per operation (0 = automatic)")
	f.IntVar(&opts.Warps, "warps", 0, "GPU warps per block (0 = automatic)")
	f.IntVar(&opts.Overlap, "overlap", 1, "operations in flight at once (1 = each waits for the previous)")
	f.BoolVar(&opts.Graph, "graph", false, "launch each repetition's operations as one CUDA graph (no CPU launch per operation)")
	f.BoolVar(&opts.Bidir, "bidir", false, "both ranks of a pair send at once")
	f.BoolVar(&opts.Matrix, "matrix", false, "measure every ordered pair of ranks (GPU x GPU matrix)")
	f.BoolVar(&opts.Tune, "tune", false, "search blocks and warps for each size and report the best")
	f.BoolVar(&opts.JSON, "json", false, "print results as JSON on stdout")
	f.BoolVar(&opts.CSV, "csv", false, "print results as CSV on stdout")
	f.StringVar(&opts.Plot, "plot", "", "draw bandwidth against size into FILE (.svg or .png)")
	cmd.AddCommand(newCmdBenchCompare(streams), newCmdBenchShow(streams))
	return cmd
}

func newCmdBenchShow(streams IO) *cobra.Command {
	var plot string
	var csv bool
	cmd := &cobra.Command{
		Use:   "show RESULT.json",
		Short: "Print a saved `bench --json` result as tables (or CSV), and plot it",
		Example: `  symmem bench --json > h200.json
  symmem bench show h200.json --plot h200.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if plot != "" {
				if err := bench.CheckPlotFile(plot); err != nil {
					return usage("%v", err)
				}
			}
			res, err := bench.Load(args[0])
			if err != nil {
				return usage("%v", err)
			}
			format := ""
			if csv {
				format = "csv"
			}
			if err := writeResult(streams, res, format, plot); err != nil {
				return err
			}
			if f := res.Failures(); len(f) > 0 {
				return exitcode.With(exitcode.WrongResults, fmt.Errorf("%s holds a failed run; its figures are not to be trusted:\n  %s", args[0], strings.Join(f, "\n  ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&plot, "plot", "", "draw bandwidth against size into FILE (.svg or .png)")
	cmd.Flags().BoolVar(&csv, "csv", false, "print CSV instead of tables")
	return cmd
}

func (o *BenchOptions) spec(backendName string) (bench.Spec, error) {
	s := bench.Spec{Ops: o.Ops, Impls: o.Impls, MinSize: int64(o.MinSize), MaxSize: int64(o.MaxSize), Factor: o.Factor,
		Iters: o.Iters, Warmup: o.Warmup, Reps: o.Reps, Blocks: o.Blocks, Warps: o.Warps, Overlap: o.Overlap, Graph: o.Graph, Bidir: o.Bidir,
		Matrix: o.Matrix, Tune: o.Tune, LatencySize: 8, PerIterMax: 64 << 10}
	if backendName == "cpu" && !o.maxSizeChanged {
		s.MaxSize = 4 << 20
	}
	for _, op := range s.Ops {
		if !containsStr(bench.Ops, op) {
			return s, usage("unknown --op %q: use %s", op, strings.Join(bench.Ops, ", "))
		}
	}
	supported := gpu.Implementations
	if backendName == "cpu" {
		supported = []string{"memcpy"}
	}
	if len(s.Impls) == 0 {
		s.Impls = supported
	}
	for _, im := range s.Impls {
		if !containsStr(supported, im) {
			return s, usage("--impl %q is not available on the %s backend: use %s", im, backendName, strings.Join(supported, ", "))
		}
	}
	switch {
	case s.MinSize < 1 || s.MaxSize < s.MinSize:
		return s, usage("sizes: need 1 <= --min-size <= --max-size (got %s..%s)", o.MinSize.String(), units.FormatSize(s.MaxSize))
	case s.Factor < 2:
		return s, usage("--factor %d: must be 2 or more", s.Factor)
	case s.Iters < 1 || s.Reps < 1 || s.Warmup < 0:
		return s, usage("--iters and --reps must be at least 1, --warmup at least 0")
	case s.Blocks < 0 || s.Warps < 0:
		return s, usage("--blocks and --warps must not be negative")
	case s.Graph && backendName == "cpu":
		return s, usage("--graph captures CUDA graphs: it needs the GPU backend (this run uses the CPU backend)")
	case s.Overlap < 1 || s.Overlap > bench.MaxOverlap:
		return s, usage("--overlap %d: use 1 (each operation waits for the last) up to %d", s.Overlap, bench.MaxOverlap)
	case s.Tune && s.Matrix:
		return s, usage("--tune and --matrix together would take hours: tune one pair first")
	}
	s.TuneWarps = kernels.Default().Warps("triton", "put_block")
	return s, nil
}

// BenchRank is one rank's report.
type BenchRank struct {
	Rows    []bench.Row `json:"rows"`
	Timing  string      `json:"timing"`
	GPU     string      `json:"gpu,omitempty"`
	NVSHMEM string      `json:"nvshmem,omitempty"`
	Driver  string      `json:"driver,omitempty"`
	// Links says why this rank's NVLink counters were not read, if they were not.
	Links string `json:"links,omitempty"`
}

type describer interface {
	Describe() (gpu, lib, driver string)
}

func runBenchRank(ctx context.Context, r *engine.Rank, j engine.Job, fault *engine.Fault, streams IO) (any, error) {
	var s bench.Spec
	if err := json.Unmarshal(j.Bench, &s); err != nil {
		return nil, err
	}
	fault.Trigger(r.Info.Rank, "op")
	run := &bench.Runner{B: r.Backend, S: s, Progress: func() { r.Store.Add(ctx, "progress", 1) }}
	// The corrupt fault goes to the checks only: wrapping the backend would hide the
	// GPU backend's timers and lanes.
	run.Tamper = fault.Tamper(r.Info.Rank)
	var err error
	if run.BeforeMeasure, err = fault.DropHook(r.Info.Rank, r.Backend); err != nil {
		return nil, err
	}
	var out BenchRank
	if g, ok := r.Backend.(*gpu.Backend); ok {
		// NVLink counters show what the links carried for each row; a machine without
		// NVLink or NVML just goes without.
		if c, err := topo.OpenCounters(nvml.New(), g.Device.PCIBusID); err == nil {
			defer c.Close()
			run.Links = c
		} else {
			out.Links = err.Error()
		}
	}
	rows, err := run.Run()
	if err != nil {
		return nil, err
	}
	out.Rows, out.Timing = rows, run.TimingNote()
	if d, ok := r.Backend.(describer); ok {
		out.GPU, out.NVSHMEM, out.Driver = d.Describe()
	}
	return out, nil
}

func runBench(ctx context.Context, opts *BenchOptions, streams IO) error {
	if err := opts.validate(); err != nil {
		return err
	}
	if opts.NProc < 2 {
		return usage("bench needs at least 2 ranks: use --nproc 2 or more")
	}
	if opts.JSON && opts.CSV {
		return usage("--json and --csv both write stdout: pick one")
	}
	if opts.Plot != "" {
		if err := bench.CheckPlotFile(opts.Plot); err != nil {
			return usage("%v", err)
		}
	}
	j := engine.Job{Kind: "bench", NVSHMEMLib: nvshmemLib(opts.NVSHMEMLib), WaitLimit: opts.WaitLimit}
	var err error
	j.Backend, j.BackendNote, err = resolveBackend(opts.Backend, opts.NProc, j.NVSHMEMLib)
	if err != nil {
		return err
	}
	spec, err := opts.spec(j.Backend)
	if err != nil {
		return err
	}
	j.Heap = spec.HeapBytes()
	if j.Heap > int64(opts.HeapSize) {
		with, lower := "", "--max-size"
		if spec.Overlap > 1 {
			with, lower = fmt.Sprintf(" with --overlap %d (buffers per operation in flight)", spec.Overlap), "--max-size or --overlap"
		}
		return usage("--max-size %s%s needs a symmetric heap of %s per rank, more than --heap-size %s: lower %s or raise --heap-size",
			units.FormatSize(spec.MaxSize), with, units.FormatSize(j.Heap), opts.HeapSize.String(), lower)
	}
	j.Bench, _ = json.Marshal(spec)
	machine := !opts.JSON && !opts.CSV
	if machine {
		fmt.Fprintf(streams.Err, "backend: %s%s\n", j.Backend, noteSuffix(j.BackendNote))
	}
	var stopProgress func()
	raw, _, err := launchJob(ctx, j, &opts.JobOptions, opts.NProc, streams.Err, streams.Err,
		func(srv *store.Server) { stopProgress = showProgress(srv, steps(spec, opts.NProc)) })
	if stopProgress != nil {
		stopProgress()
	}
	if err != nil {
		return err
	}
	res := bench.Result{Header: bench.Header{Command: "symmem " + strings.Join(os.Args[1:], " "), Backend: j.Backend, NProc: opts.NProc, Spec: spec}}
	var perRank [][]bench.Row
	for i, b := range raw {
		var br BenchRank
		if err := json.Unmarshal(b, &br); err != nil {
			return fmt.Errorf("rank %d's result: %w", i, err)
		}
		perRank = append(perRank, br.Rows)
		if i == 0 {
			res.Header.Timing = br.Timing
		}
		if br.Links != "" && res.Header.LinkCounters == "" {
			res.Header.LinkCounters = fmt.Sprintf("not read on rank %d: %s", i, br.Links)
		}
		if br.GPU != "" {
			res.Header.GPUs = append(res.Header.GPUs, br.GPU)
			res.Header.NVSHMEM, res.Header.Driver = br.NVSHMEM, br.Driver
		}
	}
	res.Rows = bench.Merge(perRank)
	if j.Backend == "nvshmem" {
		if t, err := topo.Read(nvml.New()); err == nil {
			res.Header.PeakGBps = t.Peak(0, opts.NProc/2)
			if len(t.Links) > 1 {
				res.Header.Link = t.Links[0][opts.NProc/2].Label()
			}
			for i := range res.Rows {
				if p := t.Peak(res.Rows[i].Src, res.Rows[i].Dst); p > 0 && res.Rows[i].GBps > 0 {
					res.Rows[i].PeakPct = res.Rows[i].GBps / p * 100
				}
			}
		}
	}
	var wrong int64
	var bad []string
	for _, r := range res.Rows {
		wrong += r.Wrong
		if r.Wrong > 0 {
			bad = append(bad, fmt.Sprintf("  %s %s %s %s: %d wrong bytes", r.Op, r.Impl, units.FormatSize(r.Size), r.PairLabel(), r.Wrong))
		}
	}
	res.OK = wrong == 0
	format := ""
	switch {
	case opts.JSON:
		format = "json"
	case opts.CSV:
		format = "csv"
	}
	if err := writeResult(streams, res, format, opts.Plot); err != nil {
		return err
	}
	if !res.OK {
		return exitcode.With(exitcode.WrongResults, fmt.Errorf("%d wrong bytes arrived: the results above are not to be trusted; the rows that failed:\n%s",
			wrong, strings.Join(bad, "\n")))
	}
	return nil
}

// writeResult prints res as tables (format ""), "json" or "csv", and draws it into
// plot if one is named.
func writeResult(streams IO, res bench.Result, format, plot string) error {
	var err error
	switch format {
	case "json":
		err = report.JSON(streams.Out, res)
	case "csv":
		err = bench.CSV(streams.Out, res)
	default:
		printBenchHeader(streams, res)
		for _, t := range bench.Tables(res) {
			t.Print(streams.Out)
		}
		if res.Header.Spec.Matrix {
			printMatrix(streams, res)
		}
	}
	if err != nil || plot == "" {
		return err
	}
	if err := bench.Plot(res, plot); err != nil {
		return err
	}
	if format == "" {
		fmt.Fprintf(streams.Err, "plot written to %s\n", plot)
	}
	return nil
}

func steps(s bench.Spec, n int) int {
	count := 0
	rounds := len(s.Pairs(n))
	for _, op := range s.Ops {
		for _, im := range s.Impls {
			if !bench.Supports(im, op) {
				continue
			}
			if op == "latency" {
				count += rounds
			} else {
				count += rounds * len(s.Sizes())
			}
		}
	}
	return count
}

// showProgress draws a bar on stderr while the ranks work, only on a terminal.
func showProgress(srv *store.Server, total int) func() {
	if !term.IsTerminal(int(os.Stderr.Fd())) || total == 0 {
		return func() {}
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("bench"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.Set(int(srv.Counter("progress")))
			}
		}
	}()
	return func() { close(done); bar.Finish() }
}

func printBenchHeader(streams IO, res bench.Result) {
	h := res.Header
	fmt.Fprintf(streams.Out, "# %s\n# backend %s, %d ranks", h.Command, h.Backend, h.NProc)
	if len(h.GPUs) > 0 {
		fmt.Fprintf(streams.Out, ", GPUs %s, driver %s, NVSHMEM %s", strings.Join(h.GPUs, " + "), h.Driver, h.NVSHMEM)
	}
	if h.PeakGBps > 0 {
		fmt.Fprintf(streams.Out, ", link %s peak %.0f GB/s per direction", h.Link, h.PeakGBps)
	}
	fmt.Fprintf(streams.Out, "\n# iters %d, warmup %d, reps %d", h.Spec.Iters, h.Spec.Warmup, h.Spec.Reps)
	if h.Spec.Overlap > 1 {
		fmt.Fprintf(streams.Out, ", overlap %d (operations in flight at once)", h.Spec.Overlap)
	}
	if h.Spec.Graph {
		fmt.Fprint(streams.Out, ", one CUDA graph per repetition")
	}
	fmt.Fprintln(streams.Out)
	if h.Timing != "" {
		fmt.Fprintf(streams.Out, "# timing: %s\n", h.Timing)
	}
	if h.Spec.PerIterMax > 0 {
		fmt.Fprintf(streams.Out, "# p50/p99/worst: single operations, from one more checked repetition of rows up to %s (latency: every round)\n",
			units.FormatSize(h.Spec.PerIterMax))
	}
	wire := false
	for _, r := range res.Rows {
		wire = wire || r.Link != nil
	}
	switch {
	case wire:
		fmt.Fprintf(streams.Out, "# wire: raw NVLink traffic in the payload's direction on the sender's links (NVML counters), rows of %s or more per repetition\n",
			units.FormatSize(bench.MinCounted))
	case h.LinkCounters != "":
		fmt.Fprintf(streams.Out, "# wire: NVLink counters %s\n", h.LinkCounters)
	}
}

// printMatrix shows, for the largest size of put, the bandwidth of every ordered pair.
func printMatrix(streams IO, res bench.Result) {
	var maxSize int64
	for _, r := range res.Rows {
		if r.Op == "put" && r.Size > maxSize {
			maxSize = r.Size
		}
	}
	n := res.Header.NProc
	best := map[[2]int]float64{}
	for _, r := range res.Rows {
		if r.Op == "put" && r.Size == maxSize && r.GBps > best[[2]int{r.Src, r.Dst}] {
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
			} else {
				row = append(row, fmt.Sprintf("%.1f", best[[2]int{i, j}]))
			}
		}
		t.Rows = append(t.Rows, row)
	}
	t.Print(streams.Out)
}

func newCmdBenchCompare(streams IO) *cobra.Command {
	var threshold string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compare OLD.json NEW.json",
		Short: "Compare two `bench --json` results and fail on a regression",
		Long: `Compare matches rows by operation, implementation, size, pair and mode, and prints
the change of each (GB/s; us for latency).

A row regressed when its median is worse by more than --threshold AND even its fastest
repetition is slower than the old result's slowest by that much: a change that stands
out of both runs' spread, so that repeated runs of the same build do not regress. A
median change inside the spread is reported as "within noise"; raise --reps to narrow it.

A row with wrong bytes on either side, a result that failed its checks, or a row present
in one file only is a failure: the numbers cannot be trusted or compared.

Exit status: 0 no regression; 6 a regression; 8 a failure (which wins over 6).`,
		Example: "  symmem bench compare old.json new.json --threshold 5%",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			th, err := parsePercent(threshold)
			if err != nil {
				return usage("--threshold %q: %v", threshold, err)
			}
			old, err := bench.Load(args[0])
			if err != nil {
				return usage("%v", err)
			}
			cur, err := bench.Load(args[1])
			if err != nil {
				return usage("%v", err)
			}
			return runBenchCompare(streams, [2]string{args[0], args[1]}, old, cur, th, asJSON)
		},
	}
	cmd.Flags().StringVar(&threshold, "threshold", "5%", "largest tolerated slowdown, with its unit (5%)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON on stdout")
	return cmd
}

// CompareReport is what `bench compare --json` prints.
type CompareReport struct {
	Old          string          `json:"old"`
	New          string          `json:"new"`
	ThresholdPct float64         `json:"threshold_pct"`
	Failures     []string        `json:"failures,omitempty"`
	Rows         []bench.Compare `json:"rows"`
	Regressions  int             `json:"regressions"`
	OK           bool            `json:"ok"`
}

func runBenchCompare(streams IO, files [2]string, old, cur bench.Result, th float64, asJSON bool) error {
	rep := CompareReport{Old: files[0], New: files[1], ThresholdPct: th, Rows: bench.CompareResults(old, cur, th)}
	for i, res := range []bench.Result{old, cur} {
		if !res.OK {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s failed its checks (\"ok\": false): %s", files[i], strings.Join(res.Failures(), "; ")))
		}
	}
	failed := 0
	for _, c := range rep.Rows {
		if c.Failed() {
			failed++
		}
		if c.Verdict == bench.VerdictRegression {
			rep.Regressions++
		}
	}
	rep.OK = failed == 0 && len(rep.Failures) == 0 && rep.Regressions == 0
	if asJSON {
		if err := report.JSON(streams.Out, rep); err != nil {
			return err
		}
	} else {
		t := report.Table{Header: []string{"row", "old", "new", "change", "verdict", "why"}}
		for _, c := range rep.Rows {
			change, o, n := "-", "-", "-"
			if c.Old > 0 && c.New > 0 {
				change, o, n = fmt.Sprintf("%+.1f%%", c.ChangePct), fmt.Sprintf("%.2f", c.Old), fmt.Sprintf("%.2f", c.New)
			}
			t.Rows = append(t.Rows, []string{c.Key, o, n, change, c.Verdict, c.Why})
		}
		t.Print(streams.Out)
		for _, f := range rep.Failures {
			fmt.Fprintln(streams.Out, "FAILED: "+f)
		}
	}
	switch {
	case failed > 0 || len(rep.Failures) > 0:
		return exitcode.With(exitcode.CompareFailed, fmt.Errorf("%d of %d rows cannot be compared (wrong data or missing on one side)%s: fix the failing run before comparing speed",
			failed, len(rep.Rows), plural(len(rep.Failures), ", and a result failed its checks")))
	case rep.Regressions > 0:
		return exitcode.With(exitcode.Regression, fmt.Errorf("%d of %d rows regressed by more than %.1f%% beyond the repetitions' spread", rep.Regressions, len(rep.Rows), th))
	}
	if !asJSON {
		fmt.Fprintf(streams.Out, "no regression beyond %.1f%% in %d rows (GB/s; us for latency)\n", th, len(rep.Rows))
	}
	return nil
}

func plural(n int, s string) string {
	if n == 0 {
		return ""
	}
	return s
}

// parsePercent reads a percentage that carries its unit ("5%"): a bare number is
// refused, since 0.05 and 5 would both look plausible.
func parsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, ok := strings.CutSuffix(t, "%")
	if !ok {
		return 0, fmt.Errorf("give a percentage with its unit, such as 5%%")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 || v > 1000 {
		return 0, fmt.Errorf("want a percentage from 0%% to 1000%%, such as 5%%")
	}
	return v, nil
}
