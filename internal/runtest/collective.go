package runtest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// A collective run test: every rank r sends --count elements per block, element k of
// block p of rank r holding value + r + n*p (blocks of all-to-all and reduce-scatter)
// or value + r (the others), plus k mod elemCycle, so a block or an element delivered
// to the wrong place, or a rank left out of a reduction, shows up as wrong elements.
// A reduction's operator maps each such value to one of its exact inputs
// (ops.RedOp.Value: prod's +-1 and +-2, avg's multiples of n). The rooted ones'
// root is Spec.Root (--root).

// elemCycle is the period of the values along a block.
const elemCycle = 4

// collTest is the run test of the collectives, every one of them: its sizes come
// from the operation's Shape and what each rank must hold from its Deliver.
type collTest struct{}

// moeTest is the run test of dispatch and combine: a MoE layer's routing of tokens.
type moeTest struct{}

// validateColl checks what every collective test needs: the pattern, the
// implementation (the backend's first of the op where none is named), the element
// type and the operator.
func (s *Spec) validateColl(backendName string, reg *backend.Registry) (ops.DType, error) {
	if err := s.validateEveryRank(); err != nil {
		return ops.DType{}, err
	}
	if err := s.validateImpl(backendName, reg); err != nil {
		return ops.DType{}, err
	}
	if s.DType == "" {
		s.DType = DefaultSumDType // also what MoE layers carry
	}
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return d, err
	}
	s.DType = d.Name
	switch {
	case s.Op.CombineType(d.Name) != "" && !d.Reducible():
		return d, setting.Errorf("%s %s: %s reduces, which it does for %s", setting.DType, d.Name, s.Op, strings.Join(ops.ReduceTypes, ", "))
	case !s.Op.TakesDType(d.Name):
		return d, setting.Errorf("%s %s: %s carries tokens of %s", setting.DType, d.Name, s.Op, strings.Join(s.Op.DTypes(), ", "))
	}
	if s.Op.Takes(ops.RedOpSetting) {
		r, err := ops.LookupRedOp(s.RedOp)
		if err != nil {
			return d, setting.Errorf("%s: %v", setting.RedOp, err)
		}
		s.RedOp = r.Name
	}
	return d, nil
}

func (moeTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	d, err := s.validateColl(backendName, reg)
	if err != nil {
		return err
	}
	if s.MoE == nil {
		m := coll.DefaultMoE
		s.MoE = &m
	}
	rt, err := s.MoE.Route(nranks, d.Size)
	if err != nil {
		return err
	}
	s.Count, s.Bytes = int64(s.MoE.Tokens)*int64(s.MoE.Hidden), rt.Bytes()
	return nil
}

func (collTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	d, err := s.validateColl(backendName, reg)
	if err != nil {
		return err
	}
	if s.Count <= 0 || s.Count > MaxCount/int64(nranks) {
		return setting.Errorf("%s %d out of range: give 1..%d elements per block", setting.Count, s.Count, MaxCount/int64(nranks))
	}
	s.Bytes = s.Count * d.Size
	if err := s.checkBlock(nranks, reg); err != nil {
		return err
	}
	// Every value a rank sends or must end with fits the type.
	sh, err := s.shape(nranks)
	if err != nil {
		return err
	}
	blocks := int(sh.Send / sh.Block)
	for r := 0; r < nranks; r++ {
		for k := 0; k < int(min(s.Count, elemCycle)); k++ {
			for p := 0; p < blocks; p++ {
				if v := s.collValue(r, p, nranks, k); !fits(d, v) {
					_, err := d.Encode(v)
					return setting.Errorf("%s: rank %d's block %d holds %g: %v", setting.Value, r, p, v, err)
				}
			}
			if !s.Op.Takes(ops.RedOpSetting) || r >= blocks {
				continue
			}
			if v := s.collReduced(r, nranks, k); !fits(d, v) {
				_, err := d.Encode(v)
				return setting.Errorf("%s: the %s rank %d must hold is %g: %v", setting.Value, s.redOp(), r, v, err)
			}
		}
	}
	return nil
}

func fits(d ops.DType, v float64) bool { _, err := d.Encode(v); return err == nil }

// redOp is the spec's reduction operator (sum where it names none).
func (s Spec) redOp() ops.RedOp {
	r, _ := ops.LookupRedOp(s.RedOp) // Validate refused an unknown one
	return r.Or()
}

