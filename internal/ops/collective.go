package ops

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/result"
)

// A collective run test: every rank r sends --count elements per block, block p of
// rank r holding value + r + n*p (blocks of all-to-all and reduce-scatter) or value +
// r (the others), so a block delivered to the wrong place or a rank left out of a sum
// shows up as wrong elements. Broadcast's root is --peer's counterpart, rank 0.

// validateCollective checks a collective run test and derives its sizes.
func (s *Spec) validateCollective(nranks int, backendName string) error {
	if s.Op == backend.OpDispatch || s.Op == backend.OpCombine {
		return fmt.Errorf("run %s: the MoE all-to-all-v is checked by bench (symmem bench --op %s); run tests the other collectives", s.Op, s.Op)
	}
	if s.Pattern != "" && s.Pattern != "all" {
		return fmt.Errorf("--pattern %s: %s involves every rank; leave --pattern out", s.Pattern, s.Op)
	}
	s.Pattern = "all"
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
		if backend.Reduces(s.Op) {
			s.DType = DefaultSumDType
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
	if s.Count <= 0 || s.Count > MaxCount/int64(nranks) {
		return fmt.Errorf("--count %d out of range: give 1..%d elements per block", s.Count, MaxCount/int64(nranks))
	}
	s.Bytes = s.Count * d.Size
	// Every value a rank sends or must end with fits the type.
	for r := 0; r < nranks; r++ {
		for p := 0; p < nranks; p++ {
			if _, err := d.Encode(s.collValue(r, p, nranks)); err != nil {
				return fmt.Errorf("--value: rank %d's block %d holds %g: %v", r, p, s.collValue(r, p, nranks), err)
			}
		}
		if backend.Reduces(s.Op) {
			if _, err := d.Encode(s.collSum(r, nranks)); err != nil {
				return fmt.Errorf("--value: the sum rank %d must hold is %g: %v", r, s.collSum(r, nranks), err)
			}
		}
	}
	return nil
}

// collValue is what block p of rank r's input holds.
func (s Spec) collValue(r, p, n int) float64 {
	if s.Op == backend.OpAllToAll || s.Op == backend.OpReduceScatter {
		return s.Value + float64(r+n*p)
	}
	return s.Value + float64(r)
}

// collSum is the value every element of rank me's reduced output holds.
func (s Spec) collSum(me, n int) float64 {
	var sum float64
	for r := 0; r < n; r++ {
		sum += s.collValue(r, me, n)
	}
	return sum
}

// collRoot is broadcast's root in a run test.
const collRoot = 0

// collBuffers sizes a collective run test on n ranks: the bytes each rank sends and
// receives, and the size as nccl-tests counts it.
func (s Spec) collBuffers(n int) (send, recv, size int64) {
	blocks := int64(n) * s.Bytes
	switch s.Op {
	case backend.OpAllGather:
		return s.Bytes, blocks, blocks
	case backend.OpReduceScatter:
		return blocks, s.Bytes, blocks
	case backend.OpAllToAll:
		return blocks, blocks, blocks
	}
	return s.Bytes, s.Bytes, s.Bytes
}

// collWant is what rank me must hold, element by element, and a short description.
func (s Spec) collWant(d DType, me, n int) ([]byte, string) {
	el := func(v float64) []byte { b, _ := d.Encode(v); return b }
	blocks := func(v func(p int) float64) ([]byte, string) {
		var out []byte
		var desc []string
		for p := 0; p < n; p++ {
			e := el(v(p))
			out = append(out, bytes.Repeat(e, int(s.Count))...)
			desc = append(desc, d.Format(e))
		}
		return out, "blocks " + strings.Join(desc, ",")
	}
	switch s.Op {
	case backend.OpAllReduce, backend.OpReduceScatter:
		e := el(s.collSum(me, n))
		if s.Op == backend.OpAllReduce {
			e = el(s.collSum(0, n))
		}
		return bytes.Repeat(e, int(s.Count)), d.Format(e)
	case backend.OpAllGather:
		return blocks(func(p int) float64 { return s.collValue(p, 0, n) })
	case backend.OpAllToAll:
		return blocks(func(p int) float64 { return s.collValue(p, me, n) })
	}
	e := el(s.collValue(collRoot, 0, n)) // broadcast
	return bytes.Repeat(e, int(s.Count)), d.Format(e)
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
	sendBytes, recvBytes, size := s.collBuffers(n)
	res.Bytes = recvBytes
	send, err := b.Alloc(sendBytes)
	if err != nil {
		return res, err
	}
	recv, err := b.Alloc(recvBytes)
	if err != nil {
		return res, err
	}
	var in []byte
	for p := 0; p < n; p++ {
		e, _ := d.Encode(s.collValue(me, p, n))
		if int64(len(in)) < sendBytes {
			in = append(in, bytes.Repeat(e, int(s.Count))...)
		}
	}
	want, desc := s.collWant(d, me, n)
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
	c := backend.Collective{Op: s.Op, DType: s.DType, Bytes: size, Send: send, Recv: recv, Root: collRoot}
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
	res.OK = res.Wrong == 0
	res.Received = formatElems(d, got)
	fmt.Fprintf(out, "Rank %d: received out=%s\n", me, res.Received)
	lap("verify")
	return res, b.Barrier()
}
