package check

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/dl"
	"github.com/symmem/symmem/internal/reference"
	"github.com/symmem/symmem/internal/result"
)

// Perf is check-nvshmem --perf's key sweep set beside the reference figures for this
// machine.
type Perf struct {
	reference.Judgement
	WallS float64 `json:"wall_s"`
	// Result is the sweep as bench --json writes it.
	Result *result.Result `json:"result,omitempty"`
}

// Here names the machine the sweep ran on as the figures name theirs: NVIDIA H200 x2
// NV18.
func (p *Perf) Here() string { return reference.Name(p.GPU, p.NProc, p.Link) }

// DefaultTolerancePct is how far below its figure, in per cent, a row may fall before
// it is named.
const DefaultTolerancePct = reference.DefaultTolerancePct

// Below is the verdict of a row more than the tolerance below its figure.
const Below = reference.Below

// Sweep is what a key sweep came to.
type Sweep struct {
	Ranks  int            // the job's ranks: below 2 nothing was measured
	Res    *result.Result // nil where it did not finish
	Quiet  bool           // this rank does not report (an external launcher's rank other than 0)
	Stderr string         // what the ranks printed on stderr
	Wall   time.Duration
}

// AddPerf runs the key sweep (reference.Sweep) with run on this machine's GPUs and
// sets it beside the reference figures for this machine, unless the checks before it
// found that the GPU backend cannot run. quiet is true on a rank that does not report.
func (r *Report) AddPerf(run func() (Sweep, error), tolerancePct float64) (quiet bool) {
	c := Check{Area: "perf", Name: "key sweep"}
	defer func() {
		if !quiet {
			r.Checks = append(r.Checks, c)
		}
	}()
	tbl, err := reference.Shipped()
	if err != nil {
		c.Status, c.Detail = Failure, err.Error()
		return false
	}
	if !r.GPUBackendOK {
		c.Status, c.Detail = Info, "cannot measure: the GPU backend cannot run here (the failures above), so nothing was measured; symmem has reference figures for "+tbl.Names()
		return false
	}
	out, err := run()
	if out.Quiet && err == nil {
		return true // a rank that does not report: rank 0 judges the sweep
	}
	switch {
	case err == nil && out.Ranks < 2:
		gpu := "this GPU"
		if len(r.GPUs) > 0 {
			gpu = r.GPUs[0].Name
		}
		c.Status = Info
		c.Detail = fmt.Sprintf("skipped: one rank has no link to measure, and there is no reference for %s x1; symmem has figures for %s", gpu, tbl.Names())
		c.Remedy = "on a machine of 2 or 4 such GPUs: symmem check-nvshmem --perf --nproc 2 (or 4)"
		return false
	case err != nil || out.Res == nil:
		c.Status = Failure
		c.Detail = strings.TrimSpace(LastLines(out.Stderr, 3) + "\n" + fmt.Sprint(r.words.Error(err)))
		c.Remedy = "run `symmem bench --op put --impl triton` with NVSHMEM_DEBUG=WARN to see where it fails"
		r.GPUBackendOK = false
		return false
	case len(out.Res.Failures()) > 0:
		c.Status = Failure
		c.Detail = "wrong bytes arrived: " + strings.Join(out.Res.Failures(), "; ")
		c.Remedy = "the GPUs or links corrupt data: run symmem run put and symmem bench on each pair, and have the node looked at"
		r.GPUBackendOK = false
	}
	jd := reference.Judge(*out.Res, tbl, tolerancePct)
	r.Perf = &Perf{Judgement: jd, WallS: out.Wall.Seconds(), Result: out.Res}
	if c.Status == Failure {
		return false
	}
	switch {
	case jd.NoReference != "":
		c.Status, c.Detail = Info, jd.NoReference+"; the rows below are measured, not judged"
	case jd.Below > 0:
		c.Status, c.Detail = Warning, fmt.Sprintf("%d of %d rows more than %g%% below the figures of %s (causes below)", jd.Below, len(jd.Rows), tolerancePct, jd.Reference)
		c.Remedy = "a row below its figure is a sick node until shown otherwise: see the usual causes under the table"
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("every row within %g%% of the figures of %s, or above them; %.1f s", tolerancePct, jd.Reference, r.Perf.WallS)
	}
	return false
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SearchPythonSites makes the search for the NVSHMEM library look first where pip put
// the NVSHMEM wheel for python3, the interpreter check-nvshmem names for kernel builds.
func SearchPythonSites(ctx context.Context) {
	if py, err := exec.LookPath("python3"); err == nil {
		dl.ExtraSites = dl.SitePackagesOf(ctx, py)
	}
}
