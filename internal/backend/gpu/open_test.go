package gpu

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/nvshmem"
)

func TestEnvironment(t *testing.T) {
	const heap = 1 << 30
	size := "NVSHMEM_SYMMETRIC_SIZE=" + strconv.FormatInt(nvshmem.SymmetricSize(heap), 10)
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for _, e := range kv {
				if key, v, _ := strings.Cut(e, "="); key == k {
					return v
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{nil, []string{size, "NVSHMEM_DISABLE_NCCL=1"}},
		{[]string{"NVSHMEM_SYMMETRIC_SIZE=8G"}, []string{"NVSHMEM_DISABLE_NCCL=1"}},
		{[]string{"NVSHMEM_DISABLE_NCCL=0"}, []string{size}},
		{[]string{"NVSHMEM_SYMMETRIC_SIZE=8G", "NVSHMEM_DISABLE_NCCL=0"}, nil},
	} {
		if got := Environment(heap, env(tc.set...)); !slices.Equal(got, tc.want) {
			t.Errorf("with %q set: %q, want %q", tc.set, got, tc.want)
		}
	}
}

// Rank 0 publishes its unique ID; the others block until it is there and take it.
func TestExchangeUID(t *testing.T) {
	w := newWorld(t, 3, 1<<20)
	kv := newKV()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan nvshmem.UID, 2)
	for r := 1; r < 3; r++ {
		go func() {
			uid, err := exchangeUID(ctx, Place{Rank: r, Size: 3}, kv, &fakeGPU{w: w, rank: r})
			if err != nil {
				t.Error(err)
			}
			got <- uid
		}()
	}
	uid0, err := exchangeUID(ctx, Place{Rank: 0, Size: 3}, kv, &fakeGPU{w: w, rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := (&fakeGPU{rank: 0}).NewUID(); uid0 != want {
		t.Errorf("rank 0 did not use its own unique ID")
	}
	for range 2 {
		if uid := <-got; uid != uid0 {
			t.Errorf("a rank got %q, rank 0 made %q", uid[:20], uid0[:20])
		}
	}
	// A rank whose wait ends before rank 0 publishes says what it waited for.
	short, stop := context.WithTimeout(context.Background(), time.Millisecond)
	defer stop()
	if _, err := exchangeUID(short, Place{Rank: 1}, newKV(), &fakeGPU{w: w, rank: 1}); err == nil ||
		!strings.Contains(err.Error(), "rank 0's NVSHMEM unique ID") {
		t.Errorf("no rank 0: %v", err)
	}
	bad := newKV()
	bad.Set(ctx, uidKey, []byte("short"))
	if _, err := exchangeUID(ctx, Place{Rank: 1}, bad, &fakeGPU{w: w, rank: 1}); err == nil || !strings.Contains(err.Error(), "5 bytes") {
		t.Errorf("a short unique ID: %v", err)
	}
}

// Close frees every stream, event and module the backend made, and leaves the team.
func TestCloseReleasesEverything(t *testing.T) {
	p := newPair(t, 1<<20, Config{})
	b, g := p.b[0], p.g[0]
	if err := b.Lanes(3); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(p.dst, p.src, 1, backend.Launch{Impl: implCopyEngine, Blocks: 4}); err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"triton", "cuda"} {
		if err := b.Preload(ops.PutSignal, 1<<20, backend.Launch{Impl: impl}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Preload(ops.Put, 1<<20, backend.Launch{Impl: implSMStore}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TimeEach(2, p.puts(3)); err != nil {
		t.Fatal(err)
	}
	if g.live["stream"] == 0 || g.live["module"] == 0 {
		t.Fatalf("nothing to free: %v", g.live)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for kind, n := range g.live {
		if n != 0 {
			t.Errorf("%d %ss left after Close", n, kind)
		}
	}
	if !g.freed || !g.finalized || !g.released || !slices.Contains(g.trace(), "barrier-all") {
		t.Errorf("freed %v, finalized %v, released %v, calls %q", g.freed, g.finalized, g.released, g.trace())
	}
}

func TestDescribe(t *testing.T) {
	w := newWorld(t, 2, 1<<20)
	b, _ := w.open(t, 1, Config{})
	b.driver, b.libPath = 13000, "/opt/nvshmem/lib/libnvshmem_host.so.3"
	gpu, lib, driver := b.Describe()
	if gpu != "NVIDIA H200" || lib != "3.4.5 (/opt/nvshmem/lib/libnvshmem_host.so.3)" || driver != "CUDA 13.0" {
		t.Errorf("Describe() = %q, %q, %q", gpu, lib, driver)
	}
	if b.PCIBusID() != "00000000:19:00.0" || b.Name() != backend.NVSHMEM || b.Rank() != 1 || b.Size() != 2 {
		t.Errorf("PCIBusID %q, Name %q, Rank %d, Size %d", b.PCIBusID(), b.Name(), b.Rank(), b.Size())
	}
}

// allAgree is true only when every rank said true, and every rank gets the same answer
// (each waits for the others' answers).
func TestAllAgree(t *testing.T) {
	for _, tc := range []struct {
		says []bool
		want bool
	}{{[]bool{true, true, true}, true}, {[]bool{true, false, true}, false}, {[]bool{false, false}, false}, {[]bool{true}, true}} {
		kv := newKV()
		got := make([]bool, len(tc.says))
		errs := make([]error, len(tc.says))
		var wg sync.WaitGroup
		for r, mine := range tc.says {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[r], errs[r] = allAgree(context.Background(), Place{Rank: r, Size: len(tc.says)}, kv, "test/links", mine)
			}()
		}
		wg.Wait()
		for r := range got {
			if errs[r] != nil || got[r] != tc.want {
				t.Errorf("%v: rank %d got %v, %v; want %v", tc.says, r, got[r], errs[r], tc.want)
			}
		}
	}
}

// A rank drives the GPU of its local rank where it sees one per local rank, the one GPU
// it sees where its launcher bound it to one (so a job over several nodes, or Slurm's
// --gpus-per-task, runs), and is refused, saying what to do, where it sees too few.
func TestGPUIndex(t *testing.T) {
	for _, tc := range []struct{ local, n, want int }{{0, 8, 0}, {3, 8, 3}, {7, 1, 0}, {0, 1, 0}, {1, 2, 1}} {
		if got, err := GPUIndex(tc.local, tc.n); err != nil || got != tc.want {
			t.Errorf("local rank %d of %d GPUs: %d, %v; want %d", tc.local, tc.n, got, err, tc.want)
		}
	}
	if _, err := GPUIndex(2, 2); err == nil || !strings.Contains(err.Error(), "CUDA_VISIBLE_DEVICES") {
		t.Errorf("local rank 2 of 2 GPUs: %v", err)
	}
}
