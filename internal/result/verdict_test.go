package result

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// sweep is a result of rows (one per size), each holding runs runs of reps
// repetitions; at(row, run, rep) is the time of one repetition.
func sweep(rows, runs, reps int, at func(row, run, rep int) float64) Result {
	res := Result{OK: true, Header: Header{Backend: "cpu", NProc: 2, Spec: BenchSpec{Ops: []string{"put"}, Iters: 20, Reps: reps, Runs: runs}}}
	for i := range rows {
		r := Row{Op: "put", Impl: "memcpy", Size: 1 << i, Src: 0, Dst: 1, Checked: true}
		for run := range runs {
			for rep := range reps {
				r.TimesUS = append(r.TimesUS, at(i, run, rep))
			}
		}
		r.Finish()
		res.Rows = append(res.Rows, r)
	}
	return res
}

// verdicts counts the verdicts of a comparison.
func verdicts(cs []Compare) map[string]int {
	n := map[string]int{}
	for _, c := range cs {
		n[c.Verdict]++
	}
	return n
}

// noisy draws times the way a CPU sweep spreads them: a whole run shifts every row
// alike (where the ranks landed), each row moves on its own from run to run, and the
// repetitions of a run scatter a little around that; scale multiplies all of it.
type noisy struct {
	rng             *rand.Rand
	whole, row, rep float64 // log-normal spreads: per run, per row and run, per repetition
}

func (n *noisy) result(rows, runs, reps int, scale float64) Result {
	shift := make([]float64, runs)
	for i := range shift {
		shift[i] = n.rng.NormFloat64() * n.whole
	}
	rowRun := make([]float64, rows*runs)
	for i := range rowRun {
		rowRun[i] = n.rng.NormFloat64() * n.row
	}
	return sweep(rows, runs, reps, func(row, run, rep int) float64 {
		base := 1 + float64(row) // us
		return scale * base * math.Exp(shift[run]+rowRun[row*runs+run]+n.rng.NormFloat64()*n.rep)
	})
}

// Two results of the same build (identical distributions, with whole runs shifting by
// 10% and rows by 8% from run to run) are almost never called a regression, by
// however many rows; the same with every time 30% longer is called on at least 90% of
// the rows with eight runs a side. Samples are synthetic and seeded, so the figures are the same every run.
func TestCompareHoldsVerdictsToTheRuns(t *testing.T) {
	const rows, reps, trials = 64, 5, 200
	opts := CompareOptions{ThresholdPct: 5, Alpha: DefaultAlpha}
	for _, runs := range []int{5, 8} {
		n := &noisy{rng: rand.New(rand.NewPCG(1, uint64(runs))), whole: 0.10, row: 0.08, rep: 0.03}
		alarms, called, touched := 0, 0, 0
		for range trials {
			same := CompareResults(n.result(rows, runs, reps, 1), n.result(rows, runs, reps, 1), opts)
			if verdicts(same)[VerdictRegression] > 0 {
				alarms++
			}
			slow := CompareResults(n.result(rows, runs, reps, 1), n.result(rows, runs, reps, 1.3), opts)
			called += verdicts(slow)[VerdictRegression]
			touched += len(slow)
		}
		// alpha is the false-alarm rate over all rows: 5% of 200 comparisons is 10.
		if alarms > trials/10 {
			t.Errorf("%d runs a side: %d of %d comparisons of the same build called a regression", runs, alarms, trials)
		}
		// Five runs a side tell a 30% change from this much spread on some 60% of rows;
		// eight on more than 90%.
		if rate := float64(called) / float64(touched); runs >= 8 && rate < 0.9 {
			t.Errorf("%d runs a side: a 30%% slowdown called on %.1f%% of rows, want 90%% or more", runs, 100*rate)
		}
		t.Logf("%d runs a side: same build: %d of %d comparisons with a regression; 30%% slower: %d of %d rows called", runs, alarms, trials, called, touched)
	}
}

