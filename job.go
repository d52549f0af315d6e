package symmem

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/reference"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// JobOptions are every setting of a job: symmem's command line binds its flags to this
// one struct. A zero field is a setting of zero, not the default: start from
// DefaultJobOptions.
type JobOptions struct {
	// NProc is the number of ranks to start, one process (and one GPU) each. Under an
	// external launcher the launcher decides.
	NProc int
	// Backend is "auto" (NVSHMEM where it can run, else the CPU backend), "nvshmem"
	// (GPUs) or "cpu" (shared memory, no GPU).
	Backend string
	// Timeout stops the whole job after this long; 0 never does (a sweep's bounds the
	// time between its measurements, not the sweep).
	Timeout time.Duration
	// HeapSize is the largest symmetric heap a rank may allocate.
	HeapSize Size
	// StoreAddr is the rendezvous store's address, HOST:PORT ("": 127.0.0.1 on a free
	// port; under an external launcher, rank 0's address).
	StoreAddr string
	// StoreFlag is the flag that gives StoreAddr on a command line ("--store-addr"): a
	// rank of the job that was stopped is recognised by it in its command line.
	StoreFlag string
	// Launcher says who starts the ranks: auto (detect), local (this process),
	// torchrun, mpi or slurm.
	Launcher string
	// StoreIface is the network interface rank 0 listens on when the ranks span
	// several hosts ("": every interface).
	StoreIface string
	// TagOutput prefixes every line a rank prints with [rank].
	TagOutput bool
	// NVSHMEMLib is the NVSHMEM host library to load ("": search).
	NVSHMEMLib string
	// NCCLLib is the libnccl.so.2 the nccl implementation loads ("": search).
	NCCLLib string
	// WaitLimit is the longest a rank waits for a peer's signal before it calls the
	// data undelivered.
	WaitLimit time.Duration
	// StallLimit is the longest a rank may go without a sign of life before the job is
	// stopped naming it; 0 watches for none (a rank held in a debugger).
	StallLimit time.Duration
	// KernelsDir is a directory of a user's kernels (symmem kernels build --out DIR):
	// each implementation in it can be named in Launch.Impl and BenchSpec.Impls.
	KernelsDir string
	// DryRun plans a job without starting it: a backend named outright is taken as
	// it is, not probed, and a user's kernels are read but not loaded on a GPU.
	DryRun bool
	// Backends are the backends the job may run on (Backends lists them); nil: every
	// one.
	Backends []Backend
	// Stdout gets the ranks' own lines (rank 1's "received" line), Stderr the notes
	// of the job and the ranks' errors; nil: nowhere. A program that uses the
	// library prints nothing it did not ask for: set them to os.Stdout and os.Stderr
	// to see what symmem's command line shows.
	Stdout, Stderr io.Writer
	// Words, where set, names each setting, given its key ("heap-size"), in what the
	// job says: its errors, its notes and the reasons its results record. Nil names
	// each by the field that sets it ("JobOptions.HeapSize").
	Words func(key string) string
}

// DefaultJobOptions are the settings a job takes unless told otherwise: the command
// line's flag defaults, and the library's.
func DefaultJobOptions() JobOptions {
	d := engine.DefaultOptions()
	return JobOptions{NProc: d.NProc, Backend: d.Backend, Timeout: d.Timeout, HeapSize: Size(d.HeapSize), Launcher: d.Launcher,
		TagOutput: d.TagOutput, WaitLimit: d.WaitLimit, StallLimit: d.StallLimit}
}

// Check checks o's settings on their own, as NewJob does first, without finding out
// who started this process or probing a backend: for a program that plans for o
// without a job (symmem check-nvshmem checks its --nproc so).
func (o JobOptions) Check() error {
	words := o.words()
	return words.Error(o.engine(words).Validate())
}

