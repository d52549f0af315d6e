package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// ShowOptions are `symmem bench show`'s settings.
type ShowOptions struct {
	File string
	Plot string
	CSV  bool
}

func newCmdBenchShow(streams IO) *cobra.Command {
	opts := &ShowOptions{}
	cmd := &cobra.Command{
		Use:   "show RESULT.json",
		Short: "Print a saved `bench --json` result as tables (or CSV), and plot it",
		Long: `Show prints a saved result the way bench printed it. The file must be a bench --json
result (exit 2 otherwise); a result whose checks failed is printed and then exits 3.`,
		Example: `  symmem bench --json > h200.json
  symmem bench show h200.json --plot h200.svg`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage("bench show takes one file: symmem bench show RESULT.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return runBenchShow(cmd.Context(), opts, streams)
		},
	}
	cmd.Flags().StringVar(&opts.Plot, "plot", "", "draw bandwidth against size into FILE (.svg or .png)")
	cmd.Flags().BoolVar(&opts.CSV, "csv", false, "print CSV instead of tables")
	cmd.ValidArgsFunction = completeResults(1)
	cmd.RegisterFlagCompletionFunc("plot", completeFiles("svg", "png"))
	return cmd
}

func runBenchShow(ctx context.Context, opts *ShowOptions, streams IO) error {
	if err := checkPlot(opts.Plot); err != nil {
		return err
	}
	res, err := loadResult(ctx, opts.File)
	if err != nil {
		return err
	}
	format := ""
	if opts.CSV {
		format = "csv"
	}
	// A saved result is a file anyone may have written: its names and command line are
	// printed, not obeyed by the terminal.
	shown := streams
	shown.Out = input.Terminal(streams.Out)
	if err := writeResult(shown, res, format, opts.Plot); err != nil {
		return err
	}
	if f := res.Failures(); len(f) > 0 {
		return symmem.WithExitCode(symmem.ExitWrongResults, fmt.Errorf("%s holds a failed run; its figures are not to be trusted:\n  %s", opts.File, strings.Join(f, "\n  ")))
	}
	return nil
}

// CompareOptions are `symmem bench compare`'s settings.
type CompareOptions struct {
	Old, New  string
	Threshold string
	Alpha     float64
	JSON      bool
}

func newCmdBenchCompare(streams IO) *cobra.Command {
	opts := &CompareOptions{}
	cmd := &cobra.Command{
		Use:   "compare OLD.json[,OLD2.json...] NEW.json[,NEW2.json...]",
		Short: "Compare two `bench --json` results and fail on a regression",
		Long: fmt.Sprintf(`Compare matches rows by operation, implementation, size, pair and mode, and judges
the change of each row's time per operation by the runs each side holds, as benchstat
does: each run's median time is one sample, and the Mann-Whitney U test of
golang.org/x/perf/benchmath says whether the two sides' runs differ.

Runs, not repetitions: the repetitions of one run share its buffers and cores, while on
a CPU a whole run moves by 10-30%% from the next. Measure each side with bench --runs N
(each run starts fresh ranks and buffers), or give several result files a side,
comma-separated (old1.json,old2.json): their runs are pooled. The test needs %d runs a
side to tell two sides apart at all at --alpha %g, and more to single out one row among
many (%d a side for one row in 64). Where the runs cannot tell one row apart on its own,
compare says so once, under the table, with the runs a side that could.

--alpha is the chance of a false alarm over all rows together (the Benjamini-Hochberg
step over the rows' p-values), not per row: two results of the same build regress with
that chance at most. A row whose runs differ is a regression when it is slower by more
than --threshold, "faster" when it is faster by more, and "ok" within it; a row whose
runs do not differ is "~". With too few runs a side (one run a side: bench's default),
a change beyond --threshold is "unresolved": not called, and said so.

A row with wrong bytes on either side, a result that failed its checks, or a row present
in one file only is a failure: the numbers cannot be trusted or compared.

Exit status: 0 no regression (rows "unresolved" included: they are listed); 6 a
regression; 8 a failure (which wins over 6); 2 bad input.`, result.RunsToTell(result.DefaultAlpha), result.DefaultAlpha, result.RunsToSingleOut(result.DefaultAlpha, 64)),
		Example: "  symmem bench --runs 5 --json > old.json\n  # ... change, rebuild ...\n  symmem bench --runs 5 --json > new.json\n  symmem bench compare old.json new.json --threshold 5%\n  symmem bench compare a1.json,a2.json,a3.json b1.json,b2.json,b3.json",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usage("bench compare takes two files: symmem bench compare OLD.json NEW.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Old, opts.New = args[0], args[1]
			return runBenchCompareCmd(cmd.Context(), opts, streams)
		},
	}
	cmd.Flags().StringVar(&opts.Threshold, "threshold", "5%", "largest tolerated slowdown, with its unit (5%)")
	cmd.Flags().Float64Var(&opts.Alpha, "alpha", result.DefaultAlpha, "chance of a false alarm over all rows together (0 < alpha < 1)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the comparison as JSON on stdout")
	cmd.ValidArgsFunction = completeResults(2)
	return cmd
}

