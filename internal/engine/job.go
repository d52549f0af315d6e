package engine

import (
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/kernels"
)

// RunSpec is what a run test does (the ops package's spec: commands fill it from
// their flags and the engine validates it).
type RunSpec = runtest.Spec

// DTypeNames lists the element types a run test can send.
func DTypeNames() []string { return ops.DTypeNames() }

// Kinds of job.
const (
	KindRun   = "run"   // a correctness test of one operation (runtest.Spec)
	KindBench = "bench" // a sweep of sizes and implementations (result.BenchSpec)
)

// Job is what every rank of one job does. The launcher sends it to its workers as
// JSON; ranks of an external launcher build it themselves from the same flags.
type Job struct {
	// factory opens the ranks' backend and reg says which implementation serves which
	// op: the launcher's engine sets them, a rank makes them again from the job.
	factory backend.Factory
	reg     *backend.Registry

	Kind        string `json:"kind"`
	Backend     string `json:"backend"` // resolved: "cpu" or "nvshmem"
	BackendNote string `json:"backend_note,omitempty"`
	NProc       int    `json:"nproc"`
	Heap        int64  `json:"heap"` // symmetric heap per rank, bytes: Layout's
	// Layout is every rank's buffers, planned once here and carved by every rank.
	Layout     backend.Layout `json:"layout"`
	NVSHMEMLib string         `json:"nvshmem_lib,omitempty"`
	NCCLLib    string         `json:"nccl_lib,omitempty"`
	WaitLimit  time.Duration  `json:"wait_limit,omitempty"`
	StallLimit time.Duration  `json:"stall_limit,omitempty"`
	KernelsDir string         `json:"kernels_dir,omitempty"` // --kernels: every rank registers its implementations
	// Words are the launcher's words for the settings (Options.Words), which its ranks
	// name them by in what they say ("in a --tune trial"), by key.
	Words map[setting.Name]string `json:"words,omitempty"`
	Run   *runtest.Spec           `json:"run,omitempty"`
	Bench *result.BenchSpec       `json:"bench,omitempty"`
}

// BenchDefaults is the default sweep: the bench command's flags show it, and
// DefaultBenchHeap sizes it. Latency sends 8 bytes; rows up to 64K also get
// per-operation statistics.
var BenchDefaults = result.BenchSpec{Ops: ops.Strings(ops.Points()), MinSize: 4, MaxSize: 256 << 20, Factor: 2, Iters: 20, Warmup: 5, Reps: 5,
	Overlap: 1, LatencySize: 8, PerIterMax: 64 << 10}

// DefaultCollectiveDType is the element type collectives sum and move unless --dtype
// says otherwise (what the Triton-over-NVSHMEM kernels people write mostly carry).
const DefaultCollectiveDType = runtest.DefaultSumDType

// MinWaitLimit is the shortest --wait-limit: many scheduler time slices, so that a peer
// a busy machine leaves waiting is not taken for one whose signal was lost (the tests
// of lost signals wait 500 ms).
const MinWaitLimit = 100 * time.Millisecond

// CPUTokens is the MoE layer's default token count per rank on the CPU backend (its
// copies are slow; the GPUs get coll.DefaultMoE's 4096, DeepSeek-V3's).
const CPUTokens = 256

// moeDefaults fills the token count of m left at 0 for the backend.
func moeDefaults(m *coll.MoE, backendName string) {
	if m != nil && m.Tokens == 0 {
		m.Tokens = coll.DefaultMoE.Tokens
		if backendName == backend.CPU {
			m.Tokens = CPUTokens
		}
	}
}

// CPUPlaces is how many buffers per lane the CPU backend's measurements take in turn
// (result.BenchSpec.Places): where a buffer lands in memory moves a CPU copy's time by
// up to half for a whole run, and only buffers that take turns put that inside the
// repetitions' spread, which bench compare judges by.
const CPUPlaces = 3

// CPUMaxSize is the largest default message on the CPU backend (its copies are slow).
const CPUMaxSize = 4 << 20