// engine is o as the engine takes it, its settings named by words.
func (o JobOptions) engine(words setting.Words) engine.Options {
	bs := o.Backends
	if bs == nil {
		bs = Backends()
	}
	fs := factories(bs)
	return engine.Options{NProc: o.NProc, Backend: o.Backend, Timeout: o.Timeout, HeapSize: units.Size(o.HeapSize), StoreAddr: o.StoreAddr,
		StoreFlag: o.StoreFlag, Launcher: o.Launcher, StoreIface: o.StoreIface, TagOutput: o.TagOutput, NVSHMEMLib: o.NVSHMEMLib,
		NCCLLib: o.NCCLLib, WaitLimit: o.WaitLimit, StallLimit: o.StallLimit, KernelsDir: o.KernelsDir, DryRun: o.DryRun,
		Backends: fs, Stdout: orDiscard(o.Stdout), Stderr: orDiscard(o.Stderr), Words: words}
}

// orDiscard is w, or where it is nil a writer that keeps nothing.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// words are o's Words as the layers below take them: the fields' names where o
// names none.
func (o JobOptions) words() setting.Words {
	if o.Words == nil {
		return jobWords
	}
	return func(n setting.Name) string { return o.Words(string(n)) }
}

// RunSpec is a run test with every setting `symmem run` has.
type RunSpec struct {
	// Op is the operation (Operations lists them): put, get, put-signal, all-reduce, ...
	Op string
	// Pattern is "pair" (rank 0 with Peer), "ring" (rank r with r+1) or, for a put,
	// "one-to-all" (rank 0 to every other rank; Operation.Patterns); "": pair for 2
	// ranks, ring for more, one-to-all for a user's put whose kernel reaches every peer
	// itself.
	Pattern string
	// DType is the element type ("int8", "bf16", "float32", ...); "" takes int8 for
	// the point operations and bf16 for the collectives.
	DType string
	// RedOp is the reduction operator of the operations that reduce ("": sum).
	RedOp string
	// Count is the elements per message (a collective's: per block).
	Count int64
	// Value is what rank 0 sends (with more than 2 ranks, rank r sends Value+r).
	Value float64
	// Peer is the rank rank 0 talks to in the pair pattern.
	Peer int
	// Root is the root of the operations that have one (broadcast's source).
	Root int
	// Launch says which implementation runs the operation, and how.
	Launch Launch
	// MoE is the layer dispatch and combine route (nil: DefaultMoE's, with the
	// backend's token count); Count is not used for them.
	MoE *MoE
	// Matmul is the shape of the fused operations' matrix product (nil:
	// DefaultMatmul); Count is not used for them. Random fills their A and B with
	// random values, checked within a tolerance the result prints, instead of small
	// integers checked exactly.
	Matmul *Matmul
	Random bool
}

// Launch is how an operation is launched: by which implementation, with how many GPU
// blocks and warps.
type Launch struct {
	// Impl is the implementation (Implementations lists them); "": the backend's
	// first.
	Impl string
	// Blocks and Warps shape a GPU launch; 0: automatic.
	Blocks, Warps int
}

// MoE is a mixture-of-experts layer that dispatch and combine route: each rank's
// Tokens tokens of Hidden elements go to the ranks of their TopK experts, of Experts
// spread evenly over the ranks, and come back summed.
type MoE struct {
	Tokens, Hidden, TopK, Experts int
	// Seed draws the routing.
	Seed uint64
	// Skew is 0 for a uniform routing; s > 0 draws expert e with weight 1/(e+1)^s.
	Skew float64
}

// DefaultMoE is a DeepSeek-V3-like layer; its Tokens, 0, is the backend's default
// (DefaultTokens).
func DefaultMoE() MoE {
	d := coll.DefaultMoE
	return MoE{Hidden: d.Hidden, TopK: d.TopK, Experts: d.Experts, Seed: d.Seed, Skew: d.Skew}
}

