// Package runtest holds the correctness tests `symmem run` performs: put, get and
// put-with-signal between ranks, in a pair or a ring (a put also from one rank to every
// other), written once against
// backend.Backend. Each receiving rank checks the data it actually holds afterwards,
// element by element.
package runtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// Spec is one run's test, identical on every rank.
type Spec struct {
	Op      ops.Op `json:"op"`
	Pattern string `json:"pattern"` // "pair", "ring" or ops.OneToAll (put); "all" where every rank takes part
	DType   string `json:"dtype"`
	// RedOp is the reduction operator of all-reduce and reduce-scatter (ops.RedOps;
	// "" is sum).
	RedOp string `json:"redop,omitempty"`
	Count int64  `json:"count"`
	// Bytes is one message's size, derived by Validate from Count and DType.
	Bytes int64   `json:"bytes"`
	Value float64 `json:"value"`
	Peer  int     `json:"peer"`
	// Root is the root of the operations that have one (ops.RootSetting: broadcast's
	// source).
	Root   int            `json:"root,omitempty"`
	Launch backend.Launch `json:"launch"`
	// Matmul is the fused operations' shape (nil: ops.DefaultMatmul); Random fills
	// their A and B with random values, checked within ops.MatmulTolerance, instead
	// of small integers checked exactly.
	Matmul *ops.Matmul `json:"matmul,omitempty"`
	Random bool        `json:"random,omitempty"`
	// MoE is the layer dispatch and combine route (Count is not used for them).
	MoE *coll.MoE `json:"moe,omitempty"`
	// Variants are the variants of Op the run tests (put-flag's orderings, barrier's
	// meetings): those the implementation runs, filled in by Validate; none: every one.
	Variants []string `json:"variants,omitempty"`
}

// variants are the variants of s.Op the run tests, in ops' order.
func (s Spec) variants() []string {
	if len(s.Variants) > 0 {
		return s.Variants
	}
	return s.Op.Variants("")
}

// DefaultDType is what a run test sends unless --dtype says otherwise; collectives
// default to DefaultSumDType, the element type bench's collectives take too, so that
// run and bench sum in the same type.
const (
	DefaultDType    = "int8"
	DefaultSumDType = "bf16"
)

// MaxCount bounds --count so that count*size cannot overflow.
const MaxCount = int64(1) << 40

// test is how a run test of one family of operations (ops.Family) is validated, laid
// out and run; an operation of a family is tested by its family's test, which asks
// the operation (its shape, delivery, settings) for everything else.
type test interface {
	// validate checks s (its common settings checked already), fills its defaults
	// and derives its sizes.
	validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error
	// layout is its symmetric buffers on nranks ranks.
	layout(s Spec, nranks int, reg *backend.Registry) (backend.Layout, error)
	// run is one rank's part: setup, the operation and the check.
	run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error)
}

// tests are the run tests, a family each.
var tests = map[ops.Family]test{
	ops.FamilyPut:        pointTest{move: putMove},
	ops.FamilyGet:        pointTest{pulls: true, move: getMove},
	ops.FamilyPutSignal:  pointTest{move: putSignalMove},
	ops.FamilyPutFlag:    putFlagTest{},
	ops.FamilySignal:     signalTest{},
	ops.FamilyCollective: collTest{},
	ops.FamilyRouted:     moeTest{},
	ops.FamilyMeeting:    meetTest{},
	ops.FamilyFused:      fusedTest{},
	ops.FamilyGetAdd:     getAddTest{},
}

// testOf is the run test of op (false: run does not test it).
func testOf(op ops.Op) (test, bool) {
	t, ok := tests[op.Family()]
	return t, ok && op.Runs()
}

