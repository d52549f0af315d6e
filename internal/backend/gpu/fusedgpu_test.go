//go:build gpu

package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch/store"
)

// The fused operations on GPUs: every rank a process of its own (NVSHMEM is one team a
// process), started by this test from its own binary and met through a store it
// serves; ranks share the GPUs round robin, in NVSHMEM's multiple-processes-per-GPU
// mode where they are fewer than the ranks (SYMMEM_TEST_MPG=1). triton's fused kernels
// are the embedded catalogue's, or SYMMEM_KERNELS_DIR's where it is set.
// SYMMEM_FUSED_USER=DIR:NAME[,DIR:NAME...] adds users' fused kernels, each run in
// float16 for the operations it serves (symmem kernels build
// examples/tiled_all_gather_matmul.py --out DIR makes NAME tiled-all-gather-matmul;
// tiled_matmul_reduce_scatter.py tiled-matmul-reduce-scatter).
// NCCL refuses two ranks on one GPU: cublas+nccl runs where each rank has a GPU of its
// own.

// envFusedChild makes the test binary one rank: "RANK,RANKS,ADDR,TOKEN,GPUS".
const envFusedChild = "SYMMEM_FUSED_CHILD"

func TestFusedRanks(t *testing.T) {
	if v := os.Getenv(envFusedChild); v != "" {
		fusedChild(t, v)
		return
	}
	if !slices.Contains(kernels.Default().Kernels(implTriton), kAGMatmulBF16) {
		t.Skipf("triton's fused kernels are not in this catalogue: build them with kernels/build-kernels.py --only symmem_fused and set %s=kernels/build (scripts/gpu-check.sh's fused section does)", kernels.DirEnv)
	}
	d, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	ngpu, err := d.DeviceCount()
	if err != nil || ngpu == 0 {
		t.Fatalf("GPUs: %d, %v", ngpu, err)
	}
	for _, n := range []int{1, 2, 3} {
		token := store.NewToken()
		srv, err := store.Listen("127.0.0.1:0", token)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		outs := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFusedRanks$", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d,%s,%s,%d", envFusedChild, r, n, srv.Addr(), token, ngpu))
			if ngpu < n {
				cmd.Env = append(cmd.Env, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%d", r%ngpu), "SYMMEM_TEST_MPG=1")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cancel()
				outs[r], errs[r] = cmd.CombinedOutput()
			}()
		}
		wg.Wait()
		srv.Close()
		for r := range n {
			for _, line := range strings.Split(strings.TrimSpace(string(outs[r])), "\n") {
				if strings.Contains(line, "fused:") || strings.Contains(line, "FAIL") || strings.Contains(line, "Error") || strings.Contains(line, "panic") {
					t.Logf("%d ranks, rank %d: %s", n, r, strings.TrimSpace(line))
				}
			}
			if errs[r] != nil {
				t.Errorf("%d ranks: rank %d: %v", n, r, errs[r])
			}
		}
		t.Logf("%d ranks: %s", n, time.Since(start).Round(time.Millisecond))
	}
}

// fusedCase is one call every rank makes alike.
type fusedCase struct {
	impl  string
	op    ops.Op
	dtype string
	mm    ops.Matmul
	fault backend.FusedFault // on rank 1 (or 0 alone)
}

