package cpu

import (
	"sync"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// fusedRun runs op at mm on n ranks in this process with impl, fault set on rank 1
// ("": none), and returns how many elements of each rank's C differ from
// ops.Op.Product, the reference written apart from the backend's tiles.
func fusedRun(t *testing.T, op ops.Op, n int, mm ops.Matmul, dtype, impl string, fault backend.FusedFault) []int {
	t.Helper()
	o, err := op.Operands(mm, n)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ops.LookupDType(dtype)
	ShmDir = t.TempDir()
	path := HeapPath("fused")
	size := func(e int64) int64 { return backend.Align(e*d.Size, backend.HeapAlign) }
	heap := size(o.A) + size(o.B) + size(o.C) + size(o.Scratch) + backend.HeapAlign
	if err := Create(path, n, heap); err != nil {
		t.Fatal(err)
	}
	round := d.Round
	fill := func(r int) ([]float64, []float64) { return op.Operand(mm, n, r, false, round) }
	wrong := make([]int, n)
	var wg sync.WaitGroup
	for r := range n {
		b, err := Open(path, r, n, heap)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		f := backend.Fused{Op: op, DType: dtype, Shape: mm}
		f.A, _ = b.Alloc(o.A * d.Size)
		f.B, _ = b.Alloc(o.B * d.Size)
		f.C, _ = b.Alloc(o.C * d.Size)
		f.Scratch, _ = b.Alloc(o.Scratch * d.Size)
		a, bm := fill(r)
		if err := b.Write(f.A, d.Elements(a)); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(f.B, d.Elements(bm)); err != nil {
			t.Fatal(err)
		}
		if r == 1 {
			b.SetFusedFault(fault)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Fused(f, backend.Launch{Impl: impl}); err != nil {
				t.Error(err)
				return
			}
			want, err := op.Product(ops.MatmulInputs{Ranks: n, Me: r, Shape: mm, Round: round,
				A: func(p int) []float64 { x, _ := fill(p); return x }, B: func(p int) []float64 { _, y := fill(p); return y }})
			if err != nil {
				t.Error(err)
				return
			}
			got := make([]byte, f.C.Size)
			if err := b.Read(f.C, got); err != nil {
				t.Error(err)
				return
			}
			for i, w := range want {
				if d.Value(got[int64(i)*d.Size:]) != w {
					wrong[r]++
				}
			}
		}()
	}
	wg.Wait()
	return wrong
}

// Both fused operations, fused and unfused, on 2 and 3 ranks, at a shape whose tiles
// straddle the ranks' rows and whose N and K are no multiple of a tile: every element
// of every rank's C is the reference's; and each fault, made where a tile is
// delivered, leaves wrong elements.
func TestFusedRightAndFaultsCaught(t *testing.T) {
	mm := ops.Matmul{M: 96, N: 40, K: 50}
	for _, op := range ops.Of(ops.FamilyFused) {
		for _, n := range []int{2, 3} {
			for _, impl := range []string{"memcpy", ImplUnfused} {
				for _, dtype := range ops.MatmulTypes {
					for r, w := range fusedRun(t, op, n, mm, dtype, impl, "") {
						if w != 0 {
							t.Errorf("%s %s %s on %d ranks: rank %d has %d wrong elements", op, impl, dtype, n, r, w)
						}
					}
				}
				for _, fault := range []backend.FusedFault{backend.FaultSkipTile, backend.FaultEarly} {
					total := 0
					for _, w := range fusedRun(t, op, n, mm, "bf16", impl, fault) {
						total += w
					}
					if total == 0 {
						t.Errorf("%s %s on %d ranks with the %s fault: no wrong element", op, impl, n, fault)
					}
				}
			}
		}
	}
}
