package result

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// MaxFileBytes bounds the `bench --json` files Load reads: far above any sweep's (a
// --matrix sweep of 8 GPUs writes some tens of megabytes), far below what would
// exhaust memory.
const MaxFileBytes = 1 << 30

// Load reads a `bench --json` file and checks that it is one.
func Load(file string) (Result, error) {
	b, err := input.Read(file, MaxFileBytes)
	if err != nil {
		return Result{}, err
	}
	return Parse(file, b)
}

// ErrNotJSON is ParseContext's error for bytes that are no JSON at all.
var ErrNotJSON = errors.New("not JSON")

// ParseContext is Parse that returns when ctx is done (its cause, such as a signal):
// encoding/json cannot be stopped, and tens of megabytes take it seconds, so the
// parse goes on in the background and its result is dropped. Bytes that are no
// JSON at all are ErrNotJSON.
func ParseContext(ctx context.Context, file string, b []byte) (Result, error) {
	type parsed struct {
		r   Result
		err error
	}
	done := make(chan parsed, 1)
	go func() {
		if !json.Valid(b) {
			done <- parsed{err: fmt.Errorf("%s: %w", file, ErrNotJSON)}
			return
		}
		r, err := Parse(file, b)
		done <- parsed{r, err}
	}()
	select {
	case p := <-done:
		return p.r, p.err
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// Parse checks that b, read from file, is a `bench --json` result and returns it.
func Parse(file string, b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		// encoding/json's "cannot unmarshal array into Go value of type result.Result"
		// -> "it holds a list where bench --json writes an object".
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			where := "it"
			if te.Field != "" {
				where = te.Field
			}
			what := setting.Textf("%s where bench %s writes %s", jsonKind(te.Value), setting.JSON, goKind(te.Type.Kind()))
			if num, ok := strings.CutPrefix(te.Value, "number "); ok {
				what = misfit(num, te.Type.Kind())
			}
			return r, setting.Errorf("%s is not a symmem bench %s result: %s holds %s; write it again with symmem bench %s", file, setting.JSON, where, what, setting.JSON)
		}
		return r, setting.Errorf("%s is not a symmem bench %s file: %v", file, setting.JSON, err)
	}
	if err := r.Validate(); err != nil {
		return r, setting.Errorf("%s is not a symmem bench %s result: %v; write it again with symmem bench %s", file, setting.JSON, err, setting.JSON)
	}
	return r, nil
}

