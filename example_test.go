package symmem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/symmem/symmem"
)

// The ranks of the examples are this test binary, started again: Init runs them.
func TestMain(m *testing.M) {
	if code, rank := symmem.Init(); rank {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Rank 0 puts eight 5s into rank 1's buffer on the CPU backend, and rank 1 checks them.
func ExampleRun() {
	rep, err := symmem.Run(context.Background(), symmem.Options{NProc: 2, Backend: "cpu", Stdout: io.Discard},
		symmem.Test{Op: "put", Value: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := rep.Ranks[1]
	fmt.Printf("%s of %d bytes (%s): rank %d received %s from rank %d\n", rep.Op, rep.Bytes, rep.DType, r.Rank, r.Received, r.From)
	// Output:
	// put of 8 bytes (int8): rank 1 received [5, 5, 5, 5, 5, 5, 5, 5] from rank 0
}

// An all-reduce on four ranks: every rank checks the sum it holds.
func ExampleRun_allReduce() {
	rep, err := symmem.Run(context.Background(), symmem.Options{NProc: 4, Backend: "cpu", Stdout: io.Discard},
		symmem.Test{Op: "all-reduce", Count: 64, Value: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rep.Ranks {
		fmt.Printf("rank %d: %d wrong, ok %t\n", r.Rank, r.Wrong, r.OK)
	}
	// Output:
	// rank 0: 0 wrong, ok true
	// rank 1: 0 wrong, ok true
	// rank 2: 0 wrong, ok true
	// rank 3: 0 wrong, ok true
}

// A put that never lands (the test fault drops rank 0's transfers) is reported as wrong
// data, with the exit status that says so.
func TestRunWrongData(t *testing.T) {
	t.Setenv("SYMMEM_TEST_FAULT", "0:drop")
	rep, err := symmem.Run(context.Background(), symmem.Options{Backend: "cpu", Stdout: io.Discard, Stderr: io.Discard},
		symmem.Test{Op: "put", Value: 5})
	if !errors.Is(err, symmem.ErrWrongData) || symmem.ExitCode(err) != 3 {
		t.Fatalf("err = %v (exit %d), want wrong data (exit 3)", err, symmem.ExitCode(err))
	}
	if rep == nil || rep.OK || rep.Ranks[1].OK || rep.Ranks[1].Wrong != 8 || rep.Failure() == "" {
		t.Fatalf("report = %+v", rep)
	}
}

// Bad input is refused before any rank starts, with status 2.
func TestRunBadInput(t *testing.T) {
	_, err := symmem.Run(context.Background(), symmem.Options{Backend: "cpu"}, symmem.Test{Op: "nosuchop"})
	if err == nil || symmem.ExitCode(err) != 2 {
		t.Fatalf("err = %v (exit %d), want bad input (exit 2)", err, symmem.ExitCode(err))
	}
}

// The library's errors name a setting by the field a program gives it in, not by
// symmem's command-line flags.
func TestRunNamesTheField(t *testing.T) {
	_, err := symmem.Run(context.Background(), symmem.Options{Backend: "cpu"}, symmem.Test{Op: "put", Peer: 5})
	if want := "Test.Peer 5 out of range: rank 0 talks to a peer in 1..1"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	// The count is checked where the command line's --count is, once, for both.
	_, err = symmem.Run(context.Background(), symmem.Options{Backend: "cpu"}, symmem.Test{Op: "put", Count: -1})
	if want := "Test.Count -1 out of range: give 1..1099511627776 elements"; err == nil || err.Error() != want || symmem.ExitCode(err) != 2 {
		t.Fatalf("err = %v (exit %d), want %q (exit 2)", err, symmem.ExitCode(err), want)
	}
	_, err = symmem.Run(context.Background(), symmem.Options{Backend: "cpu", NProc: 3000}, symmem.Test{Op: "put"})
	if want := "Options.NProc 3000 out of range"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want it to begin %q", err, want)
	}
}
