package result

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"golang.org/x/perf/benchmath"

	"github.com/symmem/symmem/internal/setting"
)

// Verdicts of `bench compare`, one per row.
const (
	// VerdictSame: the runs of the two sides are not told apart (benchstat's "~").
	VerdictSame = "~"
	// VerdictOK: the sides differ, by no more than the threshold.
	VerdictOK         = "ok"
	VerdictFaster     = "faster"
	VerdictRegression = "REGRESSION"
	// VerdictUnresolved: a change beyond the threshold that the runs given cannot
	// separate from what moves between runs (too few of them a side): not called.
	VerdictUnresolved = "unresolved"
	VerdictWrong      = "WRONG"
	VerdictMissing    = "MISSING"
	// VerdictUnmeasured is a row an incomplete result never reached: not a failure.
	VerdictUnmeasured = "not measured"
)

// DefaultAlpha is the false-alarm rate compare allows over all the rows of a
// comparison together (bench compare --alpha).
const DefaultAlpha = 0.05

// CompareOptions are what a comparison holds changes to: the largest change, in
// percent of time per operation, that is no regression however certain, and the rate
// of false alarms allowed over all rows (the Benjamini-Hochberg level).
type CompareOptions struct {
	ThresholdPct float64
	Alpha        float64
	// Words name the settings a row's Why speaks of (the CLI's flags).
	Words setting.Words
}

// Compare is one row of `bench compare`: the row's key (as in a result), its time per
// operation on each side (the median of its runs' medians) and one change, in time.
type Compare struct {
	Label string `json:"label"` // the row for people: put memcpy 1M 0->1
	RowKey
	// OldUS and NewUS are the medians of the runs' median times per operation (0 where
	// a side has none); OldRuns and NewRuns how many runs each side holds.
	OldUS   float64 `json:"old_us,omitempty"`
	NewUS   float64 `json:"new_us,omitempty"`
	OldRuns int     `json:"old_runs,omitempty"`
	NewRuns int     `json:"new_runs,omitempty"`
	// ChangePct is the change of time: positive slower, negative faster.
	ChangePct float64 `json:"change_pct"`
	// P is the Mann-Whitney U test's p-value of the runs' medians, where the runs could
	// tell the sides apart at all; Cut the level it was held to after the
	// Benjamini-Hochberg step over all rows tested (a row is told apart when P <= Cut).
	P       *float64 `json:"p,omitempty"`
	Cut     float64  `json:"p_cut,omitempty"`
	Verdict string   `json:"verdict"`
	Why     string   `json:"why,omitempty"`
}

// Failed says whether the row makes the comparison fail outright (wrong data or a row
// on one side only), as opposed to a regression.
func (c Compare) Failed() bool { return c.Verdict == VerdictWrong || c.Verdict == VerdictMissing }

func compareOf(r Row) Compare { return Compare{Label: r.Label(), RowKey: r.Key()} }

// CompareResults matches rows by their RowKey and judges each change by the runs each
// side holds (BenchSpec.Runs; several result files pooled), never by the repetitions
// of one run alone: those share the run's buffers and cores, while a CPU sweep's rows
// shift by 10-30% from one run to the next. A row's samples are its runs' median
// times; golang.org/x/perf/benchmath's Mann-Whitney U test (what benchstat uses) says
// how likely runs as far apart are from one distribution, and the Benjamini-Hochberg
// step holds all rows together to o.Alpha false alarms, so that two results of the same
// build have that chance of any regression at all, not of one per row. A row told
// apart whose change is beyond o.ThresholdPct is a regression (or faster); one told
// apart within it is ok; one not told apart is "~". Where a side holds too few runs for
// the test ever to tell them apart (one run a side), a change beyond the threshold is
// "unresolved": not called, and said so. A row with wrong bytes on either side, or
// present on one side only, is a failure, not a number to compare, unless the side
// that lacks it is incomplete (it never got there).
func CompareResults(old, cur Result, o CompareOptions) []Compare {
	if o.Alpha <= 0 {
		o.Alpha = DefaultAlpha
	}
	idx := map[RowKey]Row{}
	for _, r := range old.Rows {
		idx[r.Key()] = r
	}
	only := func(r Row, side string, lacking Result) Compare {
		c := compareOf(r)
		c.Verdict, c.Why = VerdictMissing, "only in the "+side+" result"
		if lacking.Incomplete != nil {
			c.Verdict, c.Why = VerdictUnmeasured, "the other result is incomplete: it ended before this row"
		}
		return c
	}
	seen := map[RowKey]bool{}
	var out []Compare
	for _, r := range cur.Rows {
		k := r.Key()
		seen[k] = true
		o, ok := idx[k]
		if !ok {
			out = append(out, only(r, "new", old))
			continue
		}
		out = append(out, measureRow(o.RunMedians(old.Header.Spec.Reps), r.RunMedians(cur.Header.Spec.Reps), o, r))
	}
	for _, r := range old.Rows {
		if !seen[r.Key()] {
			out = append(out, only(r, "old", cur))
		}
	}
	judge(out, o)
	return out
}