// DefaultTokens is the MoE layer's token count per rank where MoE.Tokens is 0, on the
// backend backendName: fewer on the CPU backend, whose copies are slow.
func DefaultTokens(backendName string) int {
	if backendName == CPU {
		return engine.CPUTokens
	}
	return coll.DefaultMoE.Tokens
}

// MaxTokens is the most tokens per rank a MoE layer may have.
const MaxTokens = coll.MaxTokens

// Matmul is the shape of a fused operation's matrix product, as torch's fused ops
// name it: C is M x N, the product of an M x K A and a K x N B, M split over the
// ranks by rows.
type Matmul struct {
	M, N, K int
}

// DefaultMatmul is the shape a run test multiplies unless told otherwise, and the
// largest a sweep measures (M down from it): small enough for the CPU backend.
func DefaultMatmul() Matmul {
	d := ops.DefaultMatmul
	return Matmul{M: d.M, N: d.N, K: d.K}
}

func (m *Matmul) internal() *ops.Matmul {
	if m == nil {
		return nil
	}
	return &ops.Matmul{M: m.M, N: m.N, K: m.K}
}

func matmulOf(m *ops.Matmul) *Matmul {
	if m == nil {
		return nil
	}
	return &Matmul{M: m.M, N: m.N, K: m.K}
}

func (m *MoE) internal() *coll.MoE {
	if m == nil {
		return nil
	}
	return &coll.MoE{Tokens: m.Tokens, Hidden: m.Hidden, TopK: m.TopK, Experts: m.Experts, Seed: m.Seed, Skew: m.Skew}
}

func moeOf(m *coll.MoE) *MoE {
	if m == nil {
		return nil
	}
	return &MoE{Tokens: m.Tokens, Hidden: m.Hidden, TopK: m.TopK, Experts: m.Experts, Seed: m.Seed, Skew: m.Skew}
}

// DefaultRunSpec is the run test's settings unless told otherwise: `symmem run`'s flag
// defaults, and the library's.
func DefaultRunSpec() RunSpec {
	d := engine.DefaultRun
	return RunSpec{Count: d.Count, Value: d.Value, Peer: d.Peer}
}

func (s RunSpec) internal() runtest.Spec {
	return runtest.Spec{Op: ops.Op(s.Op), Pattern: s.Pattern, DType: s.DType, RedOp: s.RedOp, Count: s.Count, Value: s.Value, Peer: s.Peer, Root: s.Root,
		Launch: backend.Launch{Impl: s.Launch.Impl, Blocks: s.Launch.Blocks, Warps: s.Launch.Warps}, MoE: s.MoE.internal(),
		Matmul: s.Matmul.internal(), Random: s.Random}
}

// BenchSpec is a sweep with every setting of `symmem bench`.
type BenchSpec struct {
	// Ops are the operations to measure (Operations lists them); "collectives" stands
	// for every collective, "all" for every operation. Each runs once, in the order
	// of its first place.
	Ops []string
	// Impls are the implementations to measure them with (nil: every one of the
	// backend that serves one of Ops).
	Impls []string
	// MinSize, MaxSize and Factor are the message sizes: MinSize, MinSize*Factor, ...
	// up to MaxSize. A MaxSize of 0 is the backend's default: 256M on GPUs,
	// CPUMaxSize on the CPU backend.
	MinSize, MaxSize Size
	Factor           int64
	// Iters are the timed operations per repetition, Warmup the untimed ones before
	// them, Reps the repetitions per row (the row's figure is their median).
	Iters, Warmup, Reps int
	// Blocks and Warps shape a GPU launch; 0: automatic.
	Blocks, Warps int
	// Overlap is how many operations may be in flight at once (1: each waits for the
	// previous one).
	Overlap int
	// Graph launches each repetition's operations as one CUDA graph.
	Graph bool
	// Bidir has both ranks of a pair send at once; Matrix measures every ordered pair
	// of ranks.
	Bidir, Matrix bool
	// Tune searches blocks and warps for each size and reports the best.
	Tune bool
	// LatencySize is the message of the latency ping-pong, in bytes; PerIterMax the
	// largest message that also gets statistics of single operations (p50, p99).
	LatencySize, PerIterMax Size
	// The settings of the operations that read them beside their size (Operation's
	// Settings); left out of the sweep where none of Ops reads them. DType is the
	// collectives' element type (""): bf16); RedOps the reduction operators, a row
	// each (nil: sum; "all": every one); Algo the algorithm or variant ("": the
	// implementation's choice); Root the root rank; MoE the layer dispatch and combine
	// route (nil: DefaultMoE's); Matmul the largest shape of the fused operations'
	// matrix product, whose M the sweep divides by Factor down (nil: DefaultMatmul).
	DType  string
	RedOps []string
	Algo   string
	Root   int
	MoE    *MoE
	Matmul *Matmul
}

