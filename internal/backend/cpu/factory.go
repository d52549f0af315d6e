package cpu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// Factory makes the CPU backend's ranks: processes of one host sharing a heap file
// the launcher creates.
type Factory struct{}

var _ backend.Sharer = Factory{}

// Name is backend.CPU.
func (Factory) Name() string { return backend.CPU }

// Probe always succeeds: the CPU backend runs anywhere.
func (Factory) Probe(nproc, local int, lib string) error { return nil }

// Prepare creates the job's shared heap: for ranks symmem's launcher spawns, a file
// with no name that they inherit (EnvHeapFD), so that a launcher killed leaves nothing
// behind; for an external launcher's job, whose ranks cannot inherit it, a named one
// (HeapPath) that Release removes once every rank has mapped it.
//
// Where the spawned ranks outnumber the cores, each runs its Go runtime on one
// processor (GOMAXPROCS=1, unless the caller set GOMAXPROCS): a rank's work runs on
// one goroutine, and a second processor only wakes more threads in every rank. They
// also start with a timer slack of crowdedSlack: the runtime's monitor (sysmon) of a
// busy process sleeps 20 us at a time, and a rank that waits its turn for a core stays
// busy long after its CPU time; with the slack those wake-ups come at most every
// crowdedSlack. Its timers fire that much late too: the waits' 100 us sleeps
// (backoff) and the slow fault's delays may last up to crowdedSlack longer.
func (Factory) Prepare(jobID string, nproc int, heap int64, spawn bool) (backend.Prepared, error) {
	if spawn {
		f, err := CreateUnnamed(nproc, heap)
		if err != nil {
			return backend.Prepared{}, err
		}
		p := backend.Prepared{Env: []string{EnvHeapFD + "=3"}, Files: []*os.File{f}, Cleanup: func() { f.Close() }}
		if nproc > runtime.NumCPU() {
			if _, set := os.LookupEnv("GOMAXPROCS"); !set {
				p.Env = append(p.Env, "GOMAXPROCS=1")
			}
			p.TimerSlack = crowdedSlack
		}
		return p, nil
	}
	path := HeapPath(jobID)
	if err := Create(path, nproc, heap); errors.Is(err, fs.ErrExist) {
		// Only an external launcher's job IDs repeat (ours start with our pid), and its
		// rank 0 killed while its peers started leaves the file: RemoveStale cannot tell.
		return backend.Prepared{}, &HeapExistsError{Path: path, JobID: jobID}
	} else if err != nil {
		return backend.Prepared{}, err
	}
	return backend.Prepared{Cleanup: func() { os.Remove(path) }}, nil
}

// crowdedSlack is the timer slack of ranks that outnumber the cores: their times
// include the scheduler's turns anyway.
const crowdedSlack = 2 * time.Millisecond

// HeapExistsError is a job's heap file that is already there.
type HeapExistsError struct{ Path, JobID string }

func (e *HeapExistsError) Error() string {
	return fmt.Sprintf("cpu backend: the shared heap %s already exists: another job with ID %s runs on this host, or one was killed before its ranks mapped it; if none runs, remove the file", e.Path, e.JobID)
}

// Open maps the job's heap as rank p.Rank.
func (Factory) Open(ctx context.Context, p backend.Place, kv backend.KV, cfg backend.Config) (backend.Backend, error) {
	b, err := Open(HeapFile(p.JobID), p.Rank, p.Size, cfg.Heap)
	if err != nil {
		return nil, err
	}
	if cfg.Pin {
		Pin(p.LocalRank, max(p.LocalSize, 1))
	}
	b.WaitLimit = cfg.WaitLimit
	return b, nil
}

// Release removes the job's heap file: the ranks' mappings stay.
func (Factory) Release(jobID string) { os.Remove(HeapPath(jobID)) }

// Settings lists what the CPU backend reads.
func (Factory) Settings() []string { return []string{EnvPin, EnvHeapFD, EnvTestShmDir} }

// Impls is the CPU backend's one implementation: copies and sums over the shared
// heap, for every operation (collective.go runs each from what package ops says it
// is).
func (Factory) Impls() []backend.Impl {
	serves := map[ops.Op][]string{}
	for _, o := range ops.All() {
		serves[o] = nil // no kernels
	}
	fused := map[ops.Op][]string{}
	for _, o := range ops.Of(ops.FamilyFused) {
		fused[o] = nil
	}
	return []backend.Impl{{Name: "memcpy", Backend: backend.CPU, Summary: "the CPU backend's copies (and reductions) over shared memory", Kernels: serves, RedOps: backend.EveryRedOp()},
		{Name: ImplUnfused, Backend: backend.CPU, Summary: "a fused operation as the unfused pair: the matrix product, then memcpy's collective", Kernels: fused, Unfused: true}}
}
