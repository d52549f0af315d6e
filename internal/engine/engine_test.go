package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/bench"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels/kernelstest"
	"github.com/symmem/symmem/pkg/launch"
)

// noGPU is the GPU backend's factory on a machine without GPUs to load a user's
// kernels on: everything but that load is checked.
type noGPU struct{ gpu.Factory }

func (noGPU) CheckUserKernels(*backend.Registry, []string, int, string) error { return nil }

// A machine with too few GPUs for the ranks lacks nothing to install: the refusal says
// what to do and no more; one that lacks the driver or NVSHMEM is told to install them.
func TestCannotRunSaysWhatToDo(t *testing.T) {
	_, few := gpu.GPUIndex(3, 2)
	if few == nil {
		t.Fatal("GPUIndex(3, 2) took local rank 3 on 2 GPUs")
	}
	if msg := cannotRun(backend.NVSHMEM, few).Error(); strings.Contains(msg, "install") || !strings.Contains(msg, "start at most 2 ranks per node") {
		t.Errorf("too few GPUs: %q", msg)
	}
	if msg := cannotRun(backend.NVSHMEM, errors.New("NVSHMEM host library libnvshmem_host.so.3 not found")).Error(); !strings.Contains(msg, "install the NVIDIA driver and NVSHMEM") {
		t.Errorf("NVSHMEM missing: %q", msg)
	}
}

// A sweep's header says where each user's implementation came from, from its
// sidecars: the directory, the sources' sha256 and the Triton that built them;
// symmem's own implementations are not named.
// The launcher's errors name the settings that change what they speak of by value,
// for the presenter to word; a name the caller already gave stays.
func TestNameSettings(t *testing.T) {
	te := &launch.TimeoutError{After: time.Second, Running: []int{1}}
	le := &launch.ListenError{Addr: "127.0.0.1:80", Err: syscall.EADDRINUSE, FreeDefault: true}
	named := &launch.TimeoutError{After: time.Second, Setting: "the job's limit"}
	for _, c := range []struct {
		err  error
		want string
	}{{te, "raise --timeout"}, {le, "--store-addr"}, {named, "raise the job's limit"}} {
		if got := setting.Flags.Error(fmt.Errorf("job: %w", nameSettings(c.err))).Error(); !strings.Contains(got, c.want) {
			t.Errorf("%q does not say %q", got, c.want)
		}
	}
}

func TestUserSources(t *testing.T) {
	dir := "../../pkg/kernels/testdata/userar"
	reg, err := Registry(dir, backends.All())
	if err != nil {
		t.Fatal(err)
	}
	got := userSources(reg, []string{"triton", "one-shot-all-reduce", "nccl"})
	want := map[string]result.KernelSource{"one-shot-all-reduce": {Dir: dir, Source: "10869abba4dc534fa48b0f51f5dd5bc58a800d3cdfebd974e6055e934696d93a", Triton: "3.6.0"}}
	if !maps.Equal(got, want) {
		t.Errorf("userSources = %v, want %v", got, want)
	}
	if got := userSources(reg, []string{"triton"}); got != nil {
		t.Errorf("without a user's implementation: %v", got)
	}
}

