// Package job ties a launched process to its work: it turns the environment and the job
// description into a connected rank (store, backend), runs the rank's part, and hands
// the results to whoever prints them. The launcher side (Launch) and the rank side
// (Rank) live together here so that the contract between them sits in one file.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/launch"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/store"
)

// EnvSpec carries the job description from the launcher to its workers.
const EnvSpec = "SYMMEM_JOB_SPEC"

// EnvFault is a test-only switch that makes one rank fail on purpose:
// "RANK:MODE[:PHASE]" with MODE exit (status 9), crash (a panic), kill (SIGKILL),
// hang, or corrupt (the rank sees one wrong byte in what it reads back: tests the
// comparison) and PHASE init or op (default op); or "RANK:drop[:N]": the rank's backend
// skips its transfers and signals from its N-th measurement on (counting from 0; 0 when
// N is left out), at the point of delivery: tests that every check notices.
const EnvFault = "SYMMEM_TEST_FAULT"

// FaultExitStatus is the status the exit fault ends a rank with: one no real failure
// uses, so tests can tell it apart.
const FaultExitStatus = 9

// Job is what every rank of one job does.
type Job struct {
	Kind    string    `json:"kind"`    // "run" or "bench"
	Backend string    `json:"backend"` // "cpu" or "nvshmem", resolved before launch
	Heap    int64     `json:"heap"`    // symmetric heap per rank, bytes
	Run     *ops.Spec `json:"run,omitempty"`
	// Bench is the bench package's own spec, kept opaque here.
	Bench json.RawMessage `json:"bench,omitempty"`
	// NVSHMEMLib is an explicit path to libnvshmem_host.so.3, if the user gave one.
	NVSHMEMLib string `json:"nvshmem_lib,omitempty"`
	// BackendNote says why the backend was chosen, for the output.
	BackendNote string `json:"backend_note,omitempty"`
	// WaitLimit bounds every wait for a peer's signal (0: backend.DefaultWaitLimit).
	WaitLimit time.Duration `json:"wait_limit,omitempty"`
}

// Rank is a connected rank: its place in the job, the store and the backend.
type Rank struct {
	Info    launch.RankInfo
	Store   *store.Client
	Backend backend.Backend
	server  *store.Server // set on rank 0 under an external launcher
	Timings map[string]float64
}

// Opener opens a backend for one rank. The NVSHMEM backend registers itself here from
// the package that implements it, so that this package does not depend on it.
type Opener func(ctx context.Context, info launch.RankInfo, st *store.Client, j Job) (backend.Backend, error)

// Openers maps backend names to their openers.
var Openers = map[string]Opener{"cpu": openCPU}

func openCPU(_ context.Context, info launch.RankInfo, _ *store.Client, j Job) (backend.Backend, error) {
	b, err := cpu.Open(cpu.HeapPath(info.JobID), info.Rank, info.WorldSize, j.Heap)
	if err != nil {
		return nil, err
	}
	b.WaitLimit = j.WaitLimit
	return b, nil
}

// Fault is the parsed test-only fault switch.
type Fault struct {
	Rank  int
	Mode  string
	Phase string
	From  int // drop: the first measurement whose transfers are dropped
}

// ParseFault reads EnvFault's value; "" is no fault.
func ParseFault(s string) (*Fault, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%s=%q: want RANK:MODE[:PHASE]", EnvFault, s)
	}
	r, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil, fmt.Errorf("%s=%q: bad rank", EnvFault, s)
	}
	f := &Fault{Rank: r, Mode: parts[1], Phase: "op"}
	if f.Mode == "drop" {
		if len(parts) == 3 {
			if f.From, err = strconv.Atoi(parts[2]); err != nil || f.From < 0 {
				return nil, fmt.Errorf("%s=%q: drop's N is the first measurement to drop, counting from 0", EnvFault, s)
			}
		}
		return f, nil
	}
	if len(parts) == 3 {
		f.Phase = parts[2]
	}
	switch f.Mode {
	case "exit", "crash", "kill", "hang", "corrupt":
	default:
		return nil, fmt.Errorf("%s=%q: mode must be exit, crash, kill, hang, corrupt or drop", EnvFault, s)
	}
	return f, nil
}

