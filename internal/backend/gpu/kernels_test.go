package gpu

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

func TestShapeFor(t *testing.T) {
	for _, tc := range []struct {
		n      int64
		l      backend.Launch
		blocks int
		warps  int
		chunk  int64
	}{
		{0, backend.Launch{}, 1, 4, 16},
		{1, backend.Launch{}, 1, 4, 16},
		{64 << 10, backend.Launch{}, 1, 4, 64 << 10},
		{64<<10 + 1, backend.Launch{}, 1, 32, 64<<10 + 16},
		{128<<10 + 1, backend.Launch{}, 2, 32, 64<<10 + 16},
		{1 << 30, backend.Launch{}, 128, 32, 8 << 20},
		{10, backend.Launch{Blocks: 3}, 1, 4, 16},                      // idle blocks dropped
		{100, backend.Launch{Blocks: 7, Warps: 8}, 7, 8, 16},           // 7 chunks of 16 cover 100
		{1000, backend.Launch{Blocks: 4, Warps: 2}, 4, 2, 256},         // chunks are 16-byte multiples
		{1 << 20, backend.Launch{Blocks: 1000}, 993, 32, 1056},         // past 128 when asked, less the idle
		{3<<20 + 5, backend.Launch{Blocks: 4, Warps: 8}, 4, 8, 786448}, // the GPU test's cooperative launch
	} {
		if got := ShapeFor(tc.n, tc.l); got != (Shape{tc.blocks, tc.warps, tc.chunk}) {
			t.Errorf("ShapeFor(%d, %+v) = %+v, want {%d %d %d}", tc.n, tc.l, got, tc.blocks, tc.warps, tc.chunk)
		}
	}
	// Every byte has a block and no block idles: put-signal's count depends on it.
	for _, n := range []int64{1, 15, 16, 17, 4095, 1 << 20, 1<<20 + 1, 100<<20 + 3} {
		for _, blocks := range []int{0, 1, 3, 64, 128, 1000} {
			s := ShapeFor(n, backend.Launch{Blocks: blocks})
			if s.Chunk%16 != 0 || int64(s.Blocks)*s.Chunk < n || int64(s.Blocks-1)*s.Chunk >= n {
				t.Errorf("ShapeFor(%d, %d blocks) = %+v", n, blocks, s)
			}
		}
	}
}

func TestShape(t *testing.T) {
	var b Backend
	for _, tc := range []struct {
		l             backend.Launch
		blocks, warps int
	}{
		{backend.Launch{Impl: implCopyEngine}, 1, 0},
		{backend.Launch{Impl: implCopyEngine, Blocks: 4}, 4, 0},
		{backend.Launch{Impl: "triton"}, 8, 32},
		{backend.Launch{Impl: implSMStore, Blocks: 2, Warps: 4}, 2, 4},
	} {
		if blocks, warps := b.Shape(1<<20, tc.l); blocks != tc.blocks || warps != tc.warps {
			t.Errorf("Shape(1 MiB, %+v) = %d, %d; want %d, %d", tc.l, blocks, warps, tc.blocks, tc.warps)
		}
	}
}

// loadedWant is what loading op's kernels of impl for 1 MiB should look up: the
// registry's kernels (the copy-engine collectives: the barrier kernel, and for a
// broadcast sm_store for the root's own part), the data kernels with the 32 warps ShapeFor gives 1 MiB and the
// waiting ones with one.
func loadedWant(impl backend.Impl, op ops.Op) []string {
	var want []string
	if impl.Name == implCopyEngine && ops.Op(op).IsCollective() {
		want := []string{fmt.Sprintf("%s/%s w%d", implBarrier, kBarrier, barrierWarps)}
		if op == ops.Broadcast {
			want = append(want, implSMStore+"/"+kStore)
		}
		return want
	}
	if impl.Name == implCublasTriton {
		return loadedWant(entries[implTriton], collOf[op]) // triton's collective beside the product
	}
	for _, k := range impl.Kernels[op] {
		s := impl.Name + "/" + k
		if impl.Name == "triton" {
			s += fmt.Sprintf(" w%d", launchWarps(k, 1<<20, ShapeFor(1<<20, backend.Launch{}), backend.Launch{}))
		}
		want = append(want, s)
	}
	return want
}