// Validate checks the spec for a job of nranks ranks on backend (reg says which
// implementation serves which op), fills the defaults (pattern, implementation)
// and derives the message size.
func (s *Spec) Validate(nranks int, backendName string, reg *backend.Registry) error {
	t, ok := testOf(s.Op)
	if !ok {
		return fmt.Errorf("unknown op %q: use one of %s", s.Op, ops.Names(ops.RunOps()))
	}
	if s.Launch.Blocks < 0 || s.Launch.Warps < 0 {
		return setting.Errorf("%s and %s must not be negative", setting.Blocks, setting.Warps)
	}
	if strings.Contains(s.RedOp, ",") || strings.EqualFold(strings.TrimSpace(s.RedOp), ops.AllRedOps) {
		return setting.Errorf("%s %s: run tests one operator: give one of %s (bench %s %s measures each)", setting.RedOp, s.RedOp, ops.RedOpNames(), setting.RedOp, ops.AllRedOps)
	}
	if nranks < 2 {
		return setting.Errorf("%s needs at least 2 ranks, the job has %d: use %s 2 or more", s.Op, nranks, setting.NProc)
	}
	if r, err := ops.LookupRedOp(s.RedOp); err != nil {
		return setting.Errorf("%s: %v", setting.RedOp, err)
	} else if !r.IsSum() && !s.Op.Takes(ops.RedOpSetting) {
		return setting.Errorf("%s %s: %s combines nothing; the reduction operator is for %s", setting.RedOp, s.RedOp, s.Op, ops.Names(ops.Taking(ops.RedOpSetting)))
	}
	if !s.Op.Takes(ops.RootSetting) && s.Root != 0 {
		return setting.Errorf("%s %d: %s has no root; the root is for %s", setting.Root, s.Root, s.Op, ops.Names(ops.Taking(ops.RootSetting)))
	}
	if s.Root < 0 || s.Root >= nranks {
		return setting.Errorf("%s %d out of range: the job has ranks 0..%d", setting.Root, s.Root, nranks-1)
	}
	return t.validate(s, nranks, backendName, reg)
}

// validatePoint checks a test between two ranks (or around a ring, or from one rank to
// every other): its implementation, pattern and element type.
func (s *Spec) validatePoint(nranks int, backendName string, reg *backend.Registry) (ops.DType, error) {
	if s.DType == "" {
		s.DType = DefaultDType
	}
	if err := s.validateImpl(backendName, reg); err != nil {
		return ops.DType{}, err
	}
	if err := s.validatePattern(nranks, reg); err != nil {
		return ops.DType{}, err
	}
	return ops.LookupDType(s.DType)
}

// validatePattern fills in and checks a point test's pattern: pair on 2 ranks, a ring
// on more, where an implementation's put reaches every other rank by itself
// (backend.Impl.ReachesAll: a user's kernel that computes its peers) one-to-all, the
// only pattern it serves on more than 2 ranks (on 2 its one peer is every peer, and
// every pattern is the same delivery).
func (s *Spec) validatePattern(nranks int, reg *backend.Registry) error {
	im, _ := reg.ByName(s.Launch.Impl)
	all := im.ReachesAll(s.Op) && nranks > 2
	inPlace := im.InPlace(s.Op)
	if s.Pattern == "" {
		switch {
		case all:
			s.Pattern = ops.OneToAll
		case nranks > 2 && !inPlace:
			s.Pattern = "ring"
		default:
			s.Pattern = "pair"
		}
	}
	known := Patterns(s.Op)
	switch {
	case s.Pattern == ops.OneToAll && !s.Op.ToAll():
		toAll := slices.DeleteFunc(ops.All(), func(o ops.Op) bool { return !o.ToAll() })
		return setting.Errorf("%s %s: %s runs pair or ring; one rank to every other is for %s", setting.Pattern, s.Pattern, s.Op, ops.Names(toAll))
	case !slices.Contains(known, s.Pattern):
		return setting.Errorf("unknown %s %q: use %s", setting.Pattern, s.Pattern, orList(known))
	case inPlace && s.Pattern == "ring":
		// Its entry puts this rank's src into its own dst and sends dst: a ring's rank,
		// which also receives into dst, would race its own put with its peer's.
		use := "pair (one sender, rank 0)"
		if im.ReachesAll(s.Op) {
			use = ops.OneToAll
		}
		return setting.Errorf("%s ring: %s %s puts its buffer in place (it sends its own dst), so a rank that sends it cannot also receive there: use %s %s",
			setting.Pattern, setting.Impl, s.Launch.Impl, setting.Pattern, use)
	case all && s.Pattern != ops.OneToAll:
		return setting.Errorf("%s %s: %s %s puts to every other rank from one launch, and %s gives each sender one receiver: use %s %s (on 2 ranks, pair is the same delivery)",
			setting.Pattern, s.Pattern, setting.Impl, s.Launch.Impl, s.Pattern, setting.Pattern, ops.OneToAll)
	}
	return nil
}

