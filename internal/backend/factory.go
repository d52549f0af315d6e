package backend

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/topo"
)

// Factory is a backend as a launcher sees it: whether it can run here, what its
// ranks share before they start, and how one rank opens it. Commands hand the
// engine the factories a binary is built with; the engine knows no backend by
// anything else.
type Factory interface {
	// Name is what --backend calls it (CPU, NVSHMEM).
	Name() string
	// Probe says whether nproc ranks can run here, and if not what is missing. local
	// is this process's local rank under an external launcher (its device must be
	// there), -1 when the launcher starts nproc ranks on this host itself; lib is the
	// library the user named ("" to search).
	Probe(nproc, local int, lib string) error
	// Prepare does the launcher's part before the ranks of job jobID on this host
	// start: spawn, symmem's launcher starts them itself; else this is rank 0 of an
	// external launcher's job, whose ranks are already started.
	Prepare(jobID string, nproc int, heap int64, spawn bool) (Prepared, error)
	// Open opens one rank's backend.
	Open(ctx context.Context, p Place, kv KV, cfg Config) (Backend, error)
	// Settings lists the environment variables the backend reads (the commands
	// refuse the unknown SYMMEM_* ones).
	Settings() []string
	// Impls lists the implementations the backend runs, its default first.
	Impls() []Impl
}

// Prepared is what Prepare made for a job's ranks.
type Prepared struct {
	// Env is what the spawned ranks get beside the job; Files they inherit, from
	// descriptor 3 on.
	Env   []string
	Files []*os.File
	// TimerSlack is the timer slack the spawned ranks start with (Linux; 0: the
	// launcher's own): their timers, the Go runtime's monitor's among them, may fire
	// that much late, and so wake the machine less often.
	TimerSlack time.Duration
	// Cleanup undoes what Prepare made; it is safe to call more than once.
	Cleanup func()
}

// Place is where one rank stands in its job.
type Place struct {
	Rank, LocalRank, Size, LocalSize int
	JobID                            string
}

// KV is how ranks exchange what they must share before they open (NVSHMEM's unique
// ID): rank 0 sets a key, the others get it, blocking until it is set. The
// rendezvous store's client satisfies it.
type KV interface {
	Set(ctx context.Context, key string, v []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// Config is what a job decides about its ranks' backends.
type Config struct {
	Heap int64 // symmetric bytes per rank
	// Lib and NCCLLib are the libraries the user named ("" to search).
	Lib, NCCLLib string
	// WaitLimit bounds every wait on a peer's signal (DefaultWaitLimit when zero).
	WaitLimit time.Duration
	// Pin asks for the rank to be kept on CPUs of its own (a bench's timings).
	Pin bool
	// Registry says which implementation serves which op.
	Registry *Registry
}

// Sharer is a factory whose ranks share something Prepare made on the host (the CPU
// backend's heap file). Once every rank has opened, one of them calls Release, so
// that a crash from there on leaves nothing behind; the ranks of a launcher that
// died release it too. Release is safe to call more than once.
type Sharer interface {
	Release(jobID string)
}

// Planner checks, before any rank starts, what a backend's ranks would each refuse
// at their first operation, so that the job fails once, before it starts.
type Planner interface {
	// CheckCollective says whether impl can run c (its op, element type, reduction
	// operator and --algo; no buffers) on blocks blocks (0: the implementation's choice).
	CheckCollective(reg *Registry, impl string, c Collective, blocks int) error
	// Unbounded lists impl's kernels for op that cannot give up on a peer that never
	// comes (a job of them ends only at its timeout).
	Unbounded(reg *Registry, impl string, op ops.Op) []string
	// CheckUserKernels says whether the kernels of a user's implementations load here
	// for nproc ranks.
	CheckUserKernels(reg *Registry, impls []string, nproc int, lib string) error
	// CheckLibraries says whether the libraries impls need (NCCL's, found as lib
	// says) can serve them.
	CheckLibraries(impls []string, lib string) error
}

// Linker is a factory that can read what its devices' links carry.
type Linker interface {
	// Counters opens the link counters of the device at busID (Describer.PCIBusID).
	Counters(busID string) (LinkCounter, error)
	// Peaks returns the link rate from device a to b in GB/s and the link's name.
	Peaks() (peak func(a, b int) float64, label func(a, b int) string, err error)
}

// LinkCounter reads a device's link counters.
type LinkCounter interface {
	Read() (topo.LinkSample, error)
	Close()
}

// ErrStopped marks a rank stopped from outside (SIGTERM) while it waited.
var ErrStopped = errors.New("stopped by SIGTERM")

// FewDevices is implemented by a probe's error that says the machine has too few
// devices for the ranks (nothing is missing that could be installed).
type FewDevices interface {
	FewDevices() bool
}
