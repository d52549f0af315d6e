package cli

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/result"
)

// --dry-run says how long the sweep should take, and more work takes longer.
func TestDryRunEstimatesTheDuration(t *testing.T) {
	plan := func(reps int, ops ...string) string {
		var out bytes.Buffer
		opts := &BenchOptions{JobOptions: cpuJob(), Ops: ops, MinSize: 4, MaxSize: 1 << 20, Factor: 2, Iters: 20, Warmup: 5, Reps: reps, Runs: 1, Overlap: 1, maxSizeChanged: true}
		opts.DryRun = true
		if err := runBench(t.Context(), opts, IO{Out: &out, Err: &out}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	line := regexp.MustCompile(`(?m)^duration +about ([0-9.]+) (s|min) \(an estimate; --timeout 30s bounds a stall between measurements, not the sweep\)$`)
	secs := func(s string) string {
		m := line.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("no duration line in\n%s", s)
		}
		return m[1] + " " + m[2]
	}
	short, long := secs(plan(5, "put")), secs(plan(5, "put", "get", "all-reduce"))
	if short == long {
		t.Errorf("put alone and put, get, all-reduce both %s", short)
	}
}

// Without a terminal, a sweep says on stderr when each operation's rows begin.
func TestProgressWithoutATerminal(t *testing.T) {
	var out bytes.Buffer
	job := &symmem.Job{}
	p := newProgress(job, &out, false)
	job.Progress(3, 10)
	p.landed([]result.Row{{Op: "put", Impl: "memcpy", Size: 4}, {Op: "put", Impl: "memcpy", Size: 8}})
	p.landed([]result.Row{{Op: "get", Impl: "memcpy", Size: 4}})
	want := regexp.MustCompile(`^bench: put rows landing \(3 of 10 measurements done, 0 s\)\nbench: get rows landing \(3 of 10 measurements done, 0 s\)\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("progress said %q", out.String())
	}
}
