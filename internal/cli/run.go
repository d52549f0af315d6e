package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/launch"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/store"
	"github.com/symmem/symmem/internal/units"
)

// JobOptions are the settings every launching command shares.
type JobOptions struct {
	NProc      int
	Backend    string
	Timeout    time.Duration
	HeapSize   units.Size
	StoreAddr  string
	TagOutput  bool
	NVSHMEMLib string
	WaitLimit  time.Duration
}

func (o *JobOptions) addFlags(cmd *cobra.Command, heapDefault int64) {
	f := cmd.Flags()
	f.IntVarP(&o.NProc, "nproc", "n", 2, "number of ranks (one process per GPU) to start")
	f.StringVar(&o.Backend, "backend", "auto", "auto, nvshmem (GPUs) or cpu (shared memory)")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "stop the whole job after this long (0 = never)")
	f.DurationVar(&o.WaitLimit, "wait-limit", backend.DefaultWaitLimit, "longest a rank waits for a peer's signal before it calls the data undelivered (exit 3)")
	o.HeapSize = units.Size(heapDefault)
	f.Var(&o.HeapSize, "heap-size", "largest symmetric heap a rank may allocate (e.g. 1G)")
	f.StringVar(&o.StoreAddr, "store-addr", "", "rendezvous store address HOST:PORT (default 127.0.0.1 on a free port; under srun/mpirun/torchrun, rank 0's address)")
	f.BoolVar(&o.TagOutput, "tag-output", true, "prefix every worker line with [rank]")
	f.StringVar(&o.NVSHMEMLib, "nvshmem-lib", "", "path to libnvshmem_host.so.3 (or SYMMEM_NVSHMEM_LIB; default: search)")
}

func (o *JobOptions) validate() error {
	if o.NProc < 1 || o.NProc > 1024 {
		return usage("--nproc %d out of range: give 1..1024 ranks", o.NProc)
	}
	switch o.Backend {
	case "auto", "cpu", "nvshmem":
	default:
		return usage("unknown --backend %q: use auto, nvshmem or cpu", o.Backend)
	}
	if o.Timeout < 0 {
		return usage("--timeout %s: must not be negative", o.Timeout)
	}
	if o.WaitLimit <= 0 {
		return usage("--wait-limit %s: must be positive", o.WaitLimit)
	}
	if o.HeapSize <= 0 {
		return usage("--heap-size must be positive")
	}
	return nil
}

// RunOptions are `symmem run`'s settings.
type RunOptions struct {
	JobOptions
	Op      string
	Spec    ops.Spec
	Count   units.Count
	JSON    bool
	Impl    string
	Blocks  int
	Warps   int
	Pattern string
}

// NewCmdRun builds `symmem run OP`.
func NewCmdRun(streams IO) *cobra.Command {
	opts := &RunOptions{}
	cmd := &cobra.Command{
		Use:   "run OP",
		Short: "Run a correctness test of one operation across ranks (put, get, put-signal)",
		Long: `Run starts --nproc ranks, joins them into one team and runs OP on symmetric memory:

  put          rank 0 writes --count elements of --value into --peer's buffer
  get          rank 0 reads them from --peer's buffer
  put-signal   rank 0 puts, then signals; --peer waits for the signal, then checks

With more than 2 ranks the pattern is a ring: every rank sends to (rank+1) mod N the
value --value + rank, so data delivered to the wrong rank is caught. Each receiving rank
prints what it holds and the launcher prints a correctness table. The exit status is 0
only when every element is right (3 when some are wrong, 4 when a rank failed).`,
		Example: `  symmem run put --nproc 2
  symmem run put --nproc 4 --dtype bf16 --value 1.5 --count 1M
  symmem run put-signal --backend cpu --json
  srun -N2 --ntasks-per-node=4 symmem run put --store-addr node1:29517`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: ops.Ops,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Op = args[0]
			return runRun(cmd.Context(), opts, streams)
		},
	}
	opts.addFlags(cmd, 4<<30)
	f := cmd.Flags()
	opts.Count = 8
	f.Var(&opts.Count, "count", "elements per message (accepts K, M, G: 1M = 1048576)")
	f.StringVar(&opts.Spec.DType, "dtype", "int8", "element type: "+strings.Join(ops.DTypeNames(), ", "))
	f.Float64Var(&opts.Spec.Value, "value", 5, "value rank 0 sends (ring: value + rank)")
	f.IntVar(&opts.Spec.Peer, "peer", 1, "rank that rank 0 talks to (pair pattern)")
	f.StringVar(&opts.Pattern, "pattern", "", "pair or ring (default: pair for 2 ranks, ring for more)")
	f.BoolVar(&opts.JSON, "json", false, "print the results as JSON on stdout")
	f.StringVar(&opts.Impl, "impl", "", "GPU implementation: triton (default), cuda; put and get also copy-engine, sm-store")
	f.IntVar(&opts.Blocks, "blocks", 0, "GPU blocks per operation (0 = automatic)")
	f.IntVar(&opts.Warps, "warps", 0, "GPU warps per block (0 = automatic)")
	return cmd
}