func runBenchCompareCmd(ctx context.Context, opts *CompareOptions, streams IO) error {
	th, err := parsePercent(opts.Threshold)
	if err != nil {
		return usage("%s %q: %v", setting.Threshold, opts.Threshold, err)
	}
	if !(opts.Alpha > 0 && opts.Alpha < 1) {
		return usage("%s %g: give the chance of a false alarm over all rows, above 0 and below 1, such as %g", setting.Alpha, opts.Alpha, result.DefaultAlpha)
	}
	oldNames, err := runNames(opts.Old)
	if err != nil {
		return err
	}
	newNames, err := runNames(opts.New)
	if err != nil {
		return err
	}
	old, err := loadRuns(ctx, oldNames)
	if err != nil {
		return err
	}
	cur, err := loadRuns(ctx, newNames)
	if err != nil {
		return err
	}
	return runBenchCompare(streams, [2]string{opts.Old, opts.New}, old, cur, result.CompareOptions{ThresholdPct: th, Alpha: opts.Alpha, Words: flagWords}, opts.JSON)
}

// runNames splits one side of a comparison, a result or several runs of one sweep
// (comma-separated), into its files.
func runNames(arg string) ([]string, error) {
	names := strings.Split(arg, ",")
	if slices.Contains(names, "") {
		return nil, usage("bench compare %q has an empty file name (a stray comma?): give runs as A.json,B.json", arg)
	}
	return names, nil
}

// loadRuns reads one side of a comparison and pools its runs into one.
func loadRuns(ctx context.Context, names []string) (result.Result, error) {
	var runs []result.Result
	for _, name := range names {
		res, err := loadResult(ctx, name)
		if err != nil {
			return res, err
		}
		runs = append(runs, res)
	}
	res, err := result.Pool(runs, names)
	if err != nil {
		return res, usage("%v", err)
	}
	return res, nil
}

// CompareReport is what `bench compare --json` prints.
type CompareReport struct {
	Old          string   `json:"old"`
	New          string   `json:"new"`
	ThresholdPct float64  `json:"threshold_pct"`
	Alpha        float64  `json:"alpha"`
	Failures     []string `json:"failures,omitempty"`
	// Notes say where the two runs were not made alike (backend, ranks, iterations).
	Notes       []string         `json:"notes,omitempty"`
	Rows        []result.Compare `json:"rows"`
	Regressions int              `json:"regressions"`
	// Unresolved counts the rows whose change beyond the threshold the runs given
	// cannot separate from between-run variation.
	Unresolved int `json:"unresolved"`
	// Reach is what the runs can decide over these rows, and Limit says what they
	// cannot, where they cannot tell one row apart on its own.
	Reach result.Reach `json:"reach"`
	Limit string       `json:"limit,omitempty"`
	OK    bool         `json:"ok"`
}

