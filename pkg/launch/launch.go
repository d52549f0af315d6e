package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/pkg/launch/store"
)

// Config describes one job.
type Config struct {
	NProc     int           // ranks to start, 1 or more
	Argv      []string      // every rank's command line; Argv[0] is the executable
	Env       []string      // base environment; nil means os.Environ()
	StoreAddr string        // where the store listens; "" = 127.0.0.1 on a free port
	Timeout   time.Duration // 0: none
	// Stdout and Stderr get the ranks' lines (nil: dropped; Stderr's last lines of a
	// failed rank are kept in its WorkerError all the same).
	Stdout    io.Writer
	Stderr    io.Writer
	TagOutput bool   // prefix each worker line with "[rank] "
	JobID     string // SYMMEM_JOB_ID of the ranks, for names of per-job files
	// OnStart, if set, runs once the store is up, before the workers start (for
	// progress displays that watch the store).
	OnStart func(*store.Server)
	// Grace is how long a stopped worker gets between SIGTERM and SIGKILL; 0 means 1 s.
	Grace time.Duration
	// ExtraFiles are open files every worker inherits, as descriptors 3, 4, ... (the
	// CPU backend's heap, which has no name a launcher killed could leave behind).
	ExtraFiles []*os.File
	// TimerSlack, when set, is the timer slack the workers start with (Linux: each
	// thread's timers may fire that much late, so that fewer wake-ups are spent on
	// them); 0 leaves the launcher's.
	TimerSlack time.Duration
	// StallLimit, when set, is how long a rank that has started beating (store counter
	// "beat/RANK") may go without a beat before the job is stopped: a rank that is
	// stopped (SIGSTOP) or frozen looks alive to its parent but makes no progress.
	StallLimit time.Duration
}

// StalledError names a rank that stopped beating, and what it was doing then (store
// value "phase/RANK").
type StalledError struct {
	Rank  int
	For   time.Duration
	Phase string
}

func (e *StalledError) Error() string { return e.What() + "; the other ranks were stopped" }

// What says which rank stalled, for how long and in which phase.
func (e *StalledError) What() string {
	phase := ""
	if e.Phase != "" {
		phase = " during " + e.Phase
	}
	return fmt.Sprintf("rank %d stopped responding: no sign of life for %s%s (stopped or frozen?)", e.Rank, e.For, phase)
}

// Job is a finished job's store, for reading what the ranks reported.
type Job struct {
	Store *store.Server
	Token string
	ID    string
}

// WorkerError says which rank failed and how.
type WorkerError struct {
	Rank   int
	How    string   // "exit status 3", "killed by signal: segmentation fault"
	Status int      // the rank's exit status; -1 when a signal ended it
	Stderr []string // the rank's last lines of stderr
}

func (e *WorkerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d failed: %s; the other ranks were stopped", e.Rank, e.How)
	if len(e.Stderr) > 0 {
		fmt.Fprintf(&b, "\nlast lines of rank %d's stderr:", e.Rank)
		for _, l := range e.Stderr {
			b.WriteString("\n  " + l)
		}
	}
	return b.String()
}

// ErrTimeout and ErrInterrupted end a job from outside.
var (
	ErrTimeout     = errors.New("timed out")
	ErrInterrupted = errors.New("interrupted")
)

// TimeoutError names the ranks still running when Config.Timeout ran out.
type TimeoutError struct {
	After   time.Duration
	Running []int
	// Setting is the caller's name for the timeout, for the remedy ("--timeout" in
	// symmem's CLI); "" words it as "the timeout".
	Setting string
}

func (e *TimeoutError) Error() string {
	setting := e.Setting
	if setting == "" {
		setting = "the timeout"
	}
	return fmt.Sprintf("job timed out after %s; ranks still running: %s (raise %s, or look for a rank stuck in a barrier or wait)",
		e.After, joinInts(e.Running), setting)
}
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

type exit struct {
	rank int
	err  error
}