// collValue is what element k of block p of rank r's input holds (an input of one
// block has p = 0 only), as the reduction's operator takes it.
func (s Spec) collValue(r, p, n, k int) float64 {
	v := s.Value + float64(r+k%elemCycle) + float64(n*p)
	if s.Op.Takes(ops.RedOpSetting) {
		return s.redOp().Value(v, r, n)
	}
	return v
}

// collReduced is what element k of the reduction of every rank's block me holds.
func (s Spec) collReduced(me, n, k int) float64 {
	acc := []float64{s.collValue(0, me, n, k)}
	for r := 1; r < n; r++ {
		s.redOp().FoldF64(acc, []float64{s.collValue(r, me, n, k)})
	}
	if s.redOp().Mean() {
		acc[0] /= float64(n)
	}
	return acc[0]
}

// block is --count elements, element k being v(k).
func (s Spec) block(d ops.DType, v func(k int) float64) []byte {
	out := make([]byte, 0, s.Bytes)
	cycle := make([][]byte, elemCycle)
	for k := range cycle {
		cycle[k], _ = d.Encode(v(k))
	}
	for k := int64(0); k < s.Count; k++ {
		out = append(out, cycle[k%elemCycle]...)
	}
	return out
}

// shape is the collective's shape on n ranks: --count elements per rank's block.
func (s Spec) shape(n int) (ops.Shape, error) {
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return ops.Shape{}, err
	}
	return s.Op.Shape(s.Op.SizeOfBlock(s.Bytes, n), n, d.Size)
}

func (collTest) layout(s Spec, n int, reg *backend.Registry) (backend.Layout, error) {
	var l backend.Layout
	sh, err := s.shape(n)
	if err != nil {
		return l, err
	}
	l.Add("send", sh.Send, 0)
	l.Add("recv", sh.Recv, coll.Guard)
	l.Add("scratch", reg.ScratchBytes(s.Op, s.Launch.Impl, sh.Bytes, sh.Recv, n), coll.Guard)
	return l, nil
}

// layout sizes a dispatch or combine: the most any rank's send and receive buffers
// hold.
func (moeTest) layout(s Spec, n int, reg *backend.Registry) (backend.Layout, error) {
	var l backend.Layout
	rt, err := s.routing(n)
	if err != nil {
		return l, err
	}
	most := max(rt.Bytes(), rt.MaxSlots(), 1)
	l.Add("send", most, 0)
	l.Add("recv", most, coll.Guard)
	l.Add("scratch", reg.ScratchBytes(s.Op, s.Launch.Impl, rt.Bytes(), most, n), coll.Guard)
	return l, nil
}

// routing is the MoE layer's routing on n ranks.
func (s Spec) routing(n int) (*coll.Routing, error) {
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return nil, err
	}
	return s.MoE.Route(n, d.Size)
}

// collWant is what rank me must hold, element by element: the op's delivery
// (ops.Op.Deliver) of every rank's values, carried as float64 and encoded once at the
// end, so that a reduction is the exact one of the values rounded once.
func (s Spec) collWant(d ops.DType, me, n int) ([]byte, error) {
	sh, err := s.shape(n)
	if err != nil {
		return nil, err
	}
	blocks := int(sh.Send / sh.Block)
	in := func(r int) []byte {
		plane := make([]byte, 0, int64(blocks)*s.Count*8)
		for p := 0; p < blocks; p++ {
			for k := int64(0); k < s.Count; k++ {
				plane = binary.LittleEndian.AppendUint64(plane, math.Float64bits(s.collValue(r, p, n, int(k%elemCycle))))
			}
		}
		return plane
	}
	reduce := func(dst []byte, srcs ...[]byte) error { return coll.Reduce(s.redOp(), "float64", dst, srcs...) }
	plane, err := s.Op.Deliver(ops.Inputs{Ranks: n, Me: me, Root: s.Root, Block: s.Count * 8, Recv: sh.Recv / d.Size * 8, In: in, Reduce: reduce})
	if err != nil || plane == nil {
		return nil, err // nil: the operation leaves rank me nothing
	}
	out := make([]byte, 0, sh.Recv)
	for i := 0; i+8 <= len(plane); i += 8 {
		e, _ := d.Encode(math.Float64frombits(binary.LittleEndian.Uint64(plane[i:])))
		out = append(out, e...)
	}
	return out, nil
}

