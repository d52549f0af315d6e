package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/proc"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// EnvJob carries the job from the launcher to its workers, as JSON.
const EnvJob = "SYMMEM_JOB_SPEC"

// Environment lists the SYMMEM_* variables the engine itself reads or sets (the
// launcher's for its ranks, the store's token, the job, the test fault) and those the
// backends fs read: they are not settings.
func Environment(fs []backend.Factory) []string {
	env := []string{launch.EnvRank, launch.EnvLocalRank, launch.EnvWorldSize, launch.EnvLocalWorldSize,
		launch.EnvStoreAddr, launch.EnvStoreToken, launch.EnvStoreTokenFile, launch.EnvJobID,
		launch.EnvLaunchT0, launch.EnvWorker, EnvJob, EnvFault, EnvGrace, kernels.DirEnv}
	for _, f := range fs {
		env = append(env, f.Settings()...)
	}
	return env
}

// rank is a connected rank: its place in the job, the store and the backend.
type rank struct {
	info    launch.RankInfo
	store   *store.Client
	backend backend.Backend
	factory backend.Factory // what opened backend
	server  *store.Server   // set on rank 0 under an external launcher
	timings map[string]float64
	// stopWatch disarms the peer watch of an external job's rank (see watchPeers).
	stopWatch func()
	// beat tells the launcher (or rank 0 of an external job) that this rank is alive;
	// phase is what the rank is doing (its work, or "init").
	beat  *beater
	phase atomic.Pointer[string]
	// rank0 is rank 0's process (procID), on the other ranks of an external job.
	rank0 atomic.Pointer[string]
	// token is the one the store took from this rank.
	token string
	// unhookKill takes back the exit hook connect arms on an external job's rank (it
	// kills the job's stopped ranks), once the peer watch arms its own.
	unhookKill func()
	// dropToken takes back the exit hook that removes rank 0's token file.
	dropToken func()
}

// lifecycle is every rank's life, spawned or external: connect, work, publish, and on
// rank 0 of an external job also gather everyone's results (returned; nil elsewhere).
// A failing rank aborts without any collective teardown, so that it never waits for
// peers that will not come; the launcher (ours or the external one) stops the rest.
func lifecycle(ctx context.Context, info launch.RankInfo, j Job, out io.Writer, began time.Time) ([][]byte, error) {
	fault, err := ParseFault(os.Getenv(EnvFault))
	if err != nil {
		return nil, badInput("%v", err)
	}
	r, err := connect(ctx, info, j, fault)
	if err != nil {
		return nil, err
	}
	if t0, err := strconv.ParseInt(os.Getenv(launch.EnvLaunchT0), 10, 64); err == nil && info.Source == "symmem" {
		r.timings["spawn"] = float64(began.UnixNano()-t0) / 1e6
	}
	stopWatch := r.stopWatch
	phase := j.Kind
	if j.Run != nil {
		phase += " " + string(j.Run.Op)
	}
	r.setPhase(ctx, phase)
	defer r.beat.stop()
	var res any
	switch j.Kind {
	case KindRun:
		res, err = r.runOps(j, fault, out)
	case KindBench:
		res, err = r.runBench(ctx, j, fault)
	default:
		err = fmt.Errorf("unknown job kind %q", j.Kind)
	}
	if err == nil {
		err = r.publish(ctx, res)
	}
	var raw [][]byte
	if err == nil && info.Hosted() {
		raw, err = r.gather(ctx)
	}
	if err == nil && info.Source != "symmem" {
		// Nobody drops the store before rank 0 has read everything. Rank 0 closes it as
		// soon as everyone has arrived, so the others may see it go while the barrier's
		// answer is on its way: by then their work is delivered.
		if err = r.store.Barrier(ctx, "done", info.WorldSize); err == nil {
			stopWatch()
			r.store.Leave(ctx)
		}
		if info.Rank != 0 && errors.Is(err, store.ErrLost) {
			err = nil
		}
	}
	if err != nil {
		r.killStopped(os.Stderr, nil)
	}
	stopWatch()
	if err != nil {
		r.abort()
		return nil, err
	}
	r.close()
	return raw, nil
}

