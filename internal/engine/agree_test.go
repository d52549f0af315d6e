package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// agreeAll runs agree on one rank per job, joined through one store, and returns each
// rank's error.
func agreeAll(t *testing.T, sizes []int, jobs []Job) []error {
	t.Helper()
	srv, err := store.Listen("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make([]error, len(jobs))
	done := make(chan int, len(jobs))
	for i := range jobs {
		c, err := store.Dial(ctx, srv.Addr(), "tok")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := &rank{info: launch.RankInfo{Rank: i, WorldSize: sizes[i], Source: "torchrun"}, store: c, stopWatch: func() {}}
		if i == 0 {
			r.server = srv
		}
		go func() { errs[i] = r.agree(ctx, jobs[i]); done <- i }()
	}
	for range jobs {
		<-done
	}
	return errs
}

func withImpl(j Job, impl string) Job { j.Run.Launch.Impl = impl; return j }

func runJob(op string, count int64, dtype string) Job {
	return Job{Kind: KindRun, Backend: "cpu", NProc: 2, Heap: 1 << 20, NCCLLib: "/opt/" + op,
		Run: &runtest.Spec{Op: ops.Op(op), Count: count, DType: dtype, Bytes: count * 4}}
}

// Ranks given different jobs under an external launcher ran them: put against get
// exited 0 over an empty table, --count 8 against 16 was called wrong data. Each side
// now names the difference, setting by setting, as bad input.
func TestRanksAgreeOnTheJob(t *testing.T) {
	for _, c := range []struct {
		name   string
		sizes  []int
		jobs   []Job
		want0  string
		wantK  string
		others bool // the ranks that agree with rank 0 pass
	}{
		{"op", []int{2, 2}, []Job{runJob("put", 8, "int32"), runJob("get", 8, "int32")},
			"rank 0: rank 1: the operation put here, get on rank 1", "rank 1 was given another job than rank 0: the operation get here, put on rank 0", false},
		{"count", []int{2, 2}, []Job{runJob("all-reduce", 8, "int32"), runJob("all-reduce", 16, "int32")},
			"rank 1: {count} 8 here, 16 on rank 1", "{count} 16 here, 8 on rank 0", false},
		// Numbers are named as given, not as floats (1.048576e+06).
		{"large count", []int{2, 2}, []Job{runJob("put", 1<<20, "int32"), runJob("put", 1<<21, "int32")},
			"rank 1: {count} 1048576 here, 2097152 on rank 1", "{count} 2097152 here, 1048576 on rank 0", false},
		{"world size", []int{2, 3}, []Job{runJob("put", 8, "int32"), runJob("put", 8, "int32")},
			"the world size (WORLD_SIZE, or the launcher's -n) 2 here, 3 on rank 1", "the world size (WORLD_SIZE, or the launcher's -n) 3 here, 2 on rank 0", false},
		// backend.Launch's fields name their settings too (their JSON names are Go's).
		{"impl", []int{2, 2}, []Job{runJob("put", 8, "int32"), withImpl(runJob("put", 8, "int32"), "cuda")},
			"rank 1: {impl} unset here, cuda on rank 1", "{impl} cuda here, unset on rank 0", false},
		// Rank 0 waits for three; the one that disagrees wakes it at once.
		{"one of three, rank 0 waiting for the third", []int{4, 4, 4}, []Job{runJob("put", 8, "int32"), runJob("put", 8, "int32"), runJob("put", 8, "int8")},
			"rank 2: {dtype} int32 here, int8 on rank 2", "rank 2 was given another job than rank 0: {dtype} int8 here, int32 on rank 0", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := agreeAll(t, c.sizes, c.jobs)
			last := len(errs) - 1
			for i, want := range map[int]string{0: c.want0, last: c.wantK} {
				var ce *exitcode.Err
				if !errors.As(errs[i], &ce) || ce.Code != exitcode.Usage || !strings.Contains(errs[i].Error(), want) {
					t.Errorf("rank %d: %v; want exit 2 and %q", i, errs[i], want)
				}
			}
			if c.others && errs[1] != nil {
				t.Errorf("rank 1, which agrees with rank 0: %v", errs[1])
			}
		})
	}
	// The same job, library paths aside (per host), agrees.
	a, b := runJob("put", 8, "int32"), runJob("put", 8, "int32")
	b.NCCLLib = "/elsewhere"
	for i, err := range agreeAll(t, []int{2, 2}, []Job{a, b}) {
		if err != nil {
			t.Errorf("rank %d of the same job: %v", i, err)
		}
	}
}