// A run or sweep of a user's collective is checked after the defaults are filled in:
// a run without --dtype takes the default type and passes where the kernel has it (it
// was refused, "sums bf16 or float32, not "); what the kernel cannot do is refused
// before any rank starts: a type without its kernel, --blocks past the signal words,
// --algo, each naming what to do, and an implementation bench took because --impl was
// left out says so.
func TestPlanUserCollectives(t *testing.T) {
	dir := "../../pkg/kernels/testdata/userar"
	reg, err := Registry(dir, backends.All())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: dir, HeapSize: 64 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	j, err := e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 20, Launch: backend.Launch{Impl: "one-shot-all-reduce"}})
	if err != nil || j.Run.DType != runtest.DefaultSumDType {
		t.Errorf("run all-reduce without dtype: %v (dtype %q)", err, j.Run.DType)
	}
	_, err = e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 20, DType: "float16", Launch: backend.Launch{Impl: "one-shot-all-reduce"}})
	if err == nil || !strings.Contains(err.Error(), "a user's all-reduce sums bf16 or float32, not float16: use {dtype} bf16 or float32") {
		t.Errorf("float16: %v", err)
	}
	_, err = e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 20, Launch: backend.Launch{Impl: "one-shot-all-reduce", Blocks: 200}})
	if err == nil || !strings.Contains(err.Error(), "{blocks} 200: a user's collective kernel ({impl} one-shot-all-reduce) runs at most 128 blocks") {
		t.Errorf("blocks 200: %v", err)
	}
	spec := BenchDefaults
	spec.Ops, spec.DType, spec.MaxSize = []string{ops.AllReduce}, "bf16", 1<<20
	spec.Impls, spec.Algo = []string{"one-shot-all-reduce"}, "one-shot"
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "{algo} one-shot: a user's kernel runs its own algorithm; leave {algo} out for {impl} one-shot-all-reduce") {
		t.Errorf("algo: %v", err)
	}
	spec.Algo, spec.Blocks = "", 129
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "{blocks} 129") {
		t.Errorf("bench blocks 129: %v", err)
	}
	spec.Blocks, spec.Impls = 0, nil
	if _, err := e.PlanBench(spec); err != nil {
		t.Errorf("bench with impl left out: %v", err)
	}
	spec.Blocks = 200
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "(bench took {impl} one-shot-all-reduce because {impl} was left out: name the implementations to run with {impl})") {
		t.Errorf("bench blocks 200 with impl left out: %v", err)
	}
	// A heap too small for the user's scratch says that is why.
	spec.Blocks, spec.MaxSize, e.nproc = 0, 256<<20, 8
	e.opts.HeapSize = 4 << 30
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "{max-size} 256M (the all-reduce of {impl} one-shot-all-reduce, a user's, takes 4G of scratch: 2 x 8 ranks x each rank's share) needs a symmetric heap of") {
		t.Errorf("8 ranks, 256M: %v", err)
	}
}

// A user's reducing kernel combines with one operator, which its kernel's name in the
// table says (all_reduce_f32_max: --redop max of float32): run and bench take the
// operators its kernels have, and refuse the others before any rank starts, naming
// the ones it has; a type that has kernels, but not of the operator, is named too.
func TestPlanUserRedOps(t *testing.T) {
	dir := t.TempDir()
	src := "../../pkg/kernels/testdata/userar"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ents {
		b, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// Its float32 kernel relabelled as the one that takes the maximum.
		if strings.Contains(f.Name(), "all_reduce_f32") && strings.HasSuffix(f.Name(), ".json") {
			b = []byte(strings.Replace(string(b), `"kernel": "all_reduce_f32"`, `"kernel": "all_reduce_f32_max"`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := Registry(dir, backends.All())
	if err != nil {
		t.Fatal(err)
	}
	im, _ := reg.ByName("one-shot-all-reduce")
	if strings.Join(im.RedOps, ",") != "sum,max" || !slices.Contains(im.Kernels[ops.AllReduce], "all_reduce_f32_max") {
		t.Fatalf("registered %v with kernels %v", im.RedOps, im.Kernels)
	}
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: dir, HeapSize: 64 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	run := func(dtype, red string) error {
		_, err := e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1 << 20, DType: dtype, RedOp: red, Launch: backend.Launch{Impl: "one-shot-all-reduce"}})
		return err
	}
	for _, tc := range []struct{ dtype, red, want string }{
		{"float32", "max", ""},
		{"bf16", "sum", ""},
		{"bf16", "min", "{impl} one-shot-all-reduce reduces with sum, max only, not min: {redop} min for all-reduce takes {impl} "},
		{"bf16", "max", `all-reduce {impl} one-shot-all-reduce: no max kernel for bf16 (its bf16 kernels combine with sum): build one under SYMMEM_KERNELS key "all-reduce:max", or use {dtype} float32`},
		{"float32", "sum", `all-reduce {impl} one-shot-all-reduce: no sum kernel for float32 (its float32 kernels combine with max): build one under SYMMEM_KERNELS key "all-reduce:float32", or use {dtype} bf16`},
	} {
		err := run(tc.dtype, tc.red)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.dtype, tc.red, err, tc.want)
		}
	}
	spec := BenchDefaults
	spec.Ops, spec.DType, spec.MaxSize, spec.Impls, spec.RedOps = []string{ops.AllReduce}, "float32", 1<<20, []string{"one-shot-all-reduce"}, []string{"max"}
	if _, err := e.PlanBench(spec); err != nil {
		t.Errorf("bench --redop max of float32: %v", err)
	}
	spec.RedOps = []string{"all"}
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "reduces with sum, max only, not prod") {
		t.Errorf("bench --redop all: %v", err)
	}
}

