package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// spawn runs j on this machine's ranks through symmem's launcher and returns what each
// rank reported and how long each rank's backend teardown took. A sweep that ends
// early (a stall past --timeout, an interruption, a failed rank) returns, with its
// error, the rows measured until then (partial).
func (e *Engine) spawn(ctx context.Context, j Job) (raw [][]byte, finalize []float64, partial *result.Result, err error) {
	jobID := newJobID()
	prepared, err := j.factory.Prepare(jobID, j.NProc, j.Heap, true)
	if err != nil {
		return nil, nil, nil, err
	}
	defer prepared.Cleanup()
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	env := append(append(os.Environ(), EnvJob+"="+string(spec)), prepared.Env...)
	grace, err := testGrace()
	if err != nil {
		return nil, nil, nil, err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A sweep's --timeout bounds the time between measurements (watchSweep): a long
	// healthy sweep runs to its end, a stalled one is stopped.
	timeout := e.opts.Timeout
	var f *feed
	if j.Bench != nil {
		timeout, f = 0, &feed{j: j, launcher: e.Launcher(), peaks: peaksOf(j), words: e.opts.Words}
	}
	stop := func() {}
	errLog := newStderrLog(e.Stderr)
	lj, err := launch.Run(ctx, launch.Config{
		NProc: j.NProc, Argv: []string{exe, WorkerArg}, Env: env,
		Timeout: timeout, Stdout: e.Stdout, Stderr: errLog, TagOutput: e.opts.TagOutput,
		JobID: jobID, StoreAddr: e.opts.StoreAddr, StallLimit: e.opts.StallLimit, Grace: grace, ExtraFiles: prepared.Files, TimerSlack: prepared.TimerSlack,
		OnStart: func(srv *store.Server) {
			if f != nil {
				f.srv = srv
				stop = e.watchSweep(f, e.opts.Timeout, cancel)
			}
		},
	})
	stop()
	if lj != nil {
		defer lj.Store.Close()
	}
	err = nameSettings(err)
	err = rankError(err, errLog, errLog.finish(err))
	if err != nil {
		var stalled *SweepStalledError
		if cause := context.Cause(ctx); errors.As(cause, &stalled) && errors.Is(err, launch.ErrInterrupted) {
			err = stalled
		}
		why := err
		if cause := context.Cause(parent); cause != nil && cause != context.Canceled && errors.Is(err, launch.ErrInterrupted) {
			why = cause // the signal that interrupted it
		}
		if f != nil && f.srv != nil {
			partial = f.partial(why)
		}
		return nil, nil, partial, classify(err)
	}
	raw, err = collect(lj.Store, j.NProc)
	return raw, finalizeTimes(lj.Store, j.NProc), nil, err
}

// nameSettings is err with the settings that change what the launcher's errors in it
// speak of named by value: left unnamed, pkg/launch says "the timeout" and "a store
// address".
func nameSettings(err error) error {
	var te *launch.TimeoutError
	if errors.As(err, &te) && te.Setting == "" {
		err = setting.Naming(err, setting.Timeout, func(s string) { te.Setting = s })
	}
	var le *launch.ListenError
	if errors.As(err, &le) && le.Setting == "" {
		err = setting.Naming(err, setting.StoreAddr, func(s string) { le.Setting = s })
	}
	return err
}

// runExternalRank is this process's rank of a job that srun, mpirun or torchrun
// started; rank 0 returns everyone's results.
func (e *Engine) runExternalRank(ctx context.Context, j Job) ([][]byte, *result.Result, error) {
	if e.place.Rank == 0 {
		// The ranks are started: what Prepare would give them they find themselves
		// (the GPU backend's Open applies NVSHMEM's settings), but what they share on
		// the host (the CPU backend's heap) rank 0 makes.
		prepared, err := j.factory.Prepare(e.place.JobID, j.NProc, j.Heap, false)
		if err != nil {
			return nil, nil, err
		}
		defer prepared.Cleanup()
		defer atExit(prepared.Cleanup)()
	}
	defer watchdog(ctx, e.opts.Timeout, e.place.Rank, e.Stderr, e.opts.Words)()
	// Rank 0 reports: it shows a sweep's rows as they land in the store it hosts, and
	// keeps them should the sweep end early. (--timeout stays the watchdog's: no
	// launcher of ours can stop the other ranks here.)
	var f *feed
	stop := func() {}
	var hosted func(*store.Server)
	if j.Bench != nil && e.Reports() {
		f = &feed{j: j, launcher: e.Launcher(), peaks: peaksOf(j), words: e.opts.Words}
		hosted = func(srv *store.Server) {
			f.srv = srv
			stop = e.watchSweep(f, 0, nil)
		}
	}
	if f != nil {
		// A rank stuck where it cannot be cancelled (a shared-memory barrier) makes the
		// watchdog end the process: what was measured goes out first.
		defer atExit(func() {
			stop()
			why := setting.Errorf("stopped: the job ran past %s %s", setting.Timeout, e.opts.Timeout)
			if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
				why = cause
			} else if ctx.Err() != nil {
				why = launch.ErrInterrupted
			}
			if e.Abandoned != nil && f.srv != nil {
				e.Abandoned(*f.partial(why))
			}
		})()
	}
	raw, err := untilEnded(func() ([][]byte, error) { return lifecycle(ctx, e.place, j, e.Stdout, e.start, hosted, e.opts.Words) })
	stop()
	if exitcode.IsSaid(err) {
		return nil, nil, err // what was measured went out through Abandoned
	}
	err = classify(interrupted(err, e.place.Rank))
	if err != nil && f != nil && f.srv != nil {
		why := err
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			why = cause
		}
		return nil, f.partial(why), err
	}
	return raw, nil, err
}

