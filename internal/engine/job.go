package engine

import (
	"errors"
	"fmt"
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
	Layout     backend.Layout    `json:"layout"`
	NVSHMEMLib string            `json:"nvshmem_lib,omitempty"`
	NCCLLib    string            `json:"nccl_lib,omitempty"`
	WaitLimit  time.Duration     `json:"wait_limit,omitempty"`
	StallLimit time.Duration     `json:"stall_limit,omitempty"`
	KernelsDir string            `json:"kernels_dir,omitempty"` // --kernels: every rank registers its implementations
	Run        *runtest.Spec     `json:"run,omitempty"`
	Bench      *result.BenchSpec `json:"bench,omitempty"`
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
	// result records): the CLI's flags, the library's fields. Its errors keep their
	// marks for whoever presents them.
	Words setting.Words
}

// Validate checks the options on their own; the one place --nproc and friends are checked.
func (o Options) Validate() error {
	if err := CheckNProc(o.NProc); err != nil {
		return err
	}
	switch {
	case o.Backend != "auto" && o.Backend != backend.CPU && o.Backend != backend.NVSHMEM:
		return badInput("unknown {backend} %q: use auto, nvshmem or cpu", o.Backend)
	case o.Timeout < 0:
		return badInput("{timeout} %s: must not be negative", o.Timeout)
	case o.HeapSize <= 0:
		return badInput("{heap-size} must be positive")
	case o.WaitLimit < MinWaitLimit:
		// Shorter, a peer that the scheduler leaves waiting a moment turns the setting
		// into a wrong-results verdict at random (1ns exited 0 or 3).
		return badInput("{wait-limit} %s is too short: a peer's signal may take that long on a busy machine and the data would be called undelivered; give %s or more (default %s)", o.WaitLimit, MinWaitLimit, backend.DefaultWaitLimit)
	case o.StallLimit < 0 || o.StallLimit > 0 && o.StallLimit < MinStallLimit:
		return badInput("{stall-limit} %s is too short: ranks beat every %s and a busy machine delays a beat now and then; give %s or more (default %s), or 0 to watch for none",
			o.StallLimit, beatPeriod, MinStallLimit, DefaultStallLimit)
	}
	return nil
}

// CheckNProc checks a number of ranks (Validate's check of NProc, which check-nvshmem
// makes of its own --nproc too).
func CheckNProc(n int) error {
	if n < 1 || n > MaxRanks {
		return badInput("{nproc} %d out of range: give 1..%d ranks", n, MaxRanks)
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
		return badInput("%s of {tokens} %d x {hidden} %d per rank needs a symmetric heap of %s per rank, more than {heap-size} %s: lower {tokens} or {hidden}, or raise {heap-size}",
			spec.Op, spec.MoE.Tokens, spec.MoE.Hidden, units.FormatSize(j.Heap), units.FormatSize(heapLimit))
	}
	if j.Heap > heapLimit {
		return badInput("%d x %s (%s per buffer) needs a symmetric heap of %s per rank, more than {heap-size} %s: lower {count} or raise {heap-size}",
			spec.Count, spec.DType, units.FormatSize(spec.Bytes), units.FormatSize(j.Heap), units.FormatSize(heapLimit))
	}
	return nil
}

// planBench checks a sweep against the job, fills its defaults from the registry and
// derives its layout and heap. Its checks run in the order their messages assume
// (each names what the ones before settled), hence one function past 80 lines.
func (j *Job) planBench(spec result.BenchSpec, heapLimit int64) error {
	if j.NProc < 2 {
		return badInput("bench needs at least 2 ranks: use {nproc} 2 or more")
	}
	if len(spec.Ops) == 0 {
		return badInput("{op} is empty: give one or more of %v", ops.All())
	}
	// An empty name (--impl , or put,,get) is no implementation's: LookupImpl would take
	// it for the default, and the sweep then measured nothing and passed.
	if slices.Contains(spec.Ops, "") {
		return badInput("{op} has an empty name (a stray comma?): give one or more of %s", ops.Names(ops.All()))
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
		return badInput("{impl} has an empty name (a stray comma?): give one or more of %s", strings.Join(serving, ", "))
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
			return badInput("unknown {op} %q: use %s", op, ops.Names(ops.All()))
		}
		if !slices.ContainsFunc(spec.Impls, func(name string) bool { im, _ := j.reg.Lookup(j.Backend, name); return im.Supports(op) }) {
			if len(j.reg.Serving(j.Backend, op)) == 0 {
				return badInput("{op} %s: the %s backend has no implementation of it yet (the CPU backend's memcpy has every collective: {backend} cpu); see docs/collectives.md", op, j.Backend)
			}
			return badInput("no implementation in {impl} %s serves {op} %s", strings.Join(spec.Impls, ","), op)
		}
	}
	gpuOnly := spec.Graph || spec.Tune || spec.Blocks != 0 || spec.Warps != 0
	if j.Backend == backend.CPU && gpuOnly {
		return badInput("{graph}, {tune}, {blocks} and {warps} shape GPU launches: they need the GPU backend (this run uses the CPU backend)")
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
	with, lower := "", "{max-size}"
	if spec.Overlap > 1 {
		with, lower = fmt.Sprintf(" with {overlap} %d (buffers per operation in flight)", spec.Overlap), "{max-size} or {overlap}"
	}
	if spec.Places > 1 {
		with += fmt.Sprintf(" and %d buffers per lane taken in turn", spec.Places)
	}
	scratch := userScratch(j.reg, spec, j.NProc)
	if spec.MoE != nil {
		if scratch != "" {
			scratch = "; " + scratch
		}
		sizes, lower := "", "{tokens} or {hidden}"
		if slices.ContainsFunc(spec.Ops, func(op string) bool { return !ops.Op(op).Takes(ops.MoESetting) }) {
			sizes = fmt.Sprintf("{max-size} %s%s, and ", units.FormatSize(spec.MaxSize), with)
			lower = "{tokens}, {hidden} or {max-size}"
			if spec.Overlap > 1 {
				lower = "{tokens}, {hidden}, {max-size} or {overlap}"
			}
		}
		return badInput("this sweep (%sa MoE layer of {tokens} %d x {hidden} %d per rank%s) needs a symmetric heap of %s per rank, more than {heap-size} %s: lower %s, or raise {heap-size}",
			sizes, spec.MoE.Tokens, spec.MoE.Hidden, scratch, units.FormatSize(j.Heap), units.FormatSize(heapLimit), lower)
	}
	if scratch != "" {
		with += " (" + scratch + ")"
	}
	return badInput("{max-size} %s%s needs a symmetric heap of %s per rank, more than {heap-size} %s: lower %s or raise {heap-size}",
		units.FormatSize(spec.MaxSize), with, units.FormatSize(j.Heap), units.FormatSize(heapLimit), lower)
}

// userScratch names the first collective of a user's implementation in spec that takes
// more scratch than its share, for the message of a heap too small ("" if none).
func userScratch(reg *backend.Registry, spec result.BenchSpec, n int) string {
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
				return fmt.Sprintf("the %s of {impl} %s, a user's, takes %s of scratch: 2 x %d ranks x %s", op, impl, units.FormatSize(s), n, what)
			}
		}
	}
	return ""
}
