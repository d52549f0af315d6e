package input

import (
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// read calls Read with a deadline: the cases it guards used to hang (a named pipe) or
// fill memory (/dev/zero).
func read(t *testing.T, file string, limit int64) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		b, err := Read(file, limit)
		done <- res{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("Read(%s) still running after 5s", file)
		return nil, nil
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<40); err != nil { // sparse: no disk taken
		t.Fatal(err)
	}
	cases := []struct{ file, want string }{
		{dir, dir + " is a directory, not a file"},
		{"/dev/zero", "/dev/zero is a device, not a file"},
		{big, big + " holds more than 1M"},
	}
	for _, c := range cases {
		_, err := read(t, c.file, 1<<20)
		if err == nil || err.Error() != c.want {
			t.Errorf("Read(%s): %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := read(t, filepath.Join(dir, "none"), 1<<20); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// A named pipe that nobody writes is refused (os.ReadFile waits forever for a
// writer); one that somebody writes reads what was written, as `--config <(...)` does.
func TestReadNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.json")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	b, err := read(t, p, 1<<20)
	if err == nil || err.Error() != p+" is a named pipe that nothing was written to" {
		t.Fatalf("Read of an unwritten pipe: %q, %v; want its refusal", b, err)
	}
	// A pipe whose writer is there: os.Pipe's read end, by its /proc name.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd := int(r.Fd())
	took := make(chan bool, 1)
	go func() {
		w.WriteString("version: 1\n")
		// The rest goes once the pipe is empty: the reader has taken the first line,
		// and the writer still holds the pipe open, so the reader must wait for it.
		for deadline := time.Now().Add(5 * time.Second); unread(fd) > 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		}
		took <- unread(fd) == 0
		w.WriteString("nproc: 4\n")
		w.Close()
	}()
	b, err = read(t, "/proc/self/fd/"+strconv.Itoa(fd), 1<<20)
	if err != nil || string(b) != "version: 1\nnproc: 4\n" {
		t.Fatalf("Read of a written pipe: %q, %v", b, err)
	}
	if !<-took {
		t.Fatal("Read did not take the first line within 5 s: the rest was sent anyway, and the read did not have to wait for it")
	}
	// And it stops at the limit instead of reading on.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	go func() {
		w2.WriteString(strings.Repeat("x", 2048))
		w2.Close()
	}()
	if _, err := read(t, "/proc/self/fd/"+strconv.Itoa(int(r2.Fd())), 1024); err == nil || !strings.HasSuffix(err.Error(), "holds more than 1K") {
		t.Errorf("Read of 2K from a pipe, limit 1K: %v", err)
	}
}

// unread is how many bytes the pipe whose end is fd holds: written, not yet read.
func unread(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
	if err != nil {
		return -1
	}
	return n
}

// A signal ends a read that waits on a pipe whose writer never writes: the command
// line's handler takes SIGINT and SIGTERM, so the read alone would wait for good.
func TestReadNamedPipeStopsOnSignal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0) // a writer that holds the pipe and writes nothing
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The test's own handler, as the command line's: the signal must not kill the test.
	ours := make(chan os.Signal, 16)
	signal.Notify(ours, syscall.SIGTERM)
	defer signal.Stop(ours)
	done := make(chan error, 1)
	go func() {
		_, err := Read(p, 1<<20)
		done <- err
	}()
	tick := time.NewTicker(20 * time.Millisecond) // until Read listens too
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-done:
			if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), p+": stopped by a signal (terminated) while waiting for its writer") {
				t.Fatalf("Read stopped by SIGTERM: %v", err)
			}
			return
		case <-tick.C:
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		case <-deadline:
			t.Fatal("Read of a pipe nobody writes still waiting 5s after SIGTERM")
		}
	}
}

// A signal that comes after the watch is set up and before the pipe is open still ends
// the read: a job started in the background has SIGINT ignored until Go's handler is
// set, so a watch set up after the open lost a signal sent in between, for good.
func TestReadKeepsASignalFromBeforeTheOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err) // Linux has named pipes: this check must not go quiet
	}
	wr, err := os.OpenFile(p, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	ours := make(chan os.Signal, 16) // the command line's handler, as in Main
	signal.Notify(ours, syscall.SIGTERM)
	defer signal.Stop(ours)
	w := watchSignals()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	for len(w.ch) == 0 { // until the signal has reached the watch
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readOpen(p, 1<<20, w)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the read of a pipe nobody writes still waiting 5s after the signal")
	}
	if err := w.stop(); !errors.Is(err, ErrStopped) {
		t.Fatalf("stop after a signal: %v", err)
	}
	// An open that fails: stop neither waits nor reports a signal.
	w = watchSignals()
	if _, err := readOpen(filepath.Join(t.TempDir(), "none"), 10, w); err == nil {
		t.Fatal("readOpen of a missing file: no error")
	}
	if err := w.stop(); err != nil {
		t.Fatalf("stop without a watch: %v", err)
	}
}

// Errors repeat values cut short, and text from files loses its control characters.
func TestQuoteClipPrintable(t *testing.T) {
	long := strings.Repeat("9", 100000)
	if q := Quote(long); len(q) > 100 || !strings.HasSuffix(q, "... (100000 bytes)") {
		t.Errorf("Quote of 100K digits: %q", q)
	}
	if q := Quote("a\x1b[2J"); q != `"a\x1b[2J"` {
		t.Errorf("Quote of an escape: %s", q)
	}
	if c := Clip(strings.Repeat("x", 1<<20)+" do this", 300); len(c) > 340 || !strings.HasSuffix(c, " do this") {
		t.Errorf("Clip: %d bytes, ends %q", len(c), c[len(c)-20:])
	}
	// Unquoted: a word as long as no path or name is, repeated from a value.
	host := strings.Repeat("a", 900000)
	if c := ClipWords("no host named " + host + ":1234 here\n" + host + "\tend, " + host + ": no such file"); c != "no host named "+host[:MaxEcho]+"... (900005 bytes) here\n"+host[:MaxEcho]+"... (900000 bytes)\tend, "+host[:MaxEcho]+"... (900000 bytes): no such file" {
		t.Errorf("ClipWords: %d bytes: %.200q", len(c), c)
	}
	word := strings.Repeat("é", MaxWord/2) // as long as a word is kept
	if c := ClipWords(word + " " + word + "x"); c != word+" "+word[:MaxEcho]+"... (257 bytes)" {
		t.Errorf("ClipWords at the limit: %q", c)
	}
	if p := Printable("put\x1b]0;owned\x07 \u009b2J ok\n\t│"); p != `put\x1b]0;owned\a \u009b2J ok`+"\n\t│" {
		t.Errorf("Printable: %q", p)
	}
	var b strings.Builder
	Terminal(&b).Write([]byte("impl \x1b[31mred\n"))
	if b.String() != `impl \x1b[31mred`+"\n" {
		t.Errorf("Terminal wrote %q", b.String())
	}
}
