package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch"
)

// Engine runs jobs with one set of options. New decides, once, where this process
// stands (a launcher of its own ranks, or one rank of an external launcher's job) and
// which backend the ranks use.
type Engine struct {
	opts     Options
	place    launch.RankInfo
	external bool
	nproc    int
	backend  string
	note     string
	// factory opens the ranks of backend; reg says which implementation serves which
	// op, --kernels DIR's among them.
	factory backend.Factory
	reg     *backend.Registry
	probe   time.Duration
	start   time.Time
	// Stdout and Stderr are Options'.
	Stdout, Stderr io.Writer
	// Progress, where set, is called while a bench runs with the measurements done so
	// far and the total.
	Progress func(done, total int)
	// Rows, where set, is called while a sweep runs with each row as it lands (added)
	// and the result so far.
	Rows func(res result.Result, added []result.Row)
	// Abandoned, where set, gets the rows so far when rank 0 of an external job must
	// end its process (--timeout, or an interruption its ranks cannot return from),
	// so that what was measured is written before it exits.
	Abandoned func(res result.Result)
}

// New checks the options, finds out who started this process and resolves the backend.
func New(o Options) (*Engine, error) {
	e := &Engine{opts: o, start: time.Now(), Stdout: o.Stdout, Stderr: o.Stderr}
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
	if e.Stderr == nil {
		e.Stderr = os.Stderr
	}
	info, external, err := launch.Discover(o.discover())
	if err != nil {
		return nil, badInput("%v", setting.Opening(err, o.Words, setting.Launcher, setting.StoreAddr, setting.StoreIface))
	}
	e.place, e.external, e.nproc = info, external, o.NProc
	if external {
		e.nproc = info.WorldSize // the launcher decided
		e.opts.NProc = info.WorldSize
	}
	if err := e.opts.Validate(); err != nil {
		return nil, err
	}
	// The ranks read the test fault too, but one that does not parse is the user's to
	// fix before any rank starts, not a failed rank.
	if _, err := ParseFault(os.Getenv(EnvFault)); err != nil {
		return nil, badInput("%v", err)
	}
	if e.reg, err = Registry(o.KernelsDir, o.Backends); err != nil {
		return nil, err
	}
	t := time.Now()
	local := -1 // symmem starts the ranks: one GPU each
	if external {
		local = info.LocalRank
	}
	if f := factoryOf(o.Backends, o.Backend); o.DryRun && f != nil {
		e.factory = f
		if o.Backend != backend.CPU {
			e.note = o.Words.Sprintf("not probed: %s", setting.DryRun)
		}
	} else {
		e.factory, e.note, err = resolveBackend(o.Backends, o.Backend, e.nproc, local, e.opts.NVSHMEMLib, o.Words)
	}
	e.probe = time.Since(t)
	if err != nil {
		return nil, err
	}
	e.backend = e.factory.Name()
	if e.external && e.backend == backend.CPU && info.LocalWorldSize != info.WorldSize {
		return nil, badInput("the cpu backend shares memory on one node; this %s job spans several: use %s nvshmem", info.Source, setting.Backend)
	}
	return e, nil
}

// discover is how o finds this process's place in its job; its errors name the
// settings by o's words (pkg/launch takes its caller's names for them).
func (o Options) discover() launch.DiscoverOptions {
	return launch.DiscoverOptions{Launcher: o.Launcher, StoreAddr: o.StoreAddr, StoreIface: o.StoreIface, StoreFlag: o.StoreFlag,
		Name: func(s string) string { n, _ := setting.Lookup(s); return o.Words.Word(n) }}
}

// Reports says, before any engine is made, whether this process would get a job's
// results: false on ranks other than 0 of an external launcher's job (they print
// nothing; rank 0 prints for all).
func Reports(o Options) bool {
	info, external, err := launch.Discover(o.discover())
	return err != nil || !external || info.Rank == 0
}

// HostRanks says, before any engine is made, how many ranks an external launcher put on
// this host and which launcher it was (n is 0 where none started this process), and
// what keeps its job from starting (err: a job over several hosts without a secret).
func HostRanks(o Options) (n int, launcher string, err error) {
	info, external, err := launch.Discover(o.discover())
	if !external && (err == nil || info.LocalWorldSize == 0) {
		return 0, "", err
	}
	return info.LocalWorldSize, info.Source, err
}

// Backend is the backend the ranks use, and why it was chosen when that was automatic.
func (e *Engine) Backend() (name, note string) { return e.backend, e.note }

// NProc is the number of ranks.
func (e *Engine) NProc() int { return e.nproc }