// DefaultBenchHeap is the symmetric heap per rank a default bench sweep with reg's
// implementations needs on GPUs (check-nvshmem compares it with free memory).
func DefaultBenchHeap(reg *backend.Registry) int64 {
	h, _ := bench.HeapBytes(reg, BenchDefaults, 2)
	return h
}

// MaxRanks bounds --nproc (result.MaxRanks: a saved result holding more is refused too).
const MaxRanks = result.MaxRanks

// WorkerArg is the argument the launcher starts each rank with (the executable itself,
// run again); a program's rank entry point recognises it.
const WorkerArg = "__worker"

// DefaultOptions are the settings a job takes unless told otherwise: the command
// line's flag defaults and the library's.
func DefaultOptions() Options {
	return Options{NProc: 2, Backend: "auto", Timeout: 2 * time.Minute, HeapSize: 4 << 30, Launcher: "auto", TagOutput: true,
		WaitLimit: backend.DefaultWaitLimit, StallLimit: DefaultStallLimit}
}

// words are the job's Words as a rank names settings by them.
func (j Job) words() setting.Words {
	if j.Words == nil {
		return nil
	}
	return func(n setting.Name) string {
		if w, ok := j.Words[n]; ok {
			return w
		}
		return string(n)
	}
}

// wordsOf is w's word for every setting, for a job to carry to its ranks.
func wordsOf(w setting.Words) map[setting.Name]string {
	if w == nil {
		return nil
	}
	m := map[setting.Name]string{}
	for _, n := range setting.Names() {
		m[n] = w(n)
	}
	return m
}

// DefaultRun is the run test's settings unless told otherwise: the run command's flag
// defaults, and the library's for a zero Count and Peer.
var DefaultRun = RunSpec{Count: 8, Value: 5, Peer: 1}

// Options are the settings every launching command shares.
type Options struct {
	NProc     int
	Backend   string // "auto", "cpu" or "nvshmem"
	Timeout   time.Duration
	HeapSize  units.Size // the largest symmetric heap a rank may use
	StoreAddr string
	// StoreFlag is the flag that gives StoreAddr on the command line (launch's
	// DiscoverOptions.StoreFlag: how a stopped rank of the job is recognised).
	StoreFlag string
	// Launcher overrides who is taken to have started the ranks: auto, local,
	// torchrun, mpi or slurm. StoreIface is the interface rank 0 listens on when the
	// ranks span several hosts.
	Launcher   string
	StoreIface string
	TagOutput  bool
	NVSHMEMLib string
	// NCCLLib is an explicit libnccl.so.2 (--nccl-lib); "" searches (nccl.Find).
	NCCLLib   string
	WaitLimit time.Duration
	// StallLimit is how long a rank may go without a sign of life (its heartbeat)
	// before the job is stopped naming it; 0 watches for none (a rank held in a
	// debugger), like Timeout's 0.
	StallLimit time.Duration
	// KernelsDir holds a user's kernels (symmem kernels build --out DIR): each
	// implementation in it becomes a registry entry (--kernels).
	KernelsDir string
	// DryRun plans a job without starting it (bench --dry-run): a backend named
	// outright is taken as it is, not probed, and a user's kernels are read from their
	// sidecars but not loaded on a GPU.
	DryRun bool
	// Backends are the backends this binary runs (cmd/symmem gives them); --backend
	// names one of them.
	Backends []backend.Factory
	// Stdout gets the ranks' own lines (rank 1's "received" line), Stderr the
	// launcher's notes and the ranks' errors; nil: os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Words name the settings in what the engine says itself (its notes, the reason a
	// result records, what its ranks say: Job.Words): the CLI's flags, the library's
	// fields. Its errors name settings by value for whoever presents them.
	Words setting.Words
}