// measureRow fills in a row's figures and its test, leaving the verdict of a row that
// can be compared to judge, which sees every row's test.
func measureRow(oldRuns, newRuns []float64, o, r Row) Compare {
	c := compareOf(r)
	c.OldRuns, c.NewRuns = len(oldRuns), len(newRuns)
	switch {
	case o.Wrong > 0 || r.Wrong > 0:
		c.Verdict, c.Why = VerdictWrong, fmt.Sprintf("wrong bytes: %d old, %d new", o.Wrong, r.Wrong)
		return c
	case !o.Checked || !r.Checked:
		c.Verdict, c.Why = VerdictWrong, "data not checked on one side"
		return c
	case len(oldRuns) == 0 || len(newRuns) == 0:
		c.Verdict, c.Why = VerdictWrong, "no time on one side"
		return c
	}
	th := &benchmath.Thresholds{CompareAlpha: 1} // the cut is judge's, over all rows
	so := benchmath.NewSample(slices.Clone(oldRuns), th)
	sn := benchmath.NewSample(slices.Clone(newRuns), th)
	c.OldUS = Round(benchmath.AssumeNothing.Summary(so, 0.95).Center, TimeDecimals)
	c.NewUS = Round(benchmath.AssumeNothing.Summary(sn, 0.95).Center, TimeDecimals)
	if c.OldUS > 0 && c.NewUS > 0 {
		c.ChangePct = Round((c.NewUS/c.OldUS-1)*100, 2)
	}
	if MinP(len(oldRuns), len(newRuns)) < 1 {
		p := benchmath.AssumeNothing.Compare(so, sn).P
		c.P = &p
	}
	return c
}

// MinP is the smallest p-value compare's test (benchmath.AssumeNothing's Compare)
// gives samples of n1 and n2 runs: that of two sides with no value in common, every
// run of one faster than every run of the other. It is asked of the test itself, so
// that it stays what the verdicts are held to whatever the test computes (exactly for
// small samples, by an approximation for large ones).
func MinP(n1, n2 int) float64 {
	if n1 < 1 || n2 < 1 {
		return 1
	}
	key := [2]int{n1, n2}
	if p, ok := minPs.Load(key); ok {
		return p.(float64)
	}
	a, b := make([]float64, n1), make([]float64, n2)
	for i := range a {
		a[i] = float64(i)
	}
	for i := range b {
		b[i] = float64(n1 + i)
	}
	th := &benchmath.Thresholds{CompareAlpha: 1}
	p := benchmath.AssumeNothing.Compare(benchmath.NewSample(a, th), benchmath.NewSample(b, th)).P
	minPs.Store(key, p)
	return p
}

// minPs caches MinP by its sample sizes.
var minPs sync.Map

// RunsToTell is the fewest runs a side (as many on each) whose test can reach alpha at
// all: with them a row is told apart only where most rows change together (Reach).
func RunsToTell(alpha float64) int { return RunsToSingleOut(alpha, 1) }

// RunsToSingleOut is the fewest runs a side (as many on each) with which one row of
// rows can be told apart on its own: its p-value must be at most alpha/rows, the
// Benjamini-Hochberg level of the smallest p-value.
func RunsToSingleOut(alpha float64, rows int) int {
	n := 1
	for MinP(n, n) > alpha/float64(max(rows, 1)) && n < MaxRuns {
		n++
	}
	return n
}