// Launcher names who starts the ranks: "symmem", or the external launcher.
func (e *Engine) Launcher() string {
	if e.external {
		return e.place.Source
	}
	return "symmem"
}

// Reports says whether this process gets the job's results (false on ranks other
// than 0 of an external launcher's job: they print nothing).
func (e *Engine) Reports() bool { return !e.external || e.place.Rank == 0 }

func (e *Engine) job() Job {
	return Job{factory: e.factory, reg: e.reg, Backend: e.backend, BackendNote: e.note, NProc: e.nproc, NVSHMEMLib: e.opts.NVSHMEMLib, NCCLLib: e.opts.NCCLLib, WaitLimit: e.opts.WaitLimit, StallLimit: e.opts.StallLimit,
		KernelsDir: e.opts.KernelsDir, Words: wordsOf(e.opts.Words)}
}

// PlanRun validates a run test for this engine without running it.
func (e *Engine) PlanRun(spec runtest.Spec) (Job, error) {
	j := e.job()
	if err := e.checkUserImpls([]string{spec.Launch.Impl}, []string{string(spec.Op)}); err != nil {
		return j, err
	}
	if err := e.checkNCCL([]string{spec.Launch.Impl}); err != nil {
		return j, err
	}
	if err := j.planRun(spec, int64(e.opts.HeapSize)); err != nil {
		return j, err
	}
	if err := checkUserSizes(e.reg, []string{j.Run.Launch.Impl}, []string{string(j.Run.Op)}, []int64{j.Run.Bytes}, j.NProc); err != nil {
		return j, err
	}
	if err := checkUserElems(e.reg, j.Run.Launch.Impl, j.Run.Op, j.Run.DType, j.Run.Count); err != nil {
		return j, err
	}
	// After planRun: the element type is the default one where --dtype was left out.
	red, err := ops.LookupRedOp(j.Run.RedOp)
	if err != nil {
		return j, badInput("%v", err)
	}
	return j, e.checkCollectives([]string{j.Run.Launch.Impl}, []ops.Op{j.Run.Op}, j.Run.DType, []ops.RedOp{red}, j.Run.Launch.Blocks, "", nil)
}

// PlanBench validates a sweep for this engine without running it.
func (e *Engine) PlanBench(spec result.BenchSpec) (Job, error) {
	j := e.job()
	if err := e.checkUserImpls(spec.Impls, spec.Ops); err != nil {
		return j, err
	}
	if err := e.checkNCCL(spec.Impls); err != nil {
		return j, err
	}
	if err := j.planBench(spec, int64(e.opts.HeapSize)); err != nil {
		return j, err
	}
	// Left out, --impl became every implementation of the backend that serves the ops,
	// a user's from --kernels among them: those too must load here before any rank
	// starts (the ones named were checked above).
	var added []string
	for _, name := range j.Bench.Impls {
		if !slices.Contains(spec.Impls, name) {
			added = append(added, name)
		}
	}
	j.Bench.Impls, added = e.dropNCCL(j.Bench.Impls, added)
	var err error
	if j.Bench.Impls, added, err = e.checkToAll(j.Bench.Impls, added, j.Bench.Ops, j.NProc); err != nil {
		return j, err
	}
	if err := e.checkUserImpls(added, j.Bench.Ops); err != nil {
		return j, err
	}
	if err := bench.CheckBlocks(e.reg, *j.Bench, j.NProc, added); err != nil {
		return j, badInput("%v", err)
	}
	if e.Reports() {
		for _, note := range bench.LeftOut(e.reg, *j.Bench, j.NProc) {
			e.opts.Words.Fprintf(e.Stderr, "symmem: note: %s\n", note)
		}
	}
	if err := checkVariants(e.reg, *j.Bench, added); err != nil {
		return j, err
	}
	if err := checkUserSizes(e.reg, j.Bench.Impls, j.Bench.Ops, j.Bench.Sizes(), j.NProc); err != nil {
		return j, err
	}
	reds, err := bench.RedOps(*j.Bench)
	if err != nil {
		return j, badInput("%s: %v", setting.RedOp, err)
	}
	return j, e.checkCollectives(j.Bench.Impls, opsOf(j.Bench.Ops), j.Bench.DType, reds, j.Bench.Blocks, j.Bench.Algo, added)
}