// Run starts the job and waits for it. It returns the job (its store still open, for
// reading results; the caller closes it) and the first failure, if any.
func Run(ctx context.Context, cfg Config) (*Job, error) {
	switch {
	case cfg.NProc < 1:
		return nil, fmt.Errorf("launch: Config.NProc is %d: a job needs at least 1 rank", cfg.NProc)
	case len(cfg.Argv) == 0:
		return nil, errors.New("launch: Config.Argv is empty: give the ranks' command line")
	}
	if cfg.Grace == 0 {
		cfg.Grace = time.Second
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	addr := cfg.StoreAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	token := store.NewToken()
	srv, err := store.Listen(addr, token)
	switch {
	case err != nil && cfg.StoreAddr == "":
		// No address of the user's: not a usage error (out of ports or descriptors).
		return nil, fmt.Errorf("rendezvous store: no free port on 127.0.0.1: %w", err)
	case err != nil:
		return nil, &ListenError{Addr: addr, Err: err, FreeDefault: true}
	}
	job := &Job{Store: srv, Token: token, ID: cfg.JobID}
	t0 := time.Now().UnixNano()
	if cfg.OnStart != nil {
		cfg.OnStart(srv)
	}

	var outMu sync.Mutex // one line at a time from all ranks
	procs := make([]*exec.Cmd, cfg.NProc)
	// gone[r] is set once rank r has been waited for: its pid (and group) may be
	// another process's from then on, so a late SIGKILL must leave it alone.
	gone := make([]atomic.Bool, cfg.NProc)
	tails := make([]*tail, cfg.NProc)
	exits := make(chan exit, cfg.NProc)
	restore := withTimerSlack(cfg.TimerSlack)
	defer restore() // a panic on the way; it runs once
	for r := 0; r < cfg.NProc; r++ {
		cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
		cmd.Env = WorkerEnv(cfg.Env, r, cfg.NProc, srv.Addr(), token, cfg.JobID, t0)
		prefix := ""
		if cfg.TagOutput {
			prefix = "[" + strconv.Itoa(r) + "] "
		}
		tails[r] = &tail{max: 20}
		cmd.Stdout = &lineWriter{mu: &outMu, w: cfg.Stdout, prefix: prefix}
		cmd.Stderr = &lineWriter{mu: &outMu, w: cfg.Stderr, prefix: prefix, tail: tails[r]}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.ExtraFiles = cfg.ExtraFiles
		if err := cmd.Start(); err != nil {
			restore()
			stopAll(procs[:r], gone[:r], cfg.Grace)
			srv.Close()
			return nil, fmt.Errorf("starting rank %d (%s): %w", r, cfg.Argv[0], err)
		}
		procs[r] = cmd
		go func(r int) {
			err := cmd.Wait()
			cmd.Stdout.(*lineWriter).flush()
			cmd.Stderr.(*lineWriter).flush()
			// The whole group, in case the worker left a child behind, before its
			// pid can be reused.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			gone[r].Store(true)
			exits <- exit{r, err}
		}(r)
	}

	restore()

	firstErr := wait(ctx, cfg, srv, procs, gone, tails, exits)
	return job, firstErr
}

// withTimerSlack keeps the calling goroutine on its thread with the timer slack d, for
// the workers it starts to inherit (a process starts with the slack of the thread that
// forked it, and keeps it across exec), until the returned function puts the thread's
// slack back as it was and lets it go. d <= 0 changes nothing.
func withTimerSlack(d time.Duration) (restore func()) {
	if d <= 0 {
		return func() {}
	}
	runtime.LockOSThread()
	old, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_TIMERSLACK, 0, 0)
	if errno != 0 || unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d), 0, 0, 0) != nil {
		runtime.UnlockOSThread()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Prctl(unix.PR_SET_TIMERSLACK, old, 0, 0, 0)
			runtime.UnlockOSThread()
		})
	}
}

// wait waits for every rank to exit and returns the first failure: a rank that failed
// (the others are stopped at once), the timeout, or an interruption.
func wait(ctx context.Context, cfg Config, srv *store.Server, procs []*exec.Cmd, gone []atomic.Bool, tails []*tail, exits <-chan exit) error {
	var timeout <-chan time.Time
	if cfg.Timeout > 0 {
		timer := time.NewTimer(cfg.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	var pulse <-chan time.Time
	var stall *StallWatch
	if cfg.StallLimit > 0 {
		period := min(cfg.StallLimit/8, 250*time.Millisecond)
		t := time.NewTicker(period)
		defer t.Stop()
		pulse, stall = t.C, &StallWatch{Limit: cfg.StallLimit, Period: period}
	}
	running := map[int]bool{}
	for r := range procs {
		running[r] = true
	}
	var firstErr error
	for len(running) > 0 {
		select {
		case e := <-exits:
			delete(running, e.rank)
			if e.err != nil && firstErr == nil {
				firstErr = &WorkerError{Rank: e.rank, How: describeExit(e.err), Status: exitStatus(e.err), Stderr: tails[e.rank].lines()}
				stopAll(procs, gone, cfg.Grace)
			}
		case <-timeout:
			timeout = nil
			if firstErr == nil {
				firstErr = &TimeoutError{After: cfg.Timeout, Running: sortedKeys(running)}
			}
			stopAll(procs, gone, cfg.Grace)
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = ErrInterrupted
			}
			stopAll(procs, gone, cfg.Grace)
			ctx = context.Background() // stop selecting on it
		case now := <-pulse:
			if firstErr != nil {
				break
			}
			count := func(r int) int64 { return srv.Counter("beat/" + strconv.Itoa(r)) }
			if r, _, stalled := stall.Check(now, sortedKeys(running), count); stalled {
				phase, _ := srv.Value("phase/" + strconv.Itoa(r))
				firstErr = &StalledError{Rank: r, For: cfg.StallLimit, Phase: string(phase)}
				stopAll(procs, gone, cfg.Grace)
			}
		}
	}
	return firstErr
}

func sortedKeys(m map[int]bool) []int {
	ks := make([]int, 0, len(m))
	for r := range m {
		ks = append(ks, r)
	}
	sort.Ints(ks)
	return ks
}

// stopAll sends SIGTERM to every worker's group not yet waited for, and SIGKILL to the
// ones still not waited for after grace. It returns at once.
func stopAll(procs []*exec.Cmd, gone []atomic.Bool, grace time.Duration) {
	signal := func(sig syscall.Signal) {
		for r, p := range procs {
			if p != nil && p.Process != nil && !gone[r].Load() {
				syscall.Kill(-p.Process.Pid, sig)
			}
		}
	}
	signal(syscall.SIGTERM)
	go func() {
		time.Sleep(grace)
		signal(syscall.SIGKILL)
	}()
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal: " + ws.Signal().String()
		}
		return "exit status " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

// lineWriter relays a worker's output line by line with its rank prefix.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	tail   *tail
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a very long line without newline: flush it
		l.emit(l.buf)
		l.buf = nil
	}
	return len(p), nil
}

// flush emits a last line that had no newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineWriter) emit(line []byte) {
	if l.tail != nil {
		l.tail.add(string(line))
	}
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, l.prefix+string(line)+"\n")
}

// tail keeps the last lines of a stream.
type tail struct {
	mu  sync.Mutex
	max int
	buf []string
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, s)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.buf...)
}
