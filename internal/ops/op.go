// Package ops says what each operation symmem runs is: its kind, what a size means for
// it on some number of ranks (the buffers it needs), the data every rank must end
// with, its bus-bandwidth factor (as nccl-tests counts it) and the element types it
// takes. Each operation is one file of this package; nothing else decides by an
// operation's name, so adding one is its file here plus the implementations that
// serve it.
package ops

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/symmem/symmem/internal/units"
)

// Op is an operation, by the name users type ("all-reduce"). Its behaviour is what
// its file defines; an Op no file defines is unknown (Known). Each file's constant is
// an untyped string, so that specs and rows that carry names take it as it is.
type Op string

// def is what an operation's file defines.
type def struct {
	// order is the operation's place in tables and help.
	order  int
	family Family
	// takes are the settings it reads beside its size (Takes).
	takes []Setting
	// help is its line in the commands' help.
	help string
	// named says bench's --op all leaves it out: it is measured where named (the fused
	// operations, whose element types and shape are their own).
	named bool
	// sums says it adds what it moved to what the rank holds, in its element type
	// (get-add): it takes ReduceTypes, with no operator to choose.
	sums bool
	// fused is a fused operation's matrix product (FamilyFused).
	fused *fusedDef
	// split says each rank's share is the size over the ranks: the buffer that holds
	// one share (sendShare: the input, recvShare: the output; both: neither, each is
	// the size in rank blocks).
	split     bool
	sendShare bool
	recvShare bool
	// bus is the bus-bandwidth factor on n ranks (nil: 1).
	bus func(n int) float64
	// reduces says the operation combines its inputs under a reduction operator
	// (RedOp): it takes ReduceTypes only.
	reduces bool
	// tokens says it carries tokens of ReduceTypes (MoE) without necessarily combining them.
	tokens bool
	// routed says its blocks are a MoE layer's routing of tokens to experts (Routed).
	routed bool
	// pulls says the receiver fetches (get); signals says the data comes with a signal.
	pulls, signals bool
	// toAll says one rank may send its message to every other rank at once (the
	// OneToAll pattern).
	toAll bool
	// rooted says one rank, the root (Inputs.Root), is the source or the sink of the
	// data: broadcast's sends its input to every rank, scatter's a block of it to
	// each, reduce's ends with every rank's combined, gather's with every rank's side
	// by side.
	rooted bool
	// runs says `symmem run` tests it.
	runs bool
	// algos are the values --algo takes for it; variants says they are variants that
	// bench measures each, a row each, unless --algo names one (rather than
	// algorithms an implementation may choose between).
	algos    []string
	variants bool
	// bare says it moves no payload: a signal alone (its size is the signal word's).
	// flags says the data is followed, after an ordering (its variants), by a flag
	// put the receiver waits on before it reads the data.
	bare, flags bool
	// extra says bench's default sweep leaves it out: it is measured where asked for
	// by name (or by all).
	extra bool
	// title heads its table of results (empty: its name).
	title string
	// deliver is what rank in.Me must hold afterwards.
	deliver func(in Inputs) ([]byte, error)
}

var defs = map[Op]def{}

// define is how an operation's file adds it.
func define(o Op, d def) Op {
	if _, dup := defs[o]; dup {
		panic("op " + string(o) + " defined twice")
	}
	if d.routed != (d.family == FamilyRouted) {
		panic("op " + string(o) + ": a routed operation is of FamilyRouted, and only it")
	}
	if (d.fused != nil) != (d.family == FamilyFused) {
		panic("op " + string(o) + ": a fused operation is of FamilyFused, and only it")
	}
	if d.help == "" {
		panic("op " + string(o) + " has no help line")
	}
	defs[o] = d
	return o
}

func (o Op) def() def { return defs[o] }

// String is the operation's name.
func (o Op) String() string { return string(o) }

// Known says whether some file defines o.
func (o Op) Known() bool { _, ok := defs[o]; return ok }