// RunReport is what `run --json` prints.
type RunReport struct {
	Op          string       `json:"op"`
	Pattern     string       `json:"pattern"`
	Backend     string       `json:"backend"`
	BackendNote string       `json:"backend_note,omitempty"`
	NProc       int          `json:"nproc"`
	DType       string       `json:"dtype"`
	Count       int64        `json:"count"`
	Bytes       int64        `json:"bytes"`
	OK          bool         `json:"ok"`
	Wrong       int64        `json:"wrong"`
	WallMS      float64      `json:"wall_ms"`
	ProbeMS     float64      `json:"probe_ms"` // the launcher's backend choice
	Results     []ops.Result `json:"results"`
}

func runRun(ctx context.Context, opts *RunOptions, streams IO) error {
	start := time.Now()
	info, external, err := launch.Discover(opts.StoreAddr)
	if err != nil {
		return usage("%v", err)
	}
	nproc := opts.NProc
	if external {
		nproc = info.WorldSize
	}
	if err := opts.validate(); err != nil {
		return err
	}
	spec := opts.Spec
	spec.Op, spec.Pattern, spec.Count = opts.Op, opts.Pattern, int64(opts.Count)
	spec.Launch = backend.Launch{Impl: opts.Impl, Blocks: opts.Blocks, Warps: opts.Warps}
	if opts.Blocks < 0 || opts.Warps < 0 {
		return usage("--blocks and --warps must not be negative")
	}
	if err := spec.Validate(nproc); err != nil {
		return usage("%v", err)
	}
	if need := spec.HeapBytes(); need > int64(opts.HeapSize) {
		return usage("%d x %s (%s per buffer) needs a symmetric heap of %s per rank, more than --heap-size %s: lower --count or raise --heap-size",
			spec.Count, spec.DType, units.FormatSize(spec.Bytes()), units.FormatSize(need), units.FormatSize(int64(opts.HeapSize)))
	}
	j := engine.Job{Kind: "run", Heap: spec.HeapBytes(), Run: &spec, NVSHMEMLib: nvshmemLib(opts.NVSHMEMLib), WaitLimit: opts.WaitLimit}
	probeStart := time.Now()
	j.Backend, j.BackendNote, err = resolveBackend(opts.Backend, nproc, j.NVSHMEMLib)
	if err != nil {
		return err
	}
	probe := float64(time.Since(probeStart).Microseconds()) / 1000
	if external {
		return runExternal(ctx, info, j, opts, streams, start)
	}

	workerOut := streams.Out
	if opts.JSON {
		workerOut = streams.Err // keep stdout pure JSON
	} else {
		fmt.Fprintf(streams.Err, "backend: %s%s\n", j.Backend, noteSuffix(j.BackendNote))
	}
	raw, fin, err := launchJob(ctx, j, &opts.JobOptions, nproc, workerOut, streams.Err, nil)
	if err != nil {
		return err
	}
	return printRun(streams, opts, j, raw, nproc, time.Since(start), fin, probe)
}

