package runtest

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// getAddTest is the run test of get-add: the receiving rank (pair: rank 0; ring:
// every rank, from the next) fetches its peer's source, adds its own operand and checks
// every element of what it got against its operand plus the peer's source, in the
// element type.
//
// Rank r's source holds value + r and its own operand, in a buffer of its own, value +
// n + 2r: every rank's source differs, so a get from the wrong rank shows; the operand
// differs from every source, so adding a source twice (or the operand twice) shows; and
// operand minus source differs from rank to rank, so a kernel given the operand and the
// source the other way round (getting the peer's operand, adding its own source) shows.
type getAddTest struct{}

// getAddValues are rank r's source and operand in a job of n ranks.
func (s Spec) getAddValues(r, n int) (src, local float64) {
	return s.Value + float64(r), s.Value + float64(n+2*r)
}

func (getAddTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	if s.DType == "" {
		s.DType = ops.DefaultAddDType
	}
	d, err := s.validatePoint(nranks, backendName, reg)
	if err != nil {
		return err
	}
	if !s.Op.TakesDType(d.Name) {
		return setting.Errorf("%s %s: %s adds in %s", setting.DType, d.Name, s.Op, strings.Join(s.Op.DTypes(), ", "))
	}
	if err := s.validateData(nranks, d); err != nil {
		return err
	}
	for r := 0; r < nranks; r++ {
		src, local := s.getAddValues(r, nranks)
		for _, v := range []float64{src, local} {
			if !fits(d, v) {
				_, err := d.Encode(v)
				return setting.Errorf("%s: rank %d adds %g: %v", setting.Value, r, v, err)
			}
		}
		if _, peer := s.role(r, nranks, true); peer >= 0 {
			theirs, _ := s.getAddValues(peer, nranks)
			if v := local + theirs; !fits(d, v) {
				_, err := d.Encode(v)
				return setting.Errorf("%s: rank %d must end with %g: %v", setting.Value, r, v, err)
			}
		}
	}
	return nil
}

// layout: the point test's buffers, then tmp, the scratch of the message's size that
// a user's kernel gets the peer's source into before it adds (kernels.Signatures), and
// local, this rank's own operand.
func (getAddTest) layout(s Spec, _ int, _ *backend.Registry) (backend.Layout, error) {
	l := pointLayout(s, false)
	l.Add("tmp", s.Bytes, 0)
	l.Add("local", s.Bytes, 0)
	return l, nil
}

func (getAddTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	ga, ok := b.(backend.GetAdder)
	if !ok {
		return res, fmt.Errorf("the %s backend has no get-add", b.Name())
	}
	rank, n := b.Rank(), b.Size()
	_, recvFrom := s.role(rank, n, true)
	bufs, _, err := setup(b, lay, s, d, -1, false)
	if err != nil {
		return res, err
	}
	mySrc, myLocal := s.getAddValues(rank, n)
	for _, w := range []struct {
		buf backend.Buffer
		v   float64
	}{{bufs.src, mySrc}, {bufs.local, myLocal}} {
		e, _ := d.Encode(w.v)
		if err := b.Write(w.buf, bytes.Repeat(e, int(s.Count))); err != nil {
			return res, err
		}
	}
	var want []byte
	if recvFrom >= 0 {
		// What arrives is this rank's operand plus the peer's source: its destination
		// first holds the complement, so an element never written cannot pass; tmp the
		// complement of the peer's source, so a sum of tmp never got into cannot pass
		// either (the peer's value may be 0).
		theirsV, _ := s.getAddValues(recvFrom, n)
		want, _ = d.Encode(myLocal + theirsV)
		if err := b.Write(bufs.dst, bytes.Repeat(complement(want), int(s.Count))); err != nil {
			return res, err
		}
		theirs, _ := d.Encode(theirsV)
		if err := b.Write(bufs.tmp, bytes.Repeat(complement(theirs), int(s.Count))); err != nil {
			return res, err
		}
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	if recvFrom >= 0 {
		if err := ga.GetAdd(bufs.dst, bufs.local, bufs.src, bufs.tmp, recvFrom, s.DType, s.Launch); err != nil {
			return res, fmt.Errorf("%s from rank %d: %w", s.Op, recvFrom, err)
		}
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("op")
	if recvFrom >= 0 {
		if err := receive(b, bufs.dst, s, d, want, recvFrom, &res); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "Rank %d: received out=%s (its own plus rank %d's)\n", rank, res.Received, recvFrom)
	}
	lap("verify")
	return res, b.Barrier()
}
