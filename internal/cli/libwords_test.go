package cli

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch"
)

// The libraries' errors reach the user with symmem's flags in their remedies, however
// the layers between wrapped them, and keep their exit status.
func TestLibraryWords(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{exitcode.With(exitcode.Timeout, fmt.Errorf("job: %w", &launch.TimeoutError{After: time.Second, Running: []int{1}})),
			"job: job timed out after 1s; ranks still running: 1 (raise --timeout, or look for a rank stuck in a barrier or wait)"},
		{exitcode.With(exitcode.Usage, &launch.ListenError{Addr: "127.0.0.1:80", Err: syscall.EADDRINUSE, FreeDefault: true}),
			`--store-addr "127.0.0.1:80": the port is taken (another job?): give this job its own with --store-addr HOST:PORT, or leave it out for a free one`},
		{fmt.Errorf("rank 0: %w", &kernels.WarpsError{Impl: "triton", Kernel: "put_block", Want: 3, Have: []int{4, 8}}),
			"rank 0: triton/put_block was built for [4 8] warps, not 3: pick one of those with --warps"},
	} {
		got := libraryWords(c.err)
		if got.Error() != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		var ce *exitcode.Err
		if errors.As(c.err, &ce) && symmem.ExitCode(got) != ce.Code {
			t.Errorf("%s: exit status %d, want %d", got, symmem.ExitCode(got), ce.Code)
		}
	}
}

// Every setting the lower layers may mark is a flag of some command, so that what
// they say ("lower {max-size}") names a flag a person can give.
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
	err := fmt.Errorf("rank 1: %w", setting.Errorf("lower {max-size} or raise {heap-size}; {not-a-setting} stays"))
	if want := "rank 1: lower --max-size or raise --heap-size; {not-a-setting} stays"; err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}
