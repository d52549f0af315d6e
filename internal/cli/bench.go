package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/result/chart"
	"github.com/symmem/symmem/internal/setting"
)

// BenchOptions are `symmem bench`'s settings.
type BenchOptions struct {
	JobOptions
	Ops              []string
	Impls            []string
	MinSize, MaxSize symmem.Size
	Factor           int64
	Iters, Warmup    int
	Reps             int
	Runs             int
	Blocks, Warps    int
	Overlap          int
	Graph            bool
	Bidir, Matrix    bool
	Tune             bool
	JSON, CSV        bool
	// JSONFile is where -J writes the result as JSON, beside what stdout shows.
	JSONFile string
	Plot     string
	// Collectives.
	DType          string
	RedOp          string
	Algo           string
	Root           int
	MoE            symmem.MoE
	Matmul         symmem.Matmul
	maxSizeChanged bool
	// nprocByLetter: the ranks were given as -n, which in nccl-tests is the
	// iterations; a count of ranks the machine cannot hold says so.
	nprocByLetter bool
	// given lists the flags of collectives (opsOf) set on the command line, not
	// through a config file or SYMMEM_*: one that no op uses is refused.
	given []string
}

// opsOf says which ops use each flag that only some ops read: set on the command line
// with none of them in --op it would change nothing.
func opsOf(flag, algo string) (what string, names []string) {
	takers := opsTaking(flag)
	if flag == "algo" {
		takers = opsForAlgo(algo)
	}
	what = opNames(takers)
	if flag == "dtype" {
		what = "the collectives"
	}
	return what, takers
}

