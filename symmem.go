// Package symmem runs symmem's correctness tests from a Go program, as `symmem run`
// does: it starts the ranks, joins them into one team on symmetric memory (NVSHMEM on
// GPUs, or shared memory on the CPU backend, which needs no GPU), runs one operation
// and reports what every rank received and whether it was right.
//
// The ranks are this same program, started again once per rank. A program that calls
// Run must therefore call Init first thing in main: in a process the launcher started
// as a rank, Init runs that rank and returns its exit status for the program to exit
// with, and elsewhere it returns at once. The library never exits the process itself.
//
//	func main() {
//		if code, rank := symmem.Init(); rank {
//			os.Exit(code)
//		}
//		rep, err := symmem.Run(ctx, symmem.Options{NProc: 2, Backend: "cpu"}, symmem.Test{Op: "put", Value: 5})
//		...
//	}
//
// Under an external launcher (srun, mpirun, torchrun) each process is one rank of the
// launcher's job; Run runs it, and only rank 0 gets a Report (the others get nil).
//
// Run's errors carry the exit status symmem gives them (ExitCode) and name a setting by
// the field a program gives it in ("Test.Peer 5 out of range").
//
// Run is the short way through the library's front door, which symmem's command line
// takes for `symmem run` and `symmem bench`: NewJob decides where a job runs from
// JobOptions (every setting of a job, the command line's flags among them), PlanRun and
// PlanBench check a run test or a sweep against it, and Launch runs it. The command line
// takes its flags' defaults from DefaultJobOptions and DefaultRunSpec, as Run does, maps
// errors to exit statuses with ExitCode, and has the errors name its flags instead
// (JobOptions.Words).
//
// The pieces underneath are libraries of their own: pkg/launch starts and supervises
// ranks, pkg/nvshmem binds the NVSHMEM host library and pkg/kernels holds the GPU
// kernels.
package symmem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/launch"
)

// Options say how to start a job.
type Options struct {
	// NProc is the number of ranks to start (one process, and one GPU, each); 0 means
	// 2. Under an external launcher the launcher decides. A zero field takes the
	// default symmem's command line has for it.
	NProc int
	// Backend is "cpu" (shared memory, no GPU), "nvshmem" (GPUs) or "" to take NVSHMEM
	// where it can run and the CPU backend elsewhere.
	Backend string
	// Timeout stops the whole job after this long; 0 means two minutes.
	Timeout time.Duration
	// Stdout gets the ranks' own lines ("[1] Rank 1: received ..."), Stderr their
	// errors and the job's notes; nil means nowhere: the library prints nothing it was
	// not asked to.
	Stdout, Stderr io.Writer
}

// Test is the operation to run and the data to send.
type Test struct {
	// Op is one of Operations whose Runs is set: put, get, put-signal, the
	// collectives, dispatch, combine, signal, put-flag, barrier, get-add and the fused
	// operations.
	Op string
	// Count is the elements per message; 0 means 8.
	Count int64
	// DType is the element type ("int8", "bf16", "float32", ...); "" takes int8 for put,
	// get and put-signal, and bf16 for the collectives (those that sum add in it).
	DType string
	// Value is what rank 0 sends (with more than 2 ranks, rank r sends Value+r).
	Value float64
	// Peer is the rank rank 0 talks to with 2 ranks; 0 means 1.
	Peer int
	// Impl names the implementation ("" takes the backend's first: triton on GPUs).
	Impl string
	// Root is the root of broadcast, reduce, gather and scatter.
	Root int
	// Matmul is the fused operations' shape (nil: DefaultMatmul); Random fills their
	// matrices with random values, checked within a tolerance.
	Matmul *Matmul
	Random bool
}

// Report is a finished test, merged across ranks.
type Report struct {
	Op, Impl, Backend, DType, Pattern string
	NProc                             int
	Bytes                             int64 // one message
	OK                                bool  // every rank got what it should have
	Ranks                             []RankReport
	failure                           string
}

// RankReport is what one rank checked.
type RankReport struct {
	Rank     int
	From     int    // the rank whose data it checked; -1 when it checked none
	Expected string // the value it should hold ("5")
	Received string // what it holds ("[5, 5, 5, 5, 5, 5, 5, 5]")
	Wrong    int64  // elements that differ from Expected
	OK       bool
}

// Failure says which ranks received wrong data; "" when the test passed.
func (r *Report) Failure() string { return r.failure }

// ErrWrongData is wrapped by Run's error when the job ran but some rank received wrong
// data or none (the Report says which).
var ErrWrongData = errors.New("some rank received wrong data")