// Preload loads exactly the registry's kernels for (impl, op), registers with NVSHMEM
// only the modules that call it, and refuses what the implementation does not serve
// with the registry's own message.
func TestPreloadLoadsRegistryKernels(t *testing.T) {
	t.Setenv(EnvCopyOwn, "") // the copy-engine collectives' own part by kernel
	for _, impl := range backend.Builtin(Factory{}).Of(backend.NVSHMEM) {
		for _, op := range ops.All() {
			w := newWorld(t, 1, 4<<20)
			b, g := w.open(t, 0, Config{})
			opened := 0
			b.openComm = func() (comm, error) { opened++; return fakeComm{&commHub{w: w}, 0}, nil }
			err := b.Preload(op, 1<<20, backend.Launch{Impl: impl.Name})
			if impl.Name == implNCCL && err == nil && opened != 1 {
				t.Errorf("nccl %s: Preload made %d communicators, want 1", op, opened)
			}
			if want := backend.Builtin(Factory{}).CheckOp(impl, op); want != nil {
				if err == nil || err.Error() != want.Error() {
					t.Errorf("%s %s: %v, want %v", impl.Name, op, err, want)
				}
				continue
			}
			if unbuilt(impl, op) {
				wantUnbuilt(t, impl.Name, op, err)
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", impl.Name, op, err)
			}
			if want := loadedWant(impl, op); !slices.Equal(g.loaded, want) {
				t.Errorf("%s %s loaded %q, want %q", impl.Name, op, g.loaded, want)
			}
			if impl.Name == implSMStore && len(g.inited) != 0 {
				t.Errorf("sm-store's module was registered with NVSHMEM: %v", g.inited)
			}
			// A module is registered with NVSHMEM exactly when its kernels call it
			// (triton's wait_signal only spins on memory: cumodule_init refuses it).
			for _, m := range b.modules {
				file := m.(*fakeModule).file
				uses := false
				for _, a := range kernels.Default().Artifacts {
					uses = uses || (a.File == file && a.UsesNVSHMEM)
				}
				if uses != slices.Contains(g.inited, file) {
					t.Errorf("%s %s: %s calls NVSHMEM: %v, registered: %v", impl.Name, op, file, uses, !uses)
				}
			}
			// Loading again loads nothing.
			n := len(g.loaded)
			if err := b.Preload(op, 1<<20, backend.Launch{Impl: impl.Name}); err != nil || len(g.loaded) != n {
				t.Errorf("%s %s: a second Preload: %v, %d lookups", impl.Name, op, err, len(g.loaded)-n)
			}
		}
	}
	w := newWorld(t, 1, 4<<20)
	b, _ := w.open(t, 0, Config{})
	if err := b.Preload("frobnicate", 8, backend.Launch{}); err == nil || !strings.Contains(err.Error(), "unknown op") {
		t.Errorf("an unknown op: %v", err)
	}
	// The CUDA kernels share one module: put-signal's two kernels load it once.
	if err := b.Preload(ops.PutSignal, 8, backend.Launch{Impl: "cuda"}); err != nil || len(b.modules) != 1 {
		t.Errorf("cuda put-signal: %v, %d modules", err, len(b.modules))
	}
}

