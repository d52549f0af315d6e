package ops

import (
	"fmt"
	"math"
	"strings"
)

// RedOp is a reduction operator of all-reduce and reduce-scatter, as nccl-tests' -o
// names them. Each is one entry of the table below: its name, its identity, how it
// combines two values (in the float32, float64 or int64 a kernel accumulates in),
// what the combined value becomes at the end (avg divides by the rank count), and
// the check data that keeps it exact in every element type. Nothing decides by an
// operator's name; adding one is its entry here plus the implementations that serve it.
type RedOp struct {
	// Name is what --redop takes and tables and JSON print.
	Name string
	// Code is the operator's number in the kernels' op argument
	// (kernels/triton/symmem_collectives.py: OP_*), and NCCL's ncclRedOp_t.
	Code int
	// Identity is the value that combines with any x to x (min's and max's are the
	// largest float32 of either sign, which every element type's values stay within).
	Identity float64
	f32      func(acc, x []float32)
	f64      func(acc, x []float64)
	i64      func(acc, x []int64)
	// mean says the combined value is divided by the number of inputs at the end.
	mean bool
	// value maps a draw x (|x| <= Limit) of rank r of n to an input, so that every
	// result is exact in every element type.
	value func(x float64, r, n int) float64
}

// The operators, in the order `--redop all` runs them (nccl-tests' -o all: sum, prod,
// max, min, avg). Their codes are NCCL's ncclRedOp_t.
var (
	Sum  = RedOp{Name: "sum", Code: 0, f32: add[float32], f64: add[float64], i64: add[int64], value: small}
	Prod = RedOp{Name: "prod", Code: 1, Identity: 1, f32: mul[float32], f64: mul[float64], i64: mul[int64], value: powers}
	Max  = RedOp{Name: "max", Code: 2, Identity: -math.MaxFloat32, f32: hi[float32], f64: hi[float64], i64: hi[int64], value: small}
	Min  = RedOp{Name: "min", Code: 3, Identity: math.MaxFloat32, f32: lo[float32], f64: lo[float64], i64: lo[int64], value: small}
	Avg  = RedOp{Name: "avg", Code: 4, f32: add[float32], f64: add[float64], i64: add[int64], mean: true, value: multiples}
)

// First keeps the first input and drops the rest: no operator of the table, only the
// wrong one a fault hook delivers (SYMMEM_TEST_FAULT=RANK:redop:first, a max that
// keeps rank 0's value) so that tests see every operator's check fail.
var First = RedOp{Name: "first", Code: -1, f32: keep[float32], f64: keep[float64], i64: keep[int64], value: small}

// RedOps lists every operator, in table order.
func RedOps() []RedOp { return []RedOp{Sum, Prod, Max, Min, Avg} }

// AllRedOps is what --redop takes for every operator, one row each.
const AllRedOps = "all"

// RedOpNames spells the operators for help and messages: "sum, prod, max, min, avg".
func RedOpNames() string {
	var s []string
	for _, r := range RedOps() {
		s = append(s, r.Name)
	}
	return strings.Join(s, ", ")
}

// LookupRedOp returns the operator name names ("" is sum), or an error that lists them.
func LookupRedOp(name string) (RedOp, error) {
	if name == "" {
		return Sum, nil
	}
	for _, r := range RedOps() {
		if strings.EqualFold(r.Name, name) {
			return r, nil
		}
	}
	return RedOp{}, fmt.Errorf("unknown reduction operator %q: use %s, or %s for each", name, RedOpNames(), AllRedOps)
}

// ParseRedOps reads a --redop value: one operator, a comma-separated list, or "all".
// An empty value is sum alone.
func ParseRedOps(v string) ([]RedOp, error) {
	if strings.TrimSpace(v) == "" {
		return []RedOp{Sum}, nil
	}
	var out []RedOp
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if strings.EqualFold(name, AllRedOps) {
			return RedOps(), nil
		}
		r, err := LookupRedOp(name)
		if err != nil {
			return nil, err
		}
		if !containsRedOp(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func containsRedOp(rs []RedOp, r RedOp) bool {
	for _, x := range rs {
		if x.Name == r.Name {
			return true
		}
	}
	return false
}

// Or is r, or sum where r is the zero RedOp (a reduction that names no operator).
func (r RedOp) Or() RedOp {
	if r.f32 == nil {
		return Sum
	}
	return r
}

// String is the operator's name ("sum" for the zero RedOp).
func (r RedOp) String() string { return r.Or().Name }

// IsSum says whether r is sum (the zero RedOp too).
func (r RedOp) IsSum() bool { return r.Or().Name == Sum.Name }

// FoldF32 combines x into acc element by element (acc = acc op x).
func (r RedOp) FoldF32(acc, x []float32) { r.Or().f32(acc, x) }

// FoldF64 is FoldF32 in float64.
func (r RedOp) FoldF64(acc, x []float64) { r.Or().f64(acc, x) }

// FoldI64 is FoldF32 in int64.
func (r RedOp) FoldI64(acc, x []int64) { r.Or().i64(acc, x) }

// Mean says the combined value of n inputs is divided by n at the end (avg).
func (r RedOp) Mean() bool { return r.Or().mean }

// Value is the check data's input of rank r of n for a draw x of the range
// [-Limit(n), Limit(n)]: every operator's result of such inputs is exact in every
// element type (sums of up to 256 in magnitude, bfloat16 holding every integer up to
// 256; products of +-1 and +-2 from at most 8 ranks; averages of multiples of n).
func (r RedOp) Value(x float64, rank, n int) float64 { return r.Or().value(x, rank, n) }

// Limit is the largest draw Value takes on n ranks: n of them sum to at most 256.
func Limit(n int) int64 { return max(1, 256/int64(max(n, 1))) }

func small(x float64, _, _ int) float64 { return x }

// powers keeps a product exact: +-1, and +-2 from the first 8 ranks only (|product|
// <= 256), picked by the draw's integer part.
func powers(x float64, r, _ int) float64 {
	k := int64(math.Floor(x))
	if r >= 8 {
		return []float64{1, -1}[(k%2+2)%2]
	}
	return []float64{1, -1, 2, -2}[(k%4+4)%4]
}

// multiples keeps an average exact: n times the draw, whose mean is the mean of the
// draws times n over n.
func multiples(x float64, _, n int) float64 { return x * float64(n) }

type number interface{ float32 | float64 | int64 }

// The operators' element-wise combinations (acc = acc op x), one tight loop each.

func add[T number](acc, x []T) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += x[i]
	}
}

func keep[T number](acc, x []T) {}

func mul[T number](acc, x []T) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] *= x[i]
	}
}

func hi[T number](acc, x []T) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] = max(acc[i], x[i])
	}
}

func lo[T number](acc, x []T) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] = min(acc[i], x[i])
	}
}
