package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/symmem/symmem/pkg/launch"
)

// MaxRelayed is how many lines of each rank's stderr reach the terminal: a crashed Go
// rank writes a goroutine dump of hundreds (240 for a SIGSEGV); the rest go to the
// job's stderr file only.
const MaxRelayed = 20

// stderrLog relays the ranks' stderr lines (one per Write, "[RANK] " first where the
// output is tagged), at most MaxRelayed of each rank, and keeps every line in a file,
// so that a failure's message can name the whole of it. It also keeps each rank's
// first line of a Go crash ("panic: ...", "fatal error: ..."), which the last lines of
// a dump do not hold.
type stderrLog struct {
	mu      sync.Mutex
	w       io.Writer
	lines   map[int]int
	crash   map[int]string
	file    *os.File
	dropped bool
	// finished: the job's error is out; lines still coming (the relays of ranks that
	// outlived a failed start) make no file, which nothing would name or remove.
	finished bool
}

func newStderrLog(w io.Writer) *stderrLog {
	return &stderrLog{w: w, lines: map[int]int{}, crash: map[int]string{}}
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil && !l.finished {
		// Lazily: most jobs say nothing on stderr. A file that cannot be made only
		// costs the message its name.
		l.file, _ = os.CreateTemp("", "symmem-stderr-*.log")
	}
	if l.file != nil {
		l.file.Write(p)
	}
	rank, text := -1, string(bytes.TrimRight(p, "\n"))
	if rest, ok := strings.CutPrefix(text, "["); ok {
		if n, after, ok := strings.Cut(rest, "] "); ok {
			if r, err := strconv.Atoi(n); err == nil {
				rank, text = r, after
			}
		}
	}
	if _, seen := l.crash[rank]; !seen && (strings.HasPrefix(text, "panic: ") || strings.HasPrefix(text, "fatal error: ")) {
		l.crash[rank] = text
	}
	l.lines[rank]++
	switch n := l.lines[rank]; {
	case n <= MaxRelayed:
		return l.w.Write(p)
	case n == MaxRelayed+1:
		l.dropped = true
		who := "the ranks'"
		if rank >= 0 {
			who = fmt.Sprintf("rank %d's", rank)
		}
		fmt.Fprintf(l.w, "%s... (more of %s stderr than %d lines: the rest is in %s)\n", prefixOf(rank), who, MaxRelayed, l.path())
	}
	return len(p), nil
}

func prefixOf(rank int) string {
	if rank < 0 {
		return ""
	}
	return "[" + strconv.Itoa(rank) + "] "
}

func (l *stderrLog) path() string {
	if l.file == nil {
		return "(no file could be made)"
	}
	return l.file.Name()
}

// finish closes the file; it is kept (and its name returned) where lines were held
// back from the terminal (the relay named it) or a rank crashed and err, the job's
// error, is a rank's (its message names it, with the dump cut from it), else removed:
// what was relayed was the whole of it, or nothing would name it (a rank that could
// not start). No file is made after it.
func (l *stderrLog) finish(err error) (kept string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished = true
	if l.file == nil {
		return ""
	}
	l.file.Close()
	var we *launch.WorkerError
	if l.dropped || len(l.crash) > 0 && errors.As(err, &we) {
		return l.file.Name()
	}
	os.Remove(l.file.Name())
	return ""
}

// RankError is a rank that failed, said as such: how it ended (its exit status, the
// signal that killed it, the panic it died of), its last lines of stderr, and where
// the whole of its stderr is.
type RankError struct {
	*launch.WorkerError
	Crash string // the rank's first line of a Go crash, if it crashed
	Log   string // the file that holds every rank's whole stderr ("" where none)
}

func (e *RankError) Unwrap() error { return e.WorkerError }

func (e *RankError) Error() string {
	var b strings.Builder
	switch {
	case e.Crash != "":
		fmt.Fprintf(&b, "rank %d crashed (%s, exit status %d)", e.Rank, e.Crash, e.Status)
	case e.Status >= 0:
		fmt.Fprintf(&b, "rank %d exited with status %d", e.Rank, e.Status)
	default:
		fmt.Fprintf(&b, "rank %d was %s", e.Rank, e.How)
	}
	b.WriteString("; the other ranks were stopped")
	// A crash's last lines are the bottom of its goroutine dump: the line above says
	// what happened, the file holds the dump.
	if len(e.Stderr) > 0 && e.Crash == "" {
		fmt.Fprintf(&b, "\nlast lines of rank %d's stderr:", e.Rank)
		for _, l := range e.Stderr {
			b.WriteString("\n  " + l)
		}
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\nthe ranks' whole stderr: %s", e.Log)
	}
	return b.String()
}

// rankError says a failed rank's end as RankError does, from what log kept; other
// errors pass.
func rankError(err error, log *stderrLog, kept string) error {
	var we *launch.WorkerError
	if !errors.As(err, &we) {
		return err
	}
	log.mu.Lock()
	crash, ok := log.crash[we.Rank]
	if !ok {
		crash = log.crash[-1] // untagged output (--tag-output=false)
	}
	log.mu.Unlock()
	return &RankError{WorkerError: we, Crash: crash, Log: kept}
}