// runExternal is one rank of a job that srun, mpirun or torchrun started.
func runExternal(ctx context.Context, info launch.RankInfo, j engine.Job, opts *RunOptions, streams IO, start time.Time) error {
	fault, err := engine.ParseFault(os.Getenv(engine.EnvFault))
	if err != nil {
		return usage("%v", err)
	}
	if j.Backend == "cpu" && info.LocalWorldSize != info.WorldSize {
		return usage("the cpu backend shares memory on one node; this %s job spans several: use --backend nvshmem", info.Source)
	}
	if j.Backend == "cpu" && info.Rank == 0 {
		cleanup, err := engine.Prepare(j, info.JobID, info.WorldSize)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	r, err := engine.Connect(ctx, info, j)
	if err != nil {
		return err
	}
	res, err := engine.RunOps(ctx, r, j, fault, streams.Out)
	if err == nil {
		err = r.Publish(ctx, res)
	}
	var raw [][]byte
	if err == nil && info.Rank == 0 {
		raw, err = r.Gather(ctx)
	}
	if err == nil {
		// Nobody drops the store before rank 0 has read everything. Rank 0 closes the
		// store as soon as everyone has arrived, so the others may see it go while the
		// barrier's answer is on its way: by then their work is delivered.
		err = r.Store.Barrier(ctx, "done", info.WorldSize)
		if info.Rank != 0 && errors.Is(err, store.ErrLost) {
			err = nil
		}
	}
	if err != nil {
		r.Abort()
		return err
	}
	r.Close()
	if info.Rank != 0 {
		return nil
	}
	return printRun(streams, opts, j, raw, info.WorldSize, time.Since(start), nil, 0)
}

func printRun(streams IO, opts *RunOptions, j engine.Job, raw [][]byte, nproc int, wall time.Duration, finalize []float64, probe float64) error {
	results, err := engine.Results(raw)
	if err != nil {
		return err
	}
	for i := range results {
		if i < len(finalize) {
			results[i].Timings["finalize"] = finalize[i]
		}
	}
	spec := j.Run
	wrong, ok := ops.Summary(results)
	rep := RunReport{Op: spec.Op, Pattern: spec.Pattern, Backend: j.Backend, BackendNote: j.BackendNote, NProc: nproc,
		DType: spec.DType, Count: spec.Count, Bytes: spec.Bytes(), OK: ok, Wrong: wrong,
		WallMS: float64(wall.Microseconds()) / 1000, ProbeMS: probe, Results: results}
	if opts.JSON {
		if err := report.JSON(streams.Out, rep); err != nil {
			return err
		}
	} else {
		printRunTable(streams.Out, rep)
	}
	if !ok {
		var where []string
		for _, r := range results {
			if r.Wrong > 0 {
				where = append(where, fmt.Sprintf("%d on rank %d (from rank %d)", r.Wrong, r.Rank, r.From))
			}
		}
		return exitcode.With(exitcode.WrongResults, fmt.Errorf("%s %s, %d x %s: %d wrong elements (%s): the data that arrived is not what was sent",
			spec.Op, implLabel(j.Backend, spec.Launch.Impl), spec.Count, spec.DType, wrong, strings.Join(where, ", ")))
	}
	return nil
}

func printRunTable(w io.Writer, rep RunReport) {
	t := report.Table{
		Title: fmt.Sprintf("%s: %d ranks, %s pattern, %d x %s (%s), backend %s",
			rep.Op, rep.NProc, rep.Pattern, rep.Count, rep.DType, units.FormatSize(rep.Bytes), rep.Backend),
		Header: []string{"rank", "peer", "bytes", "expected", "wrong", "status"},
	}
	for _, r := range rep.Results {
		if r.From < 0 {
			continue
		}
		status := "ok"
		if !r.OK {
			status = "WRONG"
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(r.Rank), strconv.Itoa(r.From), strconv.FormatInt(r.Bytes, 10),
			r.Expected, strconv.FormatInt(r.Wrong, 10), status})
	}
	t.Print(w)
	fmt.Fprintf(w, "%s in %.0f ms wall; launcher probe %.1f ms; slowest rank (ms): %s\n", verdict(rep.OK), rep.WallMS, rep.ProbeMS, timingLine(rep.Results))
}

// implLabel is what messages call the implementation a run used.
func implLabel(backendName, impl string) string {
	switch {
	case backendName == "cpu":
		return "memcpy"
	case impl == "":
		return "triton"
	}
	return impl
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// timingLine prints the slowest rank's time in each phase, in the order they happen.
func timingLine(rs []ops.Result) string {
	order := []string{"spawn", "init", "load", "setup", "op", "verify", "finalize"}
	max := map[string]float64{}
	for _, r := range rs {
		for k, v := range r.Timings {
			if v > max[k] {
				max[k] = v
			}
		}
	}
	var extra []string
	for k := range max {
		if !containsStr(order, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	var parts []string
	for _, k := range append(order, extra...) {
		if v, ok := max[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

func newJobID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

func nvshmemLib(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("SYMMEM_NVSHMEM_LIB")
}

// workerEnv is the launcher's environment plus the job; NVSHMEM's heap is sized for
// the job unless the user sized it.
func workerEnv(j engine.Job, spec string) []string {
	env := append(os.Environ(), engine.EnvSpec+"="+spec)
	if j.Backend == "nvshmem" {
		if os.Getenv("NVSHMEM_SYMMETRIC_SIZE") == "" {
			env = append(env, gpu.HeapEnv(j.Heap))
		}
		env = append(env, gpu.EnvDefaults(os.Getenv)...)
	}
	return env
}

// launchJob runs j on nproc local ranks through the launcher and returns what each rank
// reported and how long each rank's teardown took. onStart, if set, sees the store once
// it is up (the bench's progress bar watches it).
func launchJob(ctx context.Context, j engine.Job, o *JobOptions, nproc int, stdout, stderr io.Writer, onStart func(*store.Server)) ([][]byte, []float64, error) {
	jobID := newJobID()
	cleanup, err := engine.Prepare(j, jobID, nproc)
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	lj, err := launch.Run(ctx, launch.Config{
		NProc: nproc, Argv: []string{exe, "__worker"}, Env: workerEnv(j, string(spec)),
		Timeout: o.Timeout, Stdout: stdout, Stderr: stderr, TagOutput: o.TagOutput,
		JobID: jobID, StoreAddr: o.StoreAddr, OnStart: onStart,
	})
	if lj != nil {
		defer lj.Store.Close()
	}
	if err != nil {
		return nil, nil, err
	}
	raw, err := engine.CollectLocal(lj.Store, nproc)
	return raw, engine.FinalizeTimes(lj.Store, nproc), err
}
