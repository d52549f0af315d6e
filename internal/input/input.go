// Package input reads the files a user names on the command line (a saved result, a
// config file) so that no name can hang symmem or exhaust its memory: os.ReadFile of a
// named pipe that nobody writes waits forever, and of /dev/zero never ends.
package input

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/units"
)

// Read returns the contents of file, at most limit bytes. A directory, a device or a
// socket is refused, and so is a file holding more than limit bytes; a named pipe is
// read (`--config <(...)` is one), but one that nobody writes to is refused instead of
// waited on. A file that cannot be found or opened gives the
// *fs.PathError of os.Stat or os.Open; every other refusal names file and what it is,
// for the caller to add what to give instead.
func Read(file string, limit int64) ([]byte, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if err := check(file, st, limit, true); err != nil {
		return nil, err
	}
	// A pipe's read waits for its writer: the signals that stop it are taken before the
	// pipe is opened, so that one sent once it is open (or just before) is not lost.
	var w *signalWatch
	if st.Mode()&fs.ModeNamedPipe != 0 {
		w = watchSignals()
	}
	b, err := readOpen(file, limit, w)
	if w != nil {
		if serr := w.stop(); serr != nil {
			return nil, fmt.Errorf("%s: %w while waiting for its writer", file, serr)
		}
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(file, limit)
	}
	if len(b) == 0 && st.Mode()&fs.ModeNamedPipe != 0 {
		// Nobody held it open for writing (or its writer wrote nothing): taken for an
		// empty file, a config would be no settings and a writer that came later
		// would wait for good.
		return nil, fmt.Errorf("%s is a named pipe that nothing was written to", file)
	}
	return b, nil
}

// Check is Read's refusals for a file that other code reads whole later (a kernel
// through fs.FS): a plain file of at most limit bytes, links followed, passes; a named
// pipe is refused too.
func Check(file string, limit int64) error {
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	return check(file, st, limit, false)
}

// ErrStopped is Read's error when a signal stopped it waiting on a named pipe; it
// carries the exit status of an interruption.
var ErrStopped = exitcode.With(exitcode.Interrupted, errors.New("stopped by a signal"))

// readOpen opens file and reads at most limit+1 bytes of it; w, where set, ends the
// read when a signal comes.
func readOpen(file string, limit int64, w *signalWatch) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe for reading otherwise waits for a writer. Reads
	// still wait for data while a writer holds the pipe open (Go's poller), and end at
	// once when none does.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if w != nil {
		w.watch(f)
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// signalWatch ends a read that is waiting for a writer when SIGINT, SIGTERM, SIGHUP or
// SIGQUIT comes: the command line's handler takes those signals so that a job can clean
// up, which leaves a read that knows nothing of them deaf. The handler still gets the
// signal.
type signalWatch struct {
	ch       chan os.Signal
	quit     chan struct{}
	finished chan struct{} // closed when watch's goroutine ends; nil until watch
	got      os.Signal
}

// watchSignals takes the signals from now on: one that comes before watch is kept for
// it.
func watchSignals() *signalWatch {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	w := &signalWatch{ch: make(chan os.Signal, 1), quit: make(chan struct{})}
	signal.Notify(w.ch, sigs...)
	return w
}

// watch ends f's read when a signal comes (or came since watchSignals).
func (w *signalWatch) watch(f *os.File) {
	w.finished = make(chan struct{})
	go func() {
		defer close(w.finished)
		select {
		case w.got = <-w.ch:
			f.SetReadDeadline(time.Now()) // the pipe is in Go's poller: the read returns
		case <-w.quit:
		}
	}()
}

// stop ends the watch and says whether a signal ended the read.
func (w *signalWatch) stop() error {
	signal.Stop(w.ch)
	close(w.quit)
	if w.finished != nil {
		<-w.finished
	}
	if w.got != nil {
		return fmt.Errorf("%w (%v)", ErrStopped, w.got)
	}
	return nil
}

func check(file string, st fs.FileInfo, limit int64, pipes bool) error {
	switch m := st.Mode(); {
	case m.IsDir():
		return fmt.Errorf("%s is a directory, not a file", file)
	case m&fs.ModeDevice != 0:
		return fmt.Errorf("%s is a device, not a file", file)
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("%s is a socket, not a file", file)
	case m&fs.ModeNamedPipe != 0 && !pipes:
		return fmt.Errorf("%s is a named pipe, not a file", file)
	case m.IsRegular() && st.Size() > limit:
		return tooLarge(file, limit)
	}
	return nil
}

func tooLarge(file string, limit int64) error {
	return fmt.Errorf("%s holds more than %s", file, units.FormatSize(limit))
}
