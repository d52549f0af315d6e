package result

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/units"
)

// RankResult is one rank's outcome of a `symmem run` test.
type RankResult struct {
	Rank    int    `json:"rank"`
	Backend string `json:"backend"`
	From    int    `json:"from"` // rank whose data this rank checked; -1: none
	// Peers names whom a collective's result came from ("all", "root 0"), where From
	// is the rank itself.
	Peers    string `json:"peers,omitempty"`
	Bytes    int64  `json:"bytes"`
	Expected string `json:"expected,omitempty"`
	Wrong    int64  `json:"wrong"`
	// PastScratch is the bytes the implementation wrote past the scratch it was given
	// (a collective's guard); the output may be right all the same.
	PastScratch int64 `json:"past_scratch,omitempty"`
	// PastOutput is the bytes written past the output (a collective's guard).
	PastOutput int64              `json:"past_output,omitempty"`
	OK         bool               `json:"ok"`
	Received   string             `json:"received,omitempty"`
	Timings    map[string]float64 `json:"timings_ms,omitempty"`
}

// RunReport is what `run --json` prints.
type RunReport struct {
	Op          string `json:"op"`
	Impl        string `json:"impl"`
	Pattern     string `json:"pattern"`
	Backend     string `json:"backend"`
	BackendNote string `json:"backend_note,omitempty"`
	Launcher    string `json:"launcher"`
	NProc       int    `json:"nproc"`
	DType       string `json:"dtype"`
	RedOp       string `json:"redop,omitempty"` // a reduction's operator
	Count       int64  `json:"count"`
	Bytes       int64  `json:"bytes"`
	OK          bool   `json:"ok"`
	Wrong       int64  `json:"wrong"`
	// PastOutput and PastScratch total the ranks' bytes written past a collective's
	// output and scratch (each fails the run; wrong counts elements only).
	PastOutput  int64        `json:"past_output,omitempty"`
	PastScratch int64        `json:"past_scratch,omitempty"`
	WallMS      float64      `json:"wall_ms"`
	ProbeMS     float64      `json:"probe_ms"` // the launcher's backend choice
	Results     []RankResult `json:"results"`
	Command     string       `json:"command,omitempty"`
	Provenance  *Provenance  `json:"provenance,omitempty"`
}

// Summarize fills OK and Wrong from the ranks' results.
func (r *RunReport) Summarize() {
	r.OK, r.Wrong, r.PastOutput, r.PastScratch = true, 0, 0, 0
	for _, x := range r.Results {
		r.Wrong += x.Wrong
		r.PastOutput += x.PastOutput
		r.PastScratch += x.PastScratch
		r.OK = r.OK && x.OK
	}
}

// Failure says what went wrong, naming each rank that received wrong data; "" when
// the run passed.
func (r RunReport) Failure() string {
	if r.OK {
		return ""
	}
	var where, past, pastOut []string
	for _, x := range r.Results {
		if x.Wrong > 0 {
			from := fmt.Sprintf("from rank %d", x.From)
			if x.Peers != "" {
				from = "from " + x.Peers
			}
			where = append(where, fmt.Sprintf("%d on rank %d (%s)", x.Wrong, x.Rank, from))
		}
		if x.PastScratch > 0 {
			past = append(past, fmt.Sprintf("%d on rank %d", x.PastScratch, x.Rank))
		}
		if x.PastOutput > 0 {
			pastOut = append(pastOut, fmt.Sprintf("%d on rank %d", x.PastOutput, x.Rank))
		}
	}
	var out []string
	if r.Wrong > 0 {
		noun := "wrong elements"
		if r.Wrong == 1 {
			noun = "wrong element"
		}
		out = append(out, fmt.Sprintf("%d %s (%s): the data that arrived is not what was sent", r.Wrong, noun, strings.Join(where, ", ")))
	}
	if len(pastOut) > 0 {
		out = append(out, fmt.Sprintf("bytes written past the output (%s)", strings.Join(pastOut, ", ")))
	}
	if len(past) > 0 {
		out = append(out, fmt.Sprintf("bytes written past the scratch the implementation was given (%s)", strings.Join(past, ", ")))
	}
	if len(out) == 0 {
		out = append(out, "a rank failed its check")
	}
	return fmt.Sprintf("%s%s %s, %d x %s: %s", r.Op, r.redOp(), r.Impl, r.Count, r.DType, strings.Join(out, "; "))
}

// redOp names the reduction's operator after the op ("" where there is none, or it
// is sum, which every reduction names none for).
func (r RunReport) redOp() string {
	if r.RedOp == "" || r.RedOp == "sum" {
		return ""
	}
	return " (" + r.RedOp + ")"
}

// PrintRun writes the correctness table and the timing line.
func PrintRun(w io.Writer, rep RunReport) {
	t := report.Table{
		Title: fmt.Sprintf("%s%s: %d ranks, %s pattern, %d x %s (%s), backend %s%s",
			rep.Op, rep.redOp(), rep.NProc, rep.Pattern, rep.Count, rep.DType, units.FormatSize(rep.Bytes), rep.Backend, startedBy(rep.Launcher)),
		Header: []string{"rank", "peer", "bytes", "expected", "wrong", "status"},
	}
	for _, r := range rep.Results {
		if r.From < 0 {
			continue
		}
		status := "ok"
		switch {
		case !r.OK && r.Wrong == 0 && r.PastOutput+r.PastScratch > 0:
			status = "OVERRUN" // right output, bytes written past a buffer
		case !r.OK:
			status = "WRONG"
		}
		peer := strconv.Itoa(r.From)
		if r.Peers != "" {
			peer = r.Peers
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(r.Rank), peer, strconv.FormatInt(r.Bytes, 10),
			r.Expected, strconv.FormatInt(r.Wrong, 10), status})
	}
	t.Print(w)
	verdict := "PASS"
	if !rep.OK {
		verdict = "FAIL"
	}
	report.Note(w, fmt.Sprintf("%s in %.0f ms wall; launcher probe %.1f ms; slowest rank (ms): %s", verdict, rep.WallMS, rep.ProbeMS, timingLine(rep.Results)))
}

// timingLine prints the slowest rank's time in each phase, in the order they happen.
func timingLine(rs []RankResult) string {
	order := []string{"spawn", "init", "load", "setup", "op", "verify", "finalize"}
	slowest := map[string]float64{}
	for _, r := range rs {
		for k, v := range r.Timings {
			slowest[k] = max(slowest[k], v)
		}
	}
	var extra []string
	for k := range slowest {
		if !slices.Contains(order, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	var parts []string
	for _, k := range append(order, extra...) {
		if v, ok := slowest[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// startedBy names an external launcher as the title says it (", started by openmpi");
// nothing for symmem's own.
func startedBy(launcher string) string {
	if launcher == "" || launcher == "symmem" {
		return ""
	}
	return ", started by " + launcher
}
