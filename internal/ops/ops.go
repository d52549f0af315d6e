// Package ops holds the correctness tests `symmem run` performs: put, get and
// put-with-signal between ranks, in a pair or a ring, written once against
// backend.Backend. Each receiving rank checks the data it actually holds afterwards,
// element by element.
package ops

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// Ops lists the operations `symmem run` knows.
var Ops = []string{"put", "get", "put-signal"}

// Spec is one run's test, identical on every rank.
type Spec struct {
	Op      string         `json:"op"`
	Pattern string         `json:"pattern"` // "pair" or "ring"
	DType   string         `json:"dtype"`
	Count   int64          `json:"count"`
	Value   float64        `json:"value"`
	Peer    int            `json:"peer"`
	Launch  backend.Launch `json:"launch"`
}

// MaxCount bounds --count so that count*size cannot overflow.
const MaxCount = int64(1) << 40

// Validate checks the spec for a job of nranks ranks and fills the pattern default.
func (s *Spec) Validate(nranks int) error {
	known := false
	for _, op := range Ops {
		known = known || op == s.Op
	}
	if !known {
		return fmt.Errorf("unknown op %q: use one of %s", s.Op, strings.Join(Ops, ", "))
	}
	if nranks < 2 {
		return fmt.Errorf("%s needs at least 2 ranks, the job has %d: use --nproc 2 or more", s.Op, nranks)
	}
	if s.Pattern == "" {
		s.Pattern = "pair"
		if nranks > 2 {
			s.Pattern = "ring"
		}
	}
	if s.Pattern != "pair" && s.Pattern != "ring" {
		return fmt.Errorf("unknown pattern %q: use pair or ring", s.Pattern)
	}
	switch s.Launch.Impl {
	case "", "triton", "cuda":
	case "copy-engine", "sm-store":
		if s.Op == "put-signal" {
			return fmt.Errorf("--impl %s cannot signal: put-signal needs NVSHMEM device calls (--impl triton or cuda)", s.Launch.Impl)
		}
	default:
		return fmt.Errorf("unknown --impl %q: use triton, cuda, copy-engine or sm-store", s.Launch.Impl)
	}
	d, err := LookupDType(s.DType)
	if err != nil {
		return err
	}
	s.DType = d.Name
	if s.Count <= 0 || s.Count > MaxCount {
		return fmt.Errorf("--count %d out of range: give 1..%d elements", s.Count, MaxCount)
	}
	if s.Pattern == "pair" && (s.Peer < 1 || s.Peer >= nranks) {
		return fmt.Errorf("--peer %d out of range: rank 0 talks to a peer in 1..%d", s.Peer, nranks-1)
	}
	for r := 0; r < nranks; r++ {
		if _, err := d.Encode(s.valueOf(r)); err != nil {
			if s.Pattern == "ring" && r > 0 {
				return fmt.Errorf("--value: rank %d sends value+%d = %g: %v", r, r, s.valueOf(r), err)
			}
			return fmt.Errorf("--value: %v", err)
		}
	}
	return nil
}

// Bytes is the size of one message.
func (s Spec) Bytes() int64 {
	d, _ := LookupDType(s.DType)
	return s.Count * d.Size
}

// HeapBytes is the symmetric heap per rank the test needs: source, destination, signal.
func (s Spec) HeapBytes() int64 {
	n := backend.Align(s.Bytes(), backend.HeapAlign)
	return 2*n + backend.HeapAlign
}

// valueOf is what rank r's source buffer holds: in a ring each rank sends its own
// value, so data delivered to the wrong rank shows up as wrong elements.
func (s Spec) valueOf(r int) float64 {
	if s.Pattern == "ring" {
		return s.Value + float64(r)
	}
	return s.Value
}

// Role says what a rank does in the test: whom it sends to (or -1), and whose data it
// must end up holding (or -1).
func (s Spec) Role(rank, n int) (sendTo, recvFrom int) {
	sendTo, recvFrom = -1, -1
	switch s.Pattern {
	case "ring":
		next, prev := (rank+1)%n, (rank-1+n)%n
		if s.Op == "get" {
			// rank r fetches the next rank's data
			return -1, next
		}
		return next, prev
	default:
		if s.Op == "get" {
			if rank == 0 {
				return -1, s.Peer
			}
			return -1, -1
		}
		if rank == 0 {
			sendTo = s.Peer
		}
		if rank == s.Peer {
			recvFrom = 0
		}
		return sendTo, recvFrom
	}
}

// Result is one rank's outcome, sent to the launcher as JSON.
type Result struct {
	Rank     int                `json:"rank"`
	Backend  string             `json:"backend"`
	From     int                `json:"from"` // rank whose data this rank checked; -1: none
	Bytes    int64              `json:"bytes"`
	Expected string             `json:"expected,omitempty"`
	Wrong    int64              `json:"wrong"`
	OK       bool               `json:"ok"`
	Received string             `json:"received,omitempty"`
	Timings  map[string]float64 `json:"timings_ms,omitempty"`
}

