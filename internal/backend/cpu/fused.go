package cpu

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// ImplUnfused is the CPU backend's unfused baseline of the fused operations: the
// matrix product into scratch, then memcpy's all-gather or reduce-scatter. memcpy
// itself runs them fused: each rank writes every tile of its product where it ends,
// into its peers' memory, as soon as the tile is computed.
const ImplUnfused = "gemm+memcpy"

// fusedTile is the side of the square tiles the CPU's product is computed and
// delivered in (and the fused faults' tile).
const fusedTile = 32

// SetFusedFault makes the rank deliver its first tile of a fused operation wrongly
// (backend.FaultSkipTile, backend.FaultEarly; "": rightly), where it is delivered.
func (b *Backend) SetFusedFault(f backend.FusedFault) { b.fusedFault = f }

// Fused runs f between barriers that say every input is written and that every
// tile has landed: all-gather-matmul writes each tile of this rank's rows of C into
// every rank's C (memcpy) or gathers A first (gemm+memcpy); matmul-reduce-scatter
// writes each tile of this rank's product into its owner's slot of scratch, and the
// owner sums its slots.
func (b *Backend) Fused(f backend.Fused, l backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	me, n := b.rank, b.size
	mm := f.Shape
	op, err := f.Op.Operands(mm, n)
	if err != nil {
		return err
	}
	conv, err := fusedType(f.DType)
	if err != nil {
		return err
	}
	elem := int64(2)
	if err := b.Barrier(); err != nil {
		return err
	}
	if f.GemmOnly {
		b.gemmTiles(conv, b.region(me, f.A), b.region(me, f.B), op.Product, mm.N, mm.K, func(i0, j0, i1, j1 int, t []float32) {
			conv.store(b.region(me, f.Scratch), mm.N, i0, j0, i1, j1, t)
		})
		return b.Barrier()
	}
	unfused := l.Impl == ImplUnfused
	gathers := op.Gathers
	switch {
	case gathers && unfused:
		// Gather every rank's A into scratch, then multiply all of it.
		rowBytes := int64(mm.K) * elem
		mine := b.region(me, f.A)[:int64(op.Rows)*rowBytes]
		for p := 0; p < n; p++ {
			if !b.drop {
				copy(b.region(p, f.Scratch)[int64(me*op.Rows)*rowBytes:], mine)
			}
		}
		if err := b.Barrier(); err != nil {
			return err
		}
		c := b.region(me, f.C)
		b.gemmTiles(conv, b.region(me, f.Scratch), b.region(me, f.B), mm.M, mm.N, mm.K, func(i0, j0, i1, j1 int, t []float32) {
			conv.store(c, mm.N, i0, j0, i1, j1, t)
		})
	case gathers:
		// Each tile of this rank's rows goes to every rank's C as it is done.
		b.gemmTiles(conv, b.region(me, f.A), b.region(me, f.B), op.Rows, mm.N, mm.K, func(i0, j0, i1, j1 int, t []float32) {
			for p := 0; p < n; p++ {
				if !b.drop {
					conv.store(b.region(p, f.C), mm.N, me*op.Rows+i0, j0, me*op.Rows+i1, j1, t)
				}
			}
		})
	default:
		// Each tile of this rank's product goes to the slot of scratch its owner
		// keeps for this rank (the unfused pair: after the whole product).
		slot := int64(op.Rows) * int64(mm.N) * elem
		var done []func()
		b.gemmTiles(conv, b.region(me, f.A), b.region(me, f.B), mm.M, mm.N, mm.K, func(i0, j0, i1, j1 int, t []float32) {
			if unfused {
				t = append([]float32(nil), t...)
			}
			w := j1 - j0
			// A tile may span two owners' rows: each gets its part.
			for lo := i0; lo < i1; {
				owner := lo / op.Rows
				hi := min(i1, (owner+1)*op.Rows)
				dst := b.region(owner, f.Scratch)[int64(me)*slot:]
				part, r0 := t[(lo-i0)*w:(hi-i0)*w], lo-owner*op.Rows
				put := func() {
					if !b.drop {
						conv.store(dst, mm.N, r0, j0, r0+len(part)/w, j1, part)
					}
				}
				if unfused {
					done = append(done, put)
				} else {
					put()
				}
				lo = hi
			}
		})
		for _, put := range done {
			put()
		}
		if err := b.Barrier(); err != nil {
			return err
		}
		// Sum the n slots of this rank's rows, in float32, rounded once.
		acc := make([]float32, int64(op.Rows)*int64(mm.N))
		scratch := b.region(me, f.Scratch)
		for p := 0; p < n; p++ {
			conv.add(acc, scratch[int64(p)*slot:int64(p+1)*slot])
		}
		conv.store(b.region(me, f.C), mm.N, 0, 0, op.Rows, mm.N, acc)
	}
	return b.Barrier()
}

