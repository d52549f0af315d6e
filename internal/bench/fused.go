package bench

import (
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// FusedSizes is how many shapes a sweep measures a fused operation at: M, M/factor,
// ... as async-TP benchmarks sweep M.
const FusedSizes = 4

// fused are a sweep's buffers for the fused operations: A, B, C (with its guard) and
// scratch (with its guard), each sized for the largest shape.
type fused struct {
	a, b, c, cAll, scratch, scratchAll backend.Buffer
}

// matmulOf is the sweep's shape (the default one where it names none).
func matmulOf(s result.BenchSpec) ops.Matmul {
	if s.Matmul != nil {
		return *s.Matmul
	}
	return ops.DefaultMatmul
}

// FusedShapes lists the shapes s measures op at on n ranks, M ascending: M, M/factor,
// ... those that give each rank whole rows.
func FusedShapes(s result.BenchSpec, op ops.Op, n int) []ops.Matmul {
	mm := matmulOf(s)
	var out []ops.Matmul
	for m, i := mm.M, 0; m >= n && i < FusedSizes; m, i = m/int(max(s.Factor, 2)), i+1 {
		if _, err := op.Operands(ops.Matmul{M: m, N: mm.N, K: mm.K}, n); err == nil {
			out = append(out, ops.Matmul{M: m, N: mm.N, K: mm.K})
		}
	}
	slices.Reverse(out)
	return out
}

// fusedMost is the most elements each of A, B, C and scratch takes over the sweep's
// fused operations on n ranks.
func fusedMost(s result.BenchSpec, n int) (most ops.Operands) {
	for _, name := range s.Ops {
		op := ops.Op(name)
		if engineOf(op).area != fusedArea {
			continue
		}
		for _, mm := range FusedShapes(s, op, n) {
			o, _ := op.Operands(mm, n)
			most.A, most.B, most.C, most.Scratch = max(most.A, o.A), max(most.B, o.B), max(most.C, o.C), max(most.Scratch, o.Scratch)
		}
	}
	return most
}

// validateFused checks what a sweep's fused operations need on n ranks.
func validateFused(s result.BenchSpec, n int) error {
	if !has(s, inArea(fusedArea)) {
		return nil
	}
	if !slices.Contains(ops.MatmulTypes, ops.Canonical(s.DType)) {
		return setting.Errorf("%s %s: the fused operations multiply %s, accumulating in float32", setting.DType, s.DType, ops.MatmulTypes)
	}
	for _, name := range s.Ops {
		op := ops.Op(name)
		if engineOf(op).area != fusedArea {
			continue
		}
		if err := op.Checkable(matmulOf(s), n); err != nil {
			return setting.Errorf("%s %s %s: %v", setting.M, setting.N, setting.K, err)
		}
	}
	return nil
}

// setupFused takes the fused operations' buffers from the sweep's carved layout.
func (r *Runner) setupFused(carved backend.Carved) {
	r.fused = &fused{a: carved.One(slotFusedA).Buf, b: carved.One(slotFusedB).Buf,
		c: carved.One(slotFusedC).Buf, cAll: carved.One(slotFusedC).All,
		scratch: carved.One(slotFusedScratch).Buf, scratchAll: carved.One(slotFusedScratch).All}
}

// sweepFused measures a fused operation with each of ims at each of the sweep's
// shapes, the unfused baselines first: a row's speed-up over them is known as it
// lands.
func sweepFused(r *Runner, op ops.Op, ims []backend.Impl) ([]result.Row, error) {
	ims = slices.Clone(ims)
	slices.SortStableFunc(ims, func(a, b backend.Impl) int {
		switch {
		case a.Unfused == b.Unfused:
			return 0
		case a.Unfused:
			return -1
		}
		return 1
	})
	var rows []result.Row
	for _, im := range ims {
		for _, mm := range FusedShapes(r.S, op, r.B.Size()) {
			r.first = nil
			rs, err := r.measureFused(op, im, mm)
			if err != nil {
				return nil, fmt.Errorf("%s %s %dx%dx%d: %w", op, im.Name, mm.M, mm.N, mm.K, err)
			}
			rows = append(rows, r.done(r.withFirst(rs))...)
		}
	}
	return rows, nil
}

func countFused(_ *backend.Registry, s result.BenchSpec, op ops.Op, _ backend.Impl, n, _ int) int {
	return len(FusedShapes(s, op, n))
}

func fusedWindows(_ *backend.Registry, s result.BenchSpec, op ops.Op, _ backend.Impl, n, _ int) []Window {
	var w []Window
	for _, mm := range FusedShapes(s, op, n) {
		bytes := op.Moved(mm, n, 2) + int64(op.Flops(mm, n)/1e3) // the product as bytes of work
		w = append(w, measurement(s, bytes, false, 1)...)
		w = append(w, Window{Bytes: bytes, Ops: s.Warmup + s.Iters, Times: 1}) // the product alone
	}
	return w
}

// measureFused measures op at mm with im: every repetition writes every rank's A and
// B (small integers: every element of C is exact), poisons C with the complement of
// what must arrive, times the operations and checks every element of C; then the
// product alone is timed on the same shape.
func (r *Runner) measureFused(op ops.Op, im backend.Impl, mm ops.Matmul) ([]result.Row, error) {
	b, s := r.B, r.S
	me, n := b.Rank(), b.Size()
	fu, ok := b.(backend.Fuser)
	if !ok {
		return nil, fmt.Errorf("the %s backend runs no fused operations", b.Name())
	}
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return nil, err
	}
	o, err := op.Operands(mm, n)
	if err != nil {
		return nil, err
	}
	round := d.Round
	fill := ops.Memo(func(r int) ([]float64, []float64) { return op.Operand(mm, n, r, false, round) })
	a, bm := fill(me)
	want, err := op.Product(ops.MatmulInputs{Ranks: n, Me: me, Shape: mm, Round: round,
		A: func(r int) []float64 { x, _ := fill(r); return x }, B: func(r int) []float64 { _, y := fill(r); return y }})
	if err != nil {
		return nil, err
	}
	wantBytes := d.Elements(want)
	f := backend.Fused{Op: op, DType: d.Name, Shape: mm, A: r.fused.a.Slice(0, o.A*d.Size), B: r.fused.b.Slice(0, o.B*d.Size),
		C: r.fused.c.Slice(0, o.C*d.Size), Scratch: r.fused.scratch.Slice(0, o.Scratch*d.Size)}
	if err := b.Write(f.A, d.Elements(a)); err != nil {
		return nil, err
	}
	if err := b.Write(f.B, d.Elements(bm)); err != nil {
		return nil, err
	}
	l := backend.Launch{Impl: im.Name, Blocks: s.Blocks, Warps: s.Warps}
	moved := op.Moved(mm, n, d.Size)
	row := result.Row{Op: string(op), Impl: im.Name, Size: moved, Src: -1, Dst: -1, Ranks: n, DType: d.Name, Matmul: &mm, Unfused: im.Unfused}
	do := func(int) error { return fu.Fused(f, l) }
	guard := r.fused.cAll.Slice(f.C.Off-r.fused.cAll.Off+f.C.Size, coll.Guard)
	for rep := 0; rep < s.Reps; rep++ {
		seq := r.seq
		r.seq++
		if r.BeforeMeasure != nil {
			r.BeforeMeasure(seq)
		}
		if err := b.Write(f.C, complement(wantBytes)); err != nil {
			return nil, err
		}
		// The scratch too, for this repetition: an implementation that sums or
		// multiplies what it finds there (slots of partial products, a gathered A) must
		// not pass on the last repetition's.
		if err := b.Write(f.Scratch, poison(f.Scratch.Size, seq)); err != nil {
			return nil, err
		}
		if err := b.Write(guard, coll.GuardPattern()[:coll.Guard]); err != nil {
			return nil, err
		}
		if err := b.Barrier(); err != nil {
			return nil, err
		}
		res, err := r.drive(do, moved, s.Iters, false, true)
		if err != nil {
			return nil, err
		}
		if err := b.Barrier(); err != nil {
			return nil, err
		}
		got := make([]byte, len(wantBytes))
		if err := b.Read(f.C, got); err != nil {
			return nil, err
		}
		first := r.first
		res.wrong = r.wrongBytes(got, wantBytes)
		if first == nil && r.first != nil {
			// Where in C the first wrong element is, by row (of all of C) and column.
			e := int(r.first.Byte / d.Size)
			r.first.Where = fmt.Sprintf("(row %d, column %d of C)", op.FirstRow(mm, n, me)+e/mm.N, e%mm.N)
		}
		if err := r.pastGuard(guard, f.C.Size, "(past C)", &res); err != nil {
			return nil, err
		}
		row.TimesUS = append(row.TimesUS, res.us)
		row.Wrong += res.wrong
		row.Checked = true
		if err := b.Barrier(); err != nil {
			return nil, err
		}
	}
	// The product alone, into scratch: nothing to check, nothing moved.
	gemm := f
	gemm.GemmOnly = true
	res, err := r.drive(func(int) error { return fu.Fused(gemm, l) }, 0, s.Iters, false, true)
	if err != nil {
		return nil, err
	}
	row.GemmUS = result.Round(res.us, result.TimeDecimals)
	return []result.Row{row}, b.Barrier()
}

// poison is n bytes that no implementation leaves in its scratch, other for each
// measurement seq.
func poison(n int64, seq int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = coll.GuardByte(i + 7*seq)
	}
	return p
}
