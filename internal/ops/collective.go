package ops

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/result"
)

// A collective run test: every rank r sends --count elements per block, element k of
// block p of rank r holding value + r + n*p (blocks of all-to-all and reduce-scatter)
// or value + r (the others), plus k mod elemCycle, so a block or an element delivered
// to the wrong place, or a rank left out of a sum, shows up as wrong elements.
// Broadcast's root is rank 0.

// elemCycle is the period of the values along a block.
const elemCycle = 4

// validateCollective checks a collective run test and derives its sizes.
func (s *Spec) validateCollective(nranks int, backendName string) error {
	if s.Pattern != "" && s.Pattern != "all" {
		return fmt.Errorf("--pattern %s: %s involves every rank; leave --pattern out", s.Pattern, s.Op)
	}
	s.Pattern = "all"
	if serving := backend.ImplsServing(backendName, s.Op); s.Launch.Impl == "" && len(serving) > 0 {
		s.Launch.Impl = serving[0] // the backend's first implementation of this collective
	}
	impl, err := backend.LookupImpl(backendName, s.Launch.Impl)
	if err != nil {
		return err
	}
	if err := impl.CheckOp(s.Op); err != nil {
		return err
	}
	s.Launch.Impl = impl.Name
	if s.DType == "" {
		s.DType = DefaultDType
		if backend.IsCollective(s.Op) {
			s.DType = DefaultSumDType // also what MoE layers carry
		}
	}
	d, err := LookupDType(s.DType)
	if err != nil {
		return err
	}
	s.DType = d.Name
	if backend.Reduces(s.Op) && coll.ElemSize(d.Name) == 0 {
		return fmt.Errorf("--dtype %s: %s sums, which it does for %s", d.Name, s.Op, strings.Join(coll.SumTypes, ", "))
	}
	if backend.IsMoE(s.Op) {
		if s.MoE == nil {
			m := coll.DefaultMoE
			s.MoE = &m
		}
		if coll.ElemSize(d.Name) == 0 {
			return fmt.Errorf("--dtype %s: %s carries tokens of %s", d.Name, s.Op, strings.Join(coll.SumTypes, ", "))
		}
		rt, err := s.MoE.Route(nranks, d.Size)
		if err != nil {
			return err
		}
		s.Count, s.Bytes = int64(s.MoE.Tokens)*int64(s.MoE.Hidden), rt.Bytes()
		return nil
	}
	if s.Count <= 0 || s.Count > MaxCount/int64(nranks) {
		return fmt.Errorf("--count %d out of range: give 1..%d elements per block", s.Count, MaxCount/int64(nranks))
	}
	s.Bytes = s.Count * d.Size
	// Every value a rank sends or must end with fits the type.
	for r := 0; r < nranks; r++ {
		for k := 0; k < int(min(s.Count, elemCycle)); k++ {
			for p := 0; p < nranks; p++ {
				if v := s.collValue(r, p, nranks, k); !fits(d, v) {
					_, err := d.Encode(v)
					return fmt.Errorf("--value: rank %d's block %d holds %g: %v", r, p, v, err)
				}
			}
			if v := s.collSum(r, nranks, k); backend.Reduces(s.Op) && !fits(d, v) {
				_, err := d.Encode(v)
				return fmt.Errorf("--value: the sum rank %d must hold is %g: %v", r, v, err)
			}
		}
	}
	return nil
}

func fits(d DType, v float64) bool { _, err := d.Encode(v); return err == nil }

// collValue is what element k of block p of rank r's input holds.
func (s Spec) collValue(r, p, n, k int) float64 {
	v := s.Value + float64(r+k%elemCycle)
	if s.Op == backend.OpAllToAll || s.Op == backend.OpReduceScatter {
		v += float64(n * p)
	}
	return v
}

// collSum is what element k of rank me's reduced output holds.
func (s Spec) collSum(me, n, k int) float64 {
	var sum float64
	for r := 0; r < n; r++ {
		sum += s.collValue(r, me, n, k)
	}
	return sum
}