// checkVariants refuses a sweep in which a named implementation runs none of the
// variants of an op that --algo asks for (a user's put-flag with a fence kernel alone,
// asked for quiet), naming those it runs; one bench took itself measures none.
func checkVariants(reg *backend.Registry, s result.BenchSpec, added []string) error {
	for _, name := range s.Ops {
		op := ops.Op(name)
		if len(op.Variants(s.Algo)) == 0 {
			continue
		}
		for _, impl := range s.Impls {
			im, ok := reg.ByName(impl)
			if !ok || !im.Supports(op) || slices.Contains(added, impl) || len(im.VariantsOf(op, s.Algo)) > 0 {
				continue
			}
			have := im.VariantsOf(op, "")
			return badInput("%s %s runs %s %s only, not %s: give %s %s, or leave %s out", setting.Impl, impl, op, strings.Join(have, ", "), s.Algo, setting.Algo, strings.Join(have, " or "), setting.Algo)
		}
	}
	return nil
}

// checkCollectives says, before any rank starts, when an implementation cannot run a
// collective of the sweep as asked (NCCL or a user's kernels with an --algo; a user's
// without a kernel for the element type, or with more blocks than the signal words
// hold): its ranks would each fail at the first operation. added are the implementations bench took because --impl was left
// out, which the message names as such.
func (e *Engine) checkCollectives(impls []string, os []ops.Op, dtype string, reds []ops.RedOp, blocks int, algo string, added []string) error {
	if err := e.checkRedOps(impls, os, reds, added); err != nil {
		return err
	}
	p, ok := e.factory.(backend.Planner)
	if !ok {
		return nil
	}
	for _, impl := range impls {
		for _, op := range os {
			im, ok := e.reg.ByName(impl)
			// The planner says which of an implementation's operations it checks
			// (a user's collectives).
			if !ok || !im.Supports(op) {
				continue
			}
			// Each operator it serves (those it lacks, bench took it for and skips).
			asked := []ops.RedOp{{}}
			if op.Takes(ops.RedOpSetting) && len(reds) > 0 {
				asked = reds
			}
			var err error
			for _, red := range asked {
				if err == nil && im.ServesRedOp(red) {
					err = p.CheckCollective(e.reg, impl, backend.Collective{Op: op, DType: dtype, RedOp: red, Algo: algo}, blocks)
				}
			}
			if err != nil && slices.Contains(added, impl) {
				return badInput("%v (bench took %s %s because %s was left out: name the implementations to run with %s)", err, setting.Impl, impl, setting.Impl, setting.Impl)
			}
			if err != nil {
				return badInput("%v", err)
			}
			if ks := p.Unbounded(e.reg, impl, op); len(ks) > 0 && e.Reports() {
				what := "its kernel " + ks[0] + " takes"
				if len(ks) > 1 {
					what = "its kernels " + strings.Join(ks, ", ") + " take"
				}
				e.opts.Words.Fprintf(e.Stderr, "symmem: note: %s %s: %s no limit_ns and mailbox: it cannot give up on a peer that never comes; the host does at a measurement's first operation, elsewhere %s %s ends the job (docs/kernels.md)\n",
					setting.Impl, impl, what, setting.Timeout, e.opts.Timeout)
			}
		}
	}
	return nil
}

// checkRedOps refuses, before any rank starts, a reduction operator that a named
// implementation cannot serve, saying which can (those bench took because --impl was
// left out skip the operators they lack, which its table shows as missing rows).
func (e *Engine) checkRedOps(impls []string, os []ops.Op, reds []ops.RedOp, added []string) error {
	for _, op := range os {
		if !op.Takes(ops.RedOpSetting) {
			continue
		}
		for _, impl := range impls {
			im, ok := e.reg.ByName(impl)
			if !ok || !im.Supports(op) || slices.Contains(added, impl) {
				continue
			}
			for _, red := range reds {
				if im.ServesRedOp(red) {
					continue
				}
				var can []string
				for _, other := range e.reg.All() {
					if other.Supports(op) && other.ServesRedOp(red) && other.Backend == im.Backend {
						can = append(can, other.Name)
					}
				}
				return badInput("%s %s reduces with %s only, not %s: %s %s for %s takes %s %s",
					setting.Impl, impl, strings.Join(im.RedOpNames(), ", "), red, setting.RedOp, red, op, setting.Impl, strings.Join(can, ", "))
			}
		}
	}
	return nil
}

// Registry is the implementations of backends (those the binary runs) with those of
// a user's directory of kernels (--kernels DIR; "" adds none): the launcher and every
// rank build it before they look an implementation up. What is wrong with the
// directory is the user's to fix.
func Registry(dir string, backends []backend.Factory) (*backend.Registry, error) {
	reg := backend.Builtin(backends...)
	if dir == "" {
		return reg, nil
	}
	c, err := kernels.LoadDir(dir)
	if err == nil {
		reg, _, err = reg.WithUser(c)
	}
	if err != nil {
		return nil, badInput("%v", err)
	}
	return reg, nil
}