// interrupted says that Ctrl-C or SIGTERM ended a wait of rank's (for peers to join, or
// in a barrier) as the watchdog does, where err is only "context canceled".
func interrupted(err error, rank int) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("rank %d: %w", rank, launch.ErrInterrupted)
	}
	return err
}

// watchdog ends this rank when the job runs past --timeout or the user interrupts
// it and the rank does not return within a second. Under an external launcher no
// launcher of ours stops a rank that waits for a peer that failed, and such a wait (a
// shared-memory barrier, a GPU stream) cannot be cancelled, so the rank ends (exit):
// its process exits, the OS releases its GPU and memory, and exit's hooks remove what
// the OS does not (rank 0's heap file). stop disarms it.
func watchdog(ctx context.Context, timeout time.Duration, rank int, errw io.Writer, words setting.Words) (stop func()) {
	done := make(chan struct{})
	go func() {
		var expired <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-done:
		case <-expired:
			words.Fprintf(errw, "symmem: rank %d: the job ran past %s %s (a peer may have failed); stopping\n", rank, setting.Timeout, timeout)
			exit(exitcode.Timeout)
		case <-ctx.Done():
			select {
			case <-done: // the rank noticed and returned in time
			case <-time.After(time.Second):
				fmt.Fprintf(errw, "symmem: rank %d: interrupted\n", rank)
				exit(exitcode.Interrupted)
			}
		}
	}()
	return func() { close(done) }
}

// exitHooks remove what the OS does not when a rank ends itself (exit): the rank's own
// goroutine is left where it is stuck, so its deferred calls never run, and rank 0 of an
// external job owns its CPU heap file, which left behind makes the next job of the same
// ID fail.
var exitHooks struct {
	sync.Mutex
	next int
	fns  map[int]func()
}

// atExit has exit run f; the returned func takes it back.
func atExit(f func()) (remove func()) {
	exitHooks.Lock()
	defer exitHooks.Unlock()
	if exitHooks.fns == nil {
		exitHooks.fns = map[int]func(){}
	}
	id := exitHooks.next
	exitHooks.next++
	exitHooks.fns[id] = f
	return func() {
		exitHooks.Lock()
		delete(exitHooks.fns, id)
		exitHooks.Unlock()
	}
}