// IsCollective says whether every rank takes part in o (collectives and MoE).
func (o Op) IsCollective() bool {
	f := o.def().family
	return o.Known() && (f == FamilyCollective || f == FamilyRouted)
}

// EveryRank says whether every rank takes part in o as one (collectives, MoE and
// barriers): its results are one row per job, not per pair.
func (o Op) EveryRank() bool {
	f := o.def().family
	return o.IsCollective() || o.Known() && (f == FamilyMeeting || f == FamilyFused)
}

// RoundTrip says whether o is timed as a round trip between two ranks: it has a time
// and no bandwidth, and every round of it is a sample.
func (o Op) RoundTrip() bool {
	f := o.def().family
	return o.Known() && (f == FamilyLatency || f == FamilySignal)
}

// Title heads o's table of results.
func (o Op) Title() string {
	if t := o.def().title; t != "" {
		return t
	}
	return string(o)
}

// Uneven says whether o moves a list of blocks (an all-to-all-v) in which each rank
// sends and receives its own amount: its buffers are sized by its blocks, not by a
// share of one size, and its bus bandwidth is the bytes that crossed to other ranks.
func (o Op) Uneven() bool { return o.Known() && o.def().family == FamilyRouted }

// Routed says whether o's blocks are a MoE layer's routing of tokens to their experts
// (coll.MoE: tokens, hidden, top-k, experts): it is measured at the layer's token
// buffer, one size, not at the sizes of a sweep.
func (o Op) Routed() bool { return o.def().routed }

// Splits says whether each rank's share of o is its size over the ranks (all-gather's
// and gather's input, reduce-scatter's and scatter's output, all-to-all's block per
// peer), not the whole of it.
func (o Op) Splits() bool { return o.def().split }

// Reduces says whether o combines its inputs under a reduction operator (its element
// type and --redop matter).
func (o Op) Reduces() bool { return o.def().reduces }

// TakesRedOp says whether o combines its inputs under the operator --redop names
// (all-reduce, reduce-scatter, reduce); combine's copies of a token are always summed.
func (o Op) TakesRedOp() bool { d := o.def(); return d.reduces && !d.tokens }

// CombineType is the element type o's inputs are combined in, given the sweep's or the
// test's dtype: dtype where o combines them (a reduction, combine's sum), "" where it
// only moves bytes.
func (o Op) CombineType(dtype string) string {
	if d := o.def(); d.reduces || d.sums {
		return dtype
	}
	return ""
}

// Pulls says whether the receiving rank fetches the data (get) rather than being sent it.
func (o Op) Pulls() bool { return o.def().pulls }

// ToAll says whether one rank may send o's message to every other rank at once (run's
// OneToAll pattern).
func (o Op) ToAll() bool { return o.def().toAll }

// Signals says whether the data is delivered with a signal the receiver waits on.
func (o Op) Signals() bool { return o.def().signals }

// Rooted says whether o has a root (Inputs.Root, --root): the rank whose data goes to
// every rank (broadcast, scatter) or that ends with every rank's (reduce, gather).
func (o Op) Rooted() bool { return o.def().rooted }

// Bare says whether o carries no payload: a signal alone.
func (o Op) Bare() bool { return o.def().bare }

// Flags says whether o's data is followed, after an ordering (fence or quiet), by a
// flag put that the receiver waits on before it reads the data.
func (o Op) Flags() bool { return o.def().flags }

// Variants lists the variants of o that bench measures, a row each: algo alone where
// it is one of them, else every one (none: o has no variants).
func (o Op) Variants(algo string) []string {
	d := o.def()
	if !d.variants {
		return nil
	}
	if slices.Contains(d.algos, algo) {
		return []string{algo}
	}
	return slices.Clone(d.algos)
}

// InAll says whether bench's --op all measures o (the fused operations are measured
// where named).
func (o Op) InAll() bool { return o.Known() && !o.def().named }

// Runs says whether `symmem run` tests o.
func (o Op) Runs() bool { return o.def().runs }