// CPUMaxSize is the largest message of a sweep on the CPU backend whose MaxSize is 0
// (its copies are slow).
const CPUMaxSize = engine.CPUMaxSize

// DefaultBenchSpec is the default sweep: `symmem bench`'s flag defaults.
func DefaultBenchSpec() BenchSpec {
	return benchSpecOf(engine.BenchDefaults)
}

// benchSpecOf is s as the library's callers see it.
func benchSpecOf(s result.BenchSpec) BenchSpec {
	return BenchSpec{Ops: slices.Clone(s.Ops), Impls: slices.Clone(s.Impls), MinSize: Size(s.MinSize), MaxSize: Size(s.MaxSize), Factor: s.Factor,
		Iters: s.Iters, Warmup: s.Warmup, Reps: s.Reps, Blocks: s.Blocks, Warps: s.Warps, Overlap: s.Overlap, Graph: s.Graph,
		Bidir: s.Bidir, Matrix: s.Matrix, Tune: s.Tune, LatencySize: Size(s.LatencySize), PerIterMax: Size(s.PerIterMax),
		DType: s.DType, RedOps: slices.Clone(s.RedOps), Algo: s.Algo, Root: s.Root, MoE: moeOf(s.MoE), Matmul: matmulOf(s.Matmul)}
}

// internal is s as the engine takes it on the backend backendName: "collectives" and
// "all" spelt out, each op and implementation once, the settings no op reads left out
// (the result's header records what was measured) and the default size of the backend.
func (s BenchSpec) internal(backendName string) result.BenchSpec {
	out := result.BenchSpec{Impls: unique(s.Impls), MinSize: int64(s.MinSize), MaxSize: int64(s.MaxSize), Factor: s.Factor,
		Iters: s.Iters, Warmup: s.Warmup, Reps: s.Reps, Blocks: s.Blocks, Warps: s.Warps, Overlap: s.Overlap, Graph: s.Graph, Bidir: s.Bidir,
		Matrix: s.Matrix, Tune: s.Tune, LatencySize: int64(s.LatencySize), PerIterMax: int64(s.PerIterMax)}
	if out.MaxSize == 0 {
		out.MaxSize = engine.BenchDefaults.MaxSize
		if backendName == backend.CPU {
			out.MaxSize = engine.CPUMaxSize
		}
	}
	for _, op := range s.Ops {
		switch op {
		case "collectives":
			out.Ops = append(out.Ops, ops.Strings(ops.Collectives())...)
		case "all":
			for _, o := range ops.All() {
				if bench.Measures(o) && o.InAll() {
					out.Ops = append(out.Ops, string(o))
				}
			}
		default:
			out.Ops = append(out.Ops, op)
		}
	}
	out.Ops = unique(out.Ops)
	if ops.AnyTakes(out.Ops, ops.DTypeSetting) {
		out.DType, out.Algo, out.Root = s.DType, s.Algo, s.Root
	}
	if ops.AnyTakes(out.Ops, ops.RedOpSetting) {
		if reds, err := ops.ParseRedOps(joinRedOps(s.RedOps)); err != nil {
			out.RedOps = s.RedOps // the engine says what is wrong with them
		} else if !(len(reds) == 1 && reds[0].IsSum()) {
			for _, r := range reds {
				out.RedOps = append(out.RedOps, r.Name)
			}
		}
	}
	if slices.ContainsFunc(out.Ops, func(op string) bool { return ops.Op(op).Variants(s.Algo) != nil }) {
		out.Algo = s.Algo // a variant of put-flag or barrier
	}
	if ops.AnyTakes(out.Ops, ops.MoESetting) {
		out.MoE = s.MoE.internal() // nil: the engine's default layer
	}
	if ops.AnyTakes(out.Ops, ops.MatmulSetting) {
		out.Matmul = s.Matmul.internal() // nil: the default shape
	}
	return out
}

