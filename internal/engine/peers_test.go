package engine

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// A rank beats four times a second where each has a core; where the ranks outnumber
// the cores, as much less often as they outnumber them, but four times within the
// stall limit (DefaultStallLimit's where none is watched), and never more often.
func TestBeatEvery(t *testing.T) {
	cores := runtime.NumCPU()
	for _, tc := range []struct {
		size  int
		stall time.Duration
		want  time.Duration
	}{
		{1, DefaultStallLimit, beatPeriod},
		{cores, DefaultStallLimit, beatPeriod},
		{2 * cores, DefaultStallLimit, 2 * beatPeriod},
		{4 * cores, DefaultStallLimit, 4 * beatPeriod},
		{100 * cores, DefaultStallLimit, DefaultStallLimit / 4},
		{100 * cores, 0, DefaultStallLimit / 4},
		{100 * cores, 2 * time.Second, 500 * time.Millisecond},
		{100 * cores, MinStallLimit, beatPeriod},
		{10 * cores, time.Minute, 10 * beatPeriod}, {100 * cores, time.Minute, time.Minute / 4},
	} {
		if got := beatEvery(tc.size, tc.stall); got != tc.want {
			t.Errorf("%d ranks on %d cores, stall limit %s: a beat every %s, want %s", tc.size, cores, tc.stall, got, tc.want)
		}
	}
}

// Only ranks that symmem's launcher started stretch their beats: under another
// launcher rank 0 watches with a stall limit of its own, perhaps shorter than theirs.
func TestBeatForLauncher(t *testing.T) {
	crowd := 100 * runtime.NumCPU()
	for source, want := range map[string]time.Duration{"symmem": DefaultStallLimit / 4, "torchrun": beatPeriod, "openmpi": beatPeriod, "slurm": beatPeriod} {
		info := launch.RankInfo{Source: source, WorldSize: crowd, LocalWorldSize: crowd}
		if got := beatFor(info, DefaultStallLimit); got != want {
			t.Errorf("%d ranks started by %s: a beat every %s, want %s", crowd, source, got, want)
		}
	}
}

// A rank of symmem's launcher beats first over its own store connection, before
// anything else, and dials no connection for the beat until its next beat: here the
// beat's own address answers nobody, so a dial would leave the first beat unsent.
func TestFirstBeatUsesTheRanksConnection(t *testing.T) {
	srv, err := store.Listen("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	first, err := store.Dialer{}.Dial(ctx, srv.Addr(), "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	nobody, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := nobody.Addr().String()
	nobody.Close()
	info := launch.RankInfo{Rank: 1, Source: "symmem", StoreAddr: addr, Token: "tok"}
	b := startBeat(ctx, info, time.Hour, first)
	defer b.stop()
	if got := srv.Counter("beat/1"); got != 1 || b.answered.Load() != 1 {
		t.Errorf("after startBeat the store holds beat/1 = %d (answered %d), want 1", got, b.answered.Load())
	}
}