// connect joins the job: it reaches the store (hosting it on rank 0 under an external
// launcher) and opens the backend.
func connect(ctx context.Context, info launch.RankInfo, j Job, fault *Fault) (_ *rank, err error) {
	r := &rank{info: info, factory: j.factory, timings: map[string]float64{}, stopWatch: func() {}, dropToken: func() {}, unhookKill: func() {}}
	if info.Source != "symmem" {
		// Until the peer watch arms its own exit hook, this one kills the stopped ranks
		// of the job that the launcher started beside this rank, should the rank end
		// itself (--timeout, Ctrl-C); the deferred call does it when the start fails.
		r.unhookKill = atExit(func() { r.kill(os.Stderr, nil, nil) })
		defer func() {
			if err != nil {
				r.killStopped(os.Stderr, nil)
				r.unhookKill()
			}
		}()
	}
	fault.Trigger(info.Rank, "start")
	t := time.Now()
	if info.Hosted() {
		if info.TokenFile != "" {
			if err := launch.WriteTokenFile(info.TokenFile, info.Token, procID()); err != nil {
				return nil, err
			}
			// A rank 0 that ends itself (--timeout, a failed peer) removes it too.
			r.dropToken = atExit(func() { launch.RemoveTokenFile(info.TokenFile, info.Token) })
		}
		srv, err := store.Listen(info.ListenAddr, info.Token)
		if err != nil {
			r.abort()
			return nil, &launch.ListenError{From: info.AddrFrom, Addr: info.ListenAddr, Err: err}
		}
		r.server = srv
	}
	dctx, cancel := context.WithTimeout(ctx, JoinLimit)
	defer cancel()
	var silence time.Duration // how long rank 0 may leave this rank's greeting unanswered
	waited := func() bool { return false }
	if !info.Hosted() && info.Source != "symmem" {
		silence = j.StallLimit // (symmem's own launcher hosts the store otherwise: nothing to say of rank 0)
		// A rank started long before rank 0 (or whose rank 0 failed before it listened)
		// says what it waits for instead of waiting in silence.
		waited = time.AfterFunc(WaitNote, func() {
			fmt.Fprintf(os.Stderr, "symmem: rank %d: waiting for rank 0 to host the job's store at %s (%s); giving up after %.0fs\n",
				info.Rank, info.StoreAddr, info.AddrFrom, JoinLimit.Seconds())
		}).Stop
	}
	st, tok, err := dialToken(dctx, info, silence)
	waited()
	if errors.Is(err, store.ErrSilent) {
		err = r.silentRank0(silence)
	}
	if err != nil {
		r.abort()
		return nil, err
	}
	r.store, r.token = st, tok
	if !info.Hosted() {
		// The heartbeat starts before the backend opens: a rank frozen in its
		// initialisation is caught too.
		r.setPhase(ctx, "init")
		r.beat = startBeat(ctx, info)
	} else {
		r.server.Set("pid/0", []byte(procID()))
	}
	fault.Trigger(info.Rank, "init")
	if info.Source != "symmem" {
		if !info.Hosted() {
			fault.Trigger(info.Rank, "join")
		}
		// No launcher of ours watches these ranks: they watch each other, from before
		// the backend opens (a rank whose NVSHMEM init fails is noticed too).
		if r.stopWatch, err = r.watchPeers(ctx, os.Stderr, j.StallLimit); err != nil {
			r.abort()
			return nil, err
		}
		if err = r.agree(ctx, j); err != nil {
			r.stopWatch()
			r.abort()
			return nil, err
		}
	}
	if r.backend, err = open(ctx, info, st, j); err != nil {
		r.abort()
		return nil, err
	}
	if sh, ok := j.factory.(backend.Sharer); ok {
		// Once every rank has mapped the heap its file can go: the mappings stay, and a
		// crash from here on cannot leave a segment behind.
		if err := st.Barrier(ctx, "heap-mapped", info.WorldSize); err != nil {
			r.abort()
			return nil, err
		}
		if info.Rank == 0 {
			sh.Release(info.JobID)
		}
	}
	r.timings["init"] = ms(time.Since(t))
	return r, nil
}