// A user's put-flag serves the variants it has a kernel of: a sweep that names it with
// an --algo it has not is refused before any rank starts, naming those it has; one
// that took it itself (no --impl) runs the others without it.
func TestPlanUserVariants(t *testing.T) {
	dir := kernelstest.Dir(t, "mine", "put_flag_fence")
	reg, err := Registry(dir, backends.All())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: dir, HeapSize: 1 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	spec := BenchDefaults
	spec.Ops, spec.MaxSize, spec.Impls, spec.Algo = []string{ops.PutFlag}, 1<<20, []string{"mine"}, ops.Quiet
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "{impl} mine runs put-flag fence only, not quiet: give {algo} fence, or leave {algo} out") {
		t.Errorf("--algo quiet: %v", err)
	}
	for _, algo := range []string{ops.Fence, ""} {
		spec.Algo = algo
		if _, err := e.PlanBench(spec); err != nil {
			t.Errorf("--algo %q: %v", algo, err)
		}
	}
	spec.Algo, spec.Impls = ops.Quiet, nil
	j, err := e.PlanBench(spec)
	if err != nil {
		t.Fatalf("--algo quiet, impl left out: %v", err)
	}
	if n := bench.Count(reg, *j.Bench, 2, false); n == 0 {
		t.Error("nothing to measure")
	}
}

// A sweep of a user's dispatch and combine plans the scratch the kernels are promised
// (2 x n x the token buffer), not more: at the default layer on 8 ranks it fits a 4 GiB
// heap (it was planned from the largest buffer and refused); a heap too small for it
// says the user's scratch is why.
func TestPlanUserMoE(t *testing.T) {
	dir := "../../pkg/kernels/testdata/usermoe"
	reg, err := Registry(dir, backends.All())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: dir, HeapSize: 4 << 30}, backend: backend.NVSHMEM, nproc: 8, Stderr: io.Discard}
	spec := BenchDefaults
	spec.Ops, spec.DType, spec.Impls = []string{ops.Dispatch, ops.Combine}, "bf16", []string{"moe-all-to-all", "triton"}
	j, err := e.PlanBench(spec)
	if err != nil {
		t.Fatalf("8 ranks, the default layer: %v", err)
	}
	if j.Heap > 2<<30 {
		t.Errorf("8 ranks, the default layer: a heap of %d bytes", j.Heap)
	}
	e.opts.HeapSize = 1 << 30
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "this sweep (a MoE layer of {tokens} 4096 x {hidden} 7168 per rank; the dispatch of {impl} moe-all-to-all, a user's, takes 896M of scratch: 2 x 8 ranks x its tokens) needs a symmetric heap of") {
		t.Errorf("8 ranks, a 1G heap: %v", err)
	}
}

