package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/launch"
)

// One error of the layers below, worded by each of its presenters: the library's front
// door names the field a program sets, the command line the flag a person types.
func TestOneErrorWordedTwice(t *testing.T) {
	job, err := symmem.NewJob(cpuJob())
	if err != nil {
		t.Fatal(err)
	}
	spec := symmem.DefaultRunSpec()
	spec.Op, spec.Peer = ops.Put, 5
	_, err = job.PlanRun(spec)
	if want := "RunSpec.Peer 5 out of range: rank 0 talks to a peer in 1..1"; err == nil || err.Error() != want {
		t.Errorf("library: %v, want %q", err, want)
	}
	opts := &RunOptions{JobOptions: cpuJob(), Op: "put", Count: 8, Peer: 5}
	err = runRun(context.Background(), opts, IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	if want := "--peer 5 out of range: rank 0 talks to a peer in 1..1"; err == nil || err.Error() != want || symmem.ExitCode(err) != exitcode.Usage {
		t.Errorf("command line: %v (exit %d), want %q (exit 2)", err, symmem.ExitCode(err), want)
	}
}

// An error of pkg/launch whose setting the engine names by value (setting.Naming)
// reaches the user with the flag, however it was wrapped, and keeps its exit status.
func TestLaunchErrorNamesTheFlag(t *testing.T) {
	te := &launch.TimeoutError{After: time.Second, Running: []int{1}}
	err := exitcode.With(exitcode.Timeout, fmt.Errorf("job: %w", setting.Naming(te, setting.Timeout, func(s string) { te.Setting = s })))
	got := flagWords.Error(err)
	if want := "job: job timed out after 1s; ranks still running: 1 (raise --timeout, or look for a rank stuck in a barrier or wait)"; got.Error() != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if symmem.ExitCode(got) != exitcode.Timeout {
		t.Errorf("exit status %d, want %d", symmem.ExitCode(got), exitcode.Timeout)
	}
}

// Every setting of the table is a flag of some command, so that what the layers below
// say ("lower --max-size") names a flag a person can give.
func TestSettingsAreFlags(t *testing.T) {
	flags := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewCmdRoot(IO{Out: io.Discard, Err: io.Discard}))
	for _, n := range setting.Names() {
		if !flags[string(n)] {
			t.Errorf("setting %q is no command's flag", n)
		}
	}
}