// checkNCCL refuses the NCCL window implementations named in names (nccl-symm,
// nccl-device) that the NCCL here cannot serve, before any rank starts.
func (e *Engine) checkNCCL(names []string) error {
	p, ok := e.factory.(backend.Planner)
	if !ok || e.opts.DryRun {
		return nil
	}
	if err := p.CheckLibraries(names, e.opts.NCCLLib); err != nil {
		return badInput("%v", err)
	}
	return nil
}

// dropNCCL leaves out of a sweep's defaulted implementations (added) the NCCL window
// ones the NCCL here cannot serve: a bench that names none should not fail for an NCCL
// it did not ask for.
func (e *Engine) dropNCCL(impls, added []string) ([]string, []string) {
	p, ok := e.factory.(backend.Planner)
	if !ok {
		return impls, added
	}
	for _, name := range slices.Clone(added) {
		err := p.CheckLibraries([]string{name}, e.opts.NCCLLib)
		if err == nil {
			continue
		}
		impls = slices.DeleteFunc(impls, func(n string) bool { return n == name })
		added = slices.DeleteFunc(added, func(n string) bool { return n == name })
		if e.Reports() {
			e.opts.Words.Fprintf(e.Stderr, "symmem: note: leaving out %s %s: %v\n", setting.Impl, name, err)
		}
	}
	return impls, added
}

// checkToAll refuses, before any rank starts, a sweep of more than 2 ranks that names
// an implementation whose put reaches every other rank from one launch (a user's kernel
// that computes its peers: backend.Impl.ReachesAll): bench measures puts between pairs
// of ranks. One bench took itself (added) is left out, saying so. On 2 ranks the one
// peer is every peer, and it is measured as any put.
func (e *Engine) checkToAll(impls, added, opNames []string, n int) ([]string, []string, error) {
	if n <= 2 {
		return impls, added, nil
	}
	for _, name := range slices.Clone(impls) {
		im, ok := e.reg.ByName(name)
		i := slices.IndexFunc(opNames, func(o string) bool { return im.ReachesAll(ops.Op(o)) })
		if !ok || i < 0 {
			continue
		}
		why := setting.Textf("its %s reaches every other rank from one launch, and bench measures %s between pairs of ranks: bench it on 2 ranks (its one peer is every peer), or check it on %d with symmem run %s %s %s",
			opNames[i], opNames[i], n, opNames[i], setting.Pattern, ops.OneToAll)
		if !slices.Contains(added, name) {
			return nil, nil, badInput("%s %s: %s", setting.Impl, name, why)
		}
		impls = slices.DeleteFunc(impls, func(x string) bool { return x == name })
		added = slices.DeleteFunc(added, func(x string) bool { return x == name })
		if e.Reports() {
			e.opts.Words.Fprintf(e.Stderr, "symmem: note: leaving out %s %s: %s\n", setting.Impl, name, why)
		}
	}
	return impls, added, nil
}

// checkUserSizes refuses, before any rank starts, a size or a job of n ranks that a
// user's kernel was not built for: one that takes the size or the job's size as a
// tl.constexpr moves nothing at any other.
func checkUserSizes(reg *backend.Registry, impls, opNames []string, sizes []int64, n int) error {
	for _, name := range impls {
		im, ok := reg.ByName(name)
		if !ok || !im.User || im.Catalog == nil {
			continue
		}
		for _, o := range opNames {
			if err := im.Catalog.CheckSizes(name, im.Kernels[ops.Op(o)], sizes); err != nil {
				return badInput("%v", err)
			}
			if err := im.Catalog.CheckRanks(name, im.Kernels[ops.Op(o)], n); err != nil {
				return badInput("%v", err)
			}
		}
	}
	return nil
}

// checkUserElems refuses, before any rank starts, more elements than a user's kernel
// of the run's element type serves in one call: one written for a block of a
// tl.constexpr size (PyTorch's fused get-add) leaves the rest unwritten.
func checkUserElems(reg *backend.Registry, impl string, op ops.Op, dtype string, count int64) error {
	im, ok := reg.ByName(impl)
	if !ok || !im.User || im.Catalog == nil {
		return nil
	}
	if err := im.Catalog.CheckElems(impl, im.Kernels[op], dtype, count); err != nil {
		return badInput("%v", err)
	}
	return nil
}