// JoinLimit is how long rank 0 of an external job waits for every rank to join it,
// and the others for rank 0's store.
const JoinLimit = 60 * time.Second

// WaitNote is how long a rank of an external job waits for the others in silence: past
// it, it says once what it waits for (a rank started by hand, whose peers are not yet
// started or failed before they joined, looked hung).
const WaitNote = 5 * time.Second

// DefaultStallLimit is how long a rank may go without a heartbeat before the job is
// stopped naming it (a rank stopped with SIGSTOP, or frozen); --stall-limit sets it.
const DefaultStallLimit = 5 * time.Second

// MinStallLimit is the shortest --stall-limit: ranks beat four times a second, and a
// busy machine delays a beat by a fraction of a second now and then.
const MinStallLimit = time.Second

// beatPeriod is how often a rank beats.
const beatPeriod = 250 * time.Millisecond

// beater beats for one rank, on a connection of its own, four times a second, until
// stop. It beats whatever the rank's own work is blocked on (a barrier, a GPU stream):
// only a process that is stopped or frozen goes quiet. Under an external launcher the
// answers tell the rank, in turn, that rank 0 (which hosts the store) is alive.
type beater struct {
	answered atomic.Int64  // beats the store answered
	ended    chan struct{} // closed when the beats end: stop, or the store is gone
	done     chan struct{}
	once     sync.Once
}

func startBeat(ctx context.Context, info launch.RankInfo) *beater {
	b := &beater{ended: make(chan struct{}), done: make(chan struct{})}
	rank := strconv.Itoa(info.Rank)
	var c *store.Client
	// Rank 0 ends a stopped rank that runs on its host (symmem's launcher knows its
	// ranks' pids; rank 0 of an external job does not).
	told := info.Source == "symmem"
	// step beats once, dialling first where the last call left no connection (a call
	// past its deadline ends one), and says whether the beat goes on. Every store call
	// has a deadline: a frozen store (its host stopped) must not hold the beat. A store
	// that does not answer is silence, counted by the watches (which know a paused job
	// from a stalled peer); so is one that is gone (Dial retries a refused connection
	// until its deadline): the watch of the store's connection reports that within
	// seconds. Only another error (a refused token) ends the beat.
	step := func() bool {
		if c == nil {
			dctx, cancel := context.WithTimeout(ctx, beatDeadline)
			var err error
			c, err = dial(dctx, info)
			late := dctx.Err() == context.DeadlineExceeded
			cancel()
			if err != nil {
				c = nil
				return late && ctx.Err() == nil
			}
		}
		cctx, cancel := context.WithTimeout(ctx, beatDeadline)
		defer cancel()
		var err error
		if !told {
			if err = c.Set(cctx, "pid/"+rank, []byte(procID())); err == nil {
				told = true
			}
		}
		if err == nil {
			_, err = c.Add(cctx, "beat/"+rank, 1)
		}
		if err != nil {
			c.Close()
			c = nil
			return silent(ctx, err)
		}
		b.answered.Add(1)
		return true
	}
	// The first beat before anything else: from then on silence means trouble.
	if !step() {
		close(b.ended) // the rank's own store calls will say what is wrong
		return b
	}
	go func() {
		defer close(b.ended)
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		t := time.NewTicker(beatPeriod)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
			}
			if !step() {
				return
			}
		}
	}()
	return b
}

// silent says whether a heartbeat's store call failed only because nobody answered in
// time (the store's host stopped or frozen), not because the store is gone or the rank
// is stopping: the beat goes on, and the silence is for the watches to judge. Ending
// the beat instead would end the watch of rank 0 before its stall limit was reached:
// the stopped rank 0 would then be killed by no one.
func silent(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
}

// beatDeadline bounds each store call of the heartbeat.
const beatDeadline = 5 * time.Second

func (b *beater) stop() {
	if b != nil {
		b.once.Do(func() { close(b.done) })
	}
}

// setPhase says what this rank is doing, for the message that names a stalled rank.
func (r *rank) setPhase(ctx context.Context, phase string) {
	r.phase.Store(&phase)
	if !r.info.Hosted() {
		r.store.Set(ctx, "phase/"+strconv.Itoa(r.info.Rank), []byte(phase))
	}
}

