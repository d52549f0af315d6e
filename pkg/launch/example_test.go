package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/symmem/symmem/pkg/launch"
	"github.com/symmem/symmem/pkg/launch/store"
)

// The ranks of ExampleRun_store are this test binary, started again with
// LAUNCH_EXAMPLE_RANK=1 in their environment.
func TestMain(m *testing.M) {
	if os.Getenv("LAUNCH_EXAMPLE_RANK") == "1" {
		if err := rank(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rank is one rank of ExampleRun_store: it finds its place, dials the launcher's store,
// takes rank 0's greeting, meets the others at a barrier and leaves its result.
func rank() error {
	info, ok, err := launch.Discover(launch.DiscoverOptions{})
	if err != nil || !ok {
		return fmt.Errorf("not a rank (%v)", err)
	}
	ctx := context.Background()
	c, err := store.Dial(ctx, info.StoreAddr, info.Token)
	if err != nil {
		return err
	}
	defer c.Close()
	if info.Rank == 0 {
		if err := c.Set(ctx, "greeting", []byte("hello from rank 0")); err != nil {
			return err
		}
	}
	g, err := c.Get(ctx, "greeting")
	if err != nil {
		return err
	}
	if err := c.Barrier(ctx, "done", info.WorldSize); err != nil {
		return err
	}
	fmt.Printf("rank %d of %d read %q\n", info.Rank, info.WorldSize, g)
	return c.Set(ctx, "result/"+strconv.Itoa(info.Rank), []byte("ok"))
}

// Two ranks of a shell command, each printing where it sits; the launcher tags each line
// with the rank.
func ExampleRun() {
	job, err := launch.Run(context.Background(), launch.Config{
		NProc:     2,
		Argv:      []string{"sh", "-c", `echo "rank $SYMMEM_RANK of $SYMMEM_WORLD_SIZE"`},
		Stdout:    os.Stdout,
		TagOutput: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	job.Store.Close()
	// Unordered output:
	// [0] rank 0 of 2
	// [1] rank 1 of 2
}

// Three ranks of this program: each finds its place with Discover, meets the others
// through the store the launcher hosts, and leaves a result there for the launcher to
// read once the job is over.
func ExampleRun_store() {
	job, err := launch.Run(context.Background(), launch.Config{
		NProc:     3,
		Argv:      []string{os.Args[0]},
		Env:       append(os.Environ(), "LAUNCH_EXAMPLE_RANK=1"),
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		TagOutput: true,
		Timeout:   time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer job.Store.Close()
	for r := range 3 {
		v, _ := job.Store.Value("result/" + strconv.Itoa(r))
		fmt.Printf("result of rank %d: %s\n", r, v)
	}
	// Unordered output:
	// [0] rank 0 of 3 read "hello from rank 0"
	// [1] rank 1 of 3 read "hello from rank 0"
	// [2] rank 2 of 3 read "hello from rank 0"
	// result of rank 0: ok
	// result of rank 1: ok
	// result of rank 2: ok
}

// When one rank fails the others are stopped at once, and the error says which rank
// failed, how, and what it printed last.
func ExampleRun_failure() {
	job, err := launch.Run(context.Background(), launch.Config{
		NProc: 2,
		Argv:  []string{"sh", "-c", `if [ "$SYMMEM_RANK" = 1 ]; then echo "no GPU for me" >&2; exit 3; fi; sleep 60`},
		Grace: 100 * time.Millisecond,
	})
	var we *launch.WorkerError
	if errors.As(err, &we) {
		fmt.Println("rank", we.Rank, "exit status", we.Status)
	}
	fmt.Println(err)
	job.Store.Close()
	// Output:
	// rank 1 exit status 3
	// rank 1 failed: exit status 3; the other ranks were stopped
	// last lines of rank 1's stderr:
	//   no GPU for me
}

// A rank that torchrun started finds its place; the store listens on the port after
// torchrun's own.
func ExampleDiscover() {
	env := map[string]string{
		"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29500", "SYMMEM_STORE_TOKEN": "s3cret",
	}
	info, ok, err := launch.Discover(launch.DiscoverOptions{Getenv: func(k string) string { return env[k] }})
	if err != nil || !ok {
		fmt.Println(ok, err)
		return
	}
	fmt.Printf("%s rank %d of %d, local rank %d; store at %s; hosts it: %t\n",
		info.Source, info.Rank, info.WorldSize, info.LocalRank, info.StoreAddr, info.Hosted())
	// Output:
	// torchrun rank 1 of 2, local rank 1; store at 10.0.0.7:29501; hosts it: false
}

// A process no launcher started is no rank of any job.
func ExampleDiscover_alone() {
	_, ok, err := launch.Discover(launch.DiscoverOptions{Getenv: func(string) string { return "" }})
	fmt.Println(ok, err)
	// Output:
	// false <nil>
}

func ExampleExpandNodeList() {
	hosts, err := launch.ExpandNodeList("gpu[01-03,07],login1")
	fmt.Println(hosts, err)
	// Output:
	// [gpu01 gpu02 gpu03 gpu07 login1] <nil>
}

func ExampleExpandTasksPerNode() {
	counts, err := launch.ExpandTasksPerNode("4(x2),1")
	fmt.Println(counts, err)
	// Output:
	// [4 4 1] <nil>
}

// A rank that beat once and then went quiet is found once its silence passes the limit;
// a rank that has not started beating is left alone.
func ExampleStallWatch() {
	w := &launch.StallWatch{Limit: time.Second, Period: 250 * time.Millisecond}
	beats := map[int]int64{0: 1, 1: 0}
	start := time.Unix(0, 0)
	for tick := 0; tick <= 8; tick++ {
		beats[0]++ // rank 0 keeps beating; rank 1 never starts
		if tick < 2 {
			beats[1]++
		}
		now := start.Add(time.Duration(tick) * 250 * time.Millisecond)
		if r, silent, stalled := w.Check(now, []int{0, 1}, func(r int) int64 { return beats[r] }); stalled {
			fmt.Printf("rank %d silent for %s at tick %d\n", r, silent, tick)
			return
		}
	}
	// Output:
	// rank 1 silent for 1.25s at tick 6
}

// Errors are worded for whoever calls the library; a program names its own flag.
func ExampleTimeoutError() {
	err := &launch.TimeoutError{After: time.Minute, Running: []int{2, 3}}
	fmt.Println(err)
	err.Setting = "--timeout"
	fmt.Println(err)
	fmt.Println(errors.Is(err, launch.ErrTimeout))
	// Output:
	// job timed out after 1m0s; ranks still running: 2, 3 (raise the timeout, or look for a rank stuck in a barrier or wait)
	// job timed out after 1m0s; ranks still running: 2, 3 (raise --timeout, or look for a rank stuck in a barrier or wait)
	// true
}