// A user's collective kernel that takes no wait limit and mailbox gets a note before
// the job starts: the host bounds its wait for a peer that never comes only at a
// measurement's first operation, --timeout elsewhere.
// The example, which takes them, gets none.
func TestNoteOnAnUnboundedUserCollective(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob("../../pkg/kernels/testdata/userar/*")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["impl"] = "unbounded-ar"
			var params []any
			for _, p := range m["params"].([]any) {
				if n := p.(map[string]any)["name"]; n != "limit_ns" && n != "mailbox" {
					params = append(params, p)
				}
			}
			m["params"] = params
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ dir, impl, note string }{
		{dir, "unbounded-ar", "symmem: note: impl unbounded-ar: its kernels all_reduce_bf16, all_reduce_f32 take no limit_ns and mailbox: it cannot give up on a peer that never comes; the host does at a measurement's first operation, elsewhere timeout 1m0s ends the job (docs/kernels.md)\n"},
		{"../../pkg/kernels/testdata/userar", "one-shot-all-reduce", ""},
	} {
		reg, err := Registry(tc.dir, backends.All())
		if err != nil {
			t.Fatal(err)
		}
		var errb strings.Builder
		e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: tc.dir, HeapSize: 1 << 30, Timeout: time.Minute}, backend: backend.NVSHMEM, nproc: 2, Stderr: &errb}
		if _, err := e.PlanRun(runtest.Spec{Op: ops.AllReduce, Count: 1024, Launch: backend.Launch{Impl: tc.impl}}); err != nil {
			t.Fatal(err)
		}
		if errb.String() != tc.note {
			t.Errorf("%s: stderr %q, want %q", tc.impl, errb.String(), tc.note)
		}
	}
}

