package result

import (
	"strings"
	"testing"
)

// A rank whose output is right but whose implementation wrote past its scratch fails,
// and the failure says that, not "wrong elements".
func TestRunFailureNamesAScratchOverrun(t *testing.T) {
	rep := RunReport{Op: "all-reduce", Impl: "mine", Count: 1024, DType: "float32", Results: []RankResult{
		{Rank: 0, From: 0, Peers: "all", OK: true}, {Rank: 1, From: 1, Peers: "all", PastScratch: 8}}}
	rep.Summarize()
	if got, want := rep.Failure(), "all-reduce mine, 1024 x float32: bytes written past the scratch the implementation was given (8 on rank 1)"; rep.OK || got != want || rep.PastScratch != 8 {
		t.Errorf("ok %v, failure %q, want %q; past scratch %d", rep.OK, got, want, rep.PastScratch)
	}
	var b strings.Builder
	PrintRun(&b, rep)
	if !strings.Contains(b.String(), "OVERRUN") || !strings.Contains(b.String(), "FAIL") {
		t.Errorf("the table of a run that overran:\n%s", b.String())
	}
	rep.Results[0] = RankResult{Rank: 0, From: 0, Peers: "all", Wrong: 3, PastOutput: 16}
	rep.Summarize()
	if got, want := rep.Failure(), "all-reduce mine, 1024 x float32: 3 wrong elements (3 on rank 0 (from all)): the data that arrived is not what was sent; bytes written past the output (16 on rank 0); bytes written past the scratch the implementation was given (8 on rank 1)"; rep.OK || got != want {
		t.Errorf("ok %v, failure %q, want %q", rep.OK, got, want)
	}
}