// Run starts the job, runs the test on every rank and returns the merged report. A
// job that ran but delivered wrong data returns the report and an error wrapping
// ErrWrongData. It is NewJob, PlanRun and Launch with o's and t's settings over the
// defaults.
func Run(ctx context.Context, o Options, t Test) (*Report, error) {
	if !initialised.Load() {
		return nil, exitcode.With(exitcode.Usage, errors.New("symmem.Run: call symmem.Init first thing in main (its ranks are this program started again, and Init runs them)"))
	}
	jo := DefaultJobOptions()
	if o.NProc != 0 {
		jo.NProc = o.NProc
	}
	if o.Backend != "" {
		jo.Backend = o.Backend
	}
	if o.Timeout != 0 {
		jo.Timeout = o.Timeout
	}
	jo.Stdout, jo.Stderr = o.Stdout, o.Stderr
	jo.Words = func(key string) string { return runWords.Word(setting.Name(key)) }
	spec := DefaultRunSpec()
	spec.Op, spec.DType, spec.Value, spec.Launch.Impl = t.Op, t.DType, t.Value, t.Impl
	if t.Count != 0 {
		spec.Count = t.Count
	}
	if t.Peer != 0 {
		spec.Peer = t.Peer
	}
	spec.Root, spec.Matmul, spec.Random = t.Root, t.Matmul, t.Random
	job, err := NewJob(jo)
	if err != nil {
		return nil, err
	}
	plan, err := job.PlanRun(spec)
	if err != nil {
		return nil, err
	}
	out, err := job.Launch(ctx, plan)
	if err != nil || out == nil {
		return nil, err
	}
	rep := report(*out.Run)
	if !rep.OK {
		return rep, fmt.Errorf("%w: %s", ErrWrongData, rep.failure)
	}
	return rep, nil
}

func report(r RunResult) *Report {
	rep := &Report{Op: r.Op, Impl: r.Impl, Backend: r.Backend, DType: r.DType, Pattern: r.Pattern, NProc: r.NProc,
		Bytes: r.Bytes, OK: r.OK, failure: r.Failure()}
	for _, x := range r.Results {
		rep.Ranks = append(rep.Ranks, RankReport{Rank: x.Rank, From: x.From, Expected: x.Expected, Received: x.Received, Wrong: x.Wrong, OK: x.OK})
	}
	return rep
}

// initialised says Init was called: without it the ranks, this program started again,
// would run the program's own main instead of their rank.
var initialised atomic.Bool

// Init runs this process's rank when symmem's launcher started it as one (Run in the
// parent process), and returns the status the process must exit with and rank = true;
// elsewhere it returns at once with rank = false. Call it first in main, before flags
// are parsed (a rank's command line is not the program's own), and exit with code
// when rank is true: the launcher reads a rank's status to tell wrong data from a
// crash, and a rank that ended itself (stuck past --timeout) may have left goroutines
// behind.
func Init() (code int, rank bool) {
	initialised.Store(true)
	if os.Getenv(launch.EnvWorker) != "1" || len(os.Args) < 2 || os.Args[1] != WorkerArg {
		return 0, false
	}
	// The launcher stops a rank with SIGTERM (then SIGKILL): the rank cleans up and
	// exits with the status that says it was interrupted.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Worker(ctx, os.Stdout)
	stop()
	if err != nil && !exitcode.IsSaid(err) {
		fmt.Fprintln(os.Stderr, "symmem: "+runWords.Error(err).Error())
	}
	return ExitCode(err), true
}

// Worker runs the rank symmem's launcher started this process as, writing the rank's
// own lines to out. Init calls it; a program with a command tree of its own (symmem's
// hidden __worker command) calls it from there.
func Worker(ctx context.Context, out io.Writer) error {
	return engine.Worker(ctx, out, factories(Backends()))
}

// runWords name a setting by the field of Options or Test that sets it, else as a
// job's errors do (jobWords): Run's errors, and its ranks' (Init), speak to a program
// that set Options and Test.
var runWords setting.Words = func(n setting.Name) string {
	if f, ok := runFields[n]; ok {
		return f
	}
	return jobWords.Word(n)
}

// runFields are the fields of Options and Test, by the setting each sets.
var runFields = map[setting.Name]string{
	setting.NProc: "Options.NProc", setting.Backend: "Options.Backend", setting.Timeout: "Options.Timeout",
	setting.Op: "Test.Op", setting.Count: "Test.Count", setting.DType: "Test.DType", setting.Value: "Test.Value",
	setting.Peer: "Test.Peer", setting.Impl: "Test.Impl",
}

// FewDevices says whether err (of NewJob) is that this machine has fewer GPUs than the
// job's ranks (JobOptions.NProc): nothing is missing that could be installed. symmem
// bench adds a word for those who typed nccl-tests' -n, its iterations.
func FewDevices(err error) bool {
	var few backend.FewDevices
	return errors.As(err, &few) && few.FewDevices()
}

// ExitCode is the exit status for an error of the library (Run, a Job, Worker): 0 for
// nil, 3 when data was wrong or never arrived, 4 when a rank failed, 5 on timeout, 130
// when interrupted, 2 for bad input, 7 where the GPU backend cannot run, 1 otherwise.
// symmem's command line maps its own errors with it too (bench compare's 6 and 8
// among them). A rank must exit with it: the launcher reads a rank's status to tell
// wrong data from a crash.
func ExitCode(err error) int {
	var ce *exitcode.Err
	switch {
	case err == nil:
		return exitcode.OK
	case errors.As(err, &ce):
		return ce.Code
	case errors.Is(err, ErrWrongData):
		return exitcode.WrongResults
	case errors.Is(err, context.Canceled):
		return exitcode.Interrupted
	}
	return exitcode.Error
}
