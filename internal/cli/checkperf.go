package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/check"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
)

// perf runs the key sweep (symmem.ReferenceSweep) through the library on nproc ranks
// on the GPUs (or the ranks of the external launcher that started this process) and
// sets it beside the reference figures for this machine. quiet is true on a rank that
// does not report.
func perf(ctx context.Context, rep *check.Report, nproc int, lib string, tolerancePct float64, backends []symmem.Backend) (quiet bool) {
	return rep.AddPerf(func() (check.Sweep, error) { return sweep(ctx, nproc, lib, backends) }, tolerancePct)
}

// sweep runs the key sweep; tests replace it.
var sweep = runSweep

// runSweep runs the key sweep on nproc ranks of the GPU backend (or the ranks of the
// external launcher that started this process), every byte checked; on one rank it
// measures nothing.
func runSweep(ctx context.Context, nproc int, lib string, backends []symmem.Backend) (check.Sweep, error) {
	var errb bytes.Buffer
	o := symmem.DefaultJobOptions()
	o.NProc, o.Backend, o.NVSHMEMLib, o.Backends, o.Stdout, o.Stderr = nproc, symmem.NVSHMEM, lib, backends, io.Discard, &errb
	o.Words = libraryWords
	job, err := symmem.NewJob(o)
	if err != nil {
		return check.Sweep{Ranks: nproc}, err
	}
	out := check.Sweep{Ranks: job.NProc(), Quiet: !job.Reports()}
	if out.Ranks < 2 {
		return out, nil
	}
	start := time.Now()
	plan, err := job.PlanBench(symmem.ReferenceSweep())
	if err != nil {
		return out, err
	}
	res, err := job.Launch(ctx, plan)
	out.Wall, out.Stderr = time.Since(start), errb.String()
	if res != nil && res.Bench != nil {
		// A result bench show and bench compare take as they take bench --json's.
		res.Bench.Header.Command, res.Bench.Header.Provenance = "symmem check-nvshmem --perf", result.NewProvenance(start)
		out.Res = res.Bench
	}
	if err == nil && res == nil {
		out.Quiet = true
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
	here := p.Here()
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
		if r.Verdict != check.Below {
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
