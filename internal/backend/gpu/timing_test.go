package gpu

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// puts returns an op that puts rank 0's source into rank 1's dst on lane i%lanes.
func (p *pair) puts(lanes int) func(i int) error {
	return func(i int) error {
		return p.b[0].Put(p.dst, p.src, 1, backend.Launch{Lane: i % lanes})
	}
}

// The end event follows the quiet: remote completion is inside the timed region.
func TestTimeOpsQuietBeforeEnd(t *testing.T) {
	p := newPair(t, 4096, Config{})
	d, err := p.b[0].TimeOps(3, p.puts(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"record@s0", "launch put_block@s0", "launch put_block@s0", "launch put_block@s0", "quiet@s0", "record@s0"}
	if got := p.g[0].trace(); !slices.Equal(got, want) {
		t.Errorf("calls\n %q\nwant\n %q", got, want)
	}
	if want := time.Duration(3*fakeOp + fakeSync); d != want {
		t.Errorf("timed %v, want three kernels and the quiet, %v", d, want)
	}
}

// TimeEach gives one interval per operation, each from its start event to the next;
// the last ends after the quiet.
func TestTimeEachIntervals(t *testing.T) {
	p := newPair(t, 4096, Config{})
	ds, err := p.b[0].TimeEach(4, func(i int) error {
		for range i + 1 {
			if err := p.b[0].Put(p.dst, p.src, 1, backend.Launch{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if want := []time.Duration{1 * ms, 2 * ms, 3 * ms, 4*ms + ms/2}; !slices.Equal(ds, want) {
		t.Errorf("intervals %v, want %v", ds, want)
	}
	got := p.g[0].trace("record", "quiet")
	if want := []string{"record@s0", "record@s0", "record@s0", "record@s0", "quiet@s0", "record@s0"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// With three lanes the clock starts after every lane's earlier work, the lanes start
// after the start event, and the main stream joins them all before the quiet and the
// end event. Quiet and Barrier join the lanes too.
func TestLanesForkJoin(t *testing.T) {
	p := newPair(t, 4096, Config{})
	b, g := p.b[0], p.g[0]
	if err := b.Lanes(3); err != nil {
		t.Fatal(err)
	}
	if err := b.Lanes(2); err != nil || len(b.lanes) != 3 || g.streams != 3 {
		t.Fatalf("Lanes(2) after Lanes(3): %v, %d lanes, %d streams made", err, len(b.lanes), g.streams)
	}
	if _, err := b.TimeOps(3, p.puts(3)); err != nil {
		t.Fatal(err)
	}
	join := []string{"record@s1", "s0 waits s1", "record@s2", "s0 waits s2"}
	fork := []string{"record@s0", "s1 waits s0", "s2 waits s0"}
	var want []string
	want = append(want, join...)
	want = append(want, "record@s0")
	want = append(want, fork...)
	want = append(want, "launch put_block@s0", "launch put_block@s1", "launch put_block@s2")
	want = append(want, join...)
	want = append(want, "quiet@s0", "record@s0")
	if got := g.trace(); !slices.Equal(got, want) {
		t.Errorf("calls\n %q\nwant\n %q", got, want)
	}
	for _, c := range []struct {
		name string
		do   func() error
		last string
	}{{"Quiet", b.Quiet, "quiet@s0"}, {"Barrier", b.Barrier, "record@s0 barrier@s0"}} {
		g.log = nil
		if err := c.do(); err != nil {
			t.Fatal(err)
		}
		// Barrier first waits (bounded) for the work before it: a kernel that gave up
		// is reported before NVSHMEM's barrier waits for a peer that is not coming.
		if want := append(append(slices.Clone(join), strings.Fields(c.last)...), "sync@s0"); !slices.Equal(g.trace(), want) {
			t.Errorf("%s: calls %q, want %q", c.name, g.trace(), want)
		}
	}
}

// TimeGraph captures the operations of every lane, runs none of them while capturing,
// and times one launch of the graph, quiet included.
func TestTimeGraph(t *testing.T) {
	p := newPair(t, 4096, Config{})
	b, g := p.b[0], p.g[0]
	if err := b.Lanes(2); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 4096)
	readyAt := -1
	d, err := b.TimeGraph(2, func(i int) error {
		err := p.puts(2)(i)
		if !bytes.Equal(p.heap(1, p.dst), zero) {
			t.Error("a captured put ran at capture")
		}
		return err
	}, func() error { readyAt = len(g.log); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// ready ran after the capture, before the clock started.
	if readyAt < 1 || readyAt >= len(g.log) || !g.log[readyAt-1].captured || g.log[readyAt].op != "record" {
		t.Errorf("ready ran at call %d of %q, want right after the capture and before the start event", readyAt, g.trace())
	}
	if !bytes.Equal(p.heap(1, p.dst), pattern(0, 4096)) {
		t.Error("the graph's launch delivered nothing")
	}
	if want := time.Duration(2*fakeOp + fakeSync); d != want {
		t.Errorf("timed %v, want %v", d, want)
	}
	var captured []string
	for _, c := range g.log {
		if c.captured {
			captured = append(captured, c.String())
		}
	}
	want := []string{"record@s0", "s1 waits s0", "launch put_block@s0", "launch put_block@s1", "record@s1", "s0 waits s1"}
	if !slices.Equal(captured, want) {
		t.Errorf("captured %q, want %q", captured, want)
	}
	if n := len(g.trace("graph")); n != 1 {
		t.Errorf("graph launched %d times", n)
	}
	if g.live["graph"] != 0 {
		t.Error("the graph was not destroyed")
	}
}