func (r *rank) phaseNow() string {
	if p := r.phase.Load(); p != nil {
		return *p
	}
	return "init"
}

// procID names this process for a peer on the same host: host, pid and start time
// (so that a pid reused by another process is never taken for it).
func procID() string {
	host, _ := os.Hostname()
	return host + " " + strconv.Itoa(os.Getpid()) + " " + startTime(os.Getpid())
}

// pidIn is the pid a procID names, or 0.
func pidIn(id string) int {
	f := strings.Fields(id)
	if len(f) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}

// startTime is a process's start time (proc.Stat's Start), or "" if it cannot be read.
func startTime(pid int) string {
	st, _, _ := proc.Read(pid)
	return st.Start
}

// ended says whether the process id names (procID) ran on this host and has ended:
// it is gone, another process has its pid, or it is a zombie not yet reaped.
func ended(id string) bool {
	f := strings.Fields(id)
	host, _ := os.Hostname()
	if len(f) != 3 || f[0] != host || f[2] == "" {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return false
	}
	st, ok, gone := proc.Read(pid)
	if !ok {
		return gone
	}
	return st.Start != f[2] || st.State == "Z"
}

// peerPid is the pid of the process id names (procID) when it runs on this host, is
// still the same process and is not this one.
func peerPid(id string) (int, bool) {
	f := strings.Fields(id)
	host, _ := os.Hostname()
	if len(f) != 3 || f[0] != host || f[2] == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 1 || pid == os.Getpid() || startTime(pid) != f[2] {
		return 0, false
	}
	return pid, true
}

