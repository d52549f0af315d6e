package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/setting"
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
	// words name the settings in what the rank says.
	words setting.Words
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
// hosted, where not nil, gets the store rank 0 of an external job hosts, once it is up
// (the sweep's rows are fed from it as they land). words name the settings in the
// notes the rank prints itself.
func lifecycle(ctx context.Context, info launch.RankInfo, j Job, out io.Writer, began time.Time, hosted func(*store.Server), words setting.Words) ([][]byte, error) {
	fault, err := ParseFault(os.Getenv(EnvFault))
	if err != nil {
		return nil, badInput("%v", err)
	}
	r, err := connect(ctx, info, j, fault, words)
	if err != nil {
		return nil, err
	}
	if r.server != nil && hosted != nil {
		hosted(r.server)
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
// launcher) and opens the backend; each step undoes the ones before when it fails,
// which keeps it one function past 80 lines.
func connect(ctx context.Context, info launch.RankInfo, j Job, fault *Fault, words setting.Words) (_ *rank, err error) {
	r := &rank{info: info, factory: j.factory, words: words, timings: map[string]float64{}, stopWatch: func() {}, dropToken: func() {}, unhookKill: func() {}}
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
			le := &launch.ListenError{From: info.AddrFrom, Addr: info.ListenAddr, Err: err}
			return nil, setting.Naming(le, setting.StoreAddr, func(s string) { le.Setting = s })
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
			words.Fprintf(os.Stderr, "symmem: rank %d: waiting for rank 0 to host the job's store at %s (%s); giving up after %.0fs\n",
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
		r.beat = startBeat(ctx, info, beatFor(info, j.StallLimit), st)
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

// Worker is a rank that symmem's own launcher started (the hidden WorkerArg command).
// backends are the backends this binary runs; the job names one.
func Worker(ctx context.Context, out io.Writer, backends []backend.Factory) error {
	began := time.Now()
	if os.Getenv(launch.EnvWorker) != "1" {
		return badInput("%s is started by `symmem run` and `symmem bench`, not by hand", WorkerArg)
	}
	info, ok, err := launch.Discover(launch.DiscoverOptions{Launcher: "local"})
	if err != nil || !ok {
		return fmt.Errorf("worker environment incomplete: %v", err)
	}
	var j Job
	if err := json.Unmarshal([]byte(os.Getenv(EnvJob)), &j); err != nil {
		return fmt.Errorf("worker: bad %s: %w", EnvJob, err)
	}
	if j.reg, err = Registry(j.KernelsDir, backends); err != nil {
		return err
	}
	if j.factory = factoryOf(backends, j.Backend); j.factory == nil {
		return fmt.Errorf("worker: backend %q is not built into this binary", j.Backend)
	}
	// The launcher stops a rank with SIGTERM (ctx); one that does not return, stuck
	// where no wait can be cancelled, ends itself a moment later.
	// Its notes name no setting: it has no timeout of its own, and the launcher that
	// started it hosts the store.
	defer watchdog(ctx, 0, info.Rank, os.Stderr, nil)()
	_, err = untilEnded(func() ([][]byte, error) { return lifecycle(ctx, info, j, out, began, nil, j.words()) })
	if exitcode.IsSaid(err) {
		return err
	}
	return classify(interrupted(err, info.Rank))
}