// NewCmdBench builds `symmem bench` (with show and compare); runF, when not nil, replaces the run function (tests use it
// to check how flags land in the options). It is long for its help text and flags, one
// statement each.
func NewCmdBench(streams IO, runF func(*BenchOptions) error) *cobra.Command {
	opts, reg := &BenchOptions{}, streams.registry() // the help, --impl and its completion read it
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure bandwidth and latency across message sizes and implementations",
		Long: `Bench sweeps message sizes from --min-size to --max-size for each operation (put,
get, put-signal: bandwidth; latency: a ping-pong of a small put with a signal, reported
as the half round trip; by default these four) and each implementation:

` + implHelp(reg, allOps()) + `

Times come from CUDA events around --iters back-to-back operations and the quiet that
completes them remotely (the clock on the CPU backend); the table shows the median of
--reps repetitions with min and max, and for rows up to 64K and latency the p50, p99 and
worst of single operations. Before every repetition the receiver fills its buffers with
the complement of what must arrive; every operation sends a different window of a
per-rank pattern; after it the receiver checks every buffer: any wrong byte fails the run
(exit 3), and so does a signal that does not come within --wait-limit.

--overlap N lets N operations be in flight at once: operation i is queued on stream
i % N, between a source and a destination of its own, so it need not wait for the
previous one to finish (as NVSHMEM perftest's put_bw issues non-blocking puts). The time
per operation is then the whole stream's time divided by --iters; every stream's last
destination is checked.

--graph captures each repetition's timed operations into one CUDA graph and times one
launch of it (as nccl-tests -G does): the same kernels and copies, without the CPU
launching each one, which is what limits small messages.

Collectives (all-reduce, all-gather, reduce-scatter, broadcast, all-to-all, reduce,
gather and scatter, each named in --op, or --op collectives for all of them with
dispatch and combine) involve every rank; sizes mean what they mean in nccl-tests (all-gather and gather: the gathered
output; reduce-scatter, scatter and all-to-all: one rank's whole input), rounded down to
whole --dtype elements per rank; --root is broadcast's, reduce's, gather's and
scatter's root.
Each row's time is the mean of the ranks' (as nccl-tests); algbw is size / time, busbw applies
nccl-tests' factors (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
(n-1)/n; broadcast 1). Every rank checks its whole output after every repetition
against inputs that move with each measurement, and within one the last operation's
input differs from every earlier one's; sums use small integers, exact in bf16.
dispatch and combine are MoE all-to-all-v: each rank's --tokens tokens of --hidden
elements go to the ranks of their --topk experts (of --experts, spread evenly; --seed
draws the routing, --skew > 0 favours low-numbered experts) and come back summed; their
busbw is the bytes that crossed to other ranks per rank, over the time.

nccl-tests' letters -b -e -f -w -d -o -G mean here what they mean there, and -J FILE
writes the result as JSON into FILE. Its -n (iterations) is --iters here: -n is the
number of ranks (--nproc) in every symmem command, as in mpirun and torchrun, and
nccl-tests' -g (GPUs per process) has no place, each rank being one process and GPU.`,
		Example: `  symmem bench
  symmem bench -b 8 -e 128M -f 2 -n 4 --op all-reduce -J ar.json   # nccl-tests' letters
  symmem bench --op put --impl triton,copy-engine --min-size 1M --max-size 256M --plot bw.svg
  symmem bench --tune --op put --impl triton --min-size 1M --max-size 256M --factor 16
  symmem bench --overlap 2 --op put --min-size 1M --max-size 256M --factor 16
  symmem bench --graph --op put --max-size 1M
  symmem bench --op all-reduce,all-gather --nproc 4 --dtype float32
  symmem bench --op dispatch,combine --tokens 4096 --hidden 7168 --topk 8 --experts 256
  symmem bench --json > new.json && symmem bench compare old.json new.json --threshold 5%`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && opts.JSON {
				// --json x.json: the name was taken for a subcommand.
				return usage("--json takes no file: it prints the result on stdout; to write it into %[1]s give -J %[1]s (--json-file %[1]s)", args[0])
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.maxSizeChanged = cmd.Flags().Changed("max-size")
			opts.nprocByLetter = typedLetter(cmd.Flags(), streams.Args, "nproc")
			opts.given = config.Typed(cmd.Flags(), collectiveFlags()...)
			if err := typedZeroTokens(cmd.Flags()); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runBench(cmd.Context(), opts, streams)
		},
	}
	addJobFlags(&opts.JobOptions, cmd)
	f := cmd.Flags()
	f.Lookup("timeout").Usage = "stop the sweep when no measurement has finished for this long (it bounds a stall, not the sweep; 0 = never)"
	f.StringSliceVar(&opts.Ops, "op", pointOps(), "operations: "+opNames(allOps())+"; collectives: every collective; all: every operation bench measures but the fused ones, which it measures where named")
	f.StringSliceVar(&opts.Impls, "impl", nil, "implementations: "+strings.Join(reg.names(), ", ")+" (default: all this backend runs)")
	d := symmem.DefaultBenchSpec()
	opts.MinSize, opts.MaxSize = d.MinSize, d.MaxSize
	f.VarP(&opts.MinSize, "min-size", "b", "smallest message (K, M, G suffixes)")
	f.VarP(&opts.MaxSize, "max-size", "e", "largest message (4M on the CPU backend)")
	f.Int64VarP(&opts.Factor, "factor", "f", d.Factor, "size multiplier between steps")
	f.IntVar(&opts.Iters, "iters", d.Iters, "timed operations per repetition (nccl-tests' -n; -n is --nproc here, as in run)")
	f.IntVarP(&opts.Warmup, "warmup", "w", d.Warmup, "untimed operations before each repetition")
	f.IntVar(&opts.Reps, "reps", d.Reps, "repetitions per row (the table shows their median)")
	f.IntVar(&opts.Runs, "runs", 1, "runs of the whole sweep, each with fresh ranks and buffers, kept apart in the result (bench compare needs several a side)")
	f.IntVar(&opts.Blocks, "blocks", 0, "GPU blocks per operation (0 = automatic)")
	f.IntVar(&opts.Warps, "warps", 0, "GPU warps per block (0 = automatic)")
	f.IntVar(&opts.Overlap, "overlap", d.Overlap, "operations in flight at once (1 = each waits for the previous)")
	f.BoolVarP(&opts.Graph, "graph", "G", false, "launch each repetition's operations as one CUDA graph (no CPU launch per operation)")
	f.BoolVar(&opts.Bidir, "bidir", false, "both ranks of a pair send at once")
	f.BoolVar(&opts.Matrix, "matrix", false, "measure every ordered pair of ranks (GPU x GPU matrix)")
	f.BoolVar(&opts.Tune, "tune", false, "search blocks and warps for each size and report the best")
	f.BoolVar(&opts.JSON, "json", false, "print results as JSON on stdout")
	f.StringVarP(&opts.JSONFile, "json-file", "J", "", "also write the result as JSON into `FILE` (as nccl-tests' -J)")
	f.BoolVar(&opts.CSV, "csv", false, "print results as CSV on stdout")
	f.StringVar(&opts.Plot, "plot", "", "draw bandwidth against size into FILE (.svg or .png)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print what the sweep would measure and the heap it needs, and start nothing (--backend nvshmem is then not probed: plan a GPU sweep anywhere)")
	f.StringVarP(&opts.DType, "dtype", "d", "", "collectives' element type: "+strings.Join(symmem.CollectiveDTypes(), ", ")+" (default "+symmem.DefaultCollectiveDType+")")
	f.StringVarP(&opts.RedOp, "redop", "o", "", "reduction operator of "+opNames(opsTaking("redop"))+": "+strings.Join(symmem.RedOps(), ", ")+", a list, or all (a row each; default sum)")
	f.StringVar(&opts.Algo, "algo", "", "all-reduce's algorithm (one-shot, two-shot), or reduce-scatter's and combine's (staged, pull); default: the implementation's choice, shown in the table; put-flag's ordering (fence, quiet) or barrier's variant (barrier-all, sync-all): default both")
	f.IntVarP(&opts.Root, "root", "r", 0, "root rank of "+opNames(opsTaking("root")))
	addMoEFlags(f, &opts.MoE)
	addMatmulFlags(f, &opts.Matmul, symmem.DefaultMatmul())
	cmd.AddCommand(newCmdBenchCompare(streams), newCmdBenchShow(streams))
	// Completion reads the registry, like validation and the help text, and offers
	// what the ops already typed take.
	completeJobFlags(cmd, streams)
	cmd.RegisterFlagCompletionFunc("impl", completeList(func(c *cobra.Command, _ []string) []string {
		return implWords(c, reg, streams.backends(), benchOps(c))
	}))
	cmd.RegisterFlagCompletionFunc("op", completeList(func(*cobra.Command, []string) []string {
		return append(allOps(), "collectives\t"+opNames(collectiveOps()), "all\tevery operation")
	}))
	cmd.RegisterFlagCompletionFunc("dtype", completeOne(func(*cobra.Command, []string) []string { return symmem.CollectiveDTypes() }))
	cmd.RegisterFlagCompletionFunc("redop", completeList(func(*cobra.Command, []string) []string { return redOpWords(true) }))
	cmd.RegisterFlagCompletionFunc("algo", completeOne(func(c *cobra.Command, _ []string) []string { return algoWords(benchOps(c)) }))
	cmd.RegisterFlagCompletionFunc("plot", completeFiles("svg", "png"))
	cmd.RegisterFlagCompletionFunc("json-file", completeFiles("json"))
	return cmd
}

