// Package exitcode lists every exit status symmem returns. Scripts and CI depend on
// these numbers: add new ones, never renumber.
package exitcode

import "errors"

const (
	// OK: the command did what was asked and every check passed.
	OK = 0
	// Error: something went wrong that has no more specific code (I/O, an internal error).
	Error = 1
	// Usage: bad input: an unknown flag or value, an out-of-range number, a bad config file.
	Usage = 2
	// WrongResults: the run finished but data was wrong (a wrong element, a failed check).
	WrongResults = 3
	// WorkerFailed: a rank exited non-zero, crashed or was killed; the job was stopped.
	WorkerFailed = 4
	// Timeout: the job ran past --timeout and was stopped.
	Timeout = 5
	// Regression: `bench compare` found a row slower than the threshold allows, or
	// `check-nvshmem --perf` a row more than --tolerance below its reference figure.
	Regression = 6
	// NoGPUBackend: the GPU backend cannot run here (`check-nvshmem` found a failure, or
	// `--backend nvshmem` was asked for); the CPU backend still can.
	NoGPUBackend = 7
	// CompareFailed: `bench compare` could not compare: a result has wrong bytes or
	// failed its checks, or a row is present on one side only.
	CompareFailed = 8
	// Interrupted: stopped by Ctrl-C, SIGTERM, SIGHUP or SIGQUIT (128 + SIGINT, as shells
	// report it).
	Interrupted = 130
)

// Err carries an exit code with an error so that the one place that exits can pick it.
type Err struct {
	Code int
	Err  error
}

func (e *Err) Error() string { return e.Err.Error() }
func (e *Err) Unwrap() error { return e.Err }

// With wraps err with code; a nil err stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Err{Code: code, Err: err}
}

// Said is an error that carries only code: what went wrong was already said (a rank
// that ended itself printed why). The one place that exits prints nothing for it.
func Said(code int) error { return &Err{Code: code, Err: errSaid} }

// IsSaid says whether err is, or wraps, one of Said's.
func IsSaid(err error) bool { return errors.Is(err, errSaid) }

var errSaid = errors.New("")