// checkUserImpls runs before a job is planned. An --impl no implementation has is
// most likely a user's, named without --kernels; a user's implementation on a backend
// that checks kernels (backend.Planner: the GPU one) must load on the GPUs here and be
// served by the NVSHMEM host library, which is checked before any rank starts.
func (e *Engine) checkUserImpls(names, os []string) error {
	var user []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if _, ok := e.reg.ByName(n); !ok && e.opts.KernelsDir == "" {
			// The backend's implementations that serve one of the ops (all of them
			// where none does).
			var serving []string
			for _, im := range e.reg.Of(e.backend) {
				if slices.ContainsFunc(os, func(o string) bool { return im.Supports(ops.Op(o)) }) {
					serving = append(serving, im.Name)
				}
			}
			if len(serving) == 0 {
				serving = e.reg.Names(e.backend)
			}
			return badInput("unknown %s %q: use %s; a user's implementation needs %s DIR (the %s directory of symmem kernels build)",
				setting.Impl, n, strings.Join(serving, ", "), setting.Kernels, setting.Out)
		}
		if e.reg.IsUser(n) {
			user = append(user, n)
		}
	}
	p, ok := e.factory.(backend.Planner)
	if !ok || len(user) == 0 || e.opts.DryRun {
		return nil
	}
	if err := p.CheckUserKernels(e.reg, user, e.nproc, e.opts.NVSHMEMLib); err != nil {
		return badInput("%v", err)
	}
	return nil
}

// Outcome is what a job produced, merged across ranks.
type Outcome struct {
	Run   *result.RunReport
	Bench *result.Result
}

// Launch runs a planned job on every rank: it starts them itself, or, under an
// external launcher, runs this process's rank. It returns the merged outcome on the
// reporting process and nil elsewhere. A sweep that ended early returns, with the
// error, the rows it measured (the result marked incomplete).
func (e *Engine) Launch(ctx context.Context, j Job) (*Outcome, error) {
	var raw [][]byte
	var finalize []float64
	var partial *result.Result
	var err error
	if e.external {
		raw, partial, err = e.runExternalRank(ctx, j)
	} else {
		raw, finalize, partial, err = e.spawn(ctx, j)
	}
	if err != nil && partial != nil {
		return &Outcome{Bench: partial}, err
	}
	if err != nil || raw == nil {
		return nil, err
	}
	return e.merge(j, raw, finalize)
}

// cannotRun says why --backend nvshmem cannot run here, with what to install where
// something is missing (not where the machine has too few GPUs for the ranks).
func cannotRun(name string, err error) error {
	var few backend.FewDevices
	if errors.As(err, &few) && few.FewDevices() {
		return setting.Errorf("%s %s cannot run here: %w", setting.Backend, name, err)
	}
	return setting.Errorf("%s %s cannot run here: %w; install the NVIDIA driver and NVSHMEM (symmem check-nvshmem says what is missing), or use %s cpu", setting.Backend, name, err, setting.Backend)
}

// factoryOf is the factory of the backend name among fs (nil: none).
func factoryOf(fs []backend.Factory, name string) backend.Factory {
	for _, f := range fs {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// resolveBackend turns --backend into the factory of the backend the job runs on, and
// a note that says why when the choice was automatic ("auto": the GPU backend where
// it probes, else the CPU one). local is this rank's local rank under an external
// launcher (its GPU must be there; a job over several nodes was once refused here for
// counting every node's ranks against this node's GPUs), -1 when symmem starts nproc
// ranks itself; words name the settings in the note.
func resolveBackend(fs []backend.Factory, want string, nproc, local int, lib string, words setting.Words) (f backend.Factory, note string, err error) {
	if want != "auto" {
		if f = factoryOf(fs, want); f == nil {
			return nil, "", fmt.Errorf("backend %q is not built into this binary", want)
		}
		if err := f.Probe(nproc, local, lib); err != nil {
			return nil, "", exitcode.With(exitcode.NoGPUBackend, cannotRun(want, err))
		}
		return f, "", nil
	}
	cpuF := factoryOf(fs, backend.CPU)
	gpuF := factoryOf(fs, backend.NVSHMEM)
	if gpuF == nil {
		if cpuF == nil {
			return nil, "", errors.New("this binary is built with no backend")
		}
		return cpuF, "no GPU backend in this binary", nil
	}
	if err := gpuF.Probe(nproc, local, lib); err != nil {
		if cpuF == nil {
			return nil, "", exitcode.With(exitcode.NoGPUBackend, cannotRun(backend.NVSHMEM, err))
		}
		return cpuF, "no GPU backend here: " + words.Error(err).Error(), nil
	}
	return gpuF, "", nil
}

// opsOf is the operations a spec names.
func opsOf(names []string) []ops.Op {
	out := make([]ops.Op, len(names))
	for i, n := range names {
		out[i] = ops.Op(n)
	}
	return out
}
