package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/proc"
	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// How the ranks of a job watch each other: heartbeats, the stall and kill of a peer,
// and what a rank does when rank 0 (which hosts the store) is gone.

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

// beatPeriod is how often a rank beats where the machine has a core for each rank.
const beatPeriod = 250 * time.Millisecond

// beatEvery is how often a rank of a job of size ranks on this host beats: every
// beatPeriod, or where the ranks outnumber the cores, that much less often as they
// outnumber them, but still four times within the stall limit (DefaultStallLimit's
// where none is watched). 200 ranks on 2 cores beating four times a second spent a third
// of the machine on their beats while the launcher was still starting them.
func beatEvery(size int, stallLimit time.Duration) time.Duration {
	cores := runtime.NumCPU()
	p := beatPeriod * time.Duration(max((size+cores-1)/cores, 1))
	limit := DefaultStallLimit
	if stallLimit > 0 {
		limit = stallLimit
	}
	return max(min(p, limit/4), beatPeriod)
}

// beatFor is how often the rank of info beats under stallLimit: beatEvery for the
// ranks on its host where symmem's launcher started them, which gives every rank the
// same limit; beatPeriod under another launcher, whose rank 0 watches with its own
// limit, which may be shorter than this rank's.
func beatFor(info launch.RankInfo, stallLimit time.Duration) time.Duration {
	if info.Source != "symmem" {
		return beatPeriod
	}
	return beatEvery(max(info.LocalWorldSize, 1), stallLimit)
}

// beater beats for one rank every beatEvery, until stop: on a connection of its own
// (but for the first beat of a rank of symmem's launcher, startBeat). It beats
// whatever the rank's own work is blocked on (a barrier, a GPU stream): only a
// process that is stopped or frozen goes quiet. Under an external launcher the
// answers tell the rank, in turn, that rank 0 (which hosts the store) is alive.
type beater struct {
	answered atomic.Int64  // beats the store answered
	ended    chan struct{} // closed when the beats end: stop, or the store is gone
	done     chan struct{}
	once     sync.Once
}

func startBeat(ctx context.Context, info launch.RankInfo, every time.Duration, first *store.Client) *beater {
	b := &beater{ended: make(chan struct{}), done: make(chan struct{})}
	rank := strconv.Itoa(info.Rank)
	var c *store.Client
	// Rank 0 ends a stopped rank that runs on its host (symmem's launcher knows its
	// ranks' pids; rank 0 of an external job does not).
	told := info.Source == "symmem"
	// beat beats once on c, within limit (0: none).
	beat := func(c *store.Client, limit time.Duration) error {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if limit > 0 {
			cctx, cancel = context.WithTimeout(ctx, limit)
		}
		defer cancel()
		if !told {
			if err := c.Set(cctx, "pid/"+rank, []byte(procID())); err != nil {
				return err
			}
			told = true
		}
		_, err := c.Add(cctx, "beat/"+rank, 1)
		return err
	}
	// step beats once on the beat's own connection, dialling first where the last call
	// left none (a call past its deadline ends one), and says whether the beat goes on.
	// Every store call has a deadline: a frozen store (its host stopped) must not hold
	// the beat. A store that does not answer is silence, counted by the watches (which
	// know a paused job from a stalled peer); so is one that is gone (Dial retries a
	// refused connection until its deadline): the watch of the store's connection
	// reports that within seconds. Only another error (a refused token) ends the beat.
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
		if err := beat(c, beatDeadline); err != nil {
			c.Close()
			c = nil
			return silent(ctx, err)
		}
		b.answered.Add(1)
		return true
	}
	// The first beat before anything else: from then on silence means trouble. Where
	// symmem's launcher hosts the store, it goes over the rank's own connection (first),
	// idle until the rank's work starts, and without a deadline of its own, as the
	// rank's next call there (a deadline would leave the connection unusable); the
	// beat's own connection is dialled at the next beat, which a short job never
	// reaches.
	if first != nil && info.Source == "symmem" && beat(first, 0) == nil {
		b.answered.Add(1)
	} else if !step() {
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
		t := time.NewTicker(every)
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
		// Said and cleaned up first: the kill can end this process (see rank0Killed).
		fmt.Fprintf(errw, "symmem: rank %d: killed rank %d (pid %d): it was stopped (SIGSTOP or Ctrl-Z) and could not end with the job\n", r.info.Rank, i, pid)
		if i == 0 {
			r.rank0Killed(pid)
		}
		syscall.Kill(pid, syscall.SIGKILL) // the pid was checked a moment ago
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
				r.rank0Killed(pid)
				syscall.Kill(pid, syscall.SIGKILL)
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

// rank0Killed removes what rank 0, process pid, which this rank kills next, leaves
// behind: its token file (when the file names that process: a later job of the same
// ID may have replaced it) and the CPU backend's heap, which rank 0 makes before its
// store listens and removes once every rank has mapped it. It comes before the kill:
// rank 0's death ends this rank's wait on its store, and that can end this process.
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
