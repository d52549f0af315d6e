package symmem

import (
	"context"
	"strings"
	"testing"
)

// A program that never called Init gets an error that says what to call, before any
// rank starts (its ranks would run the program's main again), not a panic.
func TestRunWithoutInit(t *testing.T) {
	was := initialised.Load()
	initialised.Store(false)
	defer initialised.Store(was)
	rep, err := Run(context.Background(), Options{Backend: "cpu"}, Test{Op: "put"})
	if rep != nil || err == nil || !strings.Contains(err.Error(), "call symmem.Init first thing in main") || ExitCode(err) != 2 {
		t.Fatalf("report %v, err %v (exit %d): want bad input naming symmem.Init", rep, err, ExitCode(err))
	}
}
