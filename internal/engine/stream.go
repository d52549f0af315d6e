package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/launch/store"
)

// feedKey names what a rank of a sweep publishes as it measures: its part of the
// header ("bench/info/RANK", seq < 0) and each measurement's rows
// ("bench/rows/RANK/SEQ").
func feedKey(kind string, rank, seq int) string {
	k := "bench/" + kind + "/" + strconv.Itoa(rank)
	if seq >= 0 {
		k += "/" + strconv.Itoa(seq)
	}
	return k
}

// feed merges, on the launcher, the rows the ranks of a sweep publish as they measure:
// a measurement is merged once every rank has published it, in the order taken, so
// rows can be shown as they land and a sweep that ends early keeps them.
type feed struct {
	srv      *store.Server
	j        Job
	launcher string
	peaks    func(*result.Result)
	words    setting.Words // for the settings the reason of partial names
	infos    []benchRank   // nil until every rank has published its part
	rows     []result.Row
	next     int // the next measurement to merge
}

// poll merges what every rank has published since the last call and returns the
// result so far and the rows this call added.
func (f *feed) poll() (res result.Result, added []result.Row) {
	if f.srv == nil {
		return f.result(), nil
	}
	if f.infos == nil {
		infos := make([]benchRank, f.j.NProc)
		for r := range infos {
			v, ok := f.srv.Value(feedKey("info", r, -1))
			if !ok || json.Unmarshal(v, &infos[r]) != nil {
				return f.result(), nil
			}
		}
		f.infos = infos
	}
	from := len(f.rows)
	for {
		perRank := make([][]result.Row, f.j.NProc)
		for r := range perRank {
			v, ok := f.srv.Value(feedKey("rows", r, f.next))
			if !ok || json.Unmarshal(v, &perRank[r]) != nil {
				res = f.result()
				return res, res.Rows[from:]
			}
		}
		// One measurement at a time: merged together, a row only one rank took part
		// in could move ahead of rows already shown.
		f.rows = append(f.rows, result.Merge(perRank)...)
		f.next++
	}
}

// result is the sweep's result so far (its header empty until every rank's part came).
func (f *feed) result() result.Result {
	ranks := make([]benchRank, len(f.infos))
	copy(ranks, f.infos)
	res := assemble(f.j, f.launcher, ranks, nil)
	res.Rows = append([]result.Row(nil), f.rows...)
	if f.peaks != nil {
		f.peaks(&res)
	}
	res.OK = len(res.RowFailures()) == 0
	return res
}

// partial is what the sweep measured before why ended it, marked incomplete.
func (f *feed) partial(why error) *result.Result {
	res, _ := f.poll()
	if res.Rows == nil {
		res.Rows = []result.Row{} // "rows": [], as a whole result's
	}
	res.OK = false
	reason := firstLine(f.words.Error(why).Error())
	var stalled *SweepStalledError
	if errors.As(why, &stalled) {
		reason = f.words.Sprintf("%s", stalled.Short())
	}
	res.Incomplete = &result.Incomplete{Reason: reason, Rows: len(res.Rows), Planned: f.j.Rows()}
	return &res
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// SweepStalledError says that a sweep made no progress for --timeout: no measurement
// finished in that long. A sweep that keeps measuring runs to its end whatever its
// length; one that stalls is stopped.
type SweepStalledError struct {
	After time.Duration
	// Last is the last row that finished ("" when none did); Done and Total count
	// the measurements.
	Last        string
	Done, Total int
}

func (e *SweepStalledError) Error() string { return e.Say(setting.Unworded) }

// Say is the error with the setting it names worded by w.
func (e *SweepStalledError) Say(w setting.Words) string {
	if e.Last == "" {
		return w.Sprintf("the sweep's first measurement did not finish within %s %s (it bounds the time between measurements, not the sweep): the ranks were stopped; raise %s, or look for a rank stuck in a barrier or wait", setting.Timeout, e.After, setting.Timeout)
	}
	return w.Sprintf("no measurement finished for %s %s (it bounds the time between measurements, not the sweep) after %s, measurement %d of %d: the ranks were stopped; raise %s, or look for a rank stuck in a barrier or wait",
		setting.Timeout, e.After, e.Last, e.Done, e.Total, setting.Timeout)
}

// Short says it in a line, for the result it leaves.
func (e *SweepStalledError) Short() setting.Text {
	if e.Last == "" {
		return setting.Textf("stopped: the first measurement did not finish within %s %s", setting.Timeout, e.After)
	}
	return setting.Textf("stopped: no measurement finished for %s %s after %s", setting.Timeout, e.After, e.Last)
}

// rowName names a row in messages: put memcpy 1M 0->1.
func rowName(r result.Row) string {
	return fmt.Sprintf("%s %s %s %s", r.Op, r.Impl, units.FormatSize(r.Size), r.PairLabel())
}

// watchSweep, while a sweep runs, hands the rows that landed to e.Rows, its progress
// to e.Progress, and stops it (cancel, with a SweepStalledError) once no measurement
// has finished for timeout (0: never). The returned stop waits for it to end.
func (e *Engine) watchSweep(f *feed, timeout time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	total := steps(f.j.reg, *f.j.Bench, f.j.NProc)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var last int64 = -1
		lastAt := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				// Progress first: the rows' printer says how far the sweep is.
				n := f.srv.Counter("progress")
				if e.Progress != nil {
					e.Progress(int(n), total)
				}
				res, added := f.poll()
				if len(added) > 0 && e.Rows != nil {
					e.Rows(res, added)
				}
				if n != last {
					last, lastAt = n, now
				}
				if timeout > 0 && now.Sub(lastAt) > timeout {
					stalled := &SweepStalledError{After: timeout, Done: int(n), Total: total}
					if len(res.Rows) > 0 {
						stalled.Last = rowName(res.Rows[len(res.Rows)-1])
					}
					cancel(stalled)
					return
				}
			}
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-finished
	}
}