// Algos lists the values --algo takes for o (none: o has one algorithm).
func (o Op) Algos() []string { return o.def().algos }

// BusFactor turns algorithm bandwidth (size / time) into bus bandwidth, as nccl-tests
// does: the share of the data every rank must move over its links.
func (o Op) BusFactor(n int) float64 {
	if b := o.def().bus; b != nil {
		return b(n)
	}
	return 1
}

// ringShare is (n-1)/n, the share of the data a rank must receive from its peers.
func ringShare(n int) float64 { return float64(n-1) / float64(n) }

// DTypes lists the element types o takes (all of DTypeNames for one that only moves
// bytes).
func (o Op) DTypes() []string {
	if o.def().fused != nil {
		return slices.Clone(MatmulTypes)
	}
	if d := o.def(); d.reduces || d.tokens || d.sums {
		return slices.Clone(ReduceTypes)
	}
	return DTypeNames()
}

// TakesDType says whether o can carry elements of dtype (any alias).
func (o Op) TakesDType(dtype string) bool {
	if o.def().fused != nil {
		return slices.Contains(MatmulTypes, Canonical(dtype))
	}
	if d := o.def(); d.reduces || d.tokens || d.sums {
		return ElemSize(dtype) > 0
	}
	_, err := LookupDType(dtype)
	return err == nil
}

// Shape is what one operation of a nominal size needs on every rank, in bytes.
type Shape struct {
	Op    Op
	Ranks int
	Elem  int64
	// Bytes is the size as nccl-tests defines it (all-gather: the gathered output;
	// reduce-scatter: the whole input; all-to-all: one rank's whole input), rounded down
	// to a whole number of elements per rank.
	Bytes int64
	Send  int64
	Recv  int64
	// Block is one rank's share: Bytes/Ranks for the operations that split, Bytes
	// otherwise.
	Block int64
}

// SizeOfBlock is the size, as Shape takes it, of o on n ranks whose one rank's share
// is block bytes (the whole size for an operation that does not split it).
func (o Op) SizeOfBlock(block int64, n int) int64 {
	if o.def().split {
		return block * int64(n)
	}
	return block
}

// Shape sizes o for n ranks of elem-byte elements. A size too small for one element
// per rank is an error that says the least size.
func (o Op) Shape(size int64, n int, elem int64) (Shape, error) {
	d := o.def()
	s := Shape{Op: o, Ranks: n, Elem: elem}
	unit := elem
	if d.split {
		unit = elem * int64(n)
	}
	s.Bytes = size / unit * unit
	if s.Bytes == 0 {
		return s, fmt.Errorf("%s of %s over %d ranks: less than one %d-byte element per rank; the least size is %s",
			o, units.FormatSize(size), n, elem, units.FormatSize(unit))
	}
	s.Send, s.Recv, s.Block = s.Bytes, s.Bytes, s.Bytes
	if d.split {
		s.Block = s.Bytes / int64(n)
	}
	if d.sendShare {
		s.Send = s.Block
	}
	if d.recvShare {
		s.Recv = s.Block
	}
	return s, nil
}

// Block is one transfer of an all-to-all-v: Bytes from rank Src's input at SrcOff to
// rank Dst's output at DstOff.
type Block struct {
	Src, Dst       int
	SrcOff, DstOff int64
	Bytes          int64
}

// Inputs is what a rank's result is made of, for Deliver.
type Inputs struct {
	Ranks, Me int
	// Root is a rooted operation's root (Rooted); for a one-sided operation, the rank
	// whose data lands on Me.
	Root int
	// Block is one rank's share (Shape.Block); Recv the output's length.
	Block, Recv int64
	// Blocks are the transfers of an all-to-all-v.
	Blocks []Block
	// In is rank r's input (its send buffer's bytes).
	In func(r int) []byte
	// Reduce writes the element-wise reduction of srcs into dst under the
	// operation's operator (dst may be one of them; combine's copies of a token: sum).
	Reduce func(dst []byte, srcs ...[]byte) error
	// Out is where the result goes, at least Recv bytes (nil: a new buffer). An
	// all-to-all-v writes only its blocks there, so a backend can deliver in place.
	Out []byte
}

