package runtest

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// fusedTest is the run test of the fused operations (all-gather-matmul,
// matmul-reduce-scatter): every rank fills its A and B (ops.Op.Operand), the
// operation runs, and every rank checks every element of its C against the
// operation's Product: exactly for small integers, within MatmulTolerance for random
// data (Spec.Random).
type fusedTest struct{}

func (fusedTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	if err := s.validateEveryRank(); err != nil {
		return err
	}
	if err := s.validateImpl(backendName, reg); err != nil {
		return err
	}
	if s.DType == "" {
		s.DType = DefaultSumDType
	}
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return err
	}
	s.DType = d.Name
	if !s.Op.TakesDType(d.Name) {
		return setting.Errorf("%s %s: %s multiplies %s, accumulating in float32", setting.DType, d.Name, s.Op, strings.Join(s.Op.DTypes(), " or "))
	}
	if s.Matmul == nil {
		mm := ops.DefaultMatmul
		s.Matmul = &mm
	}
	o, err := s.Op.Operands(*s.Matmul, nranks)
	if err == nil {
		err = s.Op.Checkable(*s.Matmul, nranks)
	}
	if err != nil {
		return setting.Errorf("%s %s %s: %v", setting.M, setting.N, setting.K, err)
	}
	if o.A > MaxCount || o.C > MaxCount || o.Scratch > MaxCount {
		return setting.Errorf("%s %s %s: %d x %d x %d is too large: give at most %d elements per matrix", setting.M, setting.N, setting.K, s.Matmul.M, s.Matmul.N, s.Matmul.K, MaxCount)
	}
	s.Count, s.Bytes = o.C, o.C*d.Size
	return nil
}

func (fusedTest) layout(s Spec, n int, _ *backend.Registry) (backend.Layout, error) {
	var l backend.Layout
	o, err := s.Op.Operands(*s.Matmul, n)
	if err != nil {
		return l, err
	}
	elem := ops.ElemSize(s.DType)
	l.Add("a", o.A*elem, 0)
	l.Add("b", o.B*elem, 0)
	l.Add("c", o.C*elem, coll.Guard)
	l.Add("scratch", o.Scratch*elem, coll.Guard)
	return l, nil
}

func (fusedTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	me, n := b.Rank(), b.Size()
	mm := *s.Matmul
	res.From, res.Peers = me, "all"
	fu, ok := b.(backend.Fuser)
	if !ok {
		return res, fmt.Errorf("the %s backend runs no fused operations", b.Name())
	}
	carved, err := carve(b, lay)
	if err != nil {
		return res, err
	}
	a, bm, c, scratch := carved.One("a").Buf, carved.One("b").Buf, carved.One("c"), carved.One("scratch")
	round := d.Round
	fill := ops.Memo(func(r int) ([]float64, []float64) { return s.Op.Operand(mm, n, r, s.Random, round) })
	myA, myB := fill(me)
	want, err := s.Op.Product(ops.MatmulInputs{Ranks: n, Me: me, Shape: mm,
		A:     func(r int) []float64 { x, _ := fill(r); return x },
		B:     func(r int) []float64 { _, y := fill(r); return y },
		Round: round})
	if err != nil {
		return res, err
	}
	wantBytes := d.Elements(want)
	if err := b.Write(a, d.Elements(myA)); err != nil {
		return res, err
	}
	if err := b.Write(bm, d.Elements(myB)); err != nil {
		return res, err
	}
	if err := b.Write(c.Buf, complement(wantBytes)); err != nil {
		return res, err
	}
	// The scratch as well: what an implementation sums or multiplies from there must be
	// what it put there.
	junk := make([]byte, scratch.Buf.Size)
	for i := range junk {
		junk[i] = coll.GuardByte(i + 3)
	}
	if err := b.Write(scratch.Buf, junk); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	f := backend.Fused{Op: s.Op, DType: s.DType, Shape: mm, A: a, B: bm, C: c.Buf, Scratch: scratch.Buf}
	if err := fu.Fused(f, s.Launch); err != nil {
		return res, fmt.Errorf("%s %s of %d x %d x %d %s: %w", s.Op, s.Launch.Impl, mm.M, mm.N, mm.K, s.DType, err)
	}
	if err := b.Quiet(); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("op")
	gotBytes := make([]byte, len(wantBytes))
	if err := b.Read(c.Buf, gotBytes); err != nil {
		return res, err
	}
	tol := 0.0
	if s.Random {
		tol = ops.MatmulTolerance(s.DType, mm, n)
	}
	rows, first := len(want)/mm.N, s.Op.FirstRow(mm, n, me)
	bad := ops.WrongBlock{R0: -1}
	for i := range want {
		got := d.Value(gotBytes[int64(i)*d.Size:])
		if got == want[i] || tol > 0 && math.Abs(got-want[i]) <= tol {
			continue
		}
		res.Wrong++
		bad.Add(first+i/mm.N, i%mm.N)
	}
	if err := checkGuard(b, c.Buf, c.Guard, "C", out, &res.PastOutput); err != nil {
		return res, err
	}
	if err := checkGuard(b, scratch.Buf, scratch.Guard, "scratch", out, &res.PastScratch); err != nil {
		return res, err
	}
	res.Bytes = int64(len(wantBytes))
	res.OK = res.Wrong == 0 && res.PastOutput == 0 && res.PastScratch == 0
	res.Expected = fmt.Sprintf("C rows %d..%d, exact", first, first+rows-1)
	if tol > 0 {
		res.Expected = fmt.Sprintf("C rows %d..%d, within %.3g", first, first+rows-1, tol)
	}
	res.Received = formatFloats(want, gotBytes, d)
	if res.Wrong > 0 {
		res.Received = fmt.Sprintf("%d wrong elements in %s", res.Wrong, bad)
	}
	fmt.Fprintf(out, "Rank %d: %s of %d x %d x %d %s: C=%s\n", me, s.Op, mm.M, mm.N, mm.K, s.DType, res.Received)
	lap("verify")
	return res, b.Barrier()
}

// formatFloats prints C's ends as got holds them.
func formatFloats(want []float64, got []byte, d ops.DType) string {
	return formatElems(d, got[:min(int64(len(got)), int64(len(want))*d.Size)])
}