func runBenchCompare(streams IO, files [2]string, old, cur result.Result, o result.CompareOptions, asJSON bool) error {
	// Before any row: sweeps of other shapes have no rows to match.
	if err := result.SameShape(old, cur); err != nil {
		return usage("%v", err)
	}
	th := o.ThresholdPct
	rep := CompareReport{Old: files[0], New: files[1], ThresholdPct: th, Alpha: o.Alpha, Rows: result.CompareResults(old, cur, o)}
	rep.Reach = result.ReachOfRows(rep.Rows, o.Alpha)
	rep.Limit = rep.Reach.Say(o.Words)
	for i, res := range []result.Result{old, cur} {
		// Its rows too: a file whose "ok" says true while a row holds wrong bytes (edited
		// by hand, or joined from several) has failed all the same.
		if f := res.Failures(); len(f) > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s failed its checks: %s", files[i], strings.Join(f, "; ")))
		}
		if res.Incomplete != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s is %s: the rows it lacks are not compared", files[i], res.Incomplete))
		}
	}
	rep.Notes = append(rep.Notes, differences(old.Header, cur.Header)...)
	failed, same := 0, 0
	for _, c := range rep.Rows {
		if c.Failed() {
			failed++
		}
		switch c.Verdict {
		case result.VerdictRegression:
			rep.Regressions++
		case result.VerdictUnresolved:
			rep.Unresolved++
		case result.VerdictSame:
			same++
		}
	}
	rep.OK = failed == 0 && len(rep.Failures) == 0 && rep.Regressions == 0
	runs := fmt.Sprintf("%d and %d runs a side", old.Header.Spec.RunCount(), cur.Header.Spec.RunCount())
	if asJSON {
		if err := report.JSON(streams.Out, rep); err != nil {
			return err
		}
	} else {
		printCompare(streams.Out, rep.Rows)
		for _, f := range rep.Failures {
			report.Note(streams.Out, "FAILED: "+f)
		}
		for _, n := range rep.Notes {
			report.Note(streams.Out, "note: "+n)
		}
		if rep.Limit != "" {
			report.Note(streams.Out, rep.Limit)
		}
		if rep.Unresolved > 0 {
			report.Note(streams.Out, fmt.Sprintf("unresolved: %d of %d rows changed by more than %.1f%%: not called", rep.Unresolved, len(rep.Rows), th))
		}
	}
	switch {
	case failed > 0 || len(rep.Failures) > 0:
		return symmem.WithExitCode(symmem.ExitCompareFailed, fmt.Errorf("%d of %d rows cannot be compared (wrong data or missing on one side)%s: fix the failing run before comparing speed",
			failed, len(rep.Rows), plural(len(rep.Failures), ", and a result failed its checks")))
	case rep.Regressions > 0:
		return symmem.WithExitCode(symmem.ExitRegression, fmt.Errorf("%d of %d rows regressed by more than %.1f%%, told apart from between-run variation by %s (alpha %g over all rows)", rep.Regressions, len(rep.Rows), th, runs, o.Alpha))
	}
	if !asJSON {
		line := fmt.Sprintf("no regression beyond %.1f%% in %d rows (time per operation; %s, alpha %g over all rows)", th, len(rep.Rows), runs, o.Alpha)
		switch {
		case same > 0 && rep.Reach.Blind():
			line += fmt.Sprintf("; %d rows ~ (within %.1f%%)", same, th)
		case same > 0:
			line += fmt.Sprintf("; %d rows ~ (their runs are not told apart)", same)
		}
		report.Note(streams.Out, line)
	}
	return nil
}