// Each operation launches exactly the kernels the registry lists for it (the sender's
// and the receiver's together), and after Preload it loads nothing more.
func TestOpsLaunchRegistryKernels(t *testing.T) {
	const n = 1 << 20
	for _, impl := range backend.Builtin(Factory{}).Of(backend.NVSHMEM) {
		for _, op := range impl.Ops() {
			if ops.Op(op).IsCollective() {
				continue // collective_test.go
			}
			if op.Family() == ops.FamilyFused {
				continue // fused_test.go
			}
			if slices.Contains([]ops.Op{ops.Signal, ops.PutFlag, ops.Barrier}, op) {
				continue // the fake device does not imitate their kernels: scripts/gpu-check.sh runs them
			}
			if unbuilt(impl, op) {
				continue // TestPreloadLoadsRegistryKernels
			}
			p := newPair(t, n, Config{})
			stamps, _ := p.b[0].Alloc(64)
			p.b[1].Alloc(64)
			l := backend.Launch{Impl: impl.Name}
			loaded := 0
			for r := range 2 {
				if err := p.b[r].Preload(op, n, l); err != nil {
					t.Fatal(err)
				}
				loaded += len(p.g[r].loaded)
			}
			var err error
			switch op {
			case ops.Put:
				err = p.b[0].Put(p.dst, p.src, 1, l)
			case ops.Get:
				err = p.b[0].Get(p.dst, p.src, 1, l)
			case ops.PutSignal:
				if err = p.b[0].PutSignal(p.dst, p.src, p.sig, 1, l); err == nil {
					err = p.b[1].WaitSignal(p.sig, n, 1, l)
				}
			case ops.Latency:
				if _, err = p.b[0].PingPong(p.dst, p.src, p.sig, stamps, n, 3, 1, true, l); err == nil {
					_, err = p.b[1].PingPong(p.dst, p.src, p.sig, stamps, n, 3, 0, false, l)
				}
			default:
				t.Fatalf("no test for op %s", op)
			}
			if err != nil {
				t.Fatalf("%s %s: %v", impl.Name, op, err)
			}
			var launched []string
			for r := range 2 {
				for _, x := range p.g[r].launches {
					if x.impl != impl.Name {
						t.Errorf("%s %s launched %s's %s", impl.Name, op, x.impl, x.kernel)
					}
					if !slices.Contains(launched, x.kernel) {
						launched = append(launched, x.kernel)
					}
				}
				loaded -= len(p.g[r].loaded)
			}
			if want := impl.Kernels[op]; !slices.Equal(launched, want) && !(len(want) == 0 && len(launched) == 0) {
				t.Errorf("%s %s launched %q, the registry lists %q", impl.Name, op, launched, want)
			}
			if loaded != 0 {
				t.Errorf("%s %s loaded %d kernels past Preload", impl.Name, op, -loaded)
			}
		}
	}
}

// function keeps what it selected by implementation, kernel and warps: asking again
// gives the same function, asking with other warps the other build.
func TestFunctionKept(t *testing.T) {
	w := newWorld(t, 1, 4<<20)
	b, g := w.open(t, 0, Config{})
	f8, a8, err := b.function("triton", kPushBF16, 8)
	if err != nil {
		t.Fatal(err)
	}
	f16, a16, err := b.function("triton", kPushBF16, 16)
	if err != nil {
		t.Fatal(err)
	}
	again, a, err := b.function("triton", kPushBF16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if a8.NumWarps != 8 || a16.NumWarps != 16 || f8 == f16 {
		t.Errorf("8 warps gave %d (%v), 16 gave %d (%v)", a8.NumWarps, f8, a16.NumWarps, f16)
	}
	if again != f8 || a != a8 {
		t.Errorf("asked again for 8 warps: %v, %d warps; want the first", again, a.NumWarps)
	}
	if len(g.loaded) != 2 {
		t.Errorf("loaded %q, want the two builds once each", g.loaded)
	}
}

// unbuilt says whether a kernel the registry lists for impl's op is not in the
// embedded catalogue yet (signal, put-flag and barrier until the kernels are built).
func unbuilt(impl backend.Impl, op ops.Op) bool {
	for _, k := range impl.Kernels[op] {
		if !slices.ContainsFunc(kernels.Default().Artifacts, func(a *kernels.Artifact) bool { return a.Impl == impl.Name && a.Kernel == k }) {
			return true
		}
	}
	return false
}

// wantUnbuilt checks the refusal of an op whose kernels are not built: it names the
// kernel and says how to build it.
func wantUnbuilt(t *testing.T, impl string, op ops.Op, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "not in the catalogue; rebuild with scripts/build-kernels.sh") {
		t.Errorf("%s %s without its kernels built: %v, want a refusal that says how to build them", impl, op, err)
	}
}
