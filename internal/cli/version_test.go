package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/buildinfo"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/pkg/kernels"
)

// --version and version print one text: version, the commit and when it was made, and
// the kernels'.
func TestVersionSaysCommitAndDate(t *testing.T) {
	defer func(c, d string) { buildinfo.Commit, buildinfo.CommitTime = c, d }(buildinfo.Commit, buildinfo.CommitTime)
	buildinfo.Commit, buildinfo.CommitTime = "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	var outs []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		root := NewCmdRoot(IO{Out: &out, Err: &out})
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("--version printed\n%s\nversion printed\n%s", outs[0], outs[1])
	}
	if want := `^symmem \S+ \(commit 0123456789ab of 2026-01-02T03:04:05Z\) go1\.\S+ \S+/\S+\nkernels: [0-9]+ artifacts for \S+(, \S+)* \(sha256 [0-9a-f]{12}\)\n  Triton \S+, NVSHMEM device library \S+\n$`; !regexp.MustCompile(want).MatchString(outs[0]) {
		t.Errorf("version printed %q, want it to match %s", outs[0], want)
	}
}

// Every result says what made it, and run names the launcher that started it.
func TestResultsCarryProvenance(t *testing.T) {
	var out, errb bytes.Buffer
	opts := &BenchOptions{JobOptions: cpuJob(), Ops: []string{"put"}, MinSize: 1024, MaxSize: 1024, Factor: 2, Iters: 2, Warmup: 1, Reps: 1, Runs: 1, Overlap: 1, JSON: true, maxSizeChanged: true}
	if err := runBench(t.Context(), opts, IO{Out: &out, Err: &errb, Args: []string{"bench", "--json"}}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var res result.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	p := res.Header.Provenance
	if p == nil || p.Symmem.Version == "" || p.Symmem.Go == "" || len(p.Kernels) != 64 || p.Host == "" || !strings.HasPrefix(p.Started, "20") || res.Header.Command != "symmem bench --json" {
		t.Errorf("header %+v, provenance %+v", res.Header, p)
	}
	var b bytes.Buffer
	result.PrintRun(&b, result.RunReport{Op: "put", NProc: 2, Pattern: "pair", Backend: "cpu", Launcher: "openmpi", OK: true})
	if !strings.Contains(b.String(), "backend cpu, started by openmpi\n") {
		t.Errorf("run's table does not name its launcher:\n%s", b.String())
	}
}

// Each flag's help states its default once: pflag's "(default X)" came after a usage
// that already said it (bench --max-size: "(default 256M on GPUs, 4M on the CPU
// backend) (default 256M)").
func TestEachDefaultStatedOnce(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.LocalFlags().FlagUsagesWrapped(0), "\n") {
			if n := strings.Count(line, "(default"); n > 1 {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(IO{Out: io.Discard, Err: io.Discard}))
}

// kernels list --impl, --op and --arch keep only what they name (339 lines unfiltered).
func TestKernelsListFilters(t *testing.T) {
	list := func(o KernelsListOptions) (KernelList, error) {
		var out bytes.Buffer
		o.JSON, o.Host = true, func(string) kernels.Host { return kernels.Host{NoGPU: "none in the test"} }
		err := runKernelsList(&o, IO{Out: &out, Err: &out, Backends: binaryBackends})
		var l KernelList
		if err == nil {
			err = json.Unmarshal(out.Bytes(), &l)
		}
		return l, err
	}
	all, err := list(KernelsListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	some, err := list(KernelsListOptions{Impls: []string{"triton"}, Ops: []string{"all-reduce"}, Arch: "sm_90"})
	if err != nil || len(some.Kernels) == 0 || len(some.Kernels) >= len(all.Kernels) {
		t.Fatalf("%d of %d kernels kept (%v)", len(some.Kernels), len(all.Kernels), err)
	}
	for _, k := range some.Kernels {
		if k.Impl != "triton" || !strings.Contains(k.Op, "all-reduce") || !strings.HasPrefix(k.Target, "sm_90") {
			t.Errorf("kept %+v", k)
		}
	}
	if _, err := list(KernelsListOptions{Arch: "x"}); !isUsage(err) {
		t.Errorf("--arch x: %v", err)
	}
	if _, err := list(KernelsListOptions{Impls: []string{"nope"}}); !isUsage(err) {
		t.Errorf("--impl nope: %v", err)
	}
}