// NCCL picks its own algorithms: a sweep with --algo and NCCL among its
// implementations is refused before any rank starts (its ranks failed at NCCL's first
// operation), named or taken because --impl was left out; an --algo for an op NCCL
// does not run with it passes.
func TestPlanRefusesAlgoForNCCL(t *testing.T) {
	e := &Engine{factory: gpu.Factory{}, reg: own, opts: Options{HeapSize: 4 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	spec := BenchDefaults
	spec.Ops, spec.MaxSize, spec.Algo = []string{ops.AllReduce}, 1<<20, ops.OneShot
	for _, tc := range []struct {
		impls []string
		want  string
	}{
		{[]string{"triton", "nccl"}, "{algo} one-shot: NCCL picks its own algorithms (NCCL_ALGO sets them); leave {algo} out for {impl} nccl"},
		{nil, "leave {algo} out for {impl} nvshmem (bench took {impl} nvshmem because {impl} was left out"},
		{[]string{"triton"}, ""},
	} {
		spec.Impls = tc.impls
		_, err := e.PlanBench(spec)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("impl %v: %v, want %q", tc.impls, err, tc.want)
		}
	}
	spec.Ops, spec.Impls, spec.Algo = []string{ops.AllGather, ops.Combine}, []string{"nccl", "triton"}, ops.Pull
	if _, err := e.PlanBench(spec); err != nil {
		t.Errorf("algo pull, all-gather by nccl, combine by triton: %v", err)
	}
}

// triton's reduce-scatter moves 16-byte vectors: a run whose block is not whole
// vectors is refused before any rank starts (each rank failed at its launch, exit 1),
// naming a --count that works; a sweep leaves those sizes out of triton's rows (the
// default sweep, from 4 bytes, failed at reduce-scatter's first size), and its plan
// counts the rows it will write.
func TestTritonReduceScatterBlocks(t *testing.T) {
	e := &Engine{factory: gpu.Factory{}, reg: own, opts: Options{HeapSize: 4 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	_, err := e.PlanRun(runtest.Spec{Op: ops.ReduceScatter, Count: 4099, DType: "bf16", Launch: backend.Launch{Impl: "triton"}})
	var ce *exitcode.Err
	if !errors.As(err, &ce) || ce.Code != exitcode.Usage || !strings.Contains(err.Error(), "reduce-scatter {impl} triton moves 16-byte vectors: each rank's block (4099 x bf16, 8198 bytes) must be a multiple of 16 bytes; give a {count} that makes it one (4104), or {impl} nccl") {
		t.Errorf("4099 bf16: %v", err)
	}
	for _, spec := range []runtest.Spec{
		{Op: ops.ReduceScatter, Count: 4104, DType: "bf16", Launch: backend.Launch{Impl: "triton"}},
		{Op: ops.ReduceScatter, Count: 4099, DType: "bf16", Launch: backend.Launch{Impl: "nccl"}},
		{Op: ops.AllReduce, Count: 4099, DType: "bf16", Launch: backend.Launch{Impl: "triton"}},
	} {
		if _, err := e.PlanRun(spec); err != nil {
			t.Errorf("%s %d x %s impl %s: %v", spec.Op, spec.Count, spec.DType, spec.Launch.Impl, err)
		}
	}
	spec := BenchDefaults
	spec.Ops, spec.Impls, spec.DType, spec.MinSize, spec.MaxSize = []string{ops.ReduceScatter}, []string{"triton", "nccl"}, "bf16", 4, 64
	j, err := e.PlanBench(spec)
	if err != nil {
		t.Fatal(err)
	}
	// 2 ranks, bf16: nccl from 4 bytes (an element each), triton from 32 (16 each).
	if got := j.RowsOf(ops.ReduceScatter); got != 5+2 {
		t.Errorf("rows: %d, want 5 (nccl: 4 to 64) + 2 (triton: 32, 64)", got)
	}
	// On 3 ranks no power-of-two size splits into whole vectors: refused, not a sweep
	// with no triton rows.
	e.nproc = 3
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "reduce-scatter {impl} triton moves 16-byte vectors, and no size of this sweep gives each of 3 ranks whole ones: give {min-size} a multiple of 48") {
		t.Errorf("3 ranks: %v", err)
	}
	spec.MinSize = 48
	if _, err := e.PlanBench(spec); err != nil {
		t.Errorf("3 ranks from 48 bytes: %v", err)
	}
}

// NVSHMEM's reduce-scatter pushes every rank's input into half of its reduce scratch
// (NVSHMEM_REDUCE_SCRATCH_SIZE, 512 KiB by default); past it the kernel stops with a
// device-side assert. A run past it is refused before any rank starts, saying how to
// raise it; a sweep leaves the larger sizes out of nvshmem's rows and says so, and one
// with no size left is refused.
func TestPlanNVSHMEMReduceScatterScratch(t *testing.T) {
	reg, err := Registry("", backends.All())
	if err != nil {
		t.Fatal(err)
	}
	var note strings.Builder
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{HeapSize: 64 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: &note}
	rs := func(count int64) error {
		_, err := e.PlanRun(runtest.Spec{Op: ops.ReduceScatter, Count: count, DType: "float32", Launch: backend.Launch{Impl: "nvshmem"}})
		return err
	}
	if err := rs(32 << 10); err != nil { // 128 KiB a rank: 2 x 128 KiB fills half of 512 KiB
		t.Errorf("32K float32 on 2 ranks: %v", err)
	}
	if err := rs(32<<10 + 1); err == nil || !strings.Contains(err.Error(), "reduce-scatter {impl} nvshmem on 2 ranks moves blocks of at most 128K (NVSHMEM's reduce-scatter pushes every rank's input into half of NVSHMEM_REDUCE_SCRATCH_SIZE, 512K: raise it for more)") ||
		!strings.Contains(err.Error(), "lower {count} to 32768 or less") {
		t.Errorf("32K+1 float32 on 2 ranks: %v", err)
	}
	t.Setenv("NVSHMEM_REDUCE_SCRATCH_SIZE", "64M")
	if err := rs(4 << 20); err != nil {
		t.Errorf("16 MiB a rank with a 64M scratch: %v", err)
	}
	t.Setenv("NVSHMEM_REDUCE_SCRATCH_SIZE", "")
	spec := BenchDefaults
	spec.Ops, spec.DType, spec.Impls = []string{ops.ReduceScatter}, "float32", []string{"nvshmem"}
	spec.MinSize, spec.MaxSize, spec.Factor = 8<<10, 16<<20, 16
	if _, err := e.PlanBench(spec); err != nil {
		t.Errorf("bench 8K..16M: %v", err)
	}
	if !strings.Contains(note.String(), "nvshmem on 2 ranks moves blocks of at most 128K") || !strings.Contains(note.String(), "sizes above 256K are left out of its rows") {
		t.Errorf("bench 8K..16M said %q", note.String())
	}
	spec.MinSize = 1 << 20
	if _, err := e.PlanBench(spec); err == nil || !strings.Contains(err.Error(), "every size of this sweep gives each rank more: give {min-size} 256K or less") {
		t.Errorf("bench 1M..16M: %v", err)
	}
}
