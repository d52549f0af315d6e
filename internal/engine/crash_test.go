package engine

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/symmem/symmem/pkg/launch"
)

// The ranks' stderr file is kept only where a message names it, and none is made
// after the job's error is out: a rank that could not be started (no descriptors left
// to fork it) once left one in TMPDIR in a run of ten, written by the ranks started
// before it as they were stopped.
func TestStderrFileOnlyWhereNamed(t *testing.T) {
	files := func() []string {
		f, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "symmem-stderr-*.log"))
		return f
	}
	crashed := func(err error) string {
		t.Setenv("TMPDIR", t.TempDir())
		l := newStderrLog(io.Discard)
		l.Write([]byte("[1] panic: injected crash\n"))
		return l.finish(err)
	}
	if kept := crashed(&launch.WorkerError{Rank: 1, Status: 2}); kept == "" || len(files()) != 1 {
		t.Errorf("rank 1 crashed and its error names the file: kept %q, files %v", kept, files())
	}
	if kept := crashed(errors.New("starting rank 5: fork/exec: too many open files")); kept != "" || len(files()) != 0 {
		t.Errorf("a rank could not start; no message names the file: kept %q, files %v", kept, files())
	}

	t.Setenv("TMPDIR", t.TempDir())
	l := newStderrLog(io.Discard)
	l.finish(errors.New("starting rank 5: fork/exec: too many open files"))
	l.Write([]byte("[0] symmem: rank 0: interrupted\n"))
	if f := files(); len(f) != 0 {
		t.Errorf("a line after the job's error made %v", f)
	}
}
