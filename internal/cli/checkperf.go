package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/check"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/reference"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
)

// perf runs the key sweep (reference.Sweep) through the engine on nproc ranks on the
// GPUs (or the ranks of the external launcher that started this process) and sets it
// beside the reference figures for this machine. quiet is true on a rank that does
// not report.
func perf(ctx context.Context, rep *check.Report, nproc int, lib string, tolerancePct float64, backends []backend.Factory) (quiet bool) {
	c := check.Check{Area: "perf", Name: "key sweep"}
	defer func() {
		if !quiet {
			rep.Checks = append(rep.Checks, c)
		}
	}()
	tbl, err := reference.Shipped()
	if err != nil {
		c.Status, c.Detail = check.Failure, err.Error()
		return false
	}
	if !rep.GPUBackendOK {
		c.Status, c.Detail = check.Info, "cannot measure: the GPU backend cannot run here (the failures above), so nothing was measured; symmem has reference figures for "+tbl.Names()
		return false
	}
	out, err := sweep(ctx, nproc, lib, backends)
	if out.quiet && err == nil {
		return true // a rank that does not report: rank 0 judges the sweep
	}
	switch {
	case err == nil && out.ranks < 2:
		gpu := "this GPU"
		if len(rep.GPUs) > 0 {
			gpu = rep.GPUs[0].Name
		}
		c.Status = check.Info
		c.Detail = fmt.Sprintf("skipped: one rank has no link to measure, and there is no reference for %s x1; symmem has figures for %s", gpu, tbl.Names())
		c.Remedy = "on a machine of 2 or 4 such GPUs: symmem check-nvshmem --perf --nproc 2 (or 4)"
		return false
	case err != nil || out.res == nil:
		c.Status = check.Failure
		c.Detail = strings.TrimSpace(lastLines(out.stderr, 3) + "\n" + fmt.Sprint(err))
		c.Remedy = "run `symmem bench --op put --impl triton` with NVSHMEM_DEBUG=WARN to see where it fails"
		rep.GPUBackendOK = false
		return false
	case len(out.res.Failures()) > 0:
		c.Status = check.Failure
		c.Detail = "wrong bytes arrived: " + strings.Join(out.res.Failures(), "; ")
		c.Remedy = "the GPUs or links corrupt data: run symmem run put and symmem bench on each pair, and have the node looked at"
		rep.GPUBackendOK = false
	}
	jd := reference.Judge(*out.res, tbl, tolerancePct)
	rep.Perf = &check.Perf{Judgement: jd, WallS: out.wall.Seconds(), Result: out.res}
	if c.Status == check.Failure {
		return false
	}
	switch {
	case jd.NoReference != "":
		c.Status, c.Detail = check.Info, jd.NoReference+"; the rows below are measured, not judged"
	case jd.Below > 0:
		c.Status, c.Detail = check.Warning, fmt.Sprintf("%d of %d rows more than %g%% below the figures of %s (causes below)", jd.Below, len(jd.Rows), tolerancePct, jd.Reference)
		c.Remedy = "a row below its figure is a sick node until shown otherwise: see the usual causes under the table"
	default:
		c.Status, c.Detail = check.OK, fmt.Sprintf("every row within %g%% of the figures of %s, or above them; %.1f s", tolerancePct, jd.Reference, rep.Perf.WallS)
	}
	return false
}

// sweepOutcome is what a key sweep came to.
type sweepOutcome struct {
	ranks  int            // the job's ranks: below 2 nothing was measured
	res    *result.Result // nil where it did not finish
	quiet  bool           // this rank does not report (an external launcher's rank other than 0)
	stderr string         // what the ranks printed on stderr
	wall   time.Duration
}

// sweep runs the key sweep; tests replace it.
var sweep = runSweep

