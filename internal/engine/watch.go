package engine

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/pkg/launch"
)

// watchPeers makes a rank of an external launcher's job notice a peer that died or
// stalled: rank 0, which hosts the store, sees a rank's connection close before it
// left, or its heartbeat stop for the stall limit, tells the others through the store
// and stops; the others stop when told, when rank 0's store goes away, or when rank 0
// stops answering their heartbeats for the stall limit. Launchers do not all end a job
// when one rank fails (srun without -K does not), and a rank waiting in a barrier or
// on a GPU stream cannot be cancelled, so a rank that must stop exits. A stalled rank
// on the same host is killed: it cannot act on anything. stop disarms the watch.
// The watch is one goroutine whose cases share its state, hence past 80 lines.
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
			if r.server == nil { // the stalled peer is rank 0
				r.rank0Killed(pidIn(stalled))
			}
			killPeer(stalled)
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