// Run performs this rank's part of the test and checks what it received. out gets the
// "Rank N: received out=[...]" line.
func Run(b backend.Backend, s Spec, out io.Writer) (Result, error) {
	rank, n := b.Rank(), b.Size()
	d, err := LookupDType(s.DType)
	if err != nil {
		return Result{}, err
	}
	res := Result{Rank: rank, Backend: b.Name(), From: -1, Bytes: s.Bytes(), OK: true, Timings: map[string]float64{}}
	nbytes := s.Bytes()
	t := time.Now()
	lap := func(name string) {
		res.Timings[name] = float64(time.Since(t).Microseconds()) / 1000
		t = time.Now()
	}

	src, err := b.Alloc(nbytes)
	if err != nil {
		return res, err
	}
	dst, err := b.Alloc(nbytes)
	if err != nil {
		return res, err
	}
	sig, err := b.Alloc(8)
	if err != nil {
		return res, err
	}
	sendTo, recvFrom := s.Role(rank, n)
	mine, _ := d.Encode(s.valueOf(rank))
	if err := b.Write(src, bytes.Repeat(mine, int(s.Count))); err != nil {
		return res, err
	}
	var want []byte
	if recvFrom >= 0 {
		want, _ = d.Encode(s.valueOf(recvFrom))
		// Start from the complement of what must arrive: an element the op never
		// delivered can never pass for a delivered one.
		if err := b.Write(dst, bytes.Repeat(complement(want), int(s.Count))); err != nil {
			return res, err
		}
	} else if err := b.Write(dst, make([]byte, nbytes)); err != nil {
		return res, err
	}
	if err := b.Write(sig, make([]byte, 8)); err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")

	switch s.Op {
	case "put":
		if sendTo >= 0 {
			if err := b.Put(dst, src, sendTo, s.Launch); err != nil {
				return res, fmt.Errorf("put to rank %d: %w", sendTo, err)
			}
			if err := b.Quiet(); err != nil {
				return res, err
			}
		}
		err = b.Barrier()
	case "get":
		if recvFrom >= 0 {
			if err := b.Get(dst, src, recvFrom, s.Launch); err != nil {
				return res, fmt.Errorf("get from rank %d: %w", recvFrom, err)
			}
		}
		err = b.Barrier()
	case "put-signal":
		if sendTo >= 0 {
			if err := b.PutSignal(dst, src, sig, sendTo, s.Launch); err != nil {
				return res, fmt.Errorf("put-signal to rank %d: %w", sendTo, err)
			}
		}
		// No barrier: the receiver relies on the signal alone before it reads.
		if recvFrom >= 0 {
			if err = b.WaitSignal(sig, nbytes, 1, s.Launch); err != nil {
				err = fmt.Errorf("put-signal %s of %d x %s from rank %d: %w", implName(b, s.Launch), s.Count, s.DType, recvFrom, err)
			}
		}
	}
	if err != nil {
		return res, err
	}
	lap("op")

	if recvFrom >= 0 {
		got := make([]byte, nbytes)
		if err := b.Read(dst, got); err != nil {
			return res, err
		}
		res.From = recvFrom
		res.Expected = d.Format(want)
		res.Wrong = countWrong(got, want)
		res.OK = res.Wrong == 0
		res.Received = formatElems(d, got)
		fmt.Fprintf(out, "Rank %d: received out=%s\n", rank, res.Received)
	}
	lap("verify")
	// Keep every rank's heap alive until all have read.
	if err := b.Barrier(); err != nil {
		return res, err
	}
	return res, nil
}

// implName is what the output calls the implementation l selects on b.
func implName(b backend.Backend, l backend.Launch) string {
	switch {
	case b.Name() == "cpu":
		return "memcpy"
	case l.Impl == "":
		return "triton"
	}
	return l.Impl
}

func complement(b []byte) []byte {
	c := make([]byte, len(b))
	for i := range b {
		c[i] = ^b[i]
	}
	return c
}

// countWrong counts the elements of got that differ from want. It compares 64 KiB at a
// time against a slab of want and looks at single elements only where a slab differs,
// so checking 256 MiB takes milliseconds, not seconds.
func countWrong(got, want []byte) int64 {
	es := len(want)
	slab := bytes.Repeat(want, max(65536/es, 1))
	var wrong int64
	for off := 0; off < len(got); off += len(slab) {
		chunk := got[off:min(off+len(slab), len(got))]
		if bytes.Equal(chunk, slab[:len(chunk)]) {
			continue
		}
		for i := 0; i+es <= len(chunk); i += es {
			if !bytes.Equal(chunk[i:i+es], want) {
				wrong++
			}
		}
	}
	return wrong
}

// formatElems prints the buffer like a tensor: all of it when short, the ends otherwise.
func formatElems(d DType, b []byte) string {
	n := int64(len(b)) / d.Size
	el := func(i int64) string { return d.Format(b[i*d.Size : (i+1)*d.Size]) }
	var parts []string
	if n <= 32 {
		for i := int64(0); i < n; i++ {
			parts = append(parts, el(i))
		}
	} else {
		for i := int64(0); i < 3; i++ {
			parts = append(parts, el(i))
		}
		parts = append(parts, "...")
		for i := n - 3; i < n; i++ {
			parts = append(parts, el(i))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Summary counts wrong elements over all results.
func Summary(rs []Result) (wrong int64, ok bool) {
	ok = true
	for _, r := range rs {
		wrong += r.Wrong
		ok = ok && r.OK
	}
	return wrong, ok
}