// Validate checks the options on their own; the one place --nproc and friends are checked.
func (o Options) Validate() error {
	if err := CheckNProc(o.NProc); err != nil {
		return err
	}
	switch {
	case o.Backend != "auto" && o.Backend != backend.CPU && o.Backend != backend.NVSHMEM:
		return badInput("unknown %s %q: use auto, nvshmem or cpu", setting.Backend, o.Backend)
	case o.Timeout < 0:
		return badInput("%s %s: must not be negative", setting.Timeout, o.Timeout)
	case o.HeapSize <= 0:
		return badInput("%s must be positive", setting.HeapSize)
	case o.WaitLimit < MinWaitLimit:
		// Shorter, a peer that the scheduler leaves waiting a moment turns the setting
		// into a wrong-results verdict at random (1ns exited 0 or 3).
		return badInput("%s %s is too short: a peer's signal may take that long on a busy machine and the data would be called undelivered; give %s or more (default %s)", setting.WaitLimit, o.WaitLimit, MinWaitLimit, backend.DefaultWaitLimit)
	case o.StallLimit < 0 || o.StallLimit > 0 && o.StallLimit < MinStallLimit:
		return badInput("%s %s is too short: ranks beat every %s and a busy machine delays a beat now and then; give %s or more (default %s), or 0 to watch for none",
			setting.StallLimit, o.StallLimit, beatPeriod, MinStallLimit, DefaultStallLimit)
	}
	return nil
}

// CheckNProc checks a number of ranks (Validate's check of NProc, which check-nvshmem
// makes of its own --nproc too).
func CheckNProc(n int) error {
	if n < 1 || n > MaxRanks {
		return badInput("%s %d out of range: give 1..%d ranks", setting.NProc, n, MaxRanks)
	}
	return nil
}

// badInput marks an error as the user's to fix (exit status 2).
func badInput(format string, a ...any) error {
	return exitcode.With(exitcode.Usage, setting.Errorf(format, a...))
}

// planRun checks a run test against the job and derives what it needs.
func (j *Job) planRun(spec runtest.Spec, heapLimit int64) error {
	if spec.MoE != nil {
		m := *spec.MoE
		moeDefaults(&m, j.Backend)
		spec.MoE = &m
	}
	if err := spec.Validate(j.NProc, j.Backend, j.reg); err != nil {
		return badInput("%v", err)
	}
	lay, err := spec.Layout(j.NProc, j.reg)
	if err != nil {
		return badInput("%v", err)
	}
	j.Kind, j.Run, j.Layout, j.Heap = KindRun, &spec, lay, lay.Heap()
	if j.Heap > heapLimit && spec.MoE != nil {
		return badInput("%s of %s %d x %s %d per rank needs a symmetric heap of %s per rank, more than %s %s: lower %s or %s, or raise %s",
			spec.Op, setting.Tokens, spec.MoE.Tokens, setting.Hidden, spec.MoE.Hidden, units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), setting.Tokens, setting.Hidden, setting.HeapSize)
	}
	if j.Heap > heapLimit && spec.Matmul != nil {
		mm := *spec.Matmul
		return badInput("%s of %d x %d x %d needs a symmetric heap of %s per rank, more than %s %s: lower %s, %s or %s, or raise %s",
			spec.Op, mm.M, mm.N, mm.K, units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), setting.M, setting.N, setting.K, setting.HeapSize)
	}
	if j.Heap > heapLimit {
		return badInput("%d x %s (%s per buffer) needs a symmetric heap of %s per rank, more than %s %s: lower %s or raise %s",
			spec.Count, spec.DType, units.FormatSize(spec.Bytes), units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), setting.Count, setting.HeapSize)
	}
	return nil
}