// out is where the result goes: in.Out's first Recv bytes, or a new buffer.
func (in Inputs) out() []byte {
	if in.Out != nil {
		return in.Out[:in.Recv]
	}
	return make([]byte, in.Recv)
}

// Deliver is what rank in.Me must hold in its output after o. It is nil, with no
// error, where o leaves the rank nothing (a rank other than the root of reduce or
// gather): no byte of its output is o's to write, so there is nothing to check, and a
// backend that delivers through in.Out finds it as it was.
func (o Op) Deliver(in Inputs) ([]byte, error) {
	d := o.def()
	if d.deliver == nil {
		return nil, fmt.Errorf("unknown op %q", o)
	}
	return d.deliver(in)
}

// copyFrom is the delivery of the operations that land one rank's input whole.
func copyFrom(in Inputs) ([]byte, error) {
	out := in.out()
	copy(out, in.In(in.Root))
	return out, nil
}

// share is rank r's block me of its input.
func (in Inputs) share(r int) []byte {
	return in.In(r)[int64(in.Me)*in.Block : int64(in.Me+1)*in.Block]
}

// All lists every operation, in the order tables show them.
func All() []Op {
	out := make([]Op, 0, len(defs))
	for o := range defs {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return defs[out[i]].order < defs[out[j]].order })
	return out
}

// Of lists the operations of the given families, in table order.
func Of(fams ...Family) []Op {
	var out []Op
	for _, o := range All() {
		if slices.Contains(fams, o.Family()) {
			out = append(out, o)
		}
	}
	return out
}

// Reducing lists the operations that take a reduction operator (--redop), in table
// order.
func Reducing() []Op {
	var out []Op
	for _, o := range All() {
		if o.TakesRedOp() {
			out = append(out, o)
		}
	}
	return out
}

// Points are the operations between two ranks that bench's default sweep measures.
func Points() []Op {
	var out []Op
	for _, o := range All() {
		if !o.EveryRank() && !o.def().extra {
			out = append(out, o)
		}
	}
	return out
}

// Collectives are the operations every rank takes part in.
func Collectives() []Op { return Of(FamilyCollective, FamilyRouted) }

// RunOps are the operations `symmem run` can test.
func RunOps() []Op {
	var out []Op
	for _, o := range All() {
		if o.Runs() {
			out = append(out, o)
		}
	}
	return out
}

// ForAlgo lists the operations an --algo value is for (none for a value of none).
func ForAlgo(algo string) []Op {
	var out []Op
	for _, o := range All() {
		if slices.Contains(o.Algos(), algo) {
			out = append(out, o)
		}
	}
	return out
}

// Names spells ops for messages: "put, get, ...".
func Names(os []Op) string { return strings.Join(Strings(os), ", ") }

// Lookup returns the operation name names, or an error listing the known ones.
func Lookup(name string) (Op, error) {
	if o := Op(name); o.Known() {
		return o, nil
	}
	return "", &UnknownError{Name: name, Known: All()}
}

// UnknownError is an operation no file defines.
type UnknownError struct {
	Name  string
	Known []Op
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown op %q: use %s", e.Name, Names(e.Known))
}

// Algorithms of all-reduce.
const (
	OneShot = "one-shot" // every rank reads every input and reduces all of it
	TwoShot = "two-shot" // reduce-scatter, then all-gather of the reduced blocks
)

// Algorithms of MoE combine and reduce-scatter (GPUs).
const (
	Staged = "staged" // every rank puts its parts into the rank that reduces them, which reduces locally
	Pull   = "pull"   // every rank loads the parts it reduces from the peers
)

// Strings lists the names of os (for specs that carry names).
func Strings(os []Op) []string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = string(o)
	}
	return s
}