// jsonKind names the kind of JSON value encoding/json's type errors call v.
func jsonKind(v string) string {
	switch v {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return "a number" // "number", "number 1.5", "number -1"
}

// misfit says why the number num does not fit a field of kind k, where encoding/json
// only says that it does not ("number 1e999" into a float64).
func misfit(num string, k reflect.Kind) setting.Text {
	switch k {
	case reflect.Float32, reflect.Float64:
		return setting.Textf("%s, out of range for a number", num)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var ne *strconv.NumError
		switch _, err := strconv.ParseInt(num, 10, 64); {
		case errors.As(err, &ne) && ne.Err == strconv.ErrRange, err == nil && !strings.HasPrefix(num, "-"):
			return setting.Textf("%s, out of range for a whole number", num)
		case err == nil:
			return setting.Textf("%s where bench %s writes a whole number of 0 or more", num, setting.JSON)
		}
		return setting.Textf("%s where bench %s writes a whole number", num, setting.JSON)
	}
	return setting.Textf("%s where bench %s writes %s", num, setting.JSON, goKind(k))
}

// goKind names, for people, the JSON a field of kind k takes.
func goKind(k reflect.Kind) string {
	switch k {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a number"
}

// MaxRanks is the most ranks a job may have (--nproc, or an external launcher's world).
const MaxRanks = 1024

// MaxIters bounds --iters and --warmup: the latency ping-pong keeps a clock stamp per
// round (50 rounds per iteration) on the heap, per-operation times take 8 bytes each,
// and far larger counts overflowed those sizes.
const MaxIters = 1_000_000

// Validate checks that r has the shape `bench --json` writes, and numbers it can write:
// a hand-edited or truncated file is refused here rather than shown or compared as if
// it had been measured.
func (r Result) Validate() error {
	h := r.Header
	switch {
	case h.Backend == "":
		return errors.New("header.backend is missing")
	case h.NProc < 2:
		return fmt.Errorf("header.nproc is %d, a bench has at least 2 ranks", h.NProc)
	case h.NProc > MaxRanks:
		return fmt.Errorf("header.nproc is %d: bench runs 2 to %d ranks", h.NProc, MaxRanks)
	case len(h.Spec.Ops) == 0:
		return errors.New("header.spec.ops is empty")
	// No upper bound on iters and warmup: before MaxIters, bench took more (where the
	// heap allowed), and such results must still show and compare.
	case h.Spec.Iters < 1:
		return fmt.Errorf("header.spec.iters is %d: bench times at least 1 operation per repetition", h.Spec.Iters)
	case h.Spec.Warmup < 0:
		return fmt.Errorf("header.spec.warmup is %d: bench warms up with 0 or more operations", h.Spec.Warmup)
	case h.Spec.Reps < 1:
		return fmt.Errorf("header.spec.reps is %d: bench makes at least 1 repetition per row", h.Spec.Reps)
	case h.Spec.Runs < 0 || h.Spec.Runs > MaxRuns:
		return fmt.Errorf("header.spec.runs is %d: bench makes 1 to %d runs", h.Spec.Runs, MaxRuns)
	case len(r.Rows) == 0 && r.Incomplete == nil:
		return errors.New("it has no rows")
	}
	seen := map[RowKey]int{}
	for i, row := range r.Rows {
		if row.Op == "" || row.Impl == "" || row.Size <= 0 && !kindOf(row.Op).sizeless { // a barrier moves no size
			return fmt.Errorf("row %d has no op, impl or size", i+1)
		}
		// The tables show the operations they know: a row of another would be left out
		// of them without a word.
		if !ops.Op(row.Op).Known() {
			return fmt.Errorf("row %d (%s): op %q: bench measures %s", i+1, row.Label(), row.Op, ops.Names(ops.All()))
		}
		if err := row.validate(h); err != nil {
			return fmt.Errorf("row %d (%s): %v", i+1, row.Label(), err)
		}
		// bench merges the ranks' reports of a row into one: a second row of the same
		// measurement would leave compare to match one of the two, and pass the other's
		// wrong bytes over.
		if j, ok := seen[row.Key()]; ok {
			return fmt.Errorf("rows %d and %d are both %s: bench writes one row per measurement", j+1, i+1, row.Label())
		}
		seen[row.Key()] = i
	}
	return nil
}

// validate checks the numbers of one row against what bench writes: a time per
// repetition, each positive (no clock reads 0 for a timed window); their median, least
// and greatest; counts and rates of 0 or more; ranks of the job. Latency rows have no
// bandwidth, failed rows their wrong bytes and times alike, so neither is refused.
func (row Row) validate(h Header) error {
	if want := h.Spec.Reps * h.Spec.RunCount(); len(row.TimesUS) != want {
		if h.Spec.RunCount() > 1 {
			return fmt.Errorf("times_us holds %d times: bench writes one per repetition of each run, and header.spec.reps is %d, header.spec.runs %d", len(row.TimesUS), h.Spec.Reps, h.Spec.Runs)
		}
		return fmt.Errorf("times_us holds %d times: bench writes one per repetition, and header.spec.reps is %d", len(row.TimesUS), h.Spec.Reps)
	}
	for j, t := range row.TimesUS {
		if !(t > 0) || math.IsInf(t, 0) {
			return fmt.Errorf("times_us[%d] is %g: bench writes a positive time per operation", j, t)
		}
	}
	if !(row.MinUS > 0 && row.MinUS <= row.MedUS && row.MedUS <= row.MaxUS) || math.IsInf(row.MaxUS, 0) {
		return fmt.Errorf("time_us %g, min_us %g, max_us %g: bench writes the median, least and greatest of times_us", row.MedUS, row.MinUS, row.MaxUS)
	}
	switch {
	case row.Wrong < 0:
		return fmt.Errorf("wrong is %d: bench counts wrong bytes from 0", row.Wrong)
	case !(row.GBps >= 0):
		return fmt.Errorf("gbps is %g: bench writes a bandwidth of 0 or more", row.GBps)
	case !(row.BusGBps >= 0):
		return fmt.Errorf("busbw is %g: bench writes a bandwidth of 0 or more", row.BusGBps)
	case kindOf(row.Op).everyRank && row.Ranks != h.NProc:
		return fmt.Errorf("ranks is %d: a collective takes every rank, and header.nproc is %d", row.Ranks, h.NProc)
	case !kindOf(row.Op).everyRank && row.Ranks != 0:
		return fmt.Errorf("ranks is %d: %s is between two ranks (src, dst); bench writes ranks for collectives only", row.Ranks, row.Op)
	case !row.Collective() && (row.Src < 0 || row.Dst < 0 || row.Src >= h.NProc || row.Dst >= h.NProc || row.Src == row.Dst):
		return fmt.Errorf("src %d, dst %d: bench pairs two different ranks from 0 to %d (header.nproc is %d)", row.Src, row.Dst, h.NProc-1, h.NProc)
	}
	if err := row.derived(); err != nil {
		return err
	}
	if w := row.FirstWrong; w != nil && (row.Wrong == 0 || w.Rank < 0 || w.Rank >= h.NProc || w.Byte < 0) {
		return fmt.Errorf("first_wrong names rank %d, byte %d, on a row of %d wrong bytes: bench names the first of a row's wrong bytes, on a rank from 0 to %d", w.Rank, w.Byte, row.Wrong, h.NProc-1)
	}
	if p := row.PerIter; p != nil {
		if p.N < 1 {
			return fmt.Errorf("per_iter.n is %d: bench writes per-operation statistics of at least 1 operation", p.N)
		}
		if !(p.P50US >= 0 && p.P99US >= 0 && p.MaxUS >= 0) {
			return fmt.Errorf("per_iter: p50_us %g, p99_us %g, max_us %g: bench writes times of 0 or more", p.P50US, p.P99US, p.MaxUS)
		}
	}
	return nil
}

// derived checks the figures bench derives from times_us (their median, least and
// greatest, the bandwidths) against what they derive to: a hand-edited gbps or time_us
// would show in the tables, and time_us in compare's verdict, while times_us said
// otherwise.
func (row Row) derived() error {
	want := row
	if row.Link != nil {
		l := *row.Link
		want.Link = &l
	}
	want.Finish()
	// Within rounding: results written before figures were rounded (TimeDecimals)
	// carry them to 17 digits, and their times rounded move a rate by up to 2e-5 of it.
	near := func(a, b float64) bool {
		return math.Abs(a-b) <= 5e-5*math.Max(math.Abs(a), math.Abs(b)) || math.Abs(a-b) <= 0.5e-3
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"time_us", row.MedUS, want.MedUS}, {"min_us", row.MinUS, want.MinUS}, {"max_us", row.MaxUS, want.MaxUS},
		{"gbps", row.GBps, want.GBps}, {"busbw", row.BusGBps, want.BusGBps},
	} {
		if !near(f.got, f.want) {
			g, w := apart(f.got, f.want)
			return fmt.Errorf("%s is %s where times_us gives %s: bench derives it from times_us", f.name, g, w)
		}
	}
	if row.Link != nil && !near(row.Link.WireGBps, want.Link.WireGBps) {
		g, w := apart(row.Link.WireGBps, want.Link.WireGBps)
		return fmt.Errorf("link.wire_gbps is %s where times_us and link.wire_per_byte give %s: bench derives it from them", g, w)
	}
	return nil
}

// apart formats a and b with the fewest significant digits (6 at least) that tell
// them apart.
func apart(a, b float64) (string, string) {
	for p := 6; ; p++ {
		x, y := strconv.FormatFloat(a, 'g', p, 64), strconv.FormatFloat(b, 'g', p, 64)
		if x != y || p >= 17 {
			return x, y
		}
	}
}

// Failures lists what makes r untrustworthy: rows with wrong bytes, rows never checked,
// a result marked failed. Empty when r passed.
func (r Result) Failures() []string {
	out := r.RowFailures()
	// An incomplete result is marked not ok for its missing rows, not for what its
	// rows hold.
	if !r.OK && len(out) == 0 && r.Incomplete == nil {
		out = append(out, "the result is marked failed (\"ok\": false)")
	}
	return out
}

// RowFailures lists the rows whose data was wrong or never checked.
func (r Result) RowFailures() []string {
	var out []string
	for _, row := range r.Rows {
		switch {
		case row.Wrong > 0 && row.FirstWrong != nil:
			out = append(out, fmt.Sprintf("%s: %d wrong bytes (%s)", row.Label(), row.Wrong, row.FirstWrong))
		case row.Wrong > 0:
			out = append(out, fmt.Sprintf("%s: %d wrong bytes", row.Label(), row.Wrong))
		case !row.Checked:
			out = append(out, fmt.Sprintf("%s: no rank checked its data", row.Label()))
		}
	}
	return out
}

// Label names a row for people: op, implementation, size and pair.
func (r Row) Label() string { return r.Key().Label() }

// Label names a measurement for people: op, implementation, size and pair.
func (k RowKey) Label() string {
	l := fmt.Sprintf("%s %s %s %s", k.Op, k.Impl, units.FormatSize(k.Size), k.PairLabel())
	if ops.Op(k.Op).Variants("") != nil {
		// A variant is a row of its own (barrier-all, sync-all; fence, quiet); the
		// collectives' algorithms are an implementation's choice, not the row's name.
		l = fmt.Sprintf("%s %s %s %s %s", k.Op, k.Impl, k.Algo, units.FormatSize(k.Size), k.PairLabel())
		if k.Size == 0 {
			l = fmt.Sprintf("%s %s %s %s", k.Op, k.Impl, k.Algo, k.PairLabel())
		}
	}
	if k.RedOp != "" {
		l += " " + k.RedOp
	}
	if k.Overlap > 1 {
		l += fmt.Sprintf(" overlap %d", k.Overlap)
	}
	if k.Graph {
		l += " graph"
	}
	return l
}

// MaxRuns bounds bench --runs and the runs a result may hold (pooled ones too).
const MaxRuns = 1000

// Pool joins several results of one sweep into one whose rows carry every run's
// repetitions, run by run (BenchSpec.Runs): compare takes each run's median as one
// sample, so that what shifts from run to run (where the buffers landed, which cores,
// the machine's neighbours), which the repetitions of one run never see, is measured.
// Every result must have the same rows and repetitions per run; one that failed its
// checks makes the pool fail too.
func Pool(runs []Result, names []string) (Result, error) {
	if len(runs) == 1 {
		return runs[0], nil
	}
	out := runs[0]
	out.Rows = nil
	keys := map[RowKey]int{}
	for _, row := range runs[0].Rows {
		keys[row.Key()] = len(out.Rows)
		row.TimesUS = slices.Clone(row.TimesUS)
		out.Rows = append(out.Rows, row)
	}
	builds := map[string]int{} // the first run of each user's implementation
	for i, run := range runs {
		for name, k := range run.Header.Kernels {
			j, ok := builds[name]
			if !ok {
				builds[name] = i
				continue
			}
			if o := runs[j].Header.Kernels[name]; o.Source != k.Source || o.Triton != k.Triton {
				return out, fmt.Errorf("%s ran %s built from sources %s, %s from %s: pool runs of one build", names[i], name, k.Build(), names[j], o.Build())
			}
		}
	}
	for i, run := range runs[1:] {
		if len(run.Rows) != len(out.Rows) {
			return out, fmt.Errorf("%s has %d rows, %s has %d: pool runs of one sweep", names[i+1], len(run.Rows), names[0], len(out.Rows))
		}
		if run.Header.Spec.Reps != out.Header.Spec.Reps {
			return out, setting.Errorf("%s has %d repetitions a run, %s has %d: pool runs of one sweep (one %s)", names[i+1], run.Header.Spec.Reps, names[0], out.Header.Spec.Reps, setting.Reps)
		}
		for _, row := range run.Rows {
			at, ok := keys[row.Key()]
			if !ok {
				return out, fmt.Errorf("%s has %s, %s does not: pool runs of one sweep", names[i+1], row.Label(), names[0])
			}
			p := &out.Rows[at]
			p.TimesUS = append(p.TimesUS, row.TimesUS...)
			p.Wrong += row.Wrong
			p.Checked = p.Checked && row.Checked
			if p.FirstWrong == nil {
				p.FirstWrong = row.FirstWrong
			}
		}
		out.OK = out.OK && run.OK
		out.Header.Spec.Runs = out.Header.Spec.RunCount() + run.Header.Spec.RunCount()
	}
	if out.Header.Spec.Runs > MaxRuns {
		return out, fmt.Errorf("the files hold %d runs together: pool at most %d", out.Header.Spec.Runs, MaxRuns)
	}
	for i := range out.Rows {
		out.Rows[i].Finish()
	}
	return out, nil
}
