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

// MaxMatrix is the most elements one matrix of a fused operation may hold (2^34: 32
// GiB of bf16, past any GPU's memory a rank has).
const MaxMatrix = 1 << 34

// MaxChecked is the most elements a matrix of a fused operation may hold for a check
// of it: the reference (Product) holds A, B and C as float64 on every rank (2^27: 1 GiB
// each).
const MaxChecked = 1 << 27

// Checkable says whether the reference of o for mm on n ranks fits MaxChecked, or why
// not.
func (o Op) Checkable(mm Matmul, n int) error {
	op, err := o.Operands(mm, n)
	if err != nil {
		return err
	}
	if most := max(op.A, op.B, op.C, int64(mm.M)*int64(mm.K)); most > MaxChecked {
		return fmt.Errorf("%s of %d x %d x %d: a matrix of %d elements is past the %d the check computes in float64 on every rank: give smaller M, N or K", o, mm.M, mm.N, mm.K, most, MaxChecked)
	}
	return nil
}

// MatmulTypes are the element types the fused operations take: A, B and C are of it,
// the products accumulate in float32.
var MatmulTypes = []string{"bf16", "float16"}

// DefaultMatmul is the shape `symmem run` tests unless told otherwise, and the
// largest that bench sweeps (M down from it): small enough for the CPU backend.
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
	// K) of all-gather-matmul (or this rank's product alone, M/n x N, if larger), the
	// whole product (M x N, a slot of M/n rows per rank) of matmul-reduce-scatter.
	Scratch int64
	// Gathers: A is gathered before the product (all-gather-matmul); otherwise each
	// rank's product (of Product rows) is reduced and scattered.
	Gathers bool
	// Product is the rows of this rank's own matrix product: M/n or M.
	Product int
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
	// Each matrix within MaxMatrix elements: no product of its sizes overflows.
	for _, p := range [][2]int{{mm.M, mm.K}, {mm.K, mm.N}, {mm.M, mm.N}} {
		if p[0] > MaxMatrix || p[1] > MaxMatrix || int64(p[0])*int64(p[1]) > MaxMatrix {
			return Operands{}, fmt.Errorf("%s of %d x %d x %d: a matrix of %d x %d is past %d elements: give smaller M, N or K", o, mm.M, mm.N, mm.K, p[0], p[1], MaxMatrix)
		}
	}
	if mm.M%n != 0 {
		return Operands{}, fmt.Errorf("%s: M %d does not split over %d ranks by rows: give an M that is a multiple of %d", o, mm.M, n, n)
	}
	rows := mm.M / n
	b := int64(mm.K) * int64(mm.N)
	if f.gathers {
		return Operands{Rows: rows, A: int64(rows) * int64(mm.K), B: b, C: int64(mm.M) * int64(mm.N), Gathers: true, Product: rows,
			Scratch: max(int64(mm.M)*int64(mm.K), int64(rows)*int64(mm.N))}, nil
	}
	return Operands{Rows: rows, A: int64(mm.M) * int64(mm.K), B: b, C: int64(rows) * int64(mm.N), Product: mm.M, Scratch: int64(mm.M) * int64(mm.N)}, nil
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
	if _, err := o.Operands(mm, n); err != nil {
		return nil, err
	}
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

// Operand is rank r's A and B of o for mm on n ranks, as float64, each value one
// round (to the element type) gives. By default they are small integers, every sum
// exact in float32 and in bf16 and float16 (a rank's product is within 4, and a sum
// over up to 64 ranks within 256): an A row holds 1, 2 and -1 at places that move
// with the row (every row of C differs from the others), one in the last 8 columns
// (so a tile delivered before its last steps of K shows); B holds -1, 0 and 1 hashed
// from its row and column (all-gather-matmul's one B is every rank's). random fills
// them with values in [-1, 1], which MatmulTolerance bounds.
func (o Op) Operand(mm Matmul, n, r int, random bool, round func(float64) float64) (a, b []float64) {
	op, err := o.Operands(mm, n)
	if err != nil {
		return nil, nil
	}
	a, b = make([]float64, op.A), make([]float64, op.B)
	rows, first := int(op.A)/mm.K, 0 // A's rows, and the first one's place in all of A
	br := r                          // B is every rank's own, or all-gather-matmul's one B
	if op.Gathers {
		first, br = r*rows, 0
	}
	if random {
		rnd := func(seed uint64) float64 { return round(float64(mix(seed)>>11)/float64(1<<53)*2 - 1) }
		for i := range a {
			a[i] = rnd(uint64(r)<<40 | uint64(first*mm.K+i))
		}
		for i := range b {
			b[i] = rnd(uint64(br+1)<<48 | uint64(i))
		}
		return a, b
	}
	for i := 0; i < rows; i++ {
		// 1, 2 and -1 a row, at places that move with the row (and its block of K rows),
		// so that every row of C is its own: a row delivered to another row's place, or
		// to another rank, shows.
		g := first + i
		row := a[i*mm.K : (i+1)*mm.K]
		row[(7*g+3*r+g/mm.K)%mm.K] = 1
		row[(13*g+1+r)%mm.K] += 2
		row[mm.K-1-(g+r)%min(mm.K, 8)]--
	}
	for i := range b {
		// -1, 0 or 1, a hash of the row and column (no period a misplaced row or
		// column could fall on), and never 0 on the row's own diagonal place: no row of
		// B is all zero, so a missing step of K shows.
		k, j := i/mm.N, i%mm.N
		b[i] = float64(int(mix(uint64(br)<<48|uint64(i))%3) - 1)
		if j == k%mm.N && b[i] == 0 {
			b[i] = 1
		}
	}
	return a, b
}

// Memo returns f's A and B of each rank, computing each rank's once (Product asks
// for A and B of every rank, and a check of every rank's C asks for all of them).
func Memo(f func(r int) (a, b []float64)) func(r int) (a, b []float64) {
	type pair struct{ a, b []float64 }
	seen := map[int]pair{}
	return func(r int) ([]float64, []float64) {
		p, ok := seen[r]
		if !ok {
			p.a, p.b = f(r)
			seen[r] = p
		}
		return p.a, p.b
	}
}

// WrongBlock is the rows and columns of C that wrong elements span (R0 < 0: none),
// rows counted in all of C.
type WrongBlock struct{ R0, R1, C0, C1 int }

// Add takes in the element at row r, column c.
func (w *WrongBlock) Add(r, c int) {
	if w.R0 < 0 {
		*w = WrongBlock{r, r, c, c}
		return
	}
	w.R0, w.R1, w.C0, w.C1 = min(w.R0, r), max(w.R1, r), min(w.C0, c), max(w.C1, c)
}

// String names the block: "rows 32..63, columns 0..31 of C".
func (w WrongBlock) String() string {
	return fmt.Sprintf("rows %d..%d, columns %d..%d of C", w.R0, w.R1, w.C0, w.C1)
}

// FirstRow is the row of all of C that rank me's C starts at.
func (o Op) FirstRow(mm Matmul, n, me int) int {
	op, err := o.Operands(mm, n)
	if err != nil || op.Gathers {
		return 0
	}
	return me * op.Rows
}

// mix is splitmix64's finaliser of seed: the fused operations' data.
func mix(seed uint64) uint64 {
	z := seed*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ z>>31
}
