package gpu

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// MarkProgress records an event after the work queued so far on the main stream
// (backend.Progresser): bench calls it after a measurement's first warm-up.
func (b *Backend) MarkProgress() error {
	if b.mark == nil {
		e, err := b.dev.NewSyncEvent()
		if err != nil {
			return b.explain(err)
		}
		b.mark = e
	}
	if err := b.mark.Record(b.main); err != nil {
		return b.explain(err)
	}
	b.marked = true
	return nil
}

// waitMark waits, up to the host's limit, for the work MarkProgress marked: the
// timed operations are queued by then, so the wait changes nothing on the GPU. A
// first operation that has not finished by then will not (no operation takes the wait
// limit); one that gave up on the device is reported as such (the mailbox).
func (b *Backend) waitMark() error {
	if !b.marked {
		return nil
	}
	b.marked = false
	done, err := b.mark.WaitFor(b.hostLimit())
	switch {
	case err != nil:
		return b.explain(err)
	case !done && b.gaveUp() == nil:
		return fmt.Errorf("rank %d: this measurement's first operation did not finish within %s: a peer that never came, to a kernel that does not bound its own wait (NCCL's, or a user's without limit_ns and mailbox): %w",
			b.rank, b.hostLimit(), backend.ErrUndelivered)
	}
	return b.gaveUp()
}

// TimeOps times iters operations enqueued back to back with CUDA events. With several
// lanes, the clock starts once every lane's earlier work is done and stops when the
// last lane finishes.
func (b *Backend) TimeOps(iters int, op func(i int) error) (time.Duration, error) {
	start, err := b.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := b.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	if err := b.joinLanes(); err != nil {
		return 0, err
	}
	if err := start.Record(b.main); err != nil {
		return 0, err
	}
	if err := b.forkLanes(); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := op(i); err != nil {
			return 0, err
		}
	}
	// Remote completion is part of the operation (as in NVSHMEM's perftest, which
	// quiets before it stops the clock).
	if err := b.joinLanes(); err != nil {
		return 0, err
	}
	b.lib.QuietOnStream(b.main)
	if err := end.Record(b.main); err != nil {
		return 0, err
	}
	// symmem's kernels bound their waits on peers (mailbox.go), so this wait ends for
	// them; NCCL's and NVSHMEM's stream barriers (the copy-engine collectives) do not
	// bound theirs: a peer that never came to the measurement's first operation fails
	// the rank at waitMark, one that leaves later ends the job at its --timeout.
	if err := b.waitMark(); err != nil {
		return 0, err
	}
	ms, err := end.Since(start)
	if err != nil {
		return 0, b.explain(err)
	}
	return msDuration(ms), b.gaveUp()
}

// TimeEach times iters operations one by one: an event before each and one after the
// last (which follows a quiet, like TimeOps). Operations still run back to back; each
// interval is what the GPU spent from one operation's start to the next one's.
func (b *Backend) TimeEach(iters int, op func(i int) error) ([]time.Duration, error) {
	evs := make([]event, iters+1)
	for i := range evs {
		e, err := b.dev.NewEvent()
		if err != nil {
			return nil, err
		}
		defer e.Destroy()
		evs[i] = e
	}
	if err := b.joinLanes(); err != nil {
		return nil, err
	}
	for i := 0; i < iters; i++ {
		if err := evs[i].Record(b.main); err != nil {
			return nil, err
		}
		if err := b.forkLanes(); err != nil {
			return nil, err
		}
		if err := op(i); err != nil {
			return nil, err
		}
		if err := b.joinLanes(); err != nil {
			return nil, err
		}
	}
	b.lib.QuietOnStream(b.main)
	if err := evs[iters].Record(b.main); err != nil {
		return nil, err
	}
	if err := b.waitMark(); err != nil {
		return nil, err
	}
	out := make([]time.Duration, iters)
	for i := range out {
		ms, err := evs[i+1].Since(evs[i])
		if err != nil {
			return nil, b.explain(err)
		}
		out[i] = msDuration(ms)
	}
	return out, b.gaveUp()
}

// TimeGraph captures iters operations (on every lane) into one CUDA graph, uploads it,
// runs ready (when not nil), and times one launch of it with CUDA events: the same
// kernels and copies as TimeOps runs, without a CPU launch for each. (Without a barrier
// as ready, ranks that capture at different speeds start their graphs apart, and the
// first to start waits for the others inside its timed region: on two H200s the
// 1 MiB all-reduce took 14.2 us a launch under graphs against 10.0 launched one by one.)
func (b *Backend) TimeGraph(iters int, op func(i int) error, ready func() error) (time.Duration, error) {
	if err := b.joinLanes(); err != nil {
		return 0, err
	}
	g, err := b.main.Capture(func() error {
		if err := b.forkLanes(); err != nil {
			return err
		}
		for i := 0; i < iters; i++ {
			if err := op(i); err != nil {
				return err
			}
		}
		return b.joinLanes()
	})
	if err != nil {
		return 0, fmt.Errorf("capturing %d operations in a CUDA graph: %w", iters, err)
	}
	defer g.Destroy()
	if err := g.Upload(b.main); err != nil {
		return 0, err
	}
	if ready != nil {
		if err := ready(); err != nil {
			return 0, err
		}
	}
	return b.TimeOps(1, func(int) error { return g.Launch(b.main) })
}

func msDuration(ms float32) time.Duration {
	return time.Duration(float64(ms) * float64(time.Millisecond))
}