// killPeer kills the process id names (procID) when it runs on this host and is still
// the same process: a stopped rank cannot act on SIGTERM, and an external launcher
// may not end it (srun without -K does not).
func killPeer(id string) {
	if pid, ok := peerPid(id); ok {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// stoppedPeer says whether the process id names runs on this host and is stopped
// (SIGSTOP: state T; not a debugger's stop, t): such a process cannot notice that its
// job ended.
func stoppedPeer(id string) (int, bool) {
	pid, ok := peerPid(id)
	if !ok {
		return 0, false
	}
	st, ok, _ := proc.Read(pid)
	return pid, ok && st.State == "T"
}

// killStopped kills the ranks of this job on this host that are stopped, as this rank
// ends a job that failed (--timeout, a peer that died, an interruption): ranks that run
// notice the end by themselves (rank 0's store goes away, or rank 0 tells them), a
// stopped one would be left stopped for good. Rank 0 knows the pid of every rank that
// started beating; the others know rank 0's; a rank stopped before it told anyone its
// pid is found among this rank's siblings (stoppedSiblings). except is the stalled
// peer this rank killed already.
func (r *rank) killStopped(errw io.Writer, except *string) {
	ids := map[int]string{}
	if r.server != nil {
		for i := 1; i < r.info.WorldSize; i++ {
			if v, ok := r.server.Value("pid/" + strconv.Itoa(i)); ok {
				ids[i] = string(v)
			}
		}
	} else if id := r.rank0Named(); id != "" {
		ids[0] = id
	}
	r.kill(errw, ids, except)
}

// kill kills the stopped processes of ids (rank -> procID) and this job's stopped
// siblings, but for except. It reads nothing of r but its place in the job: the exit
// hook that connect arms calls it while connect may still be filling r in.
func (r *rank) kill(errw io.Writer, ids map[int]string, except *string) {
	skip := 0
	if except != nil {
		skip = pidIn(*except)
	}
	stopped := map[int]int{}
	for i, id := range ids {
		if pid, ok := stoppedPeer(id); ok && pid != skip {
			stopped[i] = pid
		}
	}
	for i, pid := range stoppedSiblings(r.info) {
		if _, ok := stopped[i]; !ok && pid != skip {
			stopped[i] = pid
		}
	}
	for _, i := range slices.Sorted(maps.Keys(stopped)) { // in rank order
		pid := stopped[i]
		syscall.Kill(pid, syscall.SIGKILL) // first: the pid was checked a moment ago
		fmt.Fprintf(errw, "symmem: rank %d: killed rank %d (pid %d): it was stopped (SIGSTOP or Ctrl-Z) and could not end with the job\n", r.info.Rank, i, pid)
		if i == 0 {
			r.rank0Killed(pid)
		}
	}
}

// silentRank0 is the error of a rank whose greeting rank 0's store took and left
// unanswered for the stall limit: rank 0 is stopped or frozen before it answered
// anyone, so none of the watches has begun. A rank 0 that is stopped on this host,
// named in its token file, is killed, as a stalled rank 0 later on is, when the
// launcher that started this rank started it too: the file is the job ID's, and a job
// of the same ID paused as a whole (Ctrl-Z) would name its own rank 0, which no store
// of this job vouches for.
func (r *rank) silentRank0(limit time.Duration) error {
	msg := fmt.Sprintf("rank %d: rank 0, which hosts the job's store, took this rank's connection but did not answer for %s (stopped or frozen?)",
		r.info.Rank, limit)
	if r.info.TokenFile != "" {
		if _, owner, rerr := launch.ReadJobToken(r.info.TokenFile); rerr == nil {
			if pid, ok := stoppedPeer(owner); ok && !sameLauncher(pid) {
				msg += fmt.Sprintf("; the rank 0 that %s names (pid %d) is stopped, but another launcher started it (a job of the same ID?): not killed", r.info.TokenFile, pid)
			} else if ok {
				syscall.Kill(pid, syscall.SIGKILL)
				r.rank0Killed(pid)
				msg += fmt.Sprintf("; killed it (pid %d, stopped)", pid)
			}
		}
	}
	return &silentError{msg}
}

// silentError is silentRank0's error: store.ErrSilent, said for this job.
type silentError struct{ msg string }

func (e *silentError) Error() string { return e.msg }
func (e *silentError) Unwrap() error { return store.ErrSilent }

// rank0Named is rank 0's process (procID), for a rank that must kill it: as rank 0's
// store told this rank, or before that as rank 0's token file names it, when the
// launcher that started this rank started it too (see silentRank0); "" if unknown.
func (r *rank) rank0Named() string {
	if p := r.rank0.Load(); p != nil {
		return *p
	}
	if r.info.TokenFile == "" {
		return ""
	}
	if _, owner, err := launch.ReadJobToken(r.info.TokenFile); err == nil {
		if pid, ok := peerPid(owner); ok && sameLauncher(pid) {
			return owner
		}
	}
	return ""
}

// rank0Killed removes what rank 0, process pid, which this rank killed, leaves behind:
// its token file (when the file names that process: a later job of the same ID may
// have replaced it) and the CPU backend's heap, which rank 0 makes before its store
// listens and removes once every rank has mapped it.
func (r *rank) rank0Killed(pid int) {
	if r.info.Hosted() {
		return
	}
	if r.info.TokenFile != "" {
		if tok, owner, err := launch.ReadJobToken(r.info.TokenFile); err == nil && pidIn(owner) == pid {
			launch.RemoveTokenFile(r.info.TokenFile, tok)
		}
	}
	if sh, ok := r.factory.(backend.Sharer); ok {
		sh.Release(r.info.JobID)
	}
}

// watchPeers makes a rank of an external launcher's job notice a peer that died or
// stalled: rank 0, which hosts the store, sees a rank's connection close before it
// left, or its heartbeat stop for the stall limit, tells the others through the store
// and stops; the others stop when told, when rank 0's store goes away, or when rank 0
// stops answering their heartbeats for the stall limit. Launchers do not all end a job
// when one rank fails (srun without -K does not), and a rank waiting in a barrier or
// on a GPU stream cannot be cancelled, so a rank that must stop exits. A stalled rank
// on the same host is killed: it cannot act on anything. stop disarms the watch.
func (r *rank) watchPeers(ctx context.Context, errw io.Writer, limit time.Duration) (stop func(), err error) {
	me := fmt.Sprintf("rank %d", r.info.Rank)
	var armed atomic.Bool
	armed.Store(true)
	// A rank that ends itself kills the peers on this host that are stopped: they
	// would be left stopped for good (the stalled peer that fail kills is done).
	var killed atomic.Pointer[string]
	unhook := atExit(func() {
		if armed.Load() {
			r.killStopped(errw, killed.Load())
		}
	})
	r.unhookKill() // connect's hook, which knew no pids
	disarm := func() { armed.Store(false); unhook() }
	fail := func(why string, stalled string) {
		// A job stopped as a whole (SIGTERM to every rank) loses its ranks in some
		// order: that is no one's failure.
		if !armed.Load() || ctx.Err() != nil {
			return
		}
		fmt.Fprintf(errw, "symmem: %s: %s; stopping\n", me, why)
		if stalled != "" {
			killed.Store(&stalled)
			killPeer(stalled)
			if r.server == nil { // the stalled peer is rank 0
				r.rank0Killed(pidIn(stalled))
			}
		}
		exit(exitcode.WorkerFailed) // its hooks kill the other stopped peers
	}
	const period = 100 * time.Millisecond
	if r.server == nil && limit > 0 {
		// Rank 0 that stops answering this rank's heartbeats (stopped, or frozen) holds
		// the store: nobody would hear from it again. Watched from before this rank
		// joins: rank 0 may stop between answering its greeting and its join.
		go func() {
			t := time.NewTicker(period)
			defer t.Stop()
			stall := &launch.StallWatch{Limit: limit, Period: period}
			answered := func(int) int64 { return r.beat.answered.Load() + 1 }
			for {
				select {
				case <-r.beat.ended: // stopped, or the store is gone: the watch below says
					return
				case now := <-t.C:
					if !armed.Load() || ctx.Err() != nil {
						return
					}
					if _, _, stalled := stall.Check(now, []int{0}, answered); stalled {
						fail(fmt.Sprintf("rank 0, which hosts the job's store, stopped responding: no answer for %s while this rank was in %s (stopped or frozen?)",
							limit, r.phaseNow()), r.rank0Named())
					}
				}
			}
		}()
	}
	if err := r.store.Join(ctx, me); err != nil {
		disarm()
		return nil, err
	}
	if r.server != nil {
		start := time.Now()
		abort := func(why, stalled string) {
			r.server.Set("abort/why", []byte(why))
			r.server.Add("abort", 1)
			time.Sleep(100 * time.Millisecond) // let the others hear it
			fail(why, stalled)
		}
		others := make([]int, 0, r.info.WorldSize-1)
		for i := 1; i < r.info.WorldSize; i++ {
			others = append(others, i)
		}
		beats := func(i int) int64 { return r.server.Counter("beat/" + strconv.Itoa(i)) }
		stall := &launch.StallWatch{Limit: limit, Period: period}
		go func() {
			t := time.NewTicker(period)
			defer t.Stop()
			noted := false
			for now := range t.C {
				if !armed.Load() || ctx.Err() != nil {
					return
				}
				if !noted && time.Since(start) > WaitNote {
					noted = true
					if missing := r.notJoined(); len(missing) > 0 {
						fmt.Fprintf(errw, "symmem: rank 0: waiting for %s to join the job's store at %s; giving up after %.0fs\n",
							strings.Join(missing, ", "), r.info.StoreAddr, JoinLimit.Seconds())
					}
				}
				if time.Since(start) > JoinLimit {
					if missing := r.notJoined(); len(missing) > 0 {
						abort(fmt.Sprintf("%s never joined the job within %s%s", strings.Join(missing, ", "), JoinLimit, crowded(r.server)), "")
					}
				}
				if lost := r.server.Lost(); len(lost) > 0 {
					abort(lost[0]+" left the job before it finished (its connection to the store closed)", "")
				}
				if i, _, stalled := stall.Check(now, others, beats); stalled && limit > 0 {
					phase, _ := r.server.Value("phase/" + strconv.Itoa(i))
					pid, _ := r.server.Value("pid/" + strconv.Itoa(i))
					if ended(string(pid)) {
						// A rank that died before it joined closed no connection that
						// Lost sees: its silence is no stall.
						abort(fmt.Sprintf("rank %d's process ended during %s, before it joined the job", i, cmp.Or(string(phase), "its start")), "")
					} else {
						abort((&launch.StalledError{Rank: i, For: limit, Phase: string(phase)}).What(), string(pid))
					}
				}
			}
		}()
		return disarm, nil
	}
	// Rank 0 is up (this rank just joined its store); if it cannot be reached again
	// within seconds, it is gone.
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	watch, err := dial(dctx, r.info)
	if err != nil {
		disarm()
		return nil, fmt.Errorf("%s: rank 0, which hosts the job's store, is gone: %w", me, err)
	}
	rank0b, err := watch.Get(dctx, "pid/0")
	if err != nil {
		disarm()
		watch.Close()
		return nil, fmt.Errorf("%s: rank 0, which hosts the job's store, is gone: %w", me, err)
	}
	rank0 := string(rank0b)
	r.rank0.Store(&rank0)
	go func() {
		defer watch.Close()
		if err := watch.WaitCount(context.Background(), "abort", 1); err == nil {
			why, _ := watch.Get(context.Background(), "abort/why")
			fail(string(why), "")
			return
		}
		// The store went away: at the end of a job rank 0 closes it, and this rank
		// disarms the watch a moment later; otherwise rank 0 is gone.
		time.Sleep(2 * time.Second)
		fail("rank 0, which hosts the job's store, is gone", "")
	}()
	return disarm, nil
}

// notJoined lists the ranks that have not joined rank 0's store ("rank 3").
func (r *rank) notJoined() []string {
	var missing []string
	for i := 0; i < r.info.WorldSize; i++ {
		if m := fmt.Sprintf("rank %d", i); !r.server.Joined(m) {
			missing = append(missing, m)
		}
	}
	return missing
}

// dial reaches the store. A rank of a one-host job without a given token reads the one
// rank 0 left in this user's token file; a file of an earlier job (or none yet) means
// rank 0 is not there yet: it tries again until the deadline.
func dial(ctx context.Context, info launch.RankInfo) (*store.Client, error) {
	st, _, err := dialToken(ctx, info, 0)
	return st, err
}

// dialToken is dial that also returns the token the store took; a store that takes
// the connection and leaves the greeting unanswered for silence (0: no bound) fails
// it with store.ErrSilent.
func dialToken(ctx context.Context, info launch.RankInfo, silence time.Duration) (_ *store.Client, _ string, err error) {
	defer func() {
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			err = ctx.Err() // interrupted: not refused, nor unreachable
		}
	}()
	d := store.Dialer{Silence: silence}
	if info.TokenFile == "" || info.Hosted() {
		st, err := d.Dial(ctx, info.StoreAddr, info.Token)
		if errors.Is(err, store.ErrRefused) && info.TokenFrom != "" {
			// Or the address is another job's store (rank 0 then failed to listen there):
			// from here the two look alike.
			return nil, "", badInput("rank %d: the store at %s refused this rank's token (%s): it is not the job's; give every rank the same %s (or, if rank 0 could not listen there, %s is another job's: give this job a port of its own)",
				info.Rank, info.StoreAddr, info.TokenFrom, info.TokenFrom, info.StoreAddr)
		}
		return st, info.Token, err
	}
	// Rank 0 writes the token file before its store listens: a store that is up while
	// the file is missing, or that keeps refusing the file's token, is not sharing its
	// token through the file (rank 0 was given one, this rank not; or the address is
	// another job's store, where rank 0 failed to listen), and waiting for the file
	// would last until the deadline.
	var mismatch time.Time
	start := time.Now()
	for {
		var err error
		up := false
		if tok, _, rerr := launch.ReadJobToken(info.TokenFile); rerr == nil {
			var st *store.Client
			if st, err = d.Dial(ctx, info.StoreAddr, tok); err == nil {
				return st, tok, nil
			}
			if !errors.Is(err, store.ErrRefused) {
				return nil, "", err
			}
			up = true
		} else {
			err = rerr
			up = errors.Is(rerr, fs.ErrNotExist) && listening(info.StoreAddr)
		}
		switch {
		case !up:
			mismatch = time.Time{}
		case mismatch.IsZero():
			mismatch = time.Now()
		case time.Since(mismatch) > tokenGrace:
			return nil, "", badInput("rank %d: a store at %s is up but shares no token in %s that it takes: rank 0 was given %s or %s and this rank not (give every rank the same one, or none on one host), or %s is another job's and rank 0 could not listen there (give this job a port of its own)",
				info.Rank, info.StoreAddr, info.TokenFile, launch.EnvStoreToken, launch.EnvStoreTokenFile, info.StoreAddr)
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, fs.ErrNotExist) {
				return nil, "", noRank0(info, time.Since(start))
			}
			return nil, "", fmt.Errorf("rank %d could not join the store at %s (token from %s): %v", info.Rank, info.StoreAddr, info.TokenFile, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tokenGrace is how long a rank reading rank 0's token file waits, once rank 0's store
// is up, for a file whose token the store takes (rank 0 writes it before it listens).
const tokenGrace = 3 * time.Second

// listening says whether something accepts connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// open opens this rank's backend: the one place backends are constructed.
func open(ctx context.Context, info launch.RankInfo, st *store.Client, j Job) (backend.Backend, error) {
	if j.factory == nil {
		return nil, fmt.Errorf("backend %q is not built into this binary", j.Backend)
	}
	return j.factory.Open(ctx, backend.Place{Rank: info.Rank, LocalRank: info.LocalRank, Size: info.WorldSize, LocalSize: info.LocalWorldSize, JobID: info.JobID}, st,
		backend.Config{Heap: j.Heap, Lib: j.NVSHMEMLib, NCCLLib: j.NCCLLib, WaitLimit: j.WaitLimit, Pin: j.Kind == KindBench, Registry: j.reg})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// abort drops the store connection without any collective teardown (process exit
// releases the GPU and NVSHMEM resources).
func (r *rank) abort() {
	if r.info.Hosted() && r.info.TokenFile != "" {
		launch.RemoveTokenFile(r.info.TokenFile, r.info.Token)
		r.dropToken()
	}
	if r.store != nil {
		r.store.Close()
	}
	if r.server != nil {
		r.server.Close()
	}
}

// close releases the backend (NVSHMEM's teardown is collective) and the store, and
// tells the launcher how long the backend's teardown took.
func (r *rank) close() {
	if r.backend != nil {
		t := time.Now()
		r.backend.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r.store.Set(ctx, "finalize/"+strconv.Itoa(r.info.Rank), []byte(strconv.FormatFloat(ms(time.Since(t)), 'f', 3, 64)))
		cancel()
	}
	r.abort()
}

// publish stores this rank's result for the launcher (or rank 0) to collect.
func (r *rank) publish(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return r.store.Set(ctx, "result/"+strconv.Itoa(r.info.Rank), b)
}

// gather waits for every rank's result (rank 0 under an external launcher).
func (r *rank) gather(ctx context.Context) ([][]byte, error) {
	out := make([][]byte, r.info.WorldSize)
	for i := range out {
		v, err := r.store.Get(ctx, "result/"+strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("waiting for rank %d's result: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// Worker is a rank that symmem's own launcher started (the hidden __worker command).
// backends are the backends this binary runs; the job names one.
func Worker(ctx context.Context, out io.Writer, backends []backend.Factory) error {
	began := time.Now()
	if os.Getenv(launch.EnvWorker) != "1" {
		return badInput("__worker is started by `symmem run` and `symmem bench`, not by hand")
	}
	info, ok, err := launch.Discover(launch.DiscoverOptions{Launcher: "local"})
	if err != nil || !ok {
		return fmt.Errorf("worker environment incomplete: %v", err)
	}
	var j Job
	if err := json.Unmarshal([]byte(os.Getenv(EnvJob)), &j); err != nil {
		return fmt.Errorf("worker: bad %s: %w", EnvJob, err)
	}
	if j.reg, err = Registry(j.KernelsDir); err != nil {
		return err
	}
	if j.factory = factoryOf(backends, j.Backend); j.factory == nil {
		return fmt.Errorf("worker: backend %q is not built into this binary", j.Backend)
	}
	_, err = lifecycle(ctx, info, j, out, began)
	return classify(interrupted(err, info.Rank))
}