// run is one rank's part in a collective run test: setup, the collective and the
// check between the barriers every rank meets in step (past 80 lines for that). A
// rank the operation leaves nothing to (a non-root of a reduce to a root) checks that
// its output was not written.
func (collTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	me, n := b.Rank(), b.Size()
	res.From, res.Peers = me, "all"
	if s.Op.Takes(ops.RootSetting) {
		res.Peers = fmt.Sprintf("root %d", s.Root)
	}
	cl, ok := b.(backend.Collectiver)
	if !ok {
		return res, fmt.Errorf("the %s backend runs no collectives", b.Name())
	}
	sh, err := s.shape(n)
	if err != nil {
		return res, err
	}
	sendBytes, recvBytes, size := sh.Send, sh.Recv, sh.Bytes
	res.Bytes = recvBytes
	carved, err := carve(b, lay)
	if err != nil {
		return res, err
	}
	send, recv, recvGuard, scratch, guard := carved.One("send").Buf, carved.One("recv").Buf, carved.One("recv").Guard, carved.One("scratch").Buf, carved.One("scratch").Guard
	var in []byte
	for p := 0; p < n && int64(len(in)) < sendBytes; p++ {
		in = append(in, s.block(d, func(k int) float64 { return s.collValue(me, p, n, k) })...)
	}
	want, err := s.collWant(d, me, n)
	if err != nil {
		return res, err
	}
	desc, fill := formatElems(d, want), complement(want)
	if want == nil {
		// The operation leaves this rank nothing (a non-root of a reduce or gather):
		// its output must keep what was there, a pattern no delivery writes.
		want = make([]byte, recvBytes)
		for i := range want {
			want[i] = coll.GuardByte(i)
		}
		fill, desc = want, fmt.Sprintf("untouched (root %d holds the result)", s.Root)
	}
	if err := b.Write(send, in[:sendBytes]); err != nil {
		return res, err
	}
	if err := b.Write(recv, fill); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	c := backend.Collective{Op: s.Op, DType: s.DType, RedOp: s.redOp(), Bytes: size, Send: send, Recv: recv, Root: s.Root, Scratch: scratch}
	if err := cl.Collective(c, s.Launch); err != nil {
		return res, fmt.Errorf("%s %s of %d x %s: %w", s.Op, s.Launch.Impl, s.Count, s.DType, err)
	}
	if err := b.Quiet(); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("op")
	got := make([]byte, recvBytes)
	if err := b.Read(recv, got); err != nil {
		return res, err
	}
	res.Expected = desc
	for i := 0; i+int(d.Size) <= len(got); i += int(d.Size) {
		if !slices.Equal(got[i:i+int(d.Size)], want[i:i+int(d.Size)]) {
			res.Wrong++
		}
	}
	if err := checkGuard(b, recv, recvGuard, "output", out, &res.PastOutput); err != nil {
		return res, err
	}
	if err := checkGuard(b, scratch, guard, "scratch", out, &res.PastScratch); err != nil {
		return res, err
	}
	res.OK = res.Wrong == 0 && res.PastScratch == 0 && res.PastOutput == 0
	res.Received = formatElems(d, got)
	fmt.Fprintf(out, "Rank %d: received out=%s\n", me, res.Received)
	lap("verify")
	return res, b.Barrier()
}

