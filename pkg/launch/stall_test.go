package launch

import (
	"testing"
	"time"
)

// runTicks feeds w ticks every step from t0 until until, with counts from beats, and
// returns when the first stall was reported (0 if none).
func runTicks(w *StallWatch, t0 time.Time, step, until time.Duration, beats func(r int, at time.Duration) int64) time.Duration {
	for at := time.Duration(0); at <= until; at += step {
		if _, _, stalled := w.Check(t0.Add(at), []int{1, 2}, func(r int) int64 { return beats(r, at) }); stalled {
			return at
		}
	}
	return 0
}

func TestStallWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	alive := func(_ int, at time.Duration) int64 { return int64(at/(250*time.Millisecond)) + 1 }
	// Rank 2 stops beating at 1 s: reported once it has been silent for the limit.
	stopsAt1s := func(r int, at time.Duration) int64 {
		if r == 2 && at > time.Second {
			return alive(r, time.Second)
		}
		return alive(r, at)
	}
	w := &StallWatch{Limit: 2 * time.Second, Period: 100 * time.Millisecond}
	if at := runTicks(w, t0, 100*time.Millisecond, 10*time.Second, stopsAt1s); at < 3*time.Second || at > 3300*time.Millisecond {
		t.Errorf("stopped rank reported at %s; want just after 3s", at)
	}
	// A loaded machine: the watcher runs every 800 ms instead of 100 ms (under half the
	// limit); still reported within a tick of the limit.
	w = &StallWatch{Limit: 2 * time.Second, Period: 100 * time.Millisecond}
	if at := runTicks(w, t0, 800*time.Millisecond, 10*time.Second, stopsAt1s); at == 0 || at > 4*time.Second {
		t.Errorf("on a slow watcher the stopped rank was reported at %s; want by 4s", at)
	}
	// Not beating yet (count 0) is not silence.
	w = &StallWatch{Limit: 2 * time.Second, Period: 100 * time.Millisecond}
	if at := runTicks(w, t0, 100*time.Millisecond, 10*time.Second, func(int, time.Duration) int64 { return 0 }); at != 0 {
		t.Errorf("a rank that never beat was reported at %s", at)
	}
	// The whole job paused for 10 s (the watcher too): no one is reported when it
	// resumes, though the beats come a tick later than the watcher looks.
	w = &StallWatch{Limit: 2 * time.Second, Period: 100 * time.Millisecond}
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		w.Check(t0.Add(at), []int{1, 2}, func(int) int64 { return 5 })
	}
	for i, at := range []time.Duration{10200 * time.Millisecond, 10300 * time.Millisecond, 10400 * time.Millisecond} {
		n := int64(5)
		if i > 0 {
			n = 6
		}
		if r, _, stalled := w.Check(t0.Add(at), []int{1, 2}, func(int) int64 { return n }); stalled {
			t.Errorf("rank %d reported after a pause of the whole job", r)
		}
	}
}