// Reach is what the runs of a comparison can decide over its rows. The
// Benjamini-Hochberg step calls the k smallest of m p-values significant where the
// k-th is at most k/m x alpha, so with the test's least p-value LeastP one row is told
// apart on its own only where LeastP <= alpha/m, and otherwise only where Together
// rows or more are told apart at once; where LeastP > alpha, none ever is.
type Reach struct {
	// Rows are the rows measured on both sides, which the test holds together.
	Rows             int     `json:"rows"`
	OldRuns, NewRuns int     `json:"-"`
	Alpha            float64 `json:"-"`
	// LeastP is the least p-value the test gives these runs.
	LeastP float64 `json:"least_p"`
	// Together is the fewest rows, all as far apart as the runs allow, that the step
	// tells apart; 0 where no number of rows can be.
	Together int `json:"together"`
	// RunsForOne is the fewest runs a side that tell one row of Rows apart on its own.
	RunsForOne int `json:"runs_for_one"`
}

// ReachOf is what runs of oldRuns and newRuns a side can decide over rows rows.
func ReachOf(rows, oldRuns, newRuns int, alpha float64) Reach {
	r := Reach{Rows: rows, OldRuns: oldRuns, NewRuns: newRuns, Alpha: alpha, LeastP: MinP(oldRuns, newRuns), RunsForOne: RunsToSingleOut(alpha, rows)}
	if r.LeastP <= alpha {
		// The smallest k with LeastP <= k/rows x alpha (a hair under, for the float).
		r.Together = max(1, int(math.Ceil(r.LeastP*float64(rows)/alpha-1e-9)))
	}
	return r
}

// Blind says that no row can be told apart at all (too few runs a side).
func (r Reach) Blind() bool { return r.Together == 0 }

// Limited says that no row can be told apart on its own: only many together, or none.
func (r Reach) Limited() bool { return r.Rows > 0 && r.Together != 1 }

// Say says, in words, what r's runs cannot decide ("" where one row can be told apart
// on its own); words name the settings.
func (r Reach) Say(words setting.Words) string {
	runs := fmt.Sprintf("%d and %d runs a side", r.OldRuns, r.NewRuns)
	switch {
	case !r.Limited():
		return ""
	case r.Blind():
		more := ""
		if n := RunsToTell(r.Alpha); n < r.RunsForOne {
			more = fmt.Sprintf(" (%d a side tell rows apart only where %d or more of the %d change together)", n, ReachOf(r.Rows, n, n, r.Alpha).Together, r.Rows)
		}
		one := fmt.Sprintf("one row of %d", r.Rows)
		if r.Rows == 1 {
			one = "the row"
		}
		return words.Sprintf("%s cannot tell any row from between-run variation: the U test's least p-value for them is %.3g, above %s %g. Measure each side with bench %s %d or more to tell %s apart%s",
			runs, r.LeastP, setting.Alpha, r.Alpha, setting.Runs, r.RunsForOne, one, more)
	}
	return words.Sprintf("%s cannot tell one row of %d apart on its own: the U test's least p-value for them, %.3g, is above the %.2g one row must reach alone (%s %g over %d rows); only %d or more rows that change together are told apart. Measure each side with bench %s %d or more to tell one row apart",
		runs, r.Rows, r.LeastP, r.Alpha/float64(r.Rows), setting.Alpha, r.Alpha, r.Rows, r.Together, setting.Runs, r.RunsForOne)
}

// ReachOfRows is what the runs of a comparison's rows (CompareResults) can decide at
// alpha: of those measured on both sides, by the runs of the one whose runs can decide
// most (a comparison's rows all hold as many).
func ReachOfRows(rows []Compare, alpha float64) Reach {
	if alpha <= 0 {
		alpha = DefaultAlpha
	}
	n, best := 0, Compare{}
	for _, c := range rows {
		if !c.tested() {
			continue
		}
		n++
		if n == 1 || MinP(c.OldRuns, c.NewRuns) < MinP(best.OldRuns, best.NewRuns) {
			best = c
		}
	}
	if n == 0 {
		return Reach{Alpha: alpha}
	}
	return ReachOf(n, best.OldRuns, best.NewRuns, alpha)
}

// tested says that c was measured on both sides, and so held to the test.
func (c Compare) tested() bool { return c.OldRuns > 0 && c.NewRuns > 0 && !c.Failed() }