func fusedChild(t *testing.T, spec string) {
	f := strings.Split(spec, ",")
	if len(f) != 5 {
		t.Fatalf("%s=%q", envFusedChild, spec)
	}
	rank, _ := strconv.Atoi(f[0])
	n, _ := strconv.Atoi(f[1])
	ngpu, _ := strconv.Atoi(f[4])
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	kv, err := store.Dial(ctx, f[2], f[3])
	if err != nil {
		t.Fatal(err)
	}
	reg := backend.Builtin(Factory{})
	var users []string
	for _, u := range strings.Split(os.Getenv("SYMMEM_FUSED_USER"), ",") {
		if u == "" {
			continue
		}
		dir, name, _ := strings.Cut(u, ":")
		c, err := kernels.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if reg, _, err = reg.WithUser(c); err != nil {
			t.Fatal(err)
		}
		users = append(users, name)
	}
	b, err := Open(ctx, Place{Rank: rank, LocalRank: rank, Size: n}, kv, Config{Heap: 256 << 20, WaitLimit: 20 * time.Second, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	impls := []string{implTriton, implCublasTriton}
	if ngpu >= n {
		impls = append(impls, implCublasNCCL)
	}
	// The default shape (its M cut to whole rows a rank: 255 on 3), and one of partial
	// tiles and five K steps.
	small := ops.DefaultMatmul
	small.M -= small.M % n
	var cases []fusedCase
	for _, impl := range impls {
		for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
			for _, dt := range ops.MatmulTypes {
				for _, mm := range []ops.Matmul{small, {M: 520 * n, N: 384, K: 320}} {
					cases = append(cases, fusedCase{impl: impl, op: op, dtype: dt, mm: mm})
				}
			}
		}
	}
	for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
		for _, fault := range []backend.FusedFault{backend.FaultSkipTile, backend.FaultEarly} {
			cases = append(cases, fusedCase{impl: implTriton, op: op, dtype: "bf16", mm: ops.Matmul{M: 520 * n, N: 384, K: 320}, fault: fault})
		}
	}
	for _, user := range users {
		im, ok := reg.ByName(user)
		if !ok {
			t.Fatalf("SYMMEM_FUSED_USER=%q: no implementation %s", os.Getenv("SYMMEM_FUSED_USER"), user)
		}
		for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
			if !im.Supports(op) {
				continue
			}
			for _, mm := range []ops.Matmul{small, {M: 520 * n, N: 384, K: 320}} {
				cases = append(cases, fusedCase{impl: user, op: op, dtype: "float16", mm: mm})
			}
		}
	}
	// Buffers for the largest case, every case in slices of them: every rank allocates
	// alike.
	big := ops.Matmul{M: 1024 * max(n, 2), N: 1024, K: 1024}
	var most ops.Operands
	for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
		o, _ := op.Operands(big, n)
		most.A, most.B, most.C, most.Scratch = max(most.A, o.A), max(most.B, o.B), max(most.C, o.C), max(most.Scratch, o.Scratch)
	}
	var bufs [4]backend.Buffer
	for i, e := range []int64{most.A, most.B, most.C, most.Scratch} {
		if bufs[i], err = b.Alloc(2 * e); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for _, c := range cases {
		if err := fusedCheck(t, b, bufs, c); err != nil {
			t.Errorf("fused: FAIL %s %s %s %v fault=%q: %v", c.impl, c.op, c.dtype, c.mm, c.fault, err)
			failed++
			if strings.Contains(err.Error(), "never delivered") || strings.Contains(err.Error(), "gave up") {
				return // the ranks no longer meet: stop here
			}
		}
	}
	// Times of back-to-back calls (ranks sharing a GPU take turns: no performance
	// claim), after a warm-up, at one larger shape.
	for _, impl := range impls {
		for _, op := range []ops.Op{ops.AllGatherMatmul, ops.MatmulReduceScatter} {
			fu := fusedBufs(bufs, op, "bf16", big)
			l := backend.Launch{Impl: impl}
			if err := b.Preload(op, 0, l); err != nil {
				t.Errorf("fused: FAIL preload %s %s: %v", impl, op, err)
				continue
			}
			if err := b.Fused(fu, l); err != nil {
				t.Errorf("fused: FAIL %s %s warm-up: %v", impl, op, err)
				continue
			}
			b.Barrier()
			d, err := b.TimeOps(5, func(int) error { return b.Fused(fu, l) })
			b.Barrier()
			if err != nil {
				t.Errorf("fused: FAIL timing %s %s: %v", impl, op, err)
				continue
			}
			per := d / 5
			t.Logf("fused: time %s %s bf16 %v on %d ranks: %s a call, %.1f TFLOP/s", impl, op, big, n, per,
				op.Flops(big, n)/float64(n)/per.Seconds()/1e12)
		}
	}
	t.Logf("fused: rank %d of %d: %d cases, %d failed; libraries %v", rank, n, len(cases), failed, b.Libraries())
}

// fusedBufs is the fused call of op in bufs' leading parts.
func fusedBufs(bufs [4]backend.Buffer, op ops.Op, dtype string, mm ops.Matmul) backend.Fused {
	return backend.Fused{Op: op, DType: dtype, Shape: mm, A: bufs[0], B: bufs[1], C: bufs[2], Scratch: bufs[3]}
}

// fusedInput is rank r's A or B (which: 0, 1) of n elements: small integers, so that
// every product and sum is exact; B is the same on every rank for all-gather-matmul.
func fusedInput(op ops.Op, r, which int, n int64) []float64 {
	seed := uint64(r)
	if which == 1 && op == ops.AllGatherMatmul {
		seed = 0
	}
	rng := rand.New(rand.NewPCG(seed, uint64(which)+7))
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(rng.IntN(5) - 2)
	}
	return v
}