// block is --count elements, element k being v(k).
func (s Spec) block(d DType, v func(k int) float64) []byte {
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

// collRoot is broadcast's root in a run test.
const collRoot = 0

// collBuffers sizes a collective run test on n ranks: the bytes each rank's send and
// receive buffers hold (dispatch and combine: the most any rank needs), and the size
// as nccl-tests counts it.
func (s Spec) collBuffers(n int) (send, recv, size int64, err error) {
	blocks := int64(n) * s.Bytes
	switch s.Op {
	case backend.OpAllGather:
		return s.Bytes, blocks, blocks, nil
	case backend.OpReduceScatter:
		return blocks, s.Bytes, blocks, nil
	case backend.OpAllToAll:
		return blocks, blocks, blocks, nil
	case backend.OpDispatch, backend.OpCombine:
		rt, err := s.routing(n)
		if err != nil {
			return 0, 0, 0, err
		}
		most := max(rt.Bytes(), rt.MaxSlots(), 1)
		return most, most, rt.Bytes(), nil
	}
	return s.Bytes, s.Bytes, s.Bytes, nil
}

// routing is the MoE layer's routing on n ranks.
func (s Spec) routing(n int) (*coll.Routing, error) {
	d, err := LookupDType(s.DType)
	if err != nil {
		return nil, err
	}
	return s.MoE.Route(n, d.Size)
}

// collWant is what rank me must hold, element by element.
func (s Spec) collWant(d DType, me, n int) []byte {
	blocks := func(v func(p, k int) float64) []byte {
		var out []byte
		for p := 0; p < n; p++ {
			out = append(out, s.block(d, func(k int) float64 { return v(p, k) })...)
		}
		return out
	}
	switch s.Op {
	case backend.OpAllReduce:
		return s.block(d, func(k int) float64 { return s.collSum(0, n, k) })
	case backend.OpReduceScatter:
		return s.block(d, func(k int) float64 { return s.collSum(me, n, k) })
	case backend.OpAllGather:
		return blocks(func(p, k int) float64 { return s.collValue(p, 0, n, k) })
	case backend.OpAllToAll:
		return blocks(func(p, k int) float64 { return s.collValue(p, me, n, k) })
	}
	return s.block(d, func(k int) float64 { return s.collValue(collRoot, 0, n, k) }) // broadcast
}

// runCollective is one rank's part in a collective run test.
func runCollective(b backend.Backend, s Spec, d DType, out io.Writer) (result.RankResult, error) {
	me, n := b.Rank(), b.Size()
	res := result.RankResult{Rank: me, Backend: b.Name(), From: me, Peers: "all", OK: true, Timings: map[string]float64{}}
	if s.Op == backend.OpBroadcast {
		res.Peers = fmt.Sprintf("root %d", collRoot)
	}
	t := time.Now()
	lap := func(name string) {
		res.Timings[name] = float64(time.Since(t).Microseconds()) / 1000
		t = time.Now()
	}
	cl, ok := b.(backend.Collectiver)
	if !ok {
		return res, fmt.Errorf("the %s backend runs no collectives", b.Name())
	}
	if backend.IsMoE(s.Op) {
		return runMoE(b, cl, s, d, out, res, lap)
	}
	sendBytes, recvBytes, size, err := s.collBuffers(n)
	if err != nil {
		return res, err
	}
	res.Bytes = recvBytes
	send, err := b.Alloc(sendBytes)
	if err != nil {
		return res, err
	}
	recv, recvGuard, err := guarded(b, recvBytes)
	if err != nil {
		return res, err
	}
	scratch, guard, err := guarded(b, backend.ScratchBytes(s.Op, s.Launch.Impl, size, recvBytes, n))
	if err != nil {
		return res, err
	}
	var in []byte
	for p := 0; p < n && int64(len(in)) < sendBytes; p++ {
		in = append(in, s.block(d, func(k int) float64 { return s.collValue(me, p, n, k) })...)
	}
	want := s.collWant(d, me, n)
	desc := formatElems(d, want)
	if err := b.Write(send, in[:sendBytes]); err != nil {
		return res, err
	}
	if err := b.Write(recv, complement(want)); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	c := backend.Collective{Op: s.Op, DType: s.DType, Bytes: size, Send: send, Recv: recv, Root: collRoot, Scratch: scratch}
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

// runMoE is one rank's part in a dispatch or combine run test: every rank's tokens (or
// the copies it holds, for combine) come from coll's check tables, and each rank checks
// every token copy it received (or every summed token) against the routing recomputed
// here.
func runMoE(b backend.Backend, cl backend.Collectiver, s Spec, d DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	me, n := b.Rank(), b.Size()
	rt, err := s.routing(n)
	if err != nil {
		return res, err
	}
	most, _, size, _ := s.collBuffers(n)
	var bufs [3]backend.Buffer // send, recv, scratch
	if bufs[0], err = b.Alloc(most); err != nil {
		return res, err
	}
	var recvGuard, guard backend.Buffer
	if bufs[1], recvGuard, err = guarded(b, most); err != nil {
		return res, err
	}
	if bufs[2], guard, err = guarded(b, backend.ScratchBytes(s.Op, s.Launch.Impl, size, most, n)); err != nil {
		return res, err
	}
	c := backend.Collective{Op: s.Op, DType: s.DType, Bytes: size, Send: bufs[0], Recv: bufs[1], Scratch: bufs[2], Blocks: rt.Dispatch}
	sendOf := func(p int) int64 { return rt.Bytes() }
	recv := int64(rt.Slots[me]) * rt.Token
	// Small integers, readable in the received line; every token row differs, so a copy
	// in the wrong slot is wrong elements.
	dt := s.DType
	res.Expected = fmt.Sprintf("%d token copies", rt.Slots[me])
	if s.Op == backend.OpCombine {
		c.Blocks = rt.Combine
		sendOf = func(p int) int64 { return int64(rt.Slots[p]) * rt.Token }
		recv = rt.Bytes()
		res.Expected = fmt.Sprintf("%d tokens, each the sum of its copies", rt.Tokens)
	}
	data := coll.NewData(dt, n, most)
	want, err := data.WantBlocks(c.Blocks, me, 0, sendOf, recv, s.Op == backend.OpCombine)
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

// guarded allocates size bytes followed by a guard of coll.Guard bytes
// (coll.GuardByte): an implementation that writes past the output or the scratch it
// was given (a user's kernel overrunning its promise) is caught there instead of
// reaching what lies beyond (the next buffer; the collectives' sync area at the
// heap's end).
func guarded(b backend.Backend, size int64) (buf, guard backend.Buffer, err error) {
	all, err := b.Alloc(size + coll.Guard)
	if err != nil {
		return buf, guard, err
	}
	buf, guard = all.Slice(0, size), all.Slice(size, coll.Guard)
	return buf, guard, b.Write(guard, coll.GuardPattern())
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