// gemmTiles computes the rows x n product of a (rows x k) and b (k x n), both of
// conv's type, in fusedTile-square tiles accumulated in float32, handing each tile
// (rows i0..i1, columns j0..j1, row-major) to deliver once it is complete; the fused
// faults change the first tile's delivery.
func (b *Backend) gemmTiles(conv fusedConv, a, bm []byte, rows, n, k int, deliver func(i0, j0, i1, j1 int, t []float32)) {
	tile := make([]float32, fusedTile*fusedTile)
	first := true
	for i0 := 0; i0 < rows; i0 += fusedTile {
		i1 := min(i0+fusedTile, rows)
		for j0 := 0; j0 < n; j0 += fusedTile {
			j1 := min(j0+fusedTile, n)
			w := j1 - j0
			t := tile[:(i1-i0)*w]
			clear(t)
			early := first && b.fusedFault == backend.FaultEarly
			for p := 0; p < k; p++ {
				if early && p == k-1 {
					break // delivered before its last step of K
				}
				brow := conv.row(bm, p*n+j0, w)
				for i := i0; i < i1; i++ {
					av := conv.at(a, i*k+p)
					if av == 0 {
						continue
					}
					out := t[(i-i0)*w : (i-i0+1)*w]
					for j, bv := range brow {
						out[j] += av * bv
					}
				}
			}
			skip := first && b.fusedFault == backend.FaultSkipTile
			first = false
			if !skip {
				deliver(i0, j0, i1, j1, t)
			}
		}
	}
}

// fusedConv reads and writes a fused operation's elements (bf16 or float16).
type fusedConv struct {
	from func(uint16) float32
	to   func(float32) uint16
}

func fusedType(dtype string) (fusedConv, error) {
	switch ops.Canonical(dtype) {
	case "bf16":
		return fusedConv{from: ops.FromBF16, to: ops.BF16}, nil
	case "float16":
		return fusedConv{from: ops.FromF16, to: ops.F16}, nil
	}
	return fusedConv{}, fmt.Errorf("fused operations take %v, not %q", ops.MatmulTypes, dtype)
}

// at is element i of m.
func (c fusedConv) at(m []byte, i int) float32 {
	return c.from(uint16(m[2*i]) | uint16(m[2*i+1])<<8)
}

// row is w elements of m from element i, as float32.
func (c fusedConv) row(m []byte, i, w int) []float32 {
	out := make([]float32, w)
	for j := range out {
		out[j] = c.at(m, i+j)
	}
	return out
}

// store writes the tile t (rows i0..i1, columns j0..j1) into m, a row-major matrix n
// wide, rounded to the type.
func (c fusedConv) store(m []byte, n, i0, j0, i1, j1 int, t []float32) {
	w := j1 - j0
	for i := i0; i < i1; i++ {
		for j := j0; j < j1; j++ {
			v := c.to(t[(i-i0)*w+j-j0])
			off := 2 * (i*n + j)
			m[off], m[off+1] = byte(v), byte(v>>8)
		}
	}
}

// add adds the elements of m to acc.
func (c fusedConv) add(acc []float32, m []byte) {
	for i := range acc {
		acc[i] += c.at(m, i)
	}
}