// fusedCheck runs c on every rank and compares this rank's C, every element, with
// ops.Product; under a fault, the wrong elements must be there and only in the faulty
// tile.
func fusedCheck(t *testing.T, b *Backend, bufs [4]backend.Buffer, c fusedCase) error {
	n, me := b.size, b.rank
	o, err := c.op.Operands(c.mm, n)
	if err != nil {
		return err
	}
	f := fusedBufs(bufs, c.op, c.dtype, c.mm)
	f.A.Size, f.B.Size, f.C.Size, f.Scratch.Size = 2*o.A, 2*o.B, 2*o.C, 2*o.Scratch
	enc := func(v []float64) []byte {
		out := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], encodeElem(c.dtype, float32(x)))
		}
		return out
	}
	if err := b.Write(f.A, enc(fusedInput(c.op, me, 0, o.A))); err != nil {
		return err
	}
	if err := b.Write(f.B, enc(fusedInput(c.op, me, 1, o.B))); err != nil {
		return err
	}
	poison := func(buf backend.Buffer) error {
		p := make([]byte, buf.Size)
		for i := range p {
			p[i] = 0xFF
		}
		return b.Write(buf, p)
	}
	if err := poison(f.C); err != nil {
		return err
	}
	if err := poison(f.Scratch); err != nil {
		return err
	}
	faulty := c.fault != "" && me == min(1, n-1)
	if faulty {
		b.SetFusedFault(c.fault)
		defer b.SetFusedFault("")
	}
	// Nobody writes into a peer's C before the peer has poisoned it.
	if err := b.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	err = b.Fused(f, backend.Launch{Impl: c.impl})
	if c.impl == implCublasTriton && c.op == ops.MatmulReduceScatter && c.dtype == "float16" {
		b.Barrier()
		if err == nil || !strings.Contains(err.Error(), "which sum bf16") {
			return fmt.Errorf("float16 reduce-scatter by triton's kernels: %v, want a refusal", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if err := b.Quiet(); err != nil {
		return err
	}
	if err := b.Barrier(); err != nil {
		return err
	}
	took := time.Since(start)
	raw := make([]byte, f.C.Size)
	if err := b.Read(f.C, raw); err != nil {
		return err
	}
	want, err := c.op.Product(ops.MatmulInputs{Ranks: n, Me: me, Shape: c.mm,
		A: func(r int) []float64 { return fusedInput(c.op, r, 0, o.A) }, B: func(r int) []float64 { return fusedInput(c.op, r, 1, o.B) },
		Round: func(v float64) float64 { return float64(decodeElem(c.dtype, encodeElem(c.dtype, float32(v)))) }})
	if err != nil {
		return err
	}
	var bad []int
	for i, w := range want {
		if got := decodeElem(c.dtype, binary.LittleEndian.Uint16(raw[2*i:])); float64(got) != w {
			bad = append(bad, i)
		}
	}
	if c.fault == "" {
		if len(bad) > 0 {
			i := bad[0]
			return fmt.Errorf("%d of %d elements wrong, the first C[%d][%d] = %g, want %g", len(bad), len(want), i/c.mm.N, i%c.mm.N,
				decodeElem(c.dtype, binary.LittleEndian.Uint16(raw[2*i:])), want[i])
		}
		t.Logf("fused: ok %s %s %s %v on %d ranks (%s with the barriers around it)", c.impl, c.op, c.dtype, c.mm, n, took.Round(time.Microsecond))
		return nil
	}
	// The faulty rank is 1 (0 alone); its tile 0 lands in its rows of every rank's C
	// (all-gather-matmul), or in the C of the rank after it (matmul-reduce-scatter).
	tri, _ := b.reg.ByName(implTriton)
	kernel, _ := kernelFor(b.cat, tri, c.op, c.dtype)
	_, a, err := b.function(implTriton, kernel, fusedWarps)
	if err != nil {
		return err
	}
	fr, rows := min(1, n-1), c.mm.M/n
	lo, hit := fr*rows, true
	if c.op == ops.MatmulReduceScatter {
		lo, hit = 0, me == (fr+1)%n
	}
	if !hit {
		if len(bad) > 0 {
			return fmt.Errorf("%d elements wrong where rank %d's fault does not reach", len(bad), fr)
		}
		return nil
	}
	if len(bad) == 0 {
		return fmt.Errorf("no element wrong: the check cannot see rank %d's %s", fr, c.fault)
	}
	for _, e := range bad {
		if i, j := e/c.mm.N-lo, e%c.mm.N; i < 0 || i >= a.Tile[0] || j >= a.Tile[1] {
			return fmt.Errorf("element C[%d][%d] wrong, outside the faulty tile (rows %d.., %d x %d)", e/c.mm.N, j, lo, a.Tile[0], a.Tile[1])
		}
	}
	t.Logf("fused: ok %s %s fault %s seen: %d wrong elements, all in tile 0 of rank %d", c.impl, c.op, c.fault, len(bad), fr)
	return nil
}