// printCompare shows the rows compared: one change each, in time per operation, the
// test's p-value and runs, and below the table why each row that is not ok is what it is.
func printCompare(w io.Writer, rows []result.Compare) {
	t := report.Table{Header: []string{"row", "old us", "new us", "time", "p", "runs", "verdict"}}
	var whys []string
	for _, c := range rows {
		cells := []string{c.Label, "-", "-", "-", "-", "-", c.Verdict}
		if c.OldUS > 0 {
			cells[1] = fmtUS(c.OldUS)
		}
		if c.NewUS > 0 {
			cells[2] = fmtUS(c.NewUS)
		}
		if c.OldUS > 0 && c.NewUS > 0 {
			cells[3] = fmt.Sprintf("%+.1f%%", c.ChangePct)
		}
		if c.P != nil {
			cells[4] = strconv.FormatFloat(*c.P, 'g', 2, 64)
		}
		if c.OldRuns > 0 || c.NewRuns > 0 {
			cells[5] = fmt.Sprintf("%d+%d", c.OldRuns, c.NewRuns)
		}
		t.Rows = append(t.Rows, cells)
		if c.Why != "" {
			whys = append(whys, fmt.Sprintf("  %s: %s", c.Label, c.Why))
		}
	}
	t.Print(w)
	for _, why := range whys {
		report.Note(w, why)
	}
}

// fmtUS shows a time as the bench tables do.
func fmtUS(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// differences lists how two results' runs were set up differently: their figures may
// differ for that reason alone.
func differences(a, b result.Header) []string {
	var out []string
	note := func(what string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			out = append(out, fmt.Sprintf("%s differs: %v in the old result, %v in the new", what, x, y))
		}
	}
	note("backend", a.Backend, b.Backend)
	note("ranks", a.NProc, b.NProc)
	note("GPUs", a.GPUs, b.GPUs)
	note("iterations per repetition", a.Spec.Iters, b.Spec.Iters)
	note("warm-ups", a.Spec.Warmup, b.Spec.Warmup)
	note("clock", a.Clock, b.Clock)
	for _, name := range slices.Sorted(maps.Keys(b.Kernels)) {
		if k, ok := a.Kernels[name]; ok && (k.Source != b.Kernels[name].Source || k.Triton != b.Kernels[name].Triton) {
			out = append(out, fmt.Sprintf("%s's kernels differ: built from sources %s in the old result, %s in the new", name, k.Build(), b.Kernels[name].Build()))
		}
	}
	return out
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
	if err != nil || !(v >= 0 && v <= 1000) { // also refuses NaN
		return 0, fmt.Errorf("want a percentage from 0%% to 1000%%, such as 5%%")
	}
	return v, nil
}

// loadResult reads a saved `bench --json` result; a file that is missing, unreadable or
// not such a result is bad input.
// loadResult reads and checks a `bench --json` file; a signal (ctx) stops it while it
// parses: a file of tens of megabytes takes seconds.
func loadResult(ctx context.Context, file string) (result.Result, error) {
	const give = "give a result that `symmem bench --json > FILE` wrote"
	if file == "" {
		return result.Result{}, usage("an empty file name; %s", give)
	}
	b, err := input.Read(file, result.MaxFileBytes)
	var pe *fs.PathError
	switch {
	case errors.Is(err, input.ErrStopped):
		return result.Result{}, err // the user stopped it: nothing to fix
	case errors.Is(err, fs.ErrNotExist):
		return result.Result{}, usage("%s: no such file; %s", file, give)
	case errors.As(err, &pe):
		return result.Result{}, usage("%s: cannot read it (%v)", file, pe.Err)
	case err != nil:
		return result.Result{}, usage("%v; %s", err, give) // a directory, a device, too large
	case len(bytes.TrimSpace(b)) == 0:
		return result.Result{}, usage("%s is empty; %s", file, give)
	}
	res, err := result.ParseContext(ctx, file, b)
	switch {
	case errors.Is(err, context.Canceled):
		return res, err
	case errors.Is(err, result.ErrNotJSON):
		// Say so, rather than encoding/json's "invalid character 'o' in literal null".
		return result.Result{}, usage("%s is not JSON; %s", file, give)
	case err != nil:
		return res, usage("%v", err)
	}
	return res, nil
}
