package launch

import "time"

// StallWatch finds a rank that stopped beating. It counts only time during which the
// watcher itself was running: a gap between two checks of half the limit or more means
// this process was stopped too (the whole job paused with SIGTSTP,
// `scontrol suspend` or a debugger) or starved of CPU, and is not held against anyone.
// A rank stopped on its own goes silent while the watcher keeps running.
type StallWatch struct {
	Limit  time.Duration // silence that makes a rank stalled
	Period time.Duration // how often Check is meant to be called
	last   time.Time
	beats  map[int]int64
	quiet  map[int]time.Duration
}

// Check takes each rank's beat count at now and returns the first rank that has been
// silent for more than Limit, and for how long. A count of 0 is a rank that has not
// started beating yet.
func (w *StallWatch) Check(now time.Time, ranks []int, count func(rank int) int64) (rank int, silent time.Duration, stalled bool) {
	if w.beats == nil {
		w.beats, w.quiet = map[int]int64{}, map[int]time.Duration{}
	}
	var dt time.Duration
	if !w.last.IsZero() {
		dt = now.Sub(w.last)
		if dt > w.Limit/2 {
			// This process did not run in between: stopped with the rest of the job, or
			// starved of CPU so badly that nobody's silence can be told from its own.
			// Shorter delays (a loaded machine) count in full, so detection stays
			// within the limit; a pause shorter than half the limit cannot reach it.
			dt = w.Period
		}
	}
	w.last = now
	for _, r := range ranks {
		n := count(r)
		switch {
		case n == 0:
		case n != w.beats[r]:
			w.beats[r], w.quiet[r] = n, 0
		default:
			w.quiet[r] += dt
			if w.quiet[r] > w.Limit {
				return r, w.quiet[r], true
			}
		}
	}
	return 0, 0, false
}