// spec is the sweep the options describe; the library reads it as the engine takes
// it (the collectives and every op spelt out, each once, the settings no op reads left
// out, a --max-size left out the backend's default).
func (o *BenchOptions) spec() symmem.BenchSpec {
	d := symmem.DefaultBenchSpec() // what no flag sets: the latency's size, per-operation statistics' reach
	s := symmem.BenchSpec{Ops: o.Ops, Impls: o.Impls, MinSize: o.MinSize, MaxSize: o.MaxSize, Factor: o.Factor,
		Iters: o.Iters, Warmup: o.Warmup, Reps: o.Reps, Blocks: o.Blocks, Warps: o.Warps, Overlap: o.Overlap, Graph: o.Graph, Bidir: o.Bidir,
		Matrix: o.Matrix, Tune: o.Tune, LatencySize: d.LatencySize, PerIterMax: d.PerIterMax, DType: o.DType, Algo: o.Algo, Root: o.Root}
	if !o.maxSizeChanged {
		s.MaxSize = 0 // the backend's: 4M on the CPU backend
	}
	if o.RedOp != "" {
		s.RedOps = []string{o.RedOp}
	}
	m := o.MoE // the engine fills in the token count if left at 0
	s.MoE = &m
	mm := o.Matmul
	s.Matmul = &mm
	return s
}