// The verdicts of single rows: told apart or not, within the threshold or beyond,
// and what too few runs cannot say.
func TestCompareVerdicts(t *testing.T) {
	one := func(runs ...[]float64) Result {
		return sweep(1, len(runs), len(runs[0]), func(_, run, rep int) float64 { return runs[run][rep] })
	}
	judge := func(old, cur Result, th float64) Compare {
		t.Helper()
		cs := CompareResults(old, cur, CompareOptions{ThresholdPct: th})
		if len(cs) != 1 {
			t.Fatalf("%d rows compared", len(cs))
		}
		return cs[0]
	}
	r := func(m float64) []float64 { return []float64{m * 0.99, m, m * 1.01} }
	base := one(r(10), r(10.5), r(9.8), r(10.2), r(10.1))
	// Every run 30% slower: a regression, with its p-value and runs.
	slow := one(r(13), r(13.4), r(12.9), r(13.2), r(13.1))
	if c := judge(base, slow, 5); c.Verdict != VerdictRegression || c.P == nil || *c.P > 0.01 || c.OldRuns != 5 || c.NewRuns != 5 ||
		!strings.Contains(c.Why, "slower (p=0.00794, 5+5 runs)") {
		t.Errorf("30%% slower: %+v", c)
	}
	if c := judge(base, slow, 40); c.Verdict != VerdictOK {
		t.Errorf("30%% slower under a 40%% threshold: %+v", c)
	}
	if c := judge(slow, base, 5); c.Verdict != VerdictFaster || c.ChangePct > -20 {
		t.Errorf("30%% faster: %+v", c)
	}
	// Runs that interleave are not told apart, whatever their medians say.
	mixed := one(r(9.9), r(10.6), r(9.7), r(10.3), r(13))
	if c := judge(base, mixed, 1); c.Verdict != VerdictSame || c.Failed() {
		t.Errorf("interleaved runs: %+v", c)
	}
	// One run a side: the repetitions are far apart, but nothing measured what moves
	// between runs. A change beyond the threshold is unresolved; what to do is said
	// once for all rows (Reach), not by the row.
	if c := judge(one(r(10)), one(r(20)), 5); c.Verdict != VerdictUnresolved || c.P != nil || c.Why != "" {
		t.Errorf("one run a side: %+v", c)
	}
	if c := judge(one(r(10)), one(r(10.2)), 5); c.Verdict != VerdictSame {
		t.Errorf("one run a side, within the threshold: %+v", c)
	}
	// Three runs a side can never reach alpha 0.05 (p >= 0.1): unresolved too.
	three := func(m float64) Result { return one(r(m), r(m), r(m)) }
	if c := judge(three(10), three(20), 5); c.Verdict != VerdictUnresolved {
		t.Errorf("three runs a side: %+v", c)
	}
	wrong := one(r(10), r(10), r(10), r(10), r(10))
	wrong.Rows[0].Wrong = 8
	if c := judge(base, wrong, 5); c.Verdict != VerdictWrong || !c.Failed() {
		t.Errorf("wrong bytes: %+v", c)
	}
}

// The false-alarm rate is over all rows: one row of 64 as far apart as five runs a
// side can be (p = 0.0079) is not called, while the same row among many that moved is.
func TestCompareHoldsAllRowsToAlpha(t *testing.T) {
	const runs, reps = 5, 3
	at := func(moved int) func(row, run, rep int) float64 {
		return func(row, run, rep int) float64 {
			v := 10 + float64((run*7+row*3)%5)*0.1 // the same values on both sides, in another order
			if row < moved {
				v *= 1.3
			}
			return v
		}
	}
	old := sweep(64, runs, reps, at(0))
	if n := verdicts(CompareResults(old, sweep(64, runs, reps, at(1)), CompareOptions{ThresholdPct: 5})); n[VerdictRegression] != 0 {
		t.Errorf("one row of 64 moved, 5 runs a side: %v", n)
	}
	if n := verdicts(CompareResults(old, sweep(64, runs, reps, at(20)), CompareOptions{ThresholdPct: 5})); n[VerdictRegression] != 20 {
		t.Errorf("20 rows of 64 moved: %v", n)
	}
	if got := fmt.Sprint(MinP(1, 1), RunsToTell(0.05), math.Round(MinP(5, 5)*1e4)/1e4); got != "1 4 0.0079" {
		t.Errorf("MinP(1, 1), RunsToTell(0.05), MinP(5, 5) = %s", got)
	}
}

// MinP is the least p-value the test gives: no order of two sides' runs gives less,
// and the order with every old run faster than every new one gives it.
func TestMinPIsTheTestsLeast(t *testing.T) {
	for n1 := 1; n1 <= 5; n1++ {
		for n2 := 1; n2 <= 5; n2++ {
			least, separated := 2.0, 0.0
			// Every way to interleave n1 old runs with n2 new ones (ranks 0..n1+n2-1).
			for mask := 0; mask < 1<<(n1+n2); mask++ {
				if bits.OnesCount(uint(mask)) != n1 {
					continue
				}
				var old, cur []float64
				for i := range n1 + n2 {
					if mask&(1<<i) != 0 {
						old = append(old, float64(i))
					} else {
						cur = append(cur, float64(i))
					}
				}
				row := func(v []float64) Result {
					return sweep(1, len(v), 1, func(_, run, _ int) float64 { return 1 + v[run] })
				}
				c := CompareResults(row(old), row(cur), CompareOptions{ThresholdPct: 1})[0]
				p := 1.0
				if c.P != nil {
					p = *c.P
				}
				least = min(least, p)
				if mask == 1<<n1-1 {
					separated = p
				}
			}
			if got := MinP(n1, n2); got != least || got != separated {
				t.Errorf("MinP(%d, %d) = %g; the test's least over every order is %g, of separated runs %g", n1, n2, got, least, separated)
			}
		}
	}
}