// Patterns are the patterns a run test of op takes (Spec.Pattern): pair and ring, and
// ops.OneToAll for a put; none for a test every rank takes part in (its pattern is
// "all").
func Patterns(op ops.Op) []string {
	if op.EveryRank() {
		return nil
	}
	if op.ToAll() {
		return []string{"pair", "ring", ops.OneToAll}
	}
	return []string{"pair", "ring"}
}

// orList is "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// validateImpl resolves the implementation (the backend's first that serves the op
// where none is named) and the variants it runs.
func (s *Spec) validateImpl(backendName string, reg *backend.Registry) error {
	s.Launch.Impl = firstServing(reg, backendName, s.Op, s.Launch.Impl)
	impl, err := reg.Lookup(backendName, s.Launch.Impl)
	// An error names the implementations that would run the op.
	var wrong *backend.WrongBackendError
	var unknown *backend.UnknownImplError
	switch {
	case errors.As(err, &wrong):
		wrong.Known = reg.Serving(backendName, s.Op)
	case errors.As(err, &unknown):
		unknown.Known = reg.Serving(backendName, s.Op)
	}
	if err != nil {
		return err
	}
	if err := reg.CheckOp(impl, s.Op); err != nil {
		return err
	}
	s.Launch.Impl = impl.Name
	if _, some := impl.Variants[s.Op]; some {
		s.Variants = impl.VariantsOf(s.Op, "")
	}
	if !impl.NeedsGPU() && (s.Launch.Blocks != 0 || s.Launch.Warps != 0) {
		return setting.Errorf("%s and %s shape GPU launches; the %s backend has none: leave them out", setting.Blocks, setting.Warps, backendName)
	}
	return nil
}

// validateData checks a point test's element count, peer and values.
func (s *Spec) validateData(nranks int, d ops.DType) error {
	s.DType = d.Name
	if s.Count <= 0 || s.Count > MaxCount {
		return setting.Errorf("%s %d out of range: give 1..%d elements", setting.Count, s.Count, MaxCount)
	}
	s.Bytes = s.Count * d.Size
	if err := s.validatePeer(nranks); err != nil {
		return err
	}
	for r := 0; r < nranks; r++ {
		if _, err := d.Encode(s.valueOf(r)); err != nil {
			if s.Pattern == "ring" && r > 0 {
				return setting.Errorf("%s: rank %d sends value+%d = %g: %v", setting.Value, r, r, s.valueOf(r), err)
			}
			return setting.Errorf("%s: %v", setting.Value, err)
		}
	}
	return nil
}

func (s *Spec) validatePeer(nranks int) error {
	if s.Pattern == "pair" && (s.Peer < 1 || s.Peer >= nranks) {
		return setting.Errorf("%s %d out of range: rank 0 talks to a peer in 1..%d", setting.Peer, s.Peer, nranks-1)
	}
	return nil
}

// validateEveryRank checks the pattern of a test every rank takes part in.
func (s *Spec) validateEveryRank() error {
	if s.Pattern != "" && s.Pattern != "all" {
		return setting.Errorf("%s %s: %s involves every rank; leave %s out", setting.Pattern, s.Pattern, s.Op, setting.Pattern)
	}
	s.Pattern = "all"
	return nil
}

// Layout is the test's symmetric buffers on nranks ranks, in the order every rank
// carves them (its family's: source, destination and signal for a point test; input,
// output and scratch, each of the last two followed by a guard, for a collective).
func (s Spec) Layout(nranks int, reg *backend.Registry) (backend.Layout, error) {
	t, ok := testOf(s.Op)
	if !ok {
		return backend.Layout{}, fmt.Errorf("unknown op %q: use one of %s", s.Op, ops.Names(ops.RunOps()))
	}
	return t.layout(s, nranks, reg)
}

// HeapBytes is the symmetric heap per rank the test's Layout takes (0 for a spec
// that does not validate).
func (s Spec) HeapBytes(nranks int, reg *backend.Registry) int64 {
	l, err := s.Layout(nranks, reg)
	if err != nil {
		return 0
	}
	return l.Heap()
}

// valueOf is what rank r's source buffer holds: in a ring each rank sends its own
// value, so data delivered to the wrong rank shows up as wrong elements.
func (s Spec) valueOf(r int) float64 {
	if s.Pattern == "ring" {
		return s.Value + float64(r)
	}
	return s.Value
}

// everyPeer is role's sendTo for a rank that sends to every other rank (one-to-all).
const everyPeer = -2

