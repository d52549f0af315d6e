package symmem

import (
	"context"
	"slices"

	all "github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// JobOptions are every setting of a job: symmem's command line binds its flags to this
// one struct. A zero field is a setting of zero, not the default: start from
// DefaultJobOptions.
type JobOptions = engine.Options

// DefaultJobOptions are the settings a job takes unless told otherwise: the command
// line's flag defaults, and the library's.
func DefaultJobOptions() JobOptions { return engine.DefaultOptions() }

// RunSpec is a run test with every setting `symmem run` has; BenchSpec is a sweep with
// every setting of `symmem bench`.
type (
	RunSpec   = engine.RunSpec
	BenchSpec = result.BenchSpec
)

// DefaultRunSpec is the run test's settings unless told otherwise: `symmem run`'s flag
// defaults, and the library's.
func DefaultRunSpec() RunSpec { return engine.DefaultRun }

// DefaultBenchSpec is the default sweep: `symmem bench`'s flag defaults.
func DefaultBenchSpec() BenchSpec {
	s := engine.BenchDefaults
	s.Ops = slices.Clone(s.Ops)
	return s
}

// Plan is what every rank of a planned job does; Outcome is what a job produced,
// merged across ranks (Run for a run test, Bench for a sweep).
type (
	Plan    = engine.Job
	Outcome = engine.Outcome
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
	Rows func(res result.Result, added []result.Row)
	// Abandoned, where set before Launch, gets the rows so far when rank 0 of an
	// external job must end its process (a timeout, or an interruption its ranks
	// cannot return from), so that what was measured is written before it exits.
	Abandoned func(res result.Result)

	e    *engine.Engine
	opts JobOptions
}

// NewJob checks o, finds out who started this process and resolves the backend;
// nothing is started. o.Backends left nil are the library's (every backend).
func NewJob(o JobOptions) (*Job, error) {
	if o.Backends == nil {
		o.Backends = backends
	}
	if o.Words == nil {
		o.Words = jobWords
	}
	e, err := engine.New(o)
	if err != nil {
		return nil, o.Words.Error(err)
	}
	return &Job{e: e, opts: o}, nil
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
	p, err := j.e.PlanRun(spec)
	return p, j.opts.Words.Error(err)
}

// PlanBench checks the sweep spec against the job, before any rank starts.
func (j *Job) PlanBench(spec BenchSpec) (Plan, error) {
	p, err := j.e.PlanBench(spec)
	return p, j.opts.Words.Error(err)
}

// Launch runs a planned job on every rank: it starts them, or, under an external
// launcher, runs this process's rank. It returns the merged outcome on the process
// that reports and nil elsewhere. A sweep that ended early returns, with the error,
// the rows it measured (the result marked incomplete).
func (j *Job) Launch(ctx context.Context, p Plan) (*Outcome, error) {
	j.e.Progress, j.e.Rows, j.e.Abandoned = j.Progress, j.Rows, j.Abandoned
	out, err := j.e.Launch(ctx, p)
	return out, j.opts.Words.Error(err)
}

// backends are the backends a job of the library runs on.
var backends = all.All()

// jobWords name a setting by the field that sets it: JobOptions', else RunSpec's, else
// BenchSpec's ("raise JobOptions.HeapSize"). The command line names its flags instead.
var jobWords setting.Words = func(n setting.Name) string { return fieldOf(n, jobFields) }

// fieldOf is n as the first of structs that has a field for it names it, or the bare
// name where none does.
func fieldOf(n setting.Name, structs []fields) string {
	for _, s := range structs {
		if f, ok := s.fields[n]; ok {
			return s.name + "." + f
		}
	}
	return string(n)
}

// fields are the fields of the struct name that set each setting.
type fields struct {
	name   string
	fields map[setting.Name]string
}

var jobFields = []fields{
	{"JobOptions", map[setting.Name]string{"nproc": "NProc", "backend": "Backend", "timeout": "Timeout", "heap-size": "HeapSize",
		"store-addr": "StoreAddr", "launcher": "Launcher", "store-iface": "StoreIface", "tag-output": "TagOutput", "nvshmem-lib": "NVSHMEMLib",
		"nccl-lib": "NCCLLib", "wait-limit": "WaitLimit", "stall-limit": "StallLimit", "kernels": "KernelsDir", "dry-run": "DryRun"}},
	{"RunSpec", map[setting.Name]string{"op": "Op", "pattern": "Pattern", "dtype": "DType", "redop": "RedOp", "count": "Count",
		"value": "Value", "peer": "Peer", "impl": "Launch.Impl", "blocks": "Launch.Blocks", "warps": "Launch.Warps",
		"tokens": "MoE.Tokens", "hidden": "MoE.Hidden", "topk": "MoE.TopK", "experts": "MoE.Experts", "seed": "MoE.Seed", "skew": "MoE.Skew"}},
	{"BenchSpec", map[setting.Name]string{"min-size": "MinSize", "max-size": "MaxSize", "factor": "Factor", "iters": "Iters",
		"warmup": "Warmup", "reps": "Reps", "overlap": "Overlap", "graph": "Graph", "bidir": "Bidir", "matrix": "Matrix",
		"tune": "Tune", "algo": "Algo", "root": "Root"}},
}