// ending is how a rank ends where it cannot return: a wait in a shared-memory barrier
// or on a GPU stream cannot be cancelled. exit makes the rank's entry point (Worker,
// or Launch under an external launcher) return at once with the exit status that says
// why, and leaves the stuck goroutine to the process's owner, which exits (symmem's
// main does so at once). The engine never ends the process itself: a program that
// embeds it decides. One rank runs in a process at a time, so one is current.
var ending struct {
	sync.Mutex
	ch chan int // the current rank's; nil where none runs
}

// untilEnded runs a rank's life and returns what it returns, or, as soon as exit is
// called, the code exit was given (as an error that says nothing more: what ended
// the rank was said when it happened).
func untilEnded(life func() ([][]byte, error)) ([][]byte, error) {
	ended := make(chan int, 1)
	ending.Lock()
	ending.ch = ended
	ending.Unlock()
	defer func() {
		ending.Lock()
		ending.ch = nil
		ending.Unlock()
	}()
	type outcome struct {
		raw [][]byte
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		raw, err := life()
		done <- outcome{raw, err}
	}()
	select {
	case o := <-done:
		return o.raw, o.err
	case code := <-ended:
		return nil, exitcode.Said(code)
	}
}

// exit ends the current rank with code after the hooks atExit gave it; the goroutine
// that calls it goes no further, as though the process had ended.
func exit(code int) {
	exitHooks.Lock()
	for id, f := range exitHooks.fns {
		f()
		delete(exitHooks.fns, id)
	}
	exitHooks.Unlock()
	end(code)
}

// end is exit without the hooks: a rank that dies as a crashed process would.
func end(code int) {
	ending.Lock()
	if ending.ch != nil {
		select {
		case ending.ch <- code:
		default: // another exit came first
		}
	}
	ending.Unlock()
	select {}
}

// classify gives a failed job its exit status: a rank that found undelivered data
// (it exits with WrongResults and says so on its stderr) makes the job's results wrong;
// any other failing rank, the timeout and an interruption have codes of their own.
func classify(err error) error {
	var we *launch.WorkerError
	switch {
	case errors.Is(err, backend.ErrUndelivered):
		return exitcode.With(exitcode.WrongResults, err)
	case errors.As(err, &we) && we.Status == exitcode.WrongResults:
		return exitcode.With(exitcode.WrongResults, err)
	case errors.As(err, &we), errors.As(err, new(*launch.StalledError)):
		return exitcode.With(exitcode.WorkerFailed, err)
	case errors.Is(err, launch.ErrTimeout), errors.As(err, new(*SweepStalledError)):
		return exitcode.With(exitcode.Timeout, err)
	case errors.Is(err, launch.ErrInterrupted), errors.Is(err, context.Canceled), errors.Is(err, backend.ErrStopped):
		return exitcode.With(exitcode.Interrupted, err)
	case errors.As(err, new(*launch.ListenError)):
		// The store cannot listen where the user said: the address is theirs to change.
		return exitcode.With(exitcode.Usage, err)
	case errors.Is(err, store.ErrLost), errors.Is(err, store.ErrSilent):
		// The store's host is gone, or stopped before it answered: symmem's launcher,
		// or rank 0 of an external job.
		return exitcode.With(exitcode.WorkerFailed, err)
	}
	return err
}

func newJobID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// collect reads every rank's result from the launcher's own store.
func collect(srv *store.Server, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		v, ok := srv.Value("result/" + strconv.Itoa(i))
		if !ok {
			return nil, errors.New("rank " + strconv.Itoa(i) + " exited without reporting a result")
		}
		out[i] = v
	}
	return out, nil
}

// finalizeTimes reads how long each rank's backend teardown took, in ms.
func finalizeTimes(srv *store.Server, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		if v, ok := srv.Value("finalize/" + strconv.Itoa(i)); ok {
			out[i], _ = strconv.ParseFloat(string(v), 64)
		}
	}
	return out
}