// role says what a rank does in a point test: whom it sends to (or -1, or everyPeer),
// and whose data it must end up holding (or -1). pulls: the receiver fetches the data.
func (s Spec) role(rank, n int, pulls bool) (sendTo, recvFrom int) {
	sendTo, recvFrom = -1, -1
	switch s.Pattern {
	case ops.OneToAll:
		if rank == 0 {
			return everyPeer, -1
		}
		return -1, 0
	case "ring":
		next, prev := (rank+1)%n, (rank-1+n)%n
		if pulls {
			// rank r fetches the next rank's data
			return -1, next
		}
		return next, prev
	default:
		if pulls {
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

// buffers are one test's symmetric objects on this rank (quiet: put-flag's second
// destination).
// buffers are a point test's: tmp is get-add's scratch and local its own operand (the
// zero Buffer elsewhere).
type buffers struct{ src, dst, sig, quiet, tmp, local backend.Buffer }

// Run performs this rank's part of the test, in the buffers of lay (the spec's Layout,
// planned by the launcher), and checks what it received. out gets the
// "Rank N: received out=[...]" line.
func Run(b backend.Backend, lay backend.Layout, s Spec, out io.Writer) (result.RankResult, error) {
	t, ok := testOf(s.Op)
	if !ok {
		return result.RankResult{}, fmt.Errorf("unknown op %q: use one of %s", s.Op, ops.Names(ops.RunOps()))
	}
	d, err := ops.LookupDType(s.DType)
	if err != nil {
		return result.RankResult{}, err
	}
	res := result.RankResult{Rank: b.Rank(), Backend: b.Name(), From: -1, Bytes: s.Bytes, OK: true, Timings: map[string]float64{}}
	t0 := time.Now()
	lap := func(name string) {
		res.Timings[name] = float64(time.Since(t0).Microseconds()) / 1000
		t0 = time.Now()
	}
	return t.run(b, lay, s, d, out, res, lap)
}

// pointTest is the run test of put, get and put-signal: pulls says the receiver
// fetches; move does the operation on this rank and returns once the data it must
// check has landed.
type pointTest struct {
	pulls bool
	move  func(b backend.Backend, s Spec, bufs buffers, sendTo, recvFrom int) error
}

func (t pointTest) validate(s *Spec, nranks int, backendName string, reg *backend.Registry) error {
	d, err := s.validatePoint(nranks, backendName, reg)
	if err != nil {
		return err
	}
	return s.validateData(nranks, d)
}

func (pointTest) layout(s Spec, _ int, _ *backend.Registry) (backend.Layout, error) {
	return pointLayout(s, false), nil
}

// pointLayout is a point test's source, destination and signal (second: put-flag's
// second ordering's destination after them).
func pointLayout(s Spec, second bool) backend.Layout {
	var l backend.Layout
	l.Add("src", s.Bytes, 0)
	l.Add("dst", s.Bytes, 0)
	l.Add("sig", 8, 0)
	if second {
		l.Add("dst-quiet", s.Bytes, 0)
	}
	return l
}

func (t pointTest) run(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, out io.Writer, res result.RankResult, lap func(string)) (result.RankResult, error) {
	rank := b.Rank()
	sendTo, recvFrom := s.role(rank, b.Size(), t.pulls)
	bufs, want, err := setup(b, lay, s, d, recvFrom, false)
	if err != nil {
		return res, err
	}
	if err := b.Barrier(); err != nil {
		return res, err
	}
	lap("setup")
	if err := t.move(b, s, bufs, sendTo, recvFrom); err != nil {
		return res, err
	}
	lap("op")
	if recvFrom >= 0 {
		if err := receive(b, bufs.dst, s, d, want, recvFrom, &res); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "Rank %d: received out=%s\n", rank, res.Received)
	}
	lap("verify")
	// Keep every rank's heap alive until all have read.
	return res, b.Barrier()
}

// receive reads dst, where every element must be want (one element, repeated), and
// records in res what it holds and how many of its elements are wrong, from rank from.
func receive(b backend.Backend, dst backend.Buffer, s Spec, d ops.DType, want []byte, from int, res *result.RankResult) error {
	got := make([]byte, s.Bytes)
	if err := b.Read(dst, got); err != nil {
		return err
	}
	res.From = from
	res.Expected = d.Format(want)
	res.Wrong = countWrong(got, want)
	res.OK = res.Wrong == 0
	res.Received = formatElems(d, got)
	return nil
}

// setup carves the buffers, fills the source with this rank's value and the
// destination with the complement of what must arrive (an element the op never
// delivered can never pass for a delivered one); the caller meets the other ranks
// after. want is the element this rank must receive (nil when it receives nothing);
// second: put-flag's second destination is carved too.
func setup(b backend.Backend, lay backend.Layout, s Spec, d ops.DType, recvFrom int, second bool) (bufs buffers, want []byte, err error) {
	carved, err := lay.Carve(b)
	if err != nil {
		return bufs, nil, err
	}
	bufs = buffers{src: carved.One("src").Buf, dst: carved.One("dst").Buf, sig: carved.One("sig").Buf, tmp: carved.One("tmp").Buf,
		local: carved.One("local").Buf}
	if second {
		bufs.quiet = carved.One("dst-quiet").Buf
	}
	mine, _ := d.Encode(s.valueOf(b.Rank()))
	if err := b.Write(bufs.src, bytes.Repeat(mine, int(s.Count))); err != nil {
		return bufs, nil, err
	}
	// A rank that receives nothing holds the complement of its own value: a put in
	// place sends its dst after putting its src there, and one whose own put went
	// missing would forward what dst held (zeros would pass for a --value of 0).
	fill := bytes.Repeat(complement(mine), int(s.Count))
	if recvFrom >= 0 {
		want, _ = d.Encode(s.valueOf(recvFrom))
		fill = bytes.Repeat(complement(want), int(s.Count))
	}
	if err := b.Write(bufs.dst, fill); err != nil {
		return bufs, nil, err
	}
	if err := b.Write(bufs.sig, make([]byte, 8)); err != nil {
		return bufs, nil, err
	}
	return bufs, want, nil
}

// putMove puts to sendTo (everyPeer: every other rank, by backend.PutAll, which
// launches a kernel that reaches them all once) and completes it; the receivers read
// after the barrier.
func putMove(b backend.Backend, s Spec, bufs buffers, sendTo, _ int) error {
	switch {
	case sendTo == everyPeer:
		if err := backend.PutAll(b, bufs.dst, bufs.src, s.Launch); err != nil {
			return fmt.Errorf("%s %s: %w", s.Op, ops.OneToAll, err)
		}
	case sendTo >= 0:
		if err := b.Put(bufs.dst, bufs.src, sendTo, s.Launch); err != nil {
			return fmt.Errorf("%s to rank %d: %w", s.Op, sendTo, err)
		}
	}
	if sendTo != -1 {
		if err := b.Quiet(); err != nil {
			return err
		}
	}
	return b.Barrier()
}

// getMove fetches recvFrom's source.
func getMove(b backend.Backend, s Spec, bufs buffers, _, recvFrom int) error {
	if recvFrom >= 0 {
		if err := b.Get(bufs.dst, bufs.src, recvFrom, s.Launch); err != nil {
			return fmt.Errorf("%s from rank %d: %w", s.Op, recvFrom, err)
		}
	}
	return b.Barrier()
}

// putSignalMove puts with a signal; the receiver relies on the signal alone (no
// barrier) before it reads.
func putSignalMove(b backend.Backend, s Spec, bufs buffers, sendTo, recvFrom int) error {
	if sendTo >= 0 {
		if err := b.PutSignal(bufs.dst, bufs.src, bufs.sig, sendTo, s.Launch); err != nil {
			return fmt.Errorf("%s to rank %d: %w", s.Op, sendTo, err)
		}
	}
	if recvFrom >= 0 {
		if err := b.WaitSignal(bufs.sig, s.Bytes, 1, s.Launch); err != nil {
			return fmt.Errorf("%s %s of %d x %s from rank %d: %w", s.Op, s.Launch.Impl, s.Count, s.DType, recvFrom, err)
		}
	}
	return nil
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
	// A slab of the expected element, up to 64 KiB and no longer than the buffer: a
	// small buffer's check touches a few bytes, not 16 fresh pages.
	slab := bytes.Repeat(want, max(min(65536, len(got))/es, 1))
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
func formatElems(d ops.DType, b []byte) string {
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

// firstServing is impl, or where it is empty the first of backendName's
// implementations that serves op (a backend's default may not).
func firstServing(reg *backend.Registry, backendName string, op ops.Op, impl string) string {
	if serving := reg.Serving(backendName, op); impl == "" && len(serving) > 0 {
		return serving[0]
	}
	return impl
}
