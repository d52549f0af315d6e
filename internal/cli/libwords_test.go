package cli

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/exitcode"
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
		if errors.As(c.err, &ce) && codeOf(got) != ce.Code {
			t.Errorf("%s: exit status %d, want %d", got, codeOf(got), ce.Code)
		}
	}
}
