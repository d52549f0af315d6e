package engine

import (
	"runtime"
	"testing"
	"time"

	"github.com/symmem/symmem/pkg/launch"
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
