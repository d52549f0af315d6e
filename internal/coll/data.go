package coll

import (
	"encoding/binary"

	"github.com/symmem/symmem/internal/ops"
)

// Every measurement reads its input from a window of a per-rank table that moves by
// WindowStep bytes per measurement (Slots positions), so that no output of an earlier
// measurement, implementation or size can pass for this one's.
const (
	Slots      = 64
	WindowStep = 16
)

// Window is the offset of measurement seq's input in a table.
func Window(seq int) int64 { return int64(seq%Slots) * WindowStep }

// Within one measurement the same collective runs warm-ups and timed operations one
// after the other, each of which writes the whole output: were their inputs the same,
// an output the first warm-up left would pass for the last timed operation's, and
// nothing the clock timed would be checked. So each operation reads its input from one
// of Places places in the send buffer, PlaceStep bytes apart (as aligned as the buffer
// is): the operations before the last alternate between the first two, the last one
// takes the third. The last output then differs from every earlier one, and no two
// operations in a row read the same input.
const (
	Places    = 3
	PlaceStep = 256
)

// PlaceSlack is what a send buffer needs beyond its input to hold every place.
const PlaceSlack = (Places - 1) * PlaceStep

// Guard is the region after a collective's output that nothing may write: a kernel
// that overruns its output (a last vector or line stored whole past the end) spoils
// it. Bench fills it with GuardByte(i) before each measurement and counts the bytes
// that changed as wrong.
const Guard = 4096

// GuardByte is byte i of the guard region.
func GuardByte(i int) byte { return byte(i*131 + 7) }

// GuardPattern is what a whole guard region holds.
func GuardPattern() []byte {
	g := make([]byte, Guard)
	for i := range g {
		g[i] = GuardByte(i)
	}
	return g
}

// Place is where operation i of the total a measurement runs reads its input.
func Place(i, total int) int {
	if i == total-1 {
		return Places - 1
	}
	return i % (Places - 1)
}

// Data makes the inputs of collectives and the outputs they must produce, for every
// rank, from tables any rank can compute: a collective's result is checked on every
// rank against what every rank sent.
type Data struct {
	DType string // element type of reductions ("" for operations that only move bytes)
	// RedOp is the reduction operator: it picks the values (RedOp.Value) and combines
	// them.
	RedOp ops.RedOp
	Ranks int
	size  int64 // each table's length: the largest input plus the windows' and places' slack
	base  int64 // where inputs start past their window (At: a place's offset)
	// Limit is the largest draw an input's value is made from (ops.Limit: sums of
	// Ranks of them stay exact, bfloat16 holding every integer up to 256).
	Limit  int64
	tables map[int][]byte
}

// NewData prepares tables for inputs of up to maxSend bytes on n ranks. dtype is the
// element type of reductions under op, or "" when the data is only moved (random
// bytes then).
func NewData(dtype string, op ops.RedOp, n int, maxSend int64) *Data {
	return &Data{DType: dtype, RedOp: op.Or(), Ranks: n, size: maxSend + Slots*WindowStep + PlaceSlack, Limit: ops.Limit(n), tables: map[int][]byte{}}
}

// Table is rank r's table (computed on first use).
func (d *Data) Table(r int) []byte {
	if t, ok := d.tables[r]; ok {
		return t
	}
	t := make([]byte, d.size)
	x := uint64(r+1)*0x9E3779B97F4A7C15 + 0x5851F42D4C957F2D
	next := func() uint64 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	if dt, err := ops.LookupDType(d.DType); d.DType != "" && err == nil && dt.Reducible() {
		for i := int64(0); i+dt.Size <= int64(len(t)); i += dt.Size {
			dt.PutInt(t[i:i+dt.Size], int64(d.RedOp.Value(float64(int64(next()%uint64(2*d.Limit+1))-d.Limit), r, d.Ranks)))
		}
	} else {
		var w [8]byte
		for i := 0; i < len(t); i += 8 {
			binary.LittleEndian.PutUint64(w[:], next())
			copy(t[i:], w[:])
		}
	}
	d.tables[r] = t
	return t
}

// Input is what rank r sends in measurement seq: n bytes from its table's window.
func (d *Data) Input(r, seq int, n int64) []byte {
	off := d.base + Window(seq)
	return d.Table(r)[off : off+n]
}

// At is d for the operations that read their input from place p of the send buffer
// (see Place): its inputs, and so the outputs it wants, start p*PlaceStep bytes
// further into the tables, which d shares.
func (d *Data) At(p int) *Data {
	v := *d
	v.base = int64(p) * PlaceStep
	return &v
}

// Want is what rank me must hold in its Recv after the collective s of measurement
// seq (root: the root of a rooted collective, ops.Op.Rooted). It is nil where s leaves
// the rank nothing (ops.Op.Deliver): none of its Recv is to be checked.
func (d *Data) Want(s ops.Shape, me, root, seq int) ([]byte, error) {
	return s.Op.Deliver(ops.Inputs{Ranks: s.Ranks, Me: me, Root: root, Block: s.Block, Recv: s.Recv,
		In:     func(r int) []byte { return d.Input(r, seq, s.Send) },
		Reduce: func(dst []byte, srcs ...[]byte) error { return Reduce(d.RedOp, d.DType, dst, srcs...) }})
}

// WantBlocks is what rank me must hold in the first recv bytes of its Recv after an
// all-to-all-v of blocks in measurement seq, rank p's input being the first send(p)
// bytes of its table's window, for o (dispatch or combine).
func (d *Data) WantBlocks(o ops.Op, blocks []ops.Block, me, seq int, send func(p int) int64, recv int64) ([]byte, error) {
	return o.Deliver(ops.Inputs{Ranks: d.Ranks, Me: me, Recv: recv, Blocks: blocks,
		In:     func(r int) []byte { return d.Input(r, seq, send(r)) },
		Reduce: func(dst []byte, srcs ...[]byte) error { return Reduce(ops.Sum, d.DType, dst, srcs...) }})
}