// DropHook returns what to call before measurement seq on rank (see bench.Runner's
// BeforeMeasure): it switches b's delivery off from the fault's measurement on. Nil
// when no drop fault is meant for this rank.
func (f *Fault) DropHook(rank int, b backend.Backend) (func(seq int), error) {
	if f == nil || f.Mode != "drop" || f.Rank != rank {
		return nil, nil
	}
	d, ok := b.(backend.Dropper)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend cannot drop transfers", EnvFault, b.Name())
	}
	return func(seq int) {
		if seq == f.From {
			fmt.Fprintf(os.Stderr, "injected fault: rank %d drops its transfers from measurement %d on\n", rank, seq)
		}
		d.SetDrop(seq >= f.From)
	}, nil
}

// Tamper returns how rank must spoil what it reads back (the corrupt mode: the first
// byte flipped), or nil.
func (f *Fault) Tamper(rank int) func(out []byte) {
	if f == nil || f.Mode != "corrupt" || f.Rank != rank {
		return nil
	}
	return func(out []byte) {
		if len(out) > 0 {
			out[0] ^= 0xff
		}
	}
}

// Trigger makes the fault happen if it is for this rank and phase.
func (f *Fault) Trigger(rank int, phase string) {
	if f == nil || f.Rank != rank || f.Phase != phase || f.Mode == "drop" || f.Mode == "corrupt" {
		return
	}
	fmt.Fprintf(os.Stderr, "injected fault: rank %d %s at %s\n", rank, f.Mode, phase)
	switch f.Mode {
	case "exit":
		os.Exit(FaultExitStatus)
	case "crash":
		panic("injected crash") // dies like any crashed Go program: exit status 2, a stack trace
	case "kill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "hang":
		select {}
	}
}