// judge gives every row that was measured on both sides its verdict: the
// Benjamini-Hochberg step over the rows' p-values sets the cut (the largest k with the
// k-th smallest p <= k/m x alpha, m the rows tested, makes p-values up to that one
// significant), then each row's change is held to it and to the threshold.
func judge(rows []Compare, o CompareOptions) {
	var ps []float64
	for _, c := range rows {
		if c.Verdict == "" && c.P != nil {
			ps = append(ps, *c.P)
		}
	}
	slices.Sort(ps)
	cut := 0.0 // nothing is significant unless the step finds a k
	for k := len(ps); k >= 1; k-- {
		if ps[k-1] <= float64(k)/float64(len(ps))*o.Alpha {
			cut = ps[k-1]
			break
		}
	}
	// What these runs cannot decide is said once, for all rows (Reach.Say), not in
	// every row's why.
	reach := ReachOfRows(rows, o.Alpha)
	for i := range rows {
		c := &rows[i]
		if c.Verdict != "" {
			continue
		}
		change, way := c.ChangePct, "slower"
		if change < 0 {
			way = "faster"
		}
		beyond := math.Abs(change) > o.ThresholdPct
		runs := fmt.Sprintf("%d+%d runs", c.OldRuns, c.NewRuns)
		if c.P == nil || MinP(c.OldRuns, c.NewRuns) > o.Alpha {
			c.Verdict = VerdictSame
			if beyond {
				c.Verdict = VerdictUnresolved
			}
			continue
		}
		c.Cut = cut
		told := *c.P <= cut
		pn := fmt.Sprintf("p=%.3g, %s", *c.P, runs)
		switch {
		case !told:
			c.Verdict = VerdictSame
			switch {
			case !beyond:
			case cut > 0:
				c.Why = fmt.Sprintf("%.1f%% %s, not told apart from between-run variation (%s; significant up to p=%.3g)", math.Abs(change), way, pn, cut)
			case !reach.Limited():
				// No row reached the step's first level: the smallest p must be at
				// most alpha/m.
				c.Why = fmt.Sprintf("%.1f%% %s, not told apart from between-run variation (%s; no row is significant: the smallest p must reach %.3g)", math.Abs(change), way, pn, o.Alpha/float64(reach.Rows))
			}
		case !beyond:
			c.Verdict = VerdictOK
		case change < 0:
			c.Verdict, c.Why = VerdictFaster, fmt.Sprintf("%.1f%% faster (%s)", -change, pn)
		default:
			c.Verdict, c.Why = VerdictRegression, fmt.Sprintf("%.1f%% slower (%s)", change, pn)
		}
	}
}

// SameShape says how two results were not made by the same sweep: another backend,
// number of ranks, set of operations or implementations, sizes or mode. Their rows
// cannot be matched one for one, and comparing them would call every row missing.
func SameShape(old, cur Result) error {
	a, b := old.Header, cur.Header
	set := func(s []string) string {
		c := slices.Clone(s)
		slices.Sort(c)
		return fmt.Sprint(c)
	}
	moe := func(h Header) string {
		if h.Spec.MoE == nil {
			return "none"
		}
		return fmt.Sprintf("%+v", *h.Spec.MoE)
	}
	matmul := func(h Header) string {
		if h.Spec.Matmul == nil {
			return "none"
		}
		return fmt.Sprintf("%+v", *h.Spec.Matmul)
	}
	for _, d := range []struct {
		what any // a string, or the setting.Name that sets it
		x, y any
	}{
		{"backend", a.Backend, b.Backend},
		{"ranks", a.NProc, b.NProc},
		{"ops", set(a.Spec.Ops), set(b.Spec.Ops)},
		{"impls", set(a.Spec.Impls), set(b.Spec.Impls)},
		{"sizes", sizesOf(a.Spec), sizesOf(b.Spec)},
		{"latency size", a.Spec.LatencySize, b.Spec.LatencySize},
		{setting.Bidir, a.Spec.Bidir, b.Spec.Bidir},
		{setting.Matrix, a.Spec.Matrix, b.Spec.Matrix},
		{setting.Overlap, max(a.Spec.Overlap, 1), max(b.Spec.Overlap, 1)},
		{setting.Graph, a.Spec.Graph, b.Spec.Graph},
		{"dtype", a.Spec.DType, b.Spec.DType},
		{setting.Algo, a.Spec.Algo, b.Spec.Algo},
		{setting.Root, a.Spec.Root, b.Spec.Root},
		{"MoE layer", moe(a), moe(b)},
		{"matmul shape (M, N, K)", matmul(a), matmul(b)},
	} {
		if fmt.Sprint(d.x) != fmt.Sprint(d.y) {
			return setting.Errorf("the two results are sweeps of other shapes: %v %v in the old, %v in the new; compare runs of one sweep", d.what, d.x, d.y)
		}
	}
	return nil
}

func sizesOf(s BenchSpec) string {
	return fmt.Sprintf("%d..%d x%d", s.MinSize, s.MaxSize, s.Factor)
}
