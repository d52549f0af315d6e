package symmem

// What a program shows its users of what the library has: the backends, the
// implementations and operations, the element types and reduction operators, where
// this process stands, how sizes are typed, and the exit statuses. symmem's command
// line builds its help, completion and checks from these.

import (
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/buildinfo"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/kernels"
)

// Backend is one backend a job can run on: "nvshmem" (GPUs) or "cpu".
type Backend struct {
	f backend.Factory
}

// Name is what JobOptions.Backend calls it.
func (b Backend) Name() string { return b.f.Name() }

// Host says what decides whether a GPU kernel loads on this machine (its GPUs and the
// NVSHMEM library lib, "" to search), where b is a backend that can tell (the GPU's).
func (b Backend) Host(lib string) (h kernels.Host, ok bool) {
	if ho, ok := b.f.(interface{ Host(string) kernels.Host }); ok {
		return ho.Host(lib), true
	}
	return kernels.Host{}, false
}

// Backends are the backends of the library, in the order help lists their
// implementations: the GPU's, then the CPU's.
func Backends() []Backend {
	var out []Backend
	for _, f := range backends.All() {
		out = append(out, Backend{f})
	}
	return out
}

func factories(bs []Backend) []backend.Factory {
	fs := make([]backend.Factory, len(bs))
	for i, b := range bs {
		fs[i] = b.f
	}
	return fs
}

// Implementation is one implementation of the operations.
type Implementation struct {
	Name    string
	Backend string // the backend that runs it
	Summary string // one line for help text
	// Ops are the operations it serves, in the order of Operations.
	Ops []string
	// Kernels are, by operation, the prebuilt kernels it launches (none: the copy
	// engine, or the CPU).
	Kernels map[string][]string
}

// Implementations are the built-in implementations of backends (nil: every backend),
// in the order help lists them; a job adds a user's from JobOptions.KernelsDir.
func Implementations(backends []Backend) []Implementation {
	if backends == nil {
		backends = Backends()
	}
	return implementationsOf(backend.Builtin(factories(backends)...))
}

// ImplementationsWith are Implementations with those of a user's directory of kernels
// added (symmem kernels build --out DIR), as a job whose JobOptions.KernelsDir is dir
// has them; the error says what is wrong with the directory.
func ImplementationsWith(dir string, backends []Backend) ([]Implementation, error) {
	if backends == nil {
		backends = Backends()
	}
	reg, err := engine.Registry(dir, factories(backends))
	if err != nil {
		return nil, jobWords.Error(err)
	}
	return implementationsOf(reg), nil
}

func implementationsOf(reg *backend.Registry) []Implementation {
	var out []Implementation
	for _, im := range reg.All() {
		i := Implementation{Name: im.Name, Backend: im.Backend, Summary: im.Summary, Kernels: map[string][]string{}}
		for _, op := range im.Ops() {
			i.Ops = append(i.Ops, string(op))
			if k := im.Kernels[op]; len(k) > 0 {
				i.Kernels[string(op)] = slices.Clone(k)
			}
		}
		out = append(out, i)
	}
	return out
}

// Operation is one operation symmem runs.
type Operation struct {
	Name string
	// Help is its line in `symmem run --help`.
	Help string
	// Runs says `symmem run` tests it; the others bench alone measures.
	Runs bool
	// Point says it is one of the operations between two ranks that a sweep measures
	// by default (DefaultBenchSpec's Ops).
	Point bool
	// Collective says every rank takes part.
	Collective bool
	// PerSize says a sweep measures it at each of its sizes.
	PerSize bool
	// Settings are the settings beside its size it reads, by key: "dtype", "redop",
	// "root", "algo", the MoE layer's "tokens", "hidden", "topk", "experts", "seed"
	// and "skew", and the matrix product's "m", "n" and "k" (Matmul).
	Settings []string
	// Algos are the values of BenchSpec.Algo for it.
	Algos []string
	// DTypes are the element types it takes (RunSpec.DType), by their names.
	DTypes []string
	// Patterns are the patterns a run test of it takes (RunSpec.Pattern): pair, ring
	// and, for a put, one-to-all; none where every rank takes part.
	Patterns []string
}

// moeKeys are the settings of the MoE layer, by key; matmulKeys those of the fused
// operations' matrix product.
var (
	moeKeys    = []string{"tokens", "hidden", "topk", "experts", "seed", "skew"}
	matmulKeys = []string{"m", "n", "k"}
)

// Operations are every operation, in the order tables show them.
func Operations() []Operation {
	points := ops.Points()
	var out []Operation
	for _, o := range ops.All() {
		op := Operation{Name: string(o), Help: o.Help(), Runs: o.Runs(), Point: slices.Contains(points, o), Collective: o.IsCollective(),
			PerSize: bench.RowsOf([]string{string(o)}).PerSize, Algos: slices.Clone(o.Algos()), DTypes: o.DTypes(), Patterns: runtest.Patterns(o)}
		for _, s := range []ops.Setting{ops.DTypeSetting, ops.RedOpSetting, ops.RootSetting, ops.AlgoSetting} {
			if o.Takes(s) {
				op.Settings = append(op.Settings, string(s))
			}
		}
		if o.Takes(ops.MoESetting) {
			op.Settings = append(op.Settings, moeKeys...)
		}
		if o.Takes(ops.MatmulSetting) {
			op.Settings = append(op.Settings, matmulKeys...)
		}
		out = append(out, op)
	}
	return out
}

// DTypes are the element types a run test sends, by their names; CollectiveDTypes
// those the collectives carry and reduce. Torch's names are taken too (bfloat16,
// half, float, double).
func DTypes() []string { return ops.DTypeNames() }