// Connect joins the job: it reaches the store (hosting it on rank 0 under an external
// launcher) and opens the backend.
func Connect(ctx context.Context, info launch.RankInfo, j Job) (*Rank, error) {
	r := &Rank{Info: info, Timings: map[string]float64{}}
	t := time.Now()
	if info.Hosted() {
		srv, err := store.Listen(info.StoreAddr, info.Token)
		if err != nil {
			return nil, fmt.Errorf("rank 0 hosts the store at %s: %w", info.StoreAddr, err)
		}
		r.server = srv
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	st, err := store.Dial(dctx, info.StoreAddr, info.Token)
	if err != nil {
		r.Abort()
		return nil, err
	}
	r.Store = st
	open, ok := Openers[j.Backend]
	if !ok {
		r.Abort()
		return nil, fmt.Errorf("backend %q is not built into this binary", j.Backend)
	}
	b, err := open(ctx, info, st, j)
	if err != nil {
		r.Abort()
		return nil, err
	}
	r.Backend = b
	if tb, ok := b.(interface{ Breakdown() map[string]float64 }); ok {
		for k, v := range tb.Breakdown() {
			r.Timings["init."+k] = v
		}
	}
	if j.Backend == "cpu" {
		// Once every rank has mapped the heap its file can go: the mappings stay, and a
		// crash from here on cannot leave a segment behind.
		if err := st.Barrier(ctx, "heap-mapped", info.WorldSize); err != nil {
			r.Abort()
			return nil, err
		}
		if info.Rank == 0 {
			os.Remove(cpu.HeapPath(info.JobID))
		}
	}
	r.Timings["init"] = ms(time.Since(t))
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Abort drops the store connection without any collective teardown: a rank that failed
// must not wait in a barrier for peers that will never come (process exit releases the
// GPU and NVSHMEM resources).
func (r *Rank) Abort() {
	if r.Store != nil {
		r.Store.Close()
	}
	if r.server != nil {
		r.server.Close()
	}
}

// Close releases the backend and the store connection after a successful run; the
// NVSHMEM teardown in it is collective. It reports how long the
// backend's teardown took (NVSHMEM finalize) so that the launcher's breakdown covers it.
func (r *Rank) Close() {
	if r.Backend != nil {
		t := time.Now()
		r.Backend.Close()
		if r.Store != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r.Store.Set(ctx, "finalize/"+strconv.Itoa(r.Info.Rank), []byte(strconv.FormatFloat(ms(time.Since(t)), 'f', 3, 64)))
			cancel()
		}
	}
	if r.Store != nil {
		r.Store.Close()
	}
	if r.server != nil {
		r.server.Close()
	}
}

// Publish stores this rank's result for the launcher (or rank 0) to collect.
func (r *Rank) Publish(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return r.Store.Set(ctx, "result/"+strconv.Itoa(r.Info.Rank), b)
}

// Gather waits for every rank's result (rank 0 under an external launcher does this).
func (r *Rank) Gather(ctx context.Context) ([][]byte, error) {
	out := make([][]byte, r.Info.WorldSize)
	for i := range out {
		v, err := r.Store.Get(ctx, "result/"+strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("waiting for rank %d's result: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// Preloader is a backend that loads its kernels ahead of the first operation.
type Preloader interface {
	Preload(op string, n int64, l backend.Launch) error
}

// RunOps is a rank's whole part in `symmem run`.
func RunOps(ctx context.Context, r *Rank, j Job, fault *Fault, out io.Writer) (ops.Result, error) {
	if p, ok := r.Backend.(Preloader); ok {
		t := time.Now()
		if err := p.Preload(j.Run.Op, j.Run.Bytes(), j.Run.Launch); err != nil {
			return ops.Result{}, err
		}
		r.Timings["load"] = ms(time.Since(t))
	}
	fault.Trigger(r.Info.Rank, "op")
	drop, err := fault.DropHook(r.Info.Rank, r.Backend)
	if err != nil {
		return ops.Result{}, err
	}
	if drop != nil {
		drop(0) // run makes one measurement
	}
	b := r.Backend
	if t := fault.Tamper(r.Info.Rank); t != nil {
		b = corrupting{b, t}
	}
	res, err := ops.Run(b, *j.Run, out)
	for k, v := range r.Timings {
		res.Timings[k] = v
	}
	return res, err
}

// Results decodes gathered run results.
func Results(raw [][]byte) ([]ops.Result, error) {
	rs := make([]ops.Result, 0, len(raw))
	for i, b := range raw {
		var res ops.Result
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, fmt.Errorf("rank %d's result: %w", i, err)
		}
		rs = append(rs, res)
	}
	return rs, nil
}

// Prepare does the launcher's part before the workers start: the CPU backend's shared
// heap. cleanup removes what Prepare made and is safe to call more than once.
func Prepare(j Job, jobID string, nproc int) (cleanup func(), err error) {
	if j.Backend != "cpu" {
		return func() {}, nil
	}
	path := cpu.HeapPath(jobID)
	if err := cpu.Create(path, nproc, j.Heap); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// CollectLocal reads every rank's result from the launcher's own store.
func CollectLocal(srv *store.Server, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		v, ok := srv.Value("result/" + strconv.Itoa(i))
		if !ok {
			return nil, errors.New("rank " + strconv.Itoa(i) + " exited without reporting a result")
		}
		out[i] = v
	}
	return out, nil
}

// FinalizeTimes reads how long each rank's backend teardown took, in ms.
func FinalizeTimes(srv *store.Server, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		if v, ok := srv.Value("finalize/" + strconv.Itoa(i)); ok {
			out[i], _ = strconv.ParseFloat(string(v), 64)
		}
	}
	return out
}

// corrupting spoils everything the rank reads back (test-only fault).
type corrupting struct {
	backend.Backend
	tamper func([]byte)
}

func (c corrupting) Read(b backend.Buffer, out []byte) error {
	err := c.Backend.Read(b, out)
	c.tamper(out)
	return err
}
