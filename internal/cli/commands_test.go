package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
)

// Flags land in the options as typed values (first level of a command's tests).
func TestRunFlagsToOptions(t *testing.T) {
	var got *RunOptions
	cmd := NewCmdRun(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(o *RunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"put-signal", "--count", "1M", "--dtype", "bf16", "--impl", "cuda", "--warps", "8", "-n", "4", "--wait-limit", "3s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	spec, err := got.spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Op != "put-signal" || spec.Count != 1<<20 || spec.DType != "bf16" || spec.Launch.Impl != "cuda" || spec.Launch.Warps != 8 ||
		got.NProc != 4 || got.WaitLimit != 3*time.Second || got.Backend != "auto" {
		t.Errorf("options %+v, spec %+v", got, spec)
	}
}

// The engine is told the flag that gives the store's address, with which the
// stopped-rank search reads it in another rank's command line: the flag the command
// took the address from.
func TestStoreFlagIsTheCommands(t *testing.T) {
	var got *RunOptions
	cmd := NewCmdRun(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(o *RunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"put", "--store-addr", "127.0.0.1:31000"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	name := got.StoreFlag
	f := cmd.Flags().Lookup(strings.TrimPrefix(name, "--"))
	if !strings.HasPrefix(name, "--") || f == nil || f.Value.String() != "127.0.0.1:31000" {
		t.Errorf("engine.Options.StoreFlag is %q, not the flag that gave the store's address", name)
	}
}

func TestBenchFlagsToOptions(t *testing.T) {
	var got *BenchOptions
	cmd := NewCmdBench(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(o *BenchOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--op", "put,latency", "--min-size", "1K", "--overlap", "2", "--reps", "3"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	s := got.spec()
	if strings.Join(s.Ops, ",") != "put,latency" || s.MinSize != 1024 || s.MaxSize != 0 || s.Overlap != 2 || s.Reps != 3 {
		t.Errorf("spec %+v", s)
	}
	// --max-size left out is the backend's default.
	for backend, want := range map[string]symmem.Size{symmem.CPU: 4 << 20, symmem.NVSHMEM: 256 << 20} {
		if got := planned(t, backend, s).Spec.MaxSize; got != want {
			t.Errorf("default max size on the %s backend %s, want %s", backend, got, want)
		}
	}
	// An op or implementation named twice runs once, and the header says so.
	cmd = NewCmdBench(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(o *BenchOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--op", "put,put,collectives,broadcast", "--impl", "memcpy,memcpy"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	sw := planned(t, symmem.CPU, got.spec())
	if got, impls := strings.Join(sw.Spec.Ops, ","), strings.Join(sw.Spec.Impls, ","); got != "put,"+strings.Join(ops.Strings(ops.Collectives()), ",") || impls != "memcpy" {
		t.Errorf("--op put,put,collectives,broadcast --impl memcpy,memcpy: ops %s, impls %s", got, impls)
	}
}

// planned is the sweep s as a dry run plans it on the backend named.
func planned(t *testing.T, backend string, s symmem.BenchSpec) *symmem.Sweep {
	t.Helper()
	o := cpuJob()
	o.Backend, o.DryRun, o.Backends, o.HeapSize = backend, true, binaryBackends, 4<<30
	job, err := symmem.NewJob(o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := job.PlanBench(s)
	if err != nil {
		t.Fatalf("%s: %v", backend, err)
	}
	return p.Sweep()
}

func cpuJob() JobOptions {
	return JobOptions{NProc: 2, Backend: "cpu", Timeout: 30 * time.Second, HeapSize: 1 << 30, TagOutput: true, WaitLimit: 5 * time.Second}
}

// The run function, called without cobra, prints what the ranks received and the
// table (second level).
func TestRunPrintsWhatArrived(t *testing.T) {
	var out, errb bytes.Buffer
	opts := &RunOptions{JobOptions: cpuJob(), Op: "put", Count: 8, DType: "int8", Value: 5, Peer: 1}
	if err := runRun(context.Background(), opts, IO{Out: &out, Err: &errb}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"[1] Rank 1: received out=[5, 5, 5, 5, 5, 5, 5, 5]", "│    1 │    0 │     8 │        5 │     0 │     ok │", "PASS in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "backend: cpu") {
		t.Errorf("stderr: %s", errb.String())
	}
}

func TestRunBadInputIsUsage(t *testing.T) {
	for _, o := range []RunOptions{
		{JobOptions: cpuJob(), Op: "put", Count: 8, DType: "int8", Peer: 1, Impl: "sm-store"},
		{JobOptions: cpuJob(), Op: "fly", Count: 8, DType: "int8", Peer: 1},
		{JobOptions: func() JobOptions { j := cpuJob(); j.NProc = 0; return j }(), Op: "put", Count: 8, DType: "int8", Peer: 1},
	} {
		err := runRun(context.Background(), &o, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
		var ce *exitcode.Err
		if !errors.As(err, &ce) || ce.Code != exitcode.Usage {
			t.Errorf("%+v: %v, want bad input (exit 2)", o, err)
		}
	}
}

func TestBenchPrintsCheckedTables(t *testing.T) {
	var out, errb bytes.Buffer
	opts := &BenchOptions{JobOptions: cpuJob(), Ops: []string{"put", "latency"}, MinSize: 1024, MaxSize: 4096, Factor: 4,
		Iters: 3, Warmup: 1, Reps: 2, Runs: 1, Overlap: 1, maxSizeChanged: true}
	if err := runBench(context.Background(), opts, IO{Out: &out, Err: &errb, Args: []string{"bench", "--op", "put,latency"}}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{`# symmem bench --op put,latency\n`, `# timing: the wall clock`, `│ +4K │ +0->1 │ memcpy │`, `latency \(half round trip`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// compare fails a result whose rows hold wrong bytes even where its "ok" says true:
// here a row of the old result, repeated, so that the row compared is the right one.
func TestCompareFailsWrongRowsOfAnOKResult(t *testing.T) {
	row := result.Row{Op: "put", Impl: "memcpy", Size: 1024, Src: 0, Dst: 1, TimesUS: []float64{1, 1, 1}, Checked: true}
	row.Finish()
	bad := row
	bad.Wrong = 5
	h := result.Header{Backend: "cpu", NProc: 2, Spec: result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, Iters: 20, Reps: 3}}
	old := result.Result{Header: h, Rows: []result.Row{bad, row}, OK: true}
	cur := result.Result{Header: h, Rows: []result.Row{row}, OK: true}
	var out bytes.Buffer
	err := runBenchCompare(IO{Out: &out, Err: &out}, [2]string{"old.json", "new.json"}, old, cur, result.CompareOptions{ThresholdPct: 5}, false)
	var ce *exitcode.Err
	if !errors.As(err, &ce) || ce.Code != exitcode.CompareFailed || !strings.Contains(out.String(), "FAILED: old.json failed its checks: put memcpy 1K 0->1: 5 wrong bytes") {
		t.Fatalf("%v:\n%s", err, out.String())
	}
}

// compare notes a user's implementation whose kernels were built from other sources:
// its rows measured other code.
func TestCompareNotesAnotherBuildOfAUsersKernels(t *testing.T) {
	row := result.Row{Op: "put", Impl: "mine", Size: 1024, Src: 0, Dst: 1, TimesUS: []float64{1, 1, 1}, Checked: true}
	row.Finish()
	h := result.Header{Backend: "nvshmem", NProc: 2, Spec: result.BenchSpec{Ops: []string{"put"}, Impls: []string{"mine"}, Iters: 20, Reps: 3},
		Kernels: map[string]result.KernelSource{"mine": {Dir: "k", Source: "aaaaaaaaaaaaaaaaaaaa"}}}
	h2 := h
	h2.Kernels = map[string]result.KernelSource{"mine": {Dir: "k", Source: "bbbbbbbbbbbbbbbbbbbb"}}
	for _, tc := range []struct {
		new  result.Header
		note bool
	}{{h, false}, {h2, true}} {
		var out bytes.Buffer
		err := runBenchCompare(IO{Out: &out, Err: &out}, [2]string{"old.json", "new.json"}, result.Result{Header: h, Rows: []result.Row{row}, OK: true},
			result.Result{Header: tc.new, Rows: []result.Row{row}, OK: true}, result.CompareOptions{ThresholdPct: 5}, false)
		if err != nil {
			t.Fatal(err)
		}
		note := "mine's kernels differ: built from sources aaaaaaaaaaaa in the old result, bbbbbbbbbbbb in the new"
		if strings.Contains(out.String(), note) != tc.note {
			t.Errorf("note %v, want %v:\n%s", strings.Contains(out.String(), note), tc.note, out.String())
		}
	}
}

// -n is the ranks in bench as in run (nccl-tests' -n, the iterations, is --iters), the
// rest of nccl-tests' letters are theirs, and -J names the file the JSON goes to.
func TestBenchLettersToOptions(t *testing.T) {
	args := []string{"-n", "4", "--iters", "7", "-b", "8", "-e", "1K", "-f", "4", "-w", "2", "-G", "-d", "float32", "-o", "max", "-J", "r.json", "--op", "all-reduce"}
	var got *BenchOptions
	cmd := NewCmdBench(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Args: args}, func(o *BenchOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	s := got.spec()
	if got.NProc != 4 || !got.nprocByLetter || s.Iters != 7 || s.MinSize != 8 || s.MaxSize != 1024 || s.Factor != 4 || s.Warmup != 2 || !s.Graph ||
		s.DType != "float32" || strings.Join(s.RedOps, ",") != "max" || got.JSONFile != "r.json" {
		t.Errorf("options %+v, spec %+v", got, s)
	}
}

// typedLetter tells -n from --nproc however the command line spells them.
func TestTypedLetter(t *testing.T) {
	fs := NewCmdBench(IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, nil).Flags()
	for _, tc := range []struct {
		args string
		want bool
	}{
		{"-n 4", true},
		{"-n4", true},
		{"-Gn 4", true},
		{"-n=4", true},
		{"--nproc 4", false},
		{"--nproc=4 --iters 3", false},
		{"-n 4 --nproc 8", false},
		{"--nproc 8 -n 4", true},
		{"-b -n", false},             // -n is -b's value
		{"--op -n --nproc 3", false}, // and --op's
		{"-bn", false},
		{"-- -n 4", false},
		{"--iters 4", false},
	} {
		if got := typedLetter(fs, strings.Fields(tc.args), "nproc"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.args, got, tc.want)
		}
	}
}

// fewGPUsError is a GPU backend's refusal of more ranks than the machine has GPUs
// (the library's test has a job give it: symmem.FewDevices).
type fewGPUsError int

func (e fewGPUsError) Error() string {
	return fmt.Sprintf("--nproc %d needs %d GPUs, this machine has 1", int(e), int(e))
}
func (fewGPUsError) FewDevices() bool { return true }

// Ranks given as -n that the machine cannot hold are refused with a word for those
// who meant nccl-tests' -n; given as --nproc, without it; and no other refusal of a
// job gets it.
func TestBenchRanksByLetterBeyondTheGPUs(t *testing.T) {
	const hint = "; as in nccl-tests? iterations are --iters here"
	few := symmem.WithExitCode(symmem.ExitNoGPUBackend, fmt.Errorf("--backend nvshmem cannot run here: %w", fewGPUsError(16)))
	for _, c := range []struct {
		err      error
		byLetter bool
		want     bool
	}{
		{few, true, true},
		{few, false, false},
		{symmem.WithExitCode(symmem.ExitNoGPUBackend, errors.New("--backend nvshmem cannot run here: the NVIDIA driver sees no GPU")), true, false},
	} {
		h := ""
		if c.byLetter {
			h = hint
		}
		err := ranksHint(c.err, h)
		if got := strings.HasSuffix(err.Error(), hint); got != c.want || symmem.ExitCode(err) != symmem.ExitNoGPUBackend {
			t.Errorf("%v by letter %v: %v (exit %d), want the hint %v", c.err, c.byLetter, err, symmem.ExitCode(err), c.want)
		}
	}
}