// planBench checks a sweep against the job, fills its defaults from the registry and
// derives its layout and heap. Its checks run in the order their messages assume
// (each names what the ones before settled), hence one function past 80 lines.
func (j *Job) planBench(spec result.BenchSpec, heapLimit int64) error {
	if j.NProc < 2 {
		return badInput("bench needs at least 2 ranks: use %s 2 or more", setting.NProc)
	}
	if len(spec.Ops) == 0 {
		return badInput("%s is empty: give one or more of %v", setting.Op, ops.All())
	}
	// An empty name (--impl , or put,,get) is no implementation's: LookupImpl would take
	// it for the default, and the sweep then measured nothing and passed.
	if slices.Contains(spec.Ops, "") {
		return badInput("%s has an empty name (a stray comma?): give one or more of %s", setting.Op, ops.Names(ops.All()))
	}
	// The backend's implementations that serve one of the sweep's operations: those
	// an error names.
	var serving []string
	for _, im := range j.reg.Of(j.Backend) {
		if slices.ContainsFunc(spec.Ops, func(o string) bool { return im.Supports(ops.Op(o)) }) {
			serving = append(serving, im.Name)
		}
	}
	if len(serving) == 0 {
		serving = j.reg.Names(j.Backend)
	}
	if slices.Contains(spec.Impls, "") {
		return badInput("%s has an empty name (a stray comma?): give one or more of %s", setting.Impl, strings.Join(serving, ", "))
	}
	if len(spec.Impls) == 0 {
		// Every implementation of the backend that serves one of the ops (else all of
		// them: the error below names the op).
		spec.Impls = slices.Clone(serving)
	}
	for _, name := range spec.Impls {
		if _, err := j.reg.Lookup(j.Backend, name); err != nil {
			var wrong *backend.WrongBackendError
			var unknown *backend.UnknownImplError
			switch {
			case errors.As(err, &wrong):
				wrong.Known = serving
			case errors.As(err, &unknown):
				unknown.Known = serving
			}
			return badInput("%v", err)
		}
	}
	// An implementation that does not serve an op skips it (the copy engine cannot
	// signal); an op that no chosen implementation serves is an error.
	for _, name := range spec.Ops {
		op := ops.Op(name)
		if !op.Known() {
			return badInput("unknown %s %q: use %s", setting.Op, op, ops.Names(ops.All()))
		}
		if !slices.ContainsFunc(spec.Impls, func(name string) bool { im, _ := j.reg.Lookup(j.Backend, name); return im.Supports(op) }) {
			if len(j.reg.Serving(j.Backend, op)) == 0 {
				return badInput("%s %s: the %s backend has no implementation of it yet (the CPU backend's memcpy has every collective: %s cpu); see docs/collectives.md", setting.Op, op, j.Backend, setting.Backend)
			}
			return badInput("no implementation in %s %s serves %s %s", setting.Impl, strings.Join(spec.Impls, ","), setting.Op, op)
		}
	}
	gpuOnly := spec.Graph || spec.Tune || spec.Blocks != 0 || spec.Warps != 0
	if j.Backend == backend.CPU && gpuOnly {
		return badInput("%s, %s, %s and %s shape GPU launches: they need the GPU backend (this run uses the CPU backend)", setting.Graph, setting.Tune, setting.Blocks, setting.Warps)
	}
	if err := bench.Validate(spec); err != nil {
		return badInput("%v", err)
	}
	if spec.DType == "" {
		spec.DType = DefaultCollectiveDType
	}
	spec.DType = ops.Canonical(spec.DType) // rows and NCCL know one name per type
	if spec.MoE == nil && ops.AnyTakes(spec.Ops, ops.MoESetting) {
		m := coll.DefaultMoE
		m.Tokens = 0 // the backend's default, below
		spec.MoE = &m
	}
	if spec.MoE != nil {
		m := *spec.MoE
		moeDefaults(&m, j.Backend)
		spec.MoE = &m
	}
	if spec.Places == 0 && j.Backend == backend.CPU {
		spec.Places = CPUPlaces
	}
	if err := bench.ValidateCollectives(spec, j.NProc); err != nil {
		return badInput("%v", err)
	}
	if err := bench.ValidatePairs(spec, j.NProc); err != nil {
		return badInput("%v", err)
	}
	if spec.Tune {
		im, _ := j.reg.Lookup(j.Backend, "")
		spec.TuneWarps = kernels.Default().Warps(im.Name, im.Kernels[ops.Put][0])
	}
	lay, err := bench.Layout(j.reg, spec, j.NProc)
	if err != nil {
		return badInput("%v", err)
	}
	j.Kind, j.Bench, j.Layout, j.Heap = KindBench, &spec, lay, lay.Heap()
	if j.Heap <= heapLimit {
		return nil
	}
	// What takes the heap beside the sizes: lanes, buffers taken in turn, a user's scratch.
	with, lower := setting.Textf(""), setting.Textf("%s", setting.MaxSize)
	if spec.Overlap > 1 {
		with, lower = setting.Textf(" with %s %d (buffers per operation in flight)", setting.Overlap, spec.Overlap), setting.Textf("%s or %s", setting.MaxSize, setting.Overlap)
	}
	if spec.Places > 1 {
		with = setting.Textf("%s and %d buffers per lane taken in turn", with, spec.Places)
	}
	scratch, user := userScratch(j.reg, spec, j.NProc)
	if mm := spec.Matmul; mm != nil && !slices.ContainsFunc(spec.Ops, func(op string) bool { return !ops.Op(op).Takes(ops.MatmulSetting) }) {
		return badInput("the fused operations of %d x %d x %d need a symmetric heap of %s per rank, more than %s %s: lower %s, %s or %s, or raise %s",
			mm.M, mm.N, mm.K, units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), setting.M, setting.N, setting.K, setting.HeapSize)
	}
	if spec.Matmul != nil && spec.MoE == nil {
		// The fused operations' matrices, sized by their shape, beside the sizes.
		mm := *spec.Matmul
		lower = setting.Textf("%s, %s, %s or %s", setting.M, setting.N, setting.K, lower)
		with = setting.Textf("%s and the fused operations' %d x %d x %d", with, mm.M, mm.N, mm.K)
	}
	if spec.MoE != nil {
		if user {
			scratch = setting.Textf("; %s", scratch)
		}
		sizes, lower := setting.Textf(""), setting.Textf("%s or %s", setting.Tokens, setting.Hidden)
		if slices.ContainsFunc(spec.Ops, func(op string) bool { return !ops.Op(op).Takes(ops.MoESetting) }) {
			sizes = setting.Textf("%s %s%s, and ", setting.MaxSize, units.FormatSize(spec.MaxSize), with)
			lower = setting.Textf("%s, %s or %s", setting.Tokens, setting.Hidden, setting.MaxSize)
			if spec.Overlap > 1 {
				lower = setting.Textf("%s, %s, %s or %s", setting.Tokens, setting.Hidden, setting.MaxSize, setting.Overlap)
			}
		}
		return badInput("this sweep (%sa MoE layer of %s %d x %s %d per rank%s) needs a symmetric heap of %s per rank, more than %s %s: lower %s, or raise %s",
			sizes, setting.Tokens, spec.MoE.Tokens, setting.Hidden, spec.MoE.Hidden, scratch, units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), lower, setting.HeapSize)
	}
	if user {
		with = setting.Textf("%s (%s)", with, scratch)
	}
	return badInput("%s %s%s needs a symmetric heap of %s per rank, more than %s %s: lower %s or raise %s",
		setting.MaxSize, units.FormatSize(spec.MaxSize), with, units.FormatSize(j.Heap), setting.HeapSize, units.FormatSize(heapLimit), lower, setting.HeapSize)
}

// userScratch names the first collective of a user's implementation in spec that takes
// more scratch than its share, for the message of a heap too small (ok false if none).
func userScratch(reg *backend.Registry, spec result.BenchSpec, n int) (t setting.Text, ok bool) {
	for _, impl := range spec.Impls {
		for _, name := range spec.Ops {
			op := ops.Op(name)
			size, what := spec.MaxSize, "each rank's share"
			if op.Takes(ops.MoESetting) {
				if spec.MoE == nil {
					continue
				}
				size, what = int64(spec.MoE.Tokens)*int64(spec.MoE.Hidden)*ops.ElemSize(spec.DType), "its tokens"
			}
			if s := reg.ScratchBytes(op, impl, size, 0, n); s > size {
				return setting.Textf("the %s of %s %s, a user's, takes %s of scratch: 2 x %d ranks x %s", op, setting.Impl, impl, units.FormatSize(s), n, what), true
			}
		}
	}
	return setting.Text{}, false
}
