package result

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// Verdicts of `bench compare`, one per row.
const (
	VerdictOK         = "ok"
	VerdictFaster     = "faster"
	VerdictNoise      = "within noise"
	VerdictTooShort   = "too short to judge"
	VerdictRegression = "REGRESSION"
	VerdictWrong      = "WRONG"
	VerdictMissing    = "MISSING"
	// VerdictUnmeasured is a row an incomplete result never reached: not a failure.
	VerdictUnmeasured = "not measured"
)

// Compare is one row of `bench compare`: the row's fields (as in a result), its median
// time per operation on each side and one change, in time.
type Compare struct {
	Label   string `json:"label"` // the row for people: put memcpy 1M 0->1
	Op      string `json:"op"`
	Impl    string `json:"impl"`
	Size    int64  `json:"size"`
	Src     int    `json:"src"`
	Dst     int    `json:"dst"`
	Bidir   bool   `json:"bidir,omitempty"`
	Overlap int    `json:"overlap,omitempty"`
	Graph   bool   `json:"graph,omitempty"`
	Ranks   int    `json:"ranks,omitempty"`
	DType   string `json:"dtype,omitempty"`
	RedOp   string `json:"redop,omitempty"`
	Algo    string `json:"algo,omitempty"`
	// OldUS and NewUS are the median times per operation (0 where a side has none).
	OldUS float64 `json:"old_us,omitempty"`
	NewUS float64 `json:"new_us,omitempty"`
	// ChangePct is the change of time: positive slower, negative faster.
	ChangePct float64 `json:"change_pct"`
	// NoiseUS is the spread a change must stand out of: three times the larger of the
	// two sides' median absolute deviations of their repetitions (omitted where a side
	// has a single repetition: the noise was not measured).
	NoiseUS *float64 `json:"noise_us,omitempty"`
	Verdict string   `json:"verdict"`
	Why     string   `json:"why,omitempty"`
}

// Failed says whether the row makes the comparison fail outright (wrong data or a row
// on one side only), as opposed to a regression.
func (c Compare) Failed() bool { return c.Verdict == VerdictWrong || c.Verdict == VerdictMissing }

func compareOf(r Row) Compare {
	return Compare{Label: r.Label(), Op: r.Op, Impl: r.Impl, Size: r.Size, Src: r.Src, Dst: r.Dst, Bidir: r.Bidir, Overlap: r.Overlap, Graph: r.Graph,
		Ranks: r.Ranks, DType: r.DType, RedOp: r.RedOp, Algo: r.Algo}
}

// CompareResults matches rows by operation, implementation, size, pair and mode. A row
// regressed when its median time per operation is worse than the old one by more than
// threshold percent and by more than both runs' noise (three median absolute
// deviations), and its lower quartile is slower by more than threshold percent too:
// the change must stand out of both runs' spread, so two runs of the same build on a
// quiet machine do not regress (compareRow); "faster" takes the same mirrored. A row
// with wrong bytes on either side, or present on one side only, is a failure, not a
// number to compare, unless the side that lacks it is incomplete (it never got there).
func CompareResults(old, cur Result, threshold float64) []Compare {
	iters := min(max(old.Header.Spec.Iters, 1), max(cur.Header.Spec.Iters, 1))
	clock := "wall" // a result that does not say is judged like the coarsest clock
	if old.Header.Clock == "cuda-events" && cur.Header.Clock == "cuda-events" {
		clock = "cuda-events"
	}
	idx := map[string]Row{}
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
	seen := map[string]bool{}
	var out []Compare
	for _, r := range cur.Rows {
		k := r.Key()
		seen[k] = true
		o, ok := idx[k]
		if !ok {
			out = append(out, only(r, "new", old))
			continue
		}
		out = append(out, compareRow(o, r, threshold, iters, clock))
	}
	for _, r := range old.Rows {
		if !seen[r.Key()] {
			out = append(out, only(r, "old", cur))
		}
	}
	return out
}

// MinJudgedWindowUS is the shortest wall-clock window (operations per repetition x
// time per operation) whose slowdown compare calls a regression: below it the clock's
// resolution and the scheduler decide more than the code does (20 CPU-backend puts of
// 4K take 4 us, and whole runs shift by 30% from one to the next). CUDA events time
// the GPU itself and are judged at any size.
const MinJudgedWindowUS = 50

