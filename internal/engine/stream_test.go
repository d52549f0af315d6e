package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/pkg/launch/store"
)

func sweepJob(t *testing.T) Job {
	t.Helper()
	j := Job{Backend: backend.CPU, NProc: 2, Kind: KindBench, Bench: &result.BenchSpec{Ops: []string{"put"}, Impls: []string{"memcpy"},
		MinSize: 4, MaxSize: 64, Factor: 2, Iters: 1, Reps: 1}, reg: own}
	return j
}

func listen(t *testing.T) *store.Server {
	t.Helper()
	srv, err := store.Listen("127.0.0.1:0", store.NewToken())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// A sweep that keeps measuring runs past --timeout; one that stops measuring is
// stopped once --timeout has passed since its last measurement.
func TestTimeoutBoundsAStallNotTheSweep(t *testing.T) {
	srv := listen(t)
	f := &feed{srv: srv, j: sweepJob(t)}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	const timeout = time.Second
	e := &Engine{}
	stop := e.watchSweep(f, timeout, cancel)
	defer stop()
	began := time.Now()
	var stalledAt time.Time
	for time.Since(began) < 3*timeout {
		stalledAt = time.Now()
		srv.Add("progress", 1)
		select {
		case <-ctx.Done():
			t.Fatalf("stopped after %s of steady progress: %v", time.Since(began), context.Cause(ctx))
		case <-time.After(timeout / 20):
		}
	}
	<-ctx.Done()
	var stalled *SweepStalledError
	if !errors.As(context.Cause(ctx), &stalled) || stalled.After != timeout {
		t.Fatalf("cause %v, want a SweepStalledError after %s", context.Cause(ctx), timeout)
	}
	if waited := time.Since(stalledAt); waited < timeout {
		t.Errorf("stopped %s after the last measurement, before timeout %s", waited, timeout)
	}
}

// The feed merges a measurement once every rank has published it, in order.
func TestFeedMergesWhatEveryRankPublished(t *testing.T) {
	srv := listen(t)
	f := &feed{srv: srv, j: sweepJob(t)}
	set := func(key string, v any) {
		b, _ := json.Marshal(v)
		srv.Set(key, b)
	}
	row := func(size int64, times ...float64) []result.Row {
		return []result.Row{{Op: "put", Impl: "memcpy", Size: size, Src: 0, Dst: 1, TimesUS: times, Checked: true}}
	}
	set(feedKey("info", 0, -1), benchRank{Clock: "wall"})
	set(feedKey("rows", 0, 0), row(4, 1))
	if _, added := f.poll(); len(added) != 0 {
		t.Fatalf("rows %v before rank 1's part came", added)
	}
	set(feedKey("info", 1, -1), benchRank{})
	set(feedKey("rows", 1, 0), []result.Row{})
	set(feedKey("rows", 0, 1), row(8, 2))
	res, added := f.poll()
	if len(added) != 1 || added[0].Size != 4 || added[0].MedUS != 1 || res.Header.Clock != "wall" {
		t.Fatalf("added %+v (clock %q), want the 4-byte row only, finished", added, res.Header.Clock)
	}
	set(feedKey("rows", 1, 1), []result.Row{})
	if _, added := f.poll(); len(added) != 1 || added[0].Size != 8 {
		t.Fatalf("added %+v, want the 8-byte row", added)
	}
	p := f.partial(errors.New("interrupted by SIGINT\nmore"))
	if p.Incomplete == nil || p.Incomplete.Rows != 2 || p.Incomplete.Planned != 5 || p.Incomplete.Reason != "interrupted by SIGINT" || p.OK {
		t.Fatalf("partial %+v ok %v", p.Incomplete, p.OK)
	}
}