// asked is the operations --op asks for, "collectives" and "all" spelt out.
func (o *BenchOptions) asked() []string {
	var out []string
	for _, op := range o.Ops {
		switch op {
		case "collectives":
			out = append(out, collectiveOps()...)
		case "all":
			out = append(out, allOps()...)
		default:
			out = append(out, op)
		}
	}
	return out
}

func (o *BenchOptions) validate() error {
	if o.Runs < 1 || o.Runs > result.MaxRuns {
		return usage("%s %d: give 1 up to %d runs of the sweep", setting.Runs, o.Runs, result.MaxRuns)
	}
	if o.JSON && o.CSV {
		return usage("%s and --csv both write stdout: pick one", setting.JSON)
	}
	if o.DryRun && (o.CSV || o.Plot != "" || o.JSONFile != "") {
		return usage("%s prints a plan, not results: leave --csv, --plot and -J out (--json prints the plan as JSON)", setting.DryRun)
	}
	// The collectives' settings are checked where a collective reads them, or where they
	// were typed on the command line whatever the ops (--dtype garbage --op put ran); one
	// from a config file or SYMMEM_* may be meant for another command (run takes int8).
	asked := o.asked()
	uses := func(name string) bool {
		_, by := opsOf(name, o.Algo)
		return slices.Contains(o.given, name) || slices.ContainsFunc(asked, func(op string) bool { return slices.Contains(by, op) })
	}
	given := givenWords(o.given)
	switch {
	case o.DType == "":
	case uses("dtype") && !symmem.IsCollectiveDType(o.DType):
		return usageIn(given, "%s %q: collectives take one of %s", setting.DType, o.DType, strings.Join(symmem.CollectiveDTypes(), ", "))
	case !slices.Contains(symmem.DTypes(), o.DType) && !symmem.IsCollectiveDType(o.DType):
		return usageIn(given, "%s %q is no element type: give one of %s", setting.DType, o.DType, strings.Join(symmem.DTypes(), ", "))
	}
	if _, err := symmem.ParseRedOps(o.RedOp); err != nil {
		return usageIn(given, "%s: %v", setting.RedOp, err)
	}
	if o.Algo != "" && opsForAlgo(o.Algo) == nil {
		return usageIn(given, "%s %q: use %s for all-reduce, %s for reduce-scatter and combine (or leave it out: the implementation chooses)",
			setting.Algo, o.Algo, strings.Join(algosOf("all-reduce"), " or "), strings.Join(algosOf("reduce-scatter"), " or "))
	}
	for _, name := range o.given {
		what, uses := opsOf(name, o.Algo)
		if !slices.ContainsFunc(asked, func(op string) bool { return slices.Contains(uses, op) }) {
			value := ""
			if name == "algo" {
				value = " " + o.Algo
			}
			return usage("%s%s is for %s; %s %s has none: leave %s out or add one of them to %s", setting.Name(name), value, what, setting.Op, strings.Join(o.Ops, ","), setting.Name(name), setting.Op)
		}
	}
	// What Plot would find nothing to draw in is refused here, before the sweep runs
	// to its end for nothing: latency has no bandwidth, dispatch and combine one size.
	if o.Plot != "" && opsWhere(func(op symmem.Operation) bool { return op.PerSize && slices.Contains(asked, op.Name) }) == nil {
		return usage("%s draws bandwidth against size, and --op %s has none (latency has no bandwidth, dispatch and combine one size): add an op such as put, or leave --plot out", setting.Plot, strings.Join(o.Ops, ","))
	}
	if err := checkPlot(o.Plot); err != nil {
		return err
	}
	return checkOutFile("-J", o.JSONFile, "the result", "result.json")
}