// compareRow judges one row. Every figure it gives is of time per operation, so that a
// row has one change, said one way (+ slower, - faster).
func compareRow(o, r Row, threshold float64, iters int, clock string) Compare {
	c := compareOf(r)
	c.OldUS, c.NewUS = o.MedUS, r.MedUS
	if o.MedUS > 0 && r.MedUS > 0 {
		c.ChangePct = Round((r.MedUS/o.MedUS-1)*100, 2)
	}
	switch {
	case o.Wrong > 0 || r.Wrong > 0:
		c.Verdict, c.Why = VerdictWrong, fmt.Sprintf("wrong bytes: %d old, %d new", o.Wrong, r.Wrong)
		return c
	case !o.Checked || !r.Checked:
		c.Verdict, c.Why = VerdictWrong, "data not checked on one side"
		return c
	case o.MedUS <= 0 || r.MedUS <= 0:
		c.Verdict, c.Why = VerdictWrong, "no time on one side"
		return c
	}
	// The noise is three times the larger of the two median absolute deviations of the
	// repetitions (about two standard deviations), so that one slow repetition neither
	// hides a change nor makes one. With one repetition a side it is not measured, and
	// no change is called beyond it.
	measured := len(o.TimesUS) > 1 && len(r.TimesUS) > 1
	noise := Round(3*max(mad(o), mad(r)), TimeDecimals)
	if measured {
		c.NoiseUS = &noise
	}
	// The fast repetitions must have moved too: rows that switch between two speeds from
	// one repetition to the next (launch-bound GPU rows, 1 MiB) move their median with
	// the mix, not their best. "Fast" is the lower quartile, not the single fastest, so
	// that one lucky repetition cannot hide a slowdown either.
	bestChange := math.NaN()
	if q := quartile(o); q > 0 {
		bestChange = (quartile(r)/q - 1) * 100
	}
	change, delta := c.ChangePct, math.Abs(r.MedUS-o.MedUS)
	way := "slower"
	if change < 0 {
		way = "faster"
	}
	switch {
	case math.Abs(change) <= threshold:
		c.Verdict = VerdictOK
	case !measured:
		c.Verdict, c.Why = VerdictNoise, setting.Sprintf("median %.1f%% %s, but one repetition a side measures no noise: raise {reps}", math.Abs(change), way)
	case delta <= noise:
		c.Verdict, c.Why = VerdictNoise, fmt.Sprintf("median %.1f%% %s, inside the repetitions' noise (+-%s us)", math.Abs(change), way, fmtNoise(noise))
	case !(math.Abs(bestChange) > threshold) || (bestChange > 0) != (change > 0):
		c.Verdict, c.Why = VerdictNoise, fmt.Sprintf("median %.1f%% %s, but the fast repetitions %+.1f%%: the row switches between speeds", math.Abs(change), way, bestChange)
	case clock == "wall" && !ops.Op(r.Op).RoundTrip() && float64(iters)*min(r.MedUS, o.MedUS) < MinJudgedWindowUS:
		c.Verdict = VerdictTooShort
		c.Why = setting.Sprintf("%d operations of %s us: a %s us window on the wall clock; raise {iters} to judge it", iters, fmtUS(r.MedUS), fmtUS(float64(iters)*r.MedUS))
	case change < 0:
		c.Verdict, c.Why = VerdictFaster, fmt.Sprintf("%.1f%% faster, beyond the noise (+-%s us)", -change, fmtNoise(noise))
	default:
		c.Verdict, c.Why = VerdictRegression, fmt.Sprintf("%.1f%% slower, beyond the noise (+-%s us)", change, fmtNoise(noise))
	}
	return c
}

// fmtNoise shows a noise to three significant figures: rounded like a time, a spread of
// 4 ns read "+-0.00 us".
func fmtNoise(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// mad is the median absolute deviation of a row's repetitions (time per operation, us).
func mad(r Row) float64 {
	if len(r.TimesUS) < 2 {
		return 0
	}
	dev := make([]float64, len(r.TimesUS))
	for i, t := range r.TimesUS {
		dev[i] = math.Abs(t - r.MedUS)
	}
	sort.Float64s(dev)
	if n := len(dev); n%2 == 0 {
		return (dev[n/2-1] + dev[n/2]) / 2
	}
	return dev[len(dev)/2]
}

// quartile is a row's lower-quartile repetition (time per operation, us): the second
// fastest of 5 to 7, the fastest of up to 3.
func quartile(r Row) float64 {
	if len(r.TimesUS) == 0 {
		return r.MinUS
	}
	t := append([]float64(nil), r.TimesUS...)
	sort.Float64s(t)
	return t[len(t)/4]
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
	for _, d := range []struct {
		what string
		x, y any
	}{
		{"backend", a.Backend, b.Backend},
		{"ranks", a.NProc, b.NProc},
		{"ops", set(a.Spec.Ops), set(b.Spec.Ops)},
		{"impls", set(a.Spec.Impls), set(b.Spec.Impls)},
		{"sizes", sizesOf(a.Spec), sizesOf(b.Spec)},
		{"latency size", a.Spec.LatencySize, b.Spec.LatencySize},
		{setting.Expand("{bidir}"), a.Spec.Bidir, b.Spec.Bidir},
		{setting.Expand("{matrix}"), a.Spec.Matrix, b.Spec.Matrix},
		{setting.Expand("{overlap}"), max(a.Spec.Overlap, 1), max(b.Spec.Overlap, 1)},
		{setting.Expand("{graph}"), a.Spec.Graph, b.Spec.Graph},
		{"dtype", a.Spec.DType, b.Spec.DType},
		{setting.Expand("{algo}"), a.Spec.Algo, b.Spec.Algo},
		{setting.Expand("{root}"), a.Spec.Root, b.Spec.Root},
		{"MoE layer", moe(a), moe(b)},
	} {
		if fmt.Sprint(d.x) != fmt.Sprint(d.y) {
			return fmt.Errorf("the two results are sweeps of other shapes: %s %v in the old, %v in the new; compare runs of one sweep", d.what, d.x, d.y)
		}
	}
	return nil
}

func sizesOf(s BenchSpec) string {
	return fmt.Sprintf("%d..%d x%d", s.MinSize, s.MaxSize, s.Factor)
}