// runSweep runs the key sweep on nproc ranks of the GPU backend (or the ranks of the
// external launcher that started this process), every byte checked; on one rank it
// measures nothing.
func runSweep(ctx context.Context, nproc int, lib string, backends []backend.Factory) (sweepOutcome, error) {
	o := engine.DefaultOptions()
	o.NProc, o.Backend, o.NVSHMEMLib, o.Backends = nproc, backend.NVSHMEM, lib, backends
	e, err := engine.New(o)
	if err != nil {
		return sweepOutcome{ranks: nproc}, err
	}
	out := sweepOutcome{ranks: e.NProc(), quiet: !e.Reports()}
	if out.ranks < 2 {
		return out, nil
	}
	var errb bytes.Buffer
	e.Stdout, e.Stderr = io.Discard, &errb
	start := time.Now()
	j, err := e.PlanBench(reference.Sweep(engine.BenchDefaults))
	if err != nil {
		return out, err
	}
	res, err := e.Launch(ctx, j)
	out.wall, out.stderr = time.Since(start), errb.String()
	if res != nil && res.Bench != nil {
		// A result bench show and bench compare take as they take bench --json's.
		res.Bench.Header.Command, res.Bench.Header.Provenance = "symmem check-nvshmem --perf", result.NewProvenance(start)
		out.res = res.Bench
	}
	if err == nil && res == nil {
		out.quiet = true
	}
	return out, err
}

// belowLine says in a line how many rows fell below their figures.
func belowLine(p *check.Perf) string {
	return fmt.Sprintf("perf: %d of %d rows more than %g%% below the reference figures of %s", p.Below, len(p.Rows), p.TolerancePct, p.Reference)
}

// printPerf prints the key sweep beside its figures, then each row below its figure
// with the usual causes, within cols columns.
func printPerf(w io.Writer, p *check.Perf, cols int) {
	here := reference.Name(p.GPU, p.NProc, p.Link)
	title := fmt.Sprintf("\nkey sweep on %s against the reference figures of %s (docs/results), tolerance %g%%", here, p.Reference, p.TolerancePct)
	if p.Reference == here {
		title = fmt.Sprintf("\nkey sweep on %s against its reference figures (docs/results), tolerance %g%%", here, p.TolerancePct)
	}
	if p.Reference == "" {
		title = fmt.Sprintf("\nkey sweep on %s: no reference, measured only", here)
	}
	t := report.Table{Title: title, Header: []string{"row", "measured", "reference", "of ref", "verdict"}}
	for _, r := range p.Rows {
		ref, share := "-", "-"
		if r.Reference > 0 {
			ref, share = figure(r.Reference, r.Unit), fmt.Sprintf("%.0f%%", r.Ratio*100)
		}
		t.Rows = append(t.Rows, []string{r.Name, figure(r.Measured, r.Unit), ref, share, string(r.Verdict)})
	}
	t.Print(w)
	for _, n := range p.Notes {
		fmt.Fprintln(w, report.WrapIndent("  note: "+n, cols, "        "))
	}
	// Rows below with the same causes are named together, their causes once.
	var order []string
	rows := map[string][]string{}
	causes := map[string][]string{}
	for _, r := range p.Rows {
		if r.Verdict != reference.Below {
			continue
		}
		k := strings.Join(r.Causes, "\n")
		if _, ok := rows[k]; !ok {
			order = append(order, k)
			causes[k] = r.Causes
		}
		rows[k] = append(rows[k], fmt.Sprintf("%s at %.0f%% of its figure (%s against %s)", r.Name, r.Ratio*100, figure(r.Measured, r.Unit), figure(r.Reference, r.Unit)))
	}
	for _, k := range order {
		fmt.Fprintln(w)
		fmt.Fprintln(w, report.WrapIndent("below: "+strings.Join(rows[k], "; "), cols, "  "))
		fmt.Fprintln(w, "usual causes, likeliest first:")
		for _, c := range causes[k] {
			fmt.Fprintln(w, report.WrapIndent("  - "+c, cols, "    "))
		}
	}
}

// figure prints a measurement with its unit: 347.1 GB/s, 2.04 us.
func figure(v float64, unit string) string {
	if unit == "us" {
		return fmt.Sprintf("%.2f %s", v, unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
