package outside_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem"
)

// The ranks of the jobs are this test binary, started again: Init runs them.
func TestMain(m *testing.M) {
	if code, rank := symmem.Init(); rank {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// cpu is the CPU backend alone: no GPU is probed.
func cpu(t *testing.T) []symmem.Backend {
	for _, b := range symmem.Backends() {
		if b.Name() == symmem.CPU {
			return []symmem.Backend{b}
		}
	}
	t.Fatal("the library has no CPU backend")
	return nil
}

// Every field of the options and specs can be set from this module: these values set
// each one (a type this module cannot name would not build), and every field of each
// is set (a field added to the library and left out here fails the test).
func TestEveryFieldIsSet(t *testing.T) {
	var out bytes.Buffer
	job := symmem.JobOptions{NProc: 2, Backend: "cpu", Timeout: time.Minute, HeapSize: 64 << 20, StoreAddr: "127.0.0.1:0",
		StoreFlag: "--store-addr", Launcher: "local", StoreIface: "lo", TagOutput: true, NVSHMEMLib: "libnvshmem_host.so.3",
		NCCLLib: "libnccl.so.2", WaitLimit: 5 * time.Second, StallLimit: 5 * time.Second, KernelsDir: "mykernels", DryRun: true,
		Backends: cpu(t), Stdout: &out, Stderr: &out, Words: func(key string) string { return "<" + key + ">" }}
	moe := &symmem.MoE{Tokens: 32, Hidden: 16, TopK: 2, Experts: 4, Seed: 3, Skew: 0.5}
	mm := &symmem.Matmul{M: 64, N: 32, K: 16}
	run := symmem.RunSpec{Op: "all-reduce", Pattern: "ring", DType: "float32", RedOp: "max", Count: 64, Value: 1, Peer: 1, Root: 1,
		Launch: symmem.Launch{Impl: "memcpy", Blocks: 1, Warps: 1}, MoE: moe, Matmul: mm, Random: true}
	bench := symmem.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"}, MinSize: 1 << 10, MaxSize: 4 << 10, Factor: 4,
		Iters: 2, Warmup: 1, Reps: 2, Blocks: 1, Warps: 1, Overlap: 2, Graph: true, Bidir: true, Matrix: true, Tune: true,
		LatencySize: 8, PerIterMax: 1 << 10, DType: "float32", RedOps: []string{"max"}, Algo: "one-shot", Root: 1, MoE: moe, Matmul: mm}
	for _, v := range []any{job, run, bench} {
		everyFieldSet(t, reflect.ValueOf(v), reflect.TypeOf(v).Name())
	}
	if err := job.Check(); err != nil {
		t.Errorf("JobOptions.Check: %v", err)
	}
}

// everyFieldSet fails t for each field of the struct v (and of the structs it holds)
// left at its zero value.
func everyFieldSet(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	for i := range v.NumField() {
		f, field := v.Field(i), name+"."+v.Type().Field(i).Name
		switch {
		case f.IsZero():
			t.Errorf("%s is not set", field)
		case f.Kind() == reflect.Struct || f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct:
			everyFieldSet(t, f, field)
		}
	}
}

// jobOn is a job of two ranks on the CPU backend, its errors naming each setting
// <key>; the ranks' lines go to out.
func jobOn(t *testing.T, out io.Writer) *symmem.Job {
	t.Helper()
	o := symmem.DefaultJobOptions()
	o.NProc, o.Backend, o.Timeout, o.HeapSize, o.Backends, o.StoreFlag, o.Launcher = 2, "cpu", time.Minute, 256<<20, cpu(t), "--store-addr", "local"
	o.WaitLimit, o.StallLimit, o.TagOutput, o.Stdout, o.Stderr = 10*time.Second, 10*time.Second, true, out, out
	o.Words = func(key string) string { return "<" + key + ">" }
	job, err := symmem.NewJob(o)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// A put test: rank 0 writes eight 5s into rank 1's buffer, which checks them.
func TestPut(t *testing.T) {
	var out bytes.Buffer
	job := jobOn(t, &out)
	plan, err := job.PlanRun(symmem.RunSpec{Op: "put", Pattern: "pair", DType: "int8", Count: 8, Value: 5, Peer: 1, Launch: symmem.Launch{Impl: "memcpy"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := job.Launch(context.Background(), plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r := res.Run; !r.OK || r.Op != "put" || r.Bytes != 8 || r.Results[1].Received != "[5, 5, 5, 5, 5, 5, 5, 5]" {
		t.Errorf("put: %+v\n%s", r, out.String())
	}
}

// A dispatch of a MoE layer set here: every rank checks the tokens it received.
func TestDispatch(t *testing.T) {
	var out bytes.Buffer
	job := jobOn(t, &out)
	spec := symmem.DefaultRunSpec()
	spec.Op, spec.DType = "dispatch", "bf16"
	spec.MoE = &symmem.MoE{Tokens: 32, Hidden: 16, TopK: 2, Experts: 4, Seed: 3, Skew: 0.5}
	plan, err := job.PlanRun(spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := job.Launch(context.Background(), plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r := res.Run; !r.OK || r.Op != "dispatch" || len(r.Results) != 2 {
		t.Errorf("dispatch: %+v\n%s", r, out.String())
	}
}

// A fused all-gather-matmul of a shape set here, of random values: every rank checks
// its C within the tolerance it reports.
func TestAllGatherMatmul(t *testing.T) {
	var out bytes.Buffer
	job := jobOn(t, &out)
	spec := symmem.DefaultRunSpec()
	spec.Op, spec.DType, spec.Matmul, spec.Random = "all-gather-matmul", "bf16", &symmem.Matmul{M: 64, N: 32, K: 16}, true
	plan, err := job.PlanRun(spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := job.Launch(context.Background(), plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r := res.Run; !r.OK || r.Op != "all-gather-matmul" || len(r.Results) != 2 {
		t.Errorf("all-gather-matmul: %+v\n%s", r, out.String())
	}
}

// A tiny sweep of a put and an all-reduce under max, every row checked.
func TestBench(t *testing.T) {
	var out bytes.Buffer
	job := jobOn(t, &out)
	spec := symmem.DefaultBenchSpec()
	spec.Ops, spec.Impls, spec.MinSize, spec.MaxSize, spec.Factor = []string{"put", "all-reduce"}, []string{"memcpy"}, 1<<10, 4<<10, 4
	spec.Iters, spec.Warmup, spec.Reps, spec.DType, spec.RedOps = 2, 1, 2, "float32", []string{"max"}
	plan, err := job.PlanBench(spec)
	if err != nil {
		t.Fatal(err)
	}
	if sw := plan.Sweep(); sw.Rows != 4 || strings.Join(sw.RedOps, ",") != "max" {
		t.Errorf("planned %d rows, reduction operators %v; want 4, max", sw.Rows, sw.RedOps)
	}
	res, err := job.Launch(context.Background(), plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if b := res.Bench; !b.OK || len(b.Rows) != 4 {
		t.Errorf("bench: ok %v, %d rows\n%s", b.OK, len(b.Rows), out.String())
	}
}

// The job's errors name a setting by the program's Words.
func TestWords(t *testing.T) {
	job := jobOn(t, io.Discard)
	_, err := job.PlanRun(symmem.RunSpec{Op: "put", Count: 8, Peer: 5})
	if want := "<peer> 5 out of range: rank 0 talks to a peer in 1..1"; err == nil || err.Error() != want || symmem.ExitCode(err) != symmem.ExitUsage {
		t.Errorf("got %v (exit %d), want %q (exit %d)", err, symmem.ExitCode(err), want, symmem.ExitUsage)
	}
}

// A program that runs the put test through the library prints nothing, on stdout or
// stderr, and says how it went by its exit status alone.
func TestLibraryIsQuiet(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/quiet"
	build := exec.Command("go", "build", "-o", bin, "./quiet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./quiet: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	run := exec.Command(bin)
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("quiet: %v\nstderr: %s", err, stderr.String())
	}
	if stdout.Len() > 0 || stderr.Len() > 0 {
		t.Errorf("a program of the library printed what it did not ask for:\nstdout: %q\nstderr: %q", stdout.String(), stderr.String())
	}
}

// Run's short form reaches the rooted and fused operations' settings: a reduce to root
// 2 and an all-gather-matmul of a shape set here.
func TestRunShortForm(t *testing.T) {
	rep, err := symmem.Run(context.Background(), symmem.Options{NProc: 3, Backend: symmem.CPU},
		symmem.Test{Op: "reduce", Root: 2, Count: 4, Impl: "memcpy"})
	if err != nil || !rep.OK {
		t.Fatalf("reduce to root 2: %v %+v", err, rep)
	}
	if got := rep.Ranks[2].Expected; got != "[3, 6, 9, 12]" { // value 0: the sum over ranks r of r + k
		t.Errorf("the root must hold the reduction: expected %q", got)
	}
	rep, err = symmem.Run(context.Background(), symmem.Options{NProc: 2, Backend: symmem.CPU},
		symmem.Test{Op: "all-gather-matmul", Matmul: &symmem.Matmul{M: 64, N: 32, K: 48}, Random: true})
	if err != nil || !rep.OK || rep.Bytes != 64*32*2 {
		t.Fatalf("all-gather-matmul 64 x 32 x 48: %v %+v", err, rep)
	}
}
