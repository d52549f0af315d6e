package ops

import (
	"fmt"
	"math"
)

// Matmul is the shape of a fused operation's matrix product, as torch's fused ops
// name it: C is M x N, the product of an M x K A and a K x N B (row-major), M split
// over the ranks by rows.
type Matmul struct {
	M, N, K int
}

// MatmulTypes are the element types the fused operations take: A, B and C are of it,
// the products accumulate in float32.
var MatmulTypes = []string{"bf16", "float16"}

// DefaultMatmul is the shape `symmem run` tests unless told otherwise.
var DefaultMatmul = Matmul{M: 256, N: 128, K: 128}

// fusedDef is what a fused operation's file defines beside the common def.
type fusedDef struct {
	// gathers: A is sharded by rows and gathered before the product (every rank's
	// C is all of it); otherwise every rank's product is reduced and scattered by
	// rows (rank r's C is rows r*M/n.. of the sum).
	gathers bool
}

// Operands are the sizes, in elements, of one rank's A, B and C for a fused operation
// on n ranks.
type Operands struct {
	// Rows is the rows of C that each rank computes from its own A (all-gather-matmul)
	// or that each rank ends with (matmul-reduce-scatter): M/n.
	Rows    int
	A, B, C int64
	// Scratch is the room an implementation may use beside them: the gathered A (M x
	// K) of all-gather-matmul, the whole product (M x N, a slot of M/n rows per rank)
	// of matmul-reduce-scatter.
	Scratch int64
}

// Operands sizes o's matrices for mm on n ranks, or says why mm does not fit.
func (o Op) Operands(mm Matmul, n int) (Operands, error) {
	f := o.def().fused
	if f == nil {
		return Operands{}, fmt.Errorf("%s is not a fused operation", o)
	}
	if mm.M < 1 || mm.N < 1 || mm.K < 1 {
		return Operands{}, fmt.Errorf("%s of %d x %d x %d: M, N and K must be at least 1", o, mm.M, mm.N, mm.K)
	}
	if mm.M%n != 0 {
		return Operands{}, fmt.Errorf("%s: M %d does not split over %d ranks by rows: give an M that is a multiple of %d", o, mm.M, n, n)
	}
	rows := mm.M / n
	b := int64(mm.K) * int64(mm.N)
	if f.gathers {
		return Operands{Rows: rows, A: int64(rows) * int64(mm.K), B: b, C: int64(mm.M) * int64(mm.N), Scratch: int64(mm.M) * int64(mm.K)}, nil
	}
	return Operands{Rows: rows, A: int64(mm.M) * int64(mm.K), B: b, C: int64(rows) * int64(mm.N), Scratch: int64(mm.M) * int64(mm.N)}, nil
}

// Flops is the arithmetic of o for mm on every rank together: 2*M*N*K for
// all-gather-matmul (each rank computes the whole C), n times that for
// matmul-reduce-scatter (each rank its own product).
func (o Op) Flops(mm Matmul, n int) float64 {
	f := 2 * float64(mm.M) * float64(mm.N) * float64(mm.K)
	if d := o.def().fused; d != nil && !d.gathers {
		return f * float64(n)
	}
	return f
}

// Moved is the bytes o moves to each rank for mm on n ranks of elem-byte elements:
// the A rows of the other ranks (all-gather-matmul), or the partial rows of C from
// the other ranks (matmul-reduce-scatter).
func (o Op) Moved(mm Matmul, n int, elem int64) int64 {
	d := o.def().fused
	if d == nil {
		return 0
	}
	rows := int64(mm.M / max(n, 1))
	if d.gathers {
		return rows * int64(n-1) * int64(mm.K) * elem
	}
	return rows * int64(n-1) * int64(mm.N) * elem
}

// MatmulInputs are every rank's A and B of a fused operation, as float64 (rank r's
// A is A(r), row-major).
type MatmulInputs struct {
	Ranks, Me int
	Shape     Matmul
	A, B      func(r int) []float64
	// Round rounds an accumulated value to C's element type.
	Round func(float64) float64
}

// Product is what rank in.Me must hold in C after o, row-major, each element the
// float32 sum of its products rounded to C's type (matmul-reduce-scatter: the sum
// over ranks of each rank's rounded product, as the unfused pair computes it).
func (o Op) Product(in MatmulInputs) ([]float64, error) {
	d := o.def().fused
	if d == nil {
		return nil, fmt.Errorf("%s is not a fused operation", o)
	}
	mm, n := in.Shape, in.Ranks
	rows := mm.M / n
	if d.gathers {
		c := make([]float64, mm.M*mm.N)
		b := in.B(in.Me)
		for r := 0; r < n; r++ {
			gemm(c[r*rows*mm.N:], in.A(r), b, rows, mm.N, mm.K, in.Round)
		}
		return c, nil
	}
	c := make([]float64, rows*mm.N)
	part := make([]float64, rows*mm.N)
	for r := 0; r < n; r++ {
		a := in.A(r)[in.Me*rows*mm.K : (in.Me+1)*rows*mm.K]
		gemm(part, a, in.B(r), rows, mm.N, mm.K, in.Round)
		for i := range c {
			c[i] += part[i]
		}
	}
	for i := range c {
		c[i] = in.Round(c[i])
	}
	return c, nil
}

// gemm writes the rows x n product of a (rows x k) and b (k x n) into c, each
// element accumulated in float32 and rounded by round.
func gemm(c, a, b []float64, rows, n, k int, round func(float64) float64) {
	acc := make([]float32, n)
	for i := 0; i < rows; i++ {
		clear(acc)
		for p := 0; p < k; p++ {
			av := float32(a[i*k+p])
			if av == 0 {
				continue
			}
			brow := b[p*n : (p+1)*n]
			for j := range acc {
				acc[j] += av * float32(brow[j])
			}
		}
		for j, v := range acc {
			c[i*n+j] = round(float64(v))
		}
	}
}

// MatmulTolerance is how far an element of C may be from the reference in the
// random-data mode for mm in dtype: the products of values in [-1, 1] accumulated in
// float32 (exact to its 24 bits) and rounded to dtype once per sum, so the error is
// a few units in the last place of dtype at the magnitude of a sum of K products
// (sqrt(K) for random signs), plus float32's over K additions.
func MatmulTolerance(dtype string, mm Matmul, n int) float64 {
	eps := math.Pow(2, -8) // bf16: 8 bits of significand
	if Canonical(dtype) == "float16" {
		eps = math.Pow(2, -11)
	}
	mag := math.Sqrt(float64(mm.K)) * math.Sqrt(float64(max(n, 1)))
	return 4*eps*mag + float64(mm.K)*math.Pow(2, -24)*mag
}

// noDelivery is the delivery of the operations whose result is not bytes of the
// inputs (the fused ones: Product).
func noDelivery(in Inputs) ([]byte, error) {
	return nil, fmt.Errorf("a fused operation's result is its Product, not a delivery of bytes")
}
