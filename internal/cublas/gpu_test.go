//go:build gpu

// GPU tests: built here with `go test -c -tags gpu -o bin/cublas-gpu.test ./internal/cublas`
// and run on a machine with a GPU and cuBLASLt (SYMMEM_CUBLAS_LIB or the usual search).
package cublas

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
)

// Row-major products on GPU 0 against float32 sums on the host: exact with small
// integers (every product and sum is a small integer), within a few units in the
// last place of the element type with values in [-1, 1].
func TestProductOnGPU(t *testing.T) {
	s := Find(os.Getenv(EnvLib))
	if s.Chosen == "" {
		t.Fatalf("cuBLASLt not found (tried %v): %s", s.Tried, InstallHint)
	}
	l, err := Open(s.Chosen)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	t.Logf("cuBLASLt %s from %s via %s", l.Version(), l.Path, s.Source)
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	st, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	const wsBytes = 32 << 20
	ws, err := ctx.Alloc(wsBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free(ws)
	for _, dt := range []string{"bf16", "float16"} {
		for _, sh := range []Shape{{256, 128, 128}, {8, 24, 40}, {1000, 200, 72}, {2048, 2048, 1024}} {
			for _, exact := range []bool{true, false} {
				product(t, h, ctx, st, ws, wsBytes, dt, sh, exact)
			}
		}
	}
}

// encode rounds v to dtype's bits.
func encode(dt string, v float32) uint16 {
	if dt == "bf16" {
		return ops.BF16(v)
	}
	return ops.F16(v)
}

func decode(dt string, h uint16) float32 {
	if dt == "bf16" {
		return ops.FromBF16(h)
	}
	return ops.FromF16(h)
}

func product(t *testing.T, h *Handle, ctx *cuda.Context, st *cuda.Stream, ws cuda.Ptr, wsBytes uint64, dt string, sh Shape, exact bool) {
	t.Helper()
	typ, _ := DataTypeOf(dt)
	rng := rand.New(rand.NewPCG(uint64(sh.M), uint64(sh.K)))
	val := func() float32 {
		if exact {
			return float32(rng.IntN(5) - 2)
		}
		return rng.Float32()*2 - 1
	}
	a, b := make([]uint16, sh.M*sh.K), make([]uint16, sh.K*sh.N)
	for i := range a {
		a[i] = encode(dt, val())
	}
	for i := range b {
		b[i] = encode(dt, val())
	}
	bytesOf := func(v []uint16) []byte {
		out := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], x)
		}
		return out
	}
	da, _ := ctx.Alloc(uint64(2 * len(a)))
	db, _ := ctx.Alloc(uint64(2 * len(b)))
	dc, _ := ctx.Alloc(uint64(2 * sh.M * sh.N))
	defer func() { ctx.Free(da); ctx.Free(db); ctx.Free(dc) }()
	if err := ctx.CopyHtoD(da, bytesOf(a)); err != nil {
		t.Fatal(err)
	}
	if err := ctx.CopyHtoD(db, bytesOf(b)); err != nil {
		t.Fatal(err)
	}
	p, err := h.Plan(typ, sh, wsBytes)
	if err != nil {
		t.Fatalf("%s %v: %v", dt, sh, err)
	}
	defer p.Destroy()
	start := time.Now()
	if err := p.Run(uintptr(da), uintptr(db), uintptr(dc), uintptr(ws), wsBytes, st.H); err != nil {
		t.Fatalf("%s %v: %v", dt, sh, err)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	out := make([]byte, 2*sh.M*sh.N)
	if err := ctx.CopyDtoH(out, dc); err != nil {
		t.Fatal(err)
	}
	tol := 0.0
	if !exact {
		tol = ops.MatmulTolerance(dt, ops.Matmul{M: sh.M, N: sh.N, K: sh.K}, 1)
	}
	bad := 0
	acc := make([]float32, sh.N)
	for i := range sh.M {
		clear(acc)
		for k := range sh.K {
			av := decode(dt, a[i*sh.K+k])
			for j := range sh.N {
				acc[j] += av * decode(dt, b[k*sh.N+j])
			}
		}
		for j := range sh.N {
			want := decode(dt, encode(dt, acc[j]))
			got := decode(dt, binary.LittleEndian.Uint16(out[2*(i*sh.N+j):]))
			if math.Abs(float64(got-want)) > tol {
				if bad < 3 {
					t.Errorf("%s %v exact=%v: C[%d][%d] = %g, want %g (tolerance %g)", dt, sh, exact, i, j, got, want, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s %v exact=%v: %d of %d elements wrong", dt, sh, exact, bad, sh.M*sh.N)
	}
	t.Logf("%s %v exact=%v: ok, %s with the plan's first run (workspace %d bytes)", dt, sh, exact, took.Round(time.Microsecond), p.Workspace)
}