// CollectiveDTypes are the element types the collectives carry and reduce.
func CollectiveDTypes() []string { return slices.Clone(ops.ReduceTypes) }

// IsCollectiveDType says whether the collectives take dtype (by any of its names).
func IsCollectiveDType(dtype string) bool { return ops.ElemSize(dtype) != 0 }

// The element types a run test takes where RunSpec.DType is "": DefaultDType for the
// point operations, DefaultCollectiveDType for the collectives (a sweep's too).
const (
	DefaultDType           = runtest.DefaultDType
	DefaultCollectiveDType = runtest.DefaultSumDType
)

// RedOps are the reduction operators; "all" stands for every one in a sweep.
func RedOps() []string {
	var out []string
	for _, r := range ops.RedOps() {
		out = append(out, r.Name)
	}
	return out
}

// ParseRedOps reads reduction operators as `symmem bench --redop` takes them: one, a
// comma-separated list, or "all"; "" is sum.
func ParseRedOps(v string) ([]string, error) {
	reds, err := ops.ParseRedOps(v)
	var out []string
	for _, r := range reds {
		out = append(out, r.Name)
	}
	return out, err
}

func joinRedOps(names []string) string { return strings.Join(names, ",") }

// Environment are the SYMMEM_* variables the library reads that are no settings: its
// launcher's, which it sets for its ranks (and an external launcher's job may set), the
// backends', and the test switches.
func Environment() []string {
	return engine.Environment(factories(Backends()))
}

// Size is a number of bytes. As a flag (flag.Value, pflag.Value) it reads and prints
// them as people type them: 4, 4K, 256M, 1G (binary multiples).
type Size int64

func (s Size) String() string       { return units.FormatSize(int64(s)) }
func (s *Size) Set(v string) error  { return (*units.Size)(s).Set(v) }
func (s *Size) Type() string        { return (*units.Size)(s).Type() }
func (c Count) String() string      { return (*units.Count)(&c).String() }
func (c *Count) Set(v string) error { return (*units.Count)(c).Set(v) }
func (c *Count) Type() string       { return (*units.Count)(c).Type() }

// Count is a number of elements; as a flag it reads K, M and G: 1M = 1048576.
type Count int64

// BuildInfo is what this program knows of the build of symmem it runs.
type BuildInfo struct {
	// Version is "dev", or the module's version (v1.2.3) where the go command
	// recorded one.
	Version string
	// Commit is the commit it was built from ("" where none was recorded).
	Commit string
	// Line is the one line `symmem version` starts with: symmem dev (commit
	// 0123456789ab of 2026-01-02T03:04:05Z) go1.26 linux/amd64.
	Line string
}

// Build is this program's BuildInfo.
func Build() BuildInfo {
	in := buildinfo.Read()
	return BuildInfo{Version: in.Version, Commit: in.Commit, Line: in.String()}
}

// Place is where this process stands before any job is made.
type Place struct {
	// Launcher is the external launcher that started this process as a rank of its
	// job ("slurm", "mpi", "torchrun"), "" where none did, and HostRanks how many
	// ranks it put on this host.
	Launcher  string
	HostRanks int
	// Reports says whether this process reports a job's results: false on ranks other
	// than 0 of an external launcher's job.
	Reports bool
	// Err is what keeps that launcher's job from starting on any backend (a job over
	// several hosts without a secret, a bad store address).
	Err error
}

// Where is this process's Place in a job of o, which reads o's Launcher and store
// settings; Err names the settings as o.Words do.
func (o JobOptions) Where() Place {
	words := o.words()
	e := o.engine(words)
	n, launcher, err := engine.HostRanks(e)
	return Place{Launcher: launcher, HostRanks: n, Reports: engine.Reports(e), Err: words.Error(err)}
}

// WorkerArg is the argument the launcher starts each rank with (the program itself,
// started again): Init recognises it, and a program with a command tree of its own
// runs Worker for it.
const WorkerArg = engine.WorkerArg

// The exit statuses ExitCode gives errors, which scripts depend on (never renumbered).
const (
	ExitOK            = exitcode.OK            // done, and every check passed
	ExitError         = exitcode.Error         // no more specific status (I/O, an internal error)
	ExitUsage         = exitcode.Usage         // bad input: a value out of range, a bad config file
	ExitWrongResults  = exitcode.WrongResults  // the job ran but data was wrong or never arrived
	ExitRankFailed    = exitcode.WorkerFailed  // a rank exited non-zero, crashed or was killed
	ExitTimeout       = exitcode.Timeout       // the job ran past JobOptions.Timeout
	ExitRegression    = exitcode.Regression    // a comparison found a row slower than allowed
	ExitNoGPUBackend  = exitcode.NoGPUBackend  // the GPU backend cannot run here
	ExitCompareFailed = exitcode.CompareFailed // a comparison could not compare (wrong data, rows missing)
	ExitInterrupted   = exitcode.Interrupted   // stopped by a signal (SIGINT, SIGTERM, ...)
)

// WithExitCode is err carrying the exit status code, which ExitCode gives it: a
// program with a command line over the library marks its own errors so (bad input:
// ExitUsage). A nil err stays nil.
func WithExitCode(code int, err error) error { return exitcode.With(code, err) }

// Said says whether err carries only its exit status, what went wrong having been
// printed already (by a rank that ended itself): a program prints nothing for it.
func Said(err error) bool { return exitcode.IsSaid(err) }

// The backends' names (Backend.Name, JobOptions.Backend).
const (
	CPU     = backend.CPU
	NVSHMEM = backend.NVSHMEM
)