// unique is list without its repeats, in the order of their first places.
func unique(list []string) []string {
	var out []string
	for _, v := range list {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Plan is what every rank of a planned job does: a run test or a sweep checked
// against its job, ready to Launch. Its JSON is what the ranks are sent.
type Plan struct {
	j engine.Job
}

// MarshalJSON writes the plan as the ranks read it.
func (p Plan) MarshalJSON() ([]byte, error) { return json.Marshal(p.j) }

// Backend is the backend the ranks run on, and why it was chosen where that was
// automatic.
func (p Plan) Backend() (name, note string) { return p.j.Backend, p.j.BackendNote }

// NProc is the number of ranks.
func (p Plan) NProc() int { return p.j.NProc }

// Heap is the symmetric heap each rank allocates, in bytes.
func (p Plan) Heap() Size { return Size(p.j.Heap) }

// Sweep is what the sweep of a plan measures, nil for a run test.
func (p Plan) Sweep() *Sweep {
	s := p.j.Bench
	if s == nil {
		return nil
	}
	rows := bench.RowsOf(s.Ops)
	sw := &Sweep{Spec: benchSpecOf(*s), Rows: p.j.Rows(), RowsOf: map[string]int{}, Estimate: p.j.Estimate()}
	for _, op := range s.Ops {
		sw.RowsOf[op] = p.j.RowsOf(op)
	}
	if rows.PerSize {
		for _, n := range s.Sizes() {
			sw.Sizes = append(sw.Sizes, Size(n))
		}
		sw.Split = rows.Split
	}
	if ops.AnyTakes(s.Ops, ops.RedOpSetting) {
		reds, _ := bench.RedOps(*s)
		for _, r := range reds {
			sw.RedOps = append(sw.RedOps, r.Name)
		}
	}
	if rows.RoundTrips {
		sw.LatencyRounds = bench.LatencyRounds(*s)
	}
	return sw
}

// Sweep is a planned sweep, as a plan shown before it runs says it.
type Sweep struct {
	// Spec is the sweep with every default filled in.
	Spec BenchSpec
	// Rows is how many rows its result will hold, RowsOf how many of them each op's.
	Rows   int
	RowsOf map[string]int
	// Sizes are the message sizes the ops measured at each size go through (none
	// where no op is); Split says they are a collective's, which gives every rank an
	// element of each.
	Sizes []Size
	Split bool
	// RedOps are the reduction operators the ops that reduce are measured with, a row
	// each (none where no op reduces).
	RedOps []string
	// LatencyRounds is how many round trips a latency row times (0: no latency).
	LatencyRounds int
	// Estimate is how long the sweep should take: a rough figure of the backend's
	// costs, not a promise.
	Estimate time.Duration
}

// Outcome is what a job produced, merged across ranks: Run for a run test, Bench for a
// sweep.
type Outcome struct {
	Run   *RunResult
	Bench *BenchResult
}

// RunResult is a run test's result, and BenchResult a sweep's with its BenchRows, as
// `symmem run --json` and `symmem bench --json` write them: for a program to read
// (and symmem bench show and compare to take), not to build.
type (
	RunResult   = result.RunReport
	BenchResult = result.Result
	BenchRow    = result.Row
)

// Job is a job whose place is decided: who starts the ranks (this process, or an
// external launcher that started it as one of them) and the backend they run on.
// PlanRun and PlanBench check a test or a sweep against it; Launch runs one. Its
// errors carry their exit status (ExitCode) and name the settings as its options'
// Words do (left nil: by the fields of JobOptions, RunSpec and BenchSpec that set
// them, JobOptions.HeapSize).
type Job struct {
	// Progress, where set before Launch, is called while a sweep runs with the
	// measurements done so far and the total.
	Progress func(done, total int)
	// Rows, where set before Launch, is called while a sweep runs with each row as it
	// lands (added) and the result so far.
	Rows func(res BenchResult, added []BenchRow)
	// Abandoned, where set before Launch, gets the rows so far when rank 0 of an
	// external job must end its process (a timeout, or an interruption its ranks
	// cannot return from), so that what was measured is written before it exits.
	Abandoned func(res BenchResult)

	e     *engine.Engine
	words setting.Words
}

// NewJob checks o, finds out who started this process and resolves the backend;
// nothing is started.
func NewJob(o JobOptions) (*Job, error) {
	words := o.words()
	e, err := engine.New(o.engine(words))
	if err != nil {
		return nil, words.Error(err)
	}
	return &Job{e: e, words: words}, nil
}

// Backend is the backend the ranks run on, and why it was chosen where that was
// automatic.
func (j *Job) Backend() (name, note string) { return j.e.Backend() }

// NProc is the number of ranks.
func (j *Job) NProc() int { return j.e.NProc() }

// Launcher names who starts the ranks: "symmem", or the external launcher.
func (j *Job) Launcher() string { return j.e.Launcher() }

// Reports says whether this process gets the job's results: false on ranks other than
// 0 of an external launcher's job (they print nothing; rank 0 reports for all).
func (j *Job) Reports() bool { return j.e.Reports() }

// PlanRun checks the run test spec against the job, before any rank starts.
func (j *Job) PlanRun(spec RunSpec) (Plan, error) {
	p, err := j.e.PlanRun(spec.internal())
	return Plan{p}, j.words.Error(err)
}

// PlanBench checks the sweep spec against the job, before any rank starts.
func (j *Job) PlanBench(spec BenchSpec) (Plan, error) {
	name, _ := j.e.Backend()
	p, err := j.e.PlanBench(spec.internal(name))
	return Plan{p}, j.words.Error(err)
}

// Launch runs a planned job on every rank: it starts them, or, under an external
// launcher, runs this process's rank. It returns the merged outcome on the process
// that reports and nil elsewhere. A sweep that ended early returns, with the error,
// the rows it measured (the result marked incomplete).
func (j *Job) Launch(ctx context.Context, p Plan) (*Outcome, error) {
	j.e.Progress, j.e.Rows, j.e.Abandoned = j.Progress, j.Rows, j.Abandoned
	out, err := j.e.Launch(ctx, p.j)
	if out == nil {
		return nil, j.words.Error(err)
	}
	return &Outcome{Run: out.Run, Bench: out.Bench}, j.words.Error(err)
}

// jobWords name a setting by the field that sets it: JobOptions', RunSpec's or
// BenchSpec's ("raise JobOptions.HeapSize"), as the table of settings says
// (setting.Fields). The command line names its flags instead.
var jobWords = setting.Fields

// ReferenceSweep is the key sweep symmem ships reference figures for (docs/results:
// put at 16 and 256 MiB, the 8-byte latency, all-reduce of bf16 at 16 and 256 MiB, by
// the triton implementation): check-nvshmem --perf runs it on the GPUs and sets its
// rows beside the figures of the machine.
func ReferenceSweep() BenchSpec { return benchSpecOf(reference.Sweep(engine.BenchDefaults)) }
