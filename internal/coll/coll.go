// Package coll describes collectives the way nccl-tests does, so that figures compare
// directly: what a size means per operation, the buffers it needs, the bus-bandwidth
// factor, and the element arithmetic of sums. It also makes the data a collective is
// checked with (small integers, so sums are exact even in bfloat16) and the routing of
// MoE dispatch and combine.
package coll

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/units"
)

// Shape is what one collective of a nominal size needs on every rank, in bytes.
type Shape struct {
	Op    string
	Ranks int
	Elem  int64
	// Bytes is the size as nccl-tests defines it (all-gather: the gathered output;
	// reduce-scatter: the whole input; all-to-all: one rank's whole input), rounded down
	// to a whole number of elements per rank.
	Bytes int64
	Send  int64
	Recv  int64
	// Block is one rank's share: Bytes/Ranks for all-gather, reduce-scatter and
	// all-to-all, Bytes otherwise.
	Block int64
}

// ShapeOf sizes op for n ranks of elem-byte elements. A size too small for one element
// per rank is an error that says the least size.
func ShapeOf(op string, size int64, n int, elem int64) (Shape, error) {
	s := Shape{Op: op, Ranks: n, Elem: elem}
	unit := elem
	split := backend.Splits(op)
	if split {
		unit = elem * int64(n)
	}
	s.Bytes = size / unit * unit
	if s.Bytes == 0 {
		return s, fmt.Errorf("%s of %s over %d ranks: less than one %d-byte element per rank; the least size is %s",
			op, units.FormatSize(size), n, elem, units.FormatSize(unit))
	}
	s.Send, s.Recv, s.Block = s.Bytes, s.Bytes, s.Bytes
	switch op {
	case backend.OpAllGather:
		s.Block = s.Bytes / int64(n)
		s.Send = s.Block
	case backend.OpReduceScatter:
		s.Block = s.Bytes / int64(n)
		s.Recv = s.Block
	case backend.OpAllToAll:
		s.Block = s.Bytes / int64(n)
	}
	return s, nil
}

// BusFactor turns algorithm bandwidth (size / time) into bus bandwidth, as nccl-tests
// does: the share of the data every rank must move over its links.
func BusFactor(op string, n int) float64 {
	f := float64(n-1) / float64(n)
	switch op {
	case backend.OpAllReduce:
		return 2 * f
	case backend.OpAllGather, backend.OpReduceScatter, backend.OpAllToAll:
		return f
	}
	return 1 // broadcast; dispatch and combine count the bytes that crossed instead
}

// Algorithms of all-reduce.
const (
	OneShot = "one-shot" // every rank reads every input and sums all of it
	TwoShot = "two-shot" // reduce-scatter, then all-gather of the reduced blocks
)

// Algorithms of MoE combine and reduce-scatter (GPUs).
const (
	Staged = "staged" // every rank puts its parts into the rank that sums them, which sums locally
	Pull   = "pull"   // every rank loads the parts it sums from the peers
)

// AlgoOps lists the ops an --algo value is for: all-reduce's one-shot and two-shot,
// combine's and reduce-scatter's staged and pull; none for a value of neither.
func AlgoOps(algo string) []string {
	switch algo {
	case OneShot, TwoShot:
		return []string{backend.OpAllReduce}
	case Staged, Pull:
		return []string{backend.OpReduceScatter, backend.OpCombine}
	}
	return nil
}

// Chunk splits count elements into n near-equal parts and returns part i's first
// element and length (two-shot all-reduce's blocks when count is not a multiple of n).
func Chunk(count int64, n, i int) (first, length int64) {
	base, extra := count/int64(n), count%int64(n)
	first = int64(i)*base + min(int64(i), extra)
	length = base
	if int64(i) < extra {
		length++
	}
	return first, length
}