// What a comparison's runs can decide: with 64 rows, Reach's Together rows all as far
// apart as the runs allow are called, one fewer are not; RunsForOne runs a side call
// one row alone, one run fewer do not.
func TestReachIsWhatTheRunsDecide(t *testing.T) {
	const rows, reps = 64, 1
	opts := CompareOptions{ThresholdPct: 5, Alpha: DefaultAlpha}
	// moved rows of the new side are 30% slower, every run of them slower than every
	// old run; the others hold the same values in another order.
	at := func(moved int) func(row, run, rep int) float64 {
		return func(row, run, rep int) float64 {
			v := 10 + float64((run*7+row*3)%5)*0.01
			if row < moved {
				v *= 1.3
			}
			return v
		}
	}
	called := func(runs, moved int) int {
		old := sweep(rows, runs, reps, at(0))
		return verdicts(CompareResults(old, sweep(rows, runs, reps, at(moved)), opts))[VerdictRegression]
	}
	for _, runs := range []int{4, 5, 6} {
		r := ReachOf(rows, runs, runs, opts.Alpha)
		if r.LeastP != MinP(runs, runs) || r.Together < 2 || r.Together > rows || !r.Limited() || r.Blind() {
			t.Fatalf("%d runs a side: %+v", runs, r)
		}
		if n := called(runs, r.Together); n != r.Together {
			t.Errorf("%d runs a side, %d rows moved (Reach.Together): %d called", runs, r.Together, n)
		}
		if n := called(runs, r.Together-1); n != 0 {
			t.Errorf("%d runs a side, %d rows moved (one fewer than Reach.Together): %d called", runs, r.Together-1, n)
		}
	}
	one := ReachOf(rows, 1, 1, opts.Alpha).RunsForOne
	if r := ReachOf(rows, one, one, opts.Alpha); r.Together != 1 || r.Limited() || called(one, 1) != 1 {
		t.Errorf("%d runs a side (RunsForOne): %+v, %d of 1 moved row called", one, r, called(one, 1))
	}
	if r := ReachOf(rows, one-1, one-1, opts.Alpha); r.Together == 1 || called(one-1, 1) != 0 {
		t.Errorf("%d runs a side (one fewer than RunsForOne): %+v, %d of 1 moved row called", one-1, r, called(one-1, 1))
	}
	if r := ReachOf(rows, 1, 1, opts.Alpha); !r.Blind() || called(1, rows) != 0 {
		t.Errorf("1 run a side: %+v, %d of %d moved rows called", r, called(1, rows), rows)
	}
}

// Runs too few for a comparison's rows say so once: not one row's why repeats it.
func TestCompareSaysOnceWhatItCannotDecide(t *testing.T) {
	const rows = 64
	n := &noisy{rng: rand.New(rand.NewPCG(3, 4)), whole: 0.10, row: 0.08, rep: 0.03}
	for _, tc := range []struct {
		runs int
		says string
	}{
		{1, "1 and 1 runs a side cannot tell any row from between-run variation: the U test's least p-value for them is 1, above alpha 0.05. Measure each side with bench runs 7 or more to tell one row of 64 apart (4 a side tell rows apart only where 37 or more of the 64 change together)"},
		{4, "4 and 4 runs a side cannot tell one row of 64 apart on its own: the U test's least p-value for them, 0.0286, is above the 0.00078 one row must reach alone (alpha 0.05 over 64 rows); only 37 or more rows that change together are told apart. Measure each side with bench runs 7 or more to tell one row apart"},
		{6, "6 and 6 runs a side cannot tell one row of 64 apart on its own"},
		{7, ""},
	} {
		cs := CompareResults(n.result(rows, tc.runs, 3, 1), n.result(rows, tc.runs, 3, 1.2), CompareOptions{ThresholdPct: 5})
		said := ReachOfRows(cs, 0).Say(nil)
		if !strings.HasPrefix(said, tc.says) || (tc.says == "") != (said == "") {
			t.Errorf("%d runs a side: %q", tc.runs, said)
		}
		for _, c := range cs {
			if tc.says != "" && c.Verdict != VerdictRegression && c.Why != "" {
				t.Errorf("%d runs a side: row %s says %q", tc.runs, c.Label, c.Why)
			}
		}
	}
}