// run is one rank's part in a dispatch or combine run test: every rank's tokens (or
// the copies it holds, for combine) come from coll's check tables, and each rank checks
// every token copy it received (or every summed token) against the routing recomputed
// here.
func (moeTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	me, n := b.Rank(), b.Size()
	res.From, res.Peers = me, "all"
	cl, ok := b.(backend.Collectiver)
	if !ok {
		return res, fmt.Errorf("the %s backend runs no collectives", b.Name())
	}
	rt, err := s.routing(n)
	if err != nil {
		return res, err
	}
	most, size := max(rt.Bytes(), rt.MaxSlots(), 1), rt.Bytes()
	carved, err := carve(b, lay)
	if err != nil {
		return res, err
	}
	bufs := [3]backend.Buffer{carved.One("send").Buf, carved.One("recv").Buf, carved.One("scratch").Buf}
	recvGuard, guard := carved.One("recv").Guard, carved.One("scratch").Guard
	c := backend.Collective{Op: s.Op, DType: s.DType, Bytes: size, Send: bufs[0], Recv: bufs[1], Scratch: bufs[2]}
	var recvOf func(int) int64
	var sendOf func(int) int64
	c.Blocks, sendOf, recvOf = rt.Transfers(s.Op)
	recv := recvOf(me)
	// Small integers, readable in the received line; every token row differs, so a copy
	// in the wrong slot is wrong elements.
	dt := s.DType
	res.Expected = rt.Holds(s.Op, me)
	data := coll.NewData(dt, ops.Sum, n, most)
	want, err := data.WantBlocks(s.Op, c.Blocks, me, 0, sendOf, recv)
	if err != nil {
		return res, err
	}
	res.Bytes = recv
	if err := b.Write(c.Send, data.Input(me, 0, sendOf(me))); err != nil {
		return res, err
	}
	if err := b.Write(c.Recv, complement(want)); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	if err := cl.Collective(c, s.Launch); err != nil {
		return res, fmt.Errorf("%s %s of %d tokens: %w", s.Op, s.Launch.Impl, rt.Tokens, err)
	}
	if err := b.Quiet(); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("op")
	got := make([]byte, recv)
	if err := b.Read(c.Recv, got); err != nil {
		return res, err
	}
	for i := 0; i+int(d.Size) <= len(got); i += int(d.Size) {
		if !slices.Equal(got[i:i+int(d.Size)], want[i:i+int(d.Size)]) {
			res.Wrong++
		}
	}
	if err := checkGuard(b, bufs[1], recvGuard, "output", out, &res.PastOutput); err != nil {
		return res, err
	}
	if err := checkGuard(b, bufs[2], guard, "scratch", out, &res.PastScratch); err != nil {
		return res, err
	}
	res.OK = res.Wrong == 0 && res.PastScratch == 0 && res.PastOutput == 0
	res.Received = formatElems(d, got)
	fmt.Fprintf(out, "Rank %d: received %s, out=%s\n", me, res.Expected, res.Received)
	lap("verify")
	return res, b.Barrier()
}

// carve carves lay on b and fills every guard with the guard pattern.
func carve(b backend.Backend, lay backend.Layout) (backend.Carved, error) {
	carved, err := lay.Carve(b)
	if err != nil {
		return nil, err
	}
	for _, rs := range carved {
		for _, r := range rs {
			if r.Guard.Size == 0 {
				continue
			}
			if err := b.Write(r.Guard, coll.GuardPattern()[:r.Guard.Size]); err != nil {
				return nil, err
			}
		}
	}
	return carved, nil
}

// checkGuard counts into past the guard bytes after buf (the implementation's output
// or scratch, what) that changed, which fails the rank, and says so on out.
func checkGuard(b backend.Backend, buf, guard backend.Buffer, what string, out io.Writer, past *int64) error {
	// The guard is read where it lies, under a fault that changes the data read (the
	// corrupt test fault stands for a wrong delivery, not an overrun).
	if u, ok := b.(interface{ Unwrap() backend.Backend }); ok {
		b = u.Unwrap()
	}
	g := make([]byte, guard.Size)
	if err := b.Read(guard, g); err != nil {
		return err
	}
	var changed, first int64 = 0, -1
	for i, v := range g {
		if v != coll.GuardByte(i) {
			if changed++; first < 0 {
				first = int64(i)
			}
		}
	}
	if changed > 0 {
		*past += changed
		fmt.Fprintf(out, "Rank %d: %d bytes written past the %s (it was given %d bytes; the first at byte %d of it)\n", b.Rank(), changed, what, buf.Size, buf.Size+first)
	}
	return nil
}

// checkBlock refuses a block (each rank's share, --count elements) that the
// implementation cannot move: larger than its most, or not a whole number of its
// vectors.
func (s *Spec) checkBlock(n int, reg *backend.Registry) error {
	im, ok := reg.ByName(s.Launch.Impl)
	if !ok || im.Holds(s.Op, s.Bytes, n) {
		return nil
	}
	if most, why := im.Most(s.Op, n); most > 0 && s.Bytes > most {
		return setting.Errorf("%s %s %s on %d ranks moves blocks of at most %s (%s): %d x %s is %s; lower %s to %d or less",
			s.Op, setting.Impl, im.Name, n, units.FormatSize(most), why, s.Count, s.DType, units.FormatSize(s.Bytes), setting.Count, most/max(s.Bytes/max(s.Count, 1), 1))
	}
	a := im.BlockAlign[s.Op]
	return setting.Errorf("%s %s %s moves %d-byte vectors: each rank's block (%d x %s, %d bytes) must be a multiple of %d bytes; give a %s that makes it one (%d), or %s nccl",
		s.Op, setting.Impl, im.Name, a, s.Count, s.DType, s.Bytes, a, setting.Count, (s.Bytes+a-1)/a*a/max(s.Bytes/max(s.Count, 1), 1), setting.Impl)
}