// givenWords name a setting as the user gave it, in the checks of bench's options: by
// its flag where it was typed on the command line (given), or where given does not
// say (a setting of every op); else, a collectives' setting from a config file or a
// SYMMEM_* variable (meant, maybe, for another command), by its key and variable.
func givenWords(given []string) setting.Words {
	return func(n setting.Name) string {
		if slices.Contains(collectiveFlags(), string(n)) && !slices.Contains(given, string(n)) {
			return fmt.Sprintf("%s (config file or %s)", string(n), config.EnvName(string(n)))
		}
		return flagWords.Word(n)
	}
}

// collectiveFlags are the flags of the settings that only some ops read, whose source
// bench's checks track (BenchOptions.given).
func collectiveFlags() []string {
	return append(append([]string{"dtype", "redop", "algo", "root"}, moeFlags...), matmulFlags...)
}

// checkPlot refuses, before any measurement, a --plot file that cannot be written: a
// name without .png or .svg, or a directory that is missing or not writable.
func checkPlot(file string) error {
	if file == "" {
		return nil
	}
	if err := result.CheckPlotFile(file); err != nil {
		return usage("%v", err)
	}
	return checkOutFile(setting.Plot, file, "the plot", "bw.svg")
}

// checkOutFile refuses, before any measurement, an output file (of flag, holding what)
// that cannot be written: a directory, or one in a directory that is missing or not
// writable. example names a file such a flag takes; flag is its setting.Name, or its
// letter as typed ("-J").
func checkOutFile(flag any, file, what, example string) error {
	if file == "" {
		return nil
	}
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return usage("%s %s is a directory: give a file name, such as %s", flag, file, filepath.Join(file, example))
	}
	dir := filepath.Dir(file)
	if st, err := os.Stat(dir); err != nil {
		return usage("%s %s: directory %s does not exist; create it or write %s elsewhere", flag, file, dir, what)
	} else if !st.IsDir() {
		return usage("%s %s: %s is a file, not a directory; write %s elsewhere", flag, file, dir, what)
	}
	f, err := os.CreateTemp(dir, ".symmem-out-*")
	if err != nil {
		return usage("%s %s: cannot write into %s (%v); write %s elsewhere", flag, file, dir, errors.Unwrap(err), what)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// writeJSONFile writes res as JSON into file (-J), whole or not at all: it is written
// beside and renamed over.
func writeJSONFile(file string, res result.Result) error {
	f, err := os.CreateTemp(filepath.Dir(file), ".symmem-out-*")
	if err != nil {
		return fmt.Errorf("-J %s: %w", file, err)
	}
	defer os.Remove(f.Name())
	if err := report.JSON(f, res); err != nil {
		f.Close()
		return fmt.Errorf("-J %s: %w", file, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("-J %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("-J %s: %w", file, err)
	}
	if err := os.Rename(f.Name(), file); err != nil {
		return fmt.Errorf("-J %s: %w", file, err)
	}
	return nil
}

// ranksHint is err, NewJob's, with hint at its end where the machine has too few GPUs
// for the ranks: given as -n, they may have been meant as nccl-tests' iterations.
func ranksHint(err error, hint string) error {
	if hint != "" && symmem.FewDevices(err) {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}

func runBench(ctx context.Context, opts *BenchOptions, streams IO) error {
	if err := opts.validate(); err != nil {
		return err
	}
	// Ranks given as -n that the machine cannot hold may be nccl-tests' iterations.
	hint := ""
	if opts.nprocByLetter {
		hint = "; as in nccl-tests? iterations are --iters here"
	}
	job, err := newJob(&opts.JobOptions, streams, false)
	if err != nil {
		return ranksHint(err, hint)
	}
	name, note := job.Backend()
	plan, err := job.PlanBench(opts.spec())
	if err != nil {
		return err
	}
	if opts.DryRun {
		if !job.Reports() {
			return nil // rank 0 of an external launcher's job prints it
		}
		return printPlan(streams, plan, opts)
	}
	forPeople := !opts.JSON && !opts.CSV
	if forPeople && job.Reports() {
		say(streams, "backend: %s%s", name, noteSuffix(note))
	}
	warnOversubscribed(job, streams, hint)
	command := strings.TrimSpace("symmem " + strings.Join(streams.Args, " "))
	made := result.NewProvenance(time.Now())
	show := newRowPrinter(streams.Out, opts.format())
	// keep writes -J's file: of the whole result, or of the rows so far of one that
	// ended early (marked incomplete, as --json's).
	keep := func(res result.Result) error {
		if opts.JSONFile == "" {
			return nil
		}
		if err := writeJSONFile(opts.JSONFile, res); err != nil {
			return err
		}
		if forPeople {
			fmt.Fprintf(streams.Err, "JSON result written to %s\n", opts.JSONFile)
		}
		return nil
	}
	var prog *progress
	if job.Reports() {
		prog = newProgress(job, os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
		defer prog.stop()
	}
	if opts.Runs == 1 {
		// One run: its rows show as they land, and a sweep that ends early shows what
		// it measured. Several: the rows pool every run's, shown at the end.
		job.Rows = func(res result.Result, added []result.Row) {
			prog.landed(added) // before the rows: the bar leaves the terminal they go to
			res.Header.Command, res.Header.Provenance = command, made
			show.add(res)
		}
		job.Abandoned = func(res result.Result) {
			prog.stop()
			res.Header.Command, res.Header.Provenance = command, made
			show.finish(res)
			if err := keep(res); err != nil {
				fmt.Fprintln(streams.Err, "symmem: "+err.Error())
			}
		}
	} else if job.Launcher() != "symmem" {
		return usage("%s %d starts the ranks afresh for each run, which %s's ranks cannot: run bench once per run and give compare the files (a.json,b.json)", setting.Runs, opts.Runs, job.Launcher())
	}
	out, err := launchRuns(ctx, job, plan, opts.Runs, streams.Err)
	if out == nil {
		return err
	}
	prog.stop()
	res := *out
	res.Header.Command, res.Header.Provenance = command, made
	if werr := show.finish(res); werr != nil {
		return werr
	}
	if werr := keep(res); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		// The rows it measured are out; the exit code says what ended it.
		if opts.CSV && res.Incomplete != nil {
			fmt.Fprintf(streams.Err, "symmem: the CSV is %s\n", res.Incomplete)
		}
		if opts.Plot != "" {
			fmt.Fprintf(streams.Err, "symmem: no plot drawn: the sweep did not finish\n")
		}
		return err
	}
	if opts.Plot != "" {
		if err := chart.Plot(res, opts.Plot); err != nil {
			return err
		}
		if forPeople {
			fmt.Fprintf(streams.Err, "plot written to %s\n", opts.Plot)
		}
	}
	if f := res.Failures(); len(f) > 0 {
		var wrong int64
		for _, r := range res.Rows {
			wrong += r.Wrong
		}
		return symmem.WithExitCode(symmem.ExitWrongResults, fmt.Errorf("%d wrong bytes arrived: the results above are not to be trusted; the rows that failed:\n  %s",
			wrong, strings.Join(f, "\n  ")))
	}
	return nil
}

// launchRuns runs the sweep runs times, each with fresh ranks and buffers, and pools
// the runs into one result (result.Pool: each row's times run by run). A run that
// ends early ends the whole: with the error, it returns that run's partial result
// where it is the first, or the runs before it.
func launchRuns(ctx context.Context, job *symmem.Job, plan symmem.Plan, runs int, w io.Writer) (*symmem.BenchResult, error) {
	var done []result.Result
	var names []string
	for i := 1; i <= runs; i++ {
		if runs > 1 && job.Reports() {
			fmt.Fprintf(w, "bench: run %d of %d\n", i, runs)
		}
		out, err := job.Launch(ctx, plan)
		if err != nil || out == nil {
			if len(done) == 0 {
				if out == nil {
					return nil, err
				}
				return out.Bench, err
			}
			pooled, perr := result.Pool(done, names)
			if perr != nil {
				return nil, errors.Join(err, perr)
			}
			// The runs that finished stand; this one's rows are not in it.
			return &pooled, fmt.Errorf("run %d of %d: %w; the result holds the %d runs before it", i, runs, err, len(done))
		}
		done = append(done, *out.Bench)
		names = append(names, fmt.Sprintf("run %d", i))
	}
	pooled, err := result.Pool(done, names)
	if err != nil {
		// Every run is the same sweep: rows that differ are a fault of symmem's.
		return nil, fmt.Errorf("pooling the runs: %w", err)
	}
	return &pooled, nil
}

// printPlan prints the sweep j would run (bench --dry-run): for people, or as JSON.
func printPlan(streams IO, j symmem.Plan, opts *BenchOptions) error {
	sw := j.Sweep()
	s := sw.Spec
	var parts []string
	for _, op := range s.Ops {
		parts = append(parts, fmt.Sprintf("%s %d", op, sw.RowsOf[op]))
	}
	if opts.JSON {
		enc := json.NewEncoder(streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			DryRun    bool           `json:"dry_run"`
			Job       symmem.Plan    `json:"job"`
			Rows      int            `json:"rows"`
			RowsByOp  map[string]int `json:"rows_by_op"`
			EstimateS float64        `json:"estimate_s"`
		}{true, j, sw.Rows, sw.RowsOf, result.Round(sw.Estimate.Seconds(), 1)})
	}
	w := streams.Out
	line := func(k, format string, a ...any) {
		report.Note(w, report.Wrap(fmt.Sprintf("%-13s %s", k, fmt.Sprintf(format, a...)), report.Columns(w), strings.Repeat(" ", 14)))
	}
	backend, note := j.Backend()
	fmt.Fprintln(w, "bench --dry-run: nothing was started")
	line("backend", "%s%s", backend, noteSuffix(note))
	line("ranks", "%d", j.NProc())
	line("impls", "%s", strings.Join(s.Impls, ", "))
	if sizes := sw.Sizes; len(sizes) > 0 {
		note := ""
		if sw.Split {
			note = " (a collective's: those that give every rank an element)"
		}
		line("sizes", "%s to %s by x%d%s", sizes[0], sizes[len(sizes)-1], s.Factor, note)
	}
	if anyTakes(s.Ops, "dtype") {
		line("dtype", "%s", s.DType)
	}
	if sw.RedOps != nil {
		line("redop", "%s", strings.Join(sw.RedOps, ", "))
	}
	if m := s.MoE; m != nil {
		line("moe layer", "%d tokens x %d per rank, top-%d of %d experts, seed %d", m.Tokens, m.Hidden, m.TopK, m.Experts, m.Seed)
	}
	line("rows", "%d: %s", sw.Rows, strings.Join(parts, ", "))
	each := fmt.Sprintf("the median of %d repetitions of %d warm-up and %d timed operations", s.Reps, s.Warmup, s.Iters)
	if sw.LatencyRounds > 0 {
		each += fmt.Sprintf(" (latency: of %d round trips)", sw.LatencyRounds)
	}
	line("each row", "%s", each)
	line("heap", "%s per rank (--heap-size allows %s)", j.Heap(), opts.HeapSize)
	line("duration", "%s (an estimate; --timeout %s bounds a stall between measurements, not the sweep)", fmtEstimate(sw.Estimate), opts.Timeout)
	return nil
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

func (o *BenchOptions) format() string {
	switch {
	case o.JSON:
		return "json"
	case o.CSV:
		return "csv"
	}
	return ""
}

// writeResult prints res as tables (format ""), "json" or "csv", and draws it into
// plot if one is named.
func writeResult(streams IO, res result.Result, format, plot string) error {
	var err error
	switch format {
	case "json":
		err = report.JSON(streams.Out, res)
	case "csv":
		err = result.CSV(streams.Out, res)
	default:
		result.Print(streams.Out, res)
	}
	if err != nil || plot == "" {
		return err
	}
	if err := chart.Plot(res, plot); err != nil {
		return err
	}
	if format == "" {
		fmt.Fprintf(streams.Err, "plot written to %s\n", plot)
	}
	return nil
}

// addMoEFlags binds the MoE layer's flags (dispatch and combine, for run and bench).
// matmulFlags are the fused operations' shape's flags (addMatmulFlags).
var matmulFlags = []string{"m", "n", "k"}

// addMatmulFlags binds the fused operations' shape to --m, --n and --k, d's by
// default.
func addMatmulFlags(f *pflag.FlagSet, mm *symmem.Matmul, d symmem.Matmul) {
	f.IntVar(&mm.M, "m", d.M, "fused operations: rows of C, split over the ranks (bench: the largest M of its sweep)")
	f.IntVar(&mm.N, "n", d.N, "fused operations: columns of C")
	f.IntVar(&mm.K, "k", d.K, "fused operations: the inner dimension (A's columns, B's rows)")
}

// moeFlags are the MoE layer's flags (addMoEFlags).
var moeFlags = []string{"tokens", "hidden", "topk", "experts", "seed", "skew"}

// typedZeroTokens refuses a --tokens 0 typed on the command line: 0 is the flag's
// unset value, "the backend's default", which a typed 0 silently ran (256 tokens) where
// --hidden 0 is refused. In a config file (configs/default.yaml lists tokens: 0) or
// the environment it keeps meaning the default.
func typedZeroTokens(fs *pflag.FlagSet) error {
	if f := fs.Lookup("tokens"); config.OnCommandLine(f) && f.Value.String() == "0" {
		return usage("%s 0: give 1..%d tokens per rank (leave --tokens out for the default)", setting.Tokens, symmem.MaxTokens)
	}
	return nil
}

func addMoEFlags(f *pflag.FlagSet, m *symmem.MoE) {
	d := symmem.DefaultMoE()
	f.IntVar(&m.Tokens, "tokens", 0, fmt.Sprintf("dispatch/combine: tokens per rank (default %d on GPUs, %d on the CPU backend)", symmem.DefaultTokens(symmem.NVSHMEM), symmem.DefaultTokens(symmem.CPU)))
	f.IntVar(&m.Hidden, "hidden", d.Hidden, "dispatch/combine: elements per token")
	f.IntVar(&m.TopK, "topk", d.TopK, "dispatch/combine: experts per token")
	f.IntVar(&m.Experts, "experts", d.Experts, "dispatch/combine: experts, spread evenly over the ranks")
	f.Uint64Var(&m.Seed, "seed", d.Seed, "dispatch/combine: seed of the routing")
	f.Float64Var(&m.Skew, "skew", 0, "dispatch/combine: 0 routes uniformly; s > 0 draws expert e with weight 1/(e+1)^s")
}

// algosOf lists the --algo values of op.
func algosOf(op string) []string {
	for _, o := range operations() {
		if o.Name == op {
			return o.Algos
		}
	}
	return nil
}
