package cpu

import (
	"fmt"
	"slices"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
)

// TwoShotMin is the smallest all-reduce the CPU backend splits into a reduce-scatter
// and an all-gather when the caller leaves the algorithm to it: below it, one pass
// over every input costs less than the extra barrier.
const TwoShotMin = 256 << 10

// Algorithm says which all-reduce algorithm Collective runs for c.
func (b *Backend) Algorithm(c backend.Collective, _ backend.Launch) string {
	if !slices.Contains(c.Op.Algos(), ops.TwoShot) {
		return ""
	}
	if c.Algo != "" {
		return c.Algo
	}
	if c.Bytes >= TwoShotMin && b.size > 1 {
		return ops.TwoShot
	}
	return ops.OneShot
}

// Collective runs c over the shared heap: every rank reads its peers' parts of the
// mapping directly (a pull, as NVSHMEM's loads through peer mappings do) between
// barriers that say every input is written and that every reader is done. The drop
// fault skips the reads and reductions, never the barriers, so peers are not left waiting.
func (b *Backend) Collective(c backend.Collective, l backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	if err := b.Barrier(); err != nil {
		return err
	}
	if err := b.collective(c, l); err != nil {
		return err
	}
	return b.Barrier()
}

func (b *Backend) collective(c backend.Collective, l backend.Launch) error {
	me, n := b.rank, b.size
	if b.wrongOp.Name != "" && c.Op.TakesRedOp() {
		c.RedOp = b.wrongOp
	}
	recv := b.region(me, c.Recv)
	send := func(p int) []byte { return b.region(p, c.Send) }
	if !c.Op.IsCollective() {
		return fmt.Errorf("the cpu backend has no collective %q", c.Op)
	}
	elem := int64(1)
	if c.Op.Reduces() {
		if elem = ops.ElemSize(c.DType); elem == 0 {
			return coll.Reduce(c.RedOp, c.DType, nil) // the error names the types there are
		}
	}
	if b.Algorithm(c, l) == ops.TwoShot {
		return b.twoShot(c, elem, recv, send)
	}
	if c.Op.Rooted() && (c.Root < 0 || c.Root >= n) {
		return fmt.Errorf("%s root %d out of range: the job has ranks 0..%d", c.Op, c.Root, n-1)
	}
	in := ops.Inputs{Ranks: n, Me: me, Root: c.Root, Blocks: c.Blocks, In: send,
		Reduce: func(dst []byte, srcs ...[]byte) error { return coll.Reduce(c.RedOp, c.DType, dst, srcs...) }}
	if c.Op.Uneven() {
		if b.drop {
			return nil
		}
		if err := b.checkBlocks(c); err != nil {
			return err
		}
		in.Recv = c.Recv.Size
	} else {
		sh, err := c.Op.Shape(c.Bytes, n, elem)
		if err != nil {
			return err
		}
		in.Block, in.Recv = sh.Block, sh.Recv
		in.In = func(p int) []byte { return send(p)[:sh.Send] }
	}
	if b.drop {
		return nil
	}
	// Deliver writes this rank's result into its output, and nothing where the op
	// leaves the rank nothing (a rank other than reduce's or gather's root): that
	// output stays as it was, as NCCL leaves it.
	in.Out = recv
	_, err := c.Op.Deliver(in)
	return err
}

// twoShot is the two-shot all-reduce: rank me reduces its chunk of every input, then
// gathers the others' results from their Recv once every chunk is done. A dropping rank
// skips both but still meets the others in the middle barrier.
func (b *Backend) twoShot(c backend.Collective, elem int64, recv []byte, send func(p int) []byte) error {
	me, n := b.rank, b.size
	count := c.Bytes / elem
	part := func(i int) (int64, int64) { f, k := coll.Chunk(count, n, i); return f * elem, (f + k) * elem }
	lo, hi := part(me)
	if !b.drop {
		if err := coll.Reduce(c.RedOp, c.DType, recv[lo:hi], b.all(func(p int) []byte { return send(p)[lo:hi] })...); err != nil {
			return err
		}
	}
	if err := b.Barrier(); err != nil {
		return err
	}
	for p := 0; p < n && !b.drop; p++ {
		if p != me {
			lo, hi := part(p)
			copy(recv[lo:hi], b.region(p, c.Recv)[lo:hi])
		}
	}
	return nil
}

// checkBlocks refuses an all-to-all-v block to this rank that lies outside the
// buffers or comes from no rank.
func (b *Backend) checkBlocks(c backend.Collective) error {
	for _, k := range c.Blocks {
		if k.Dst != b.rank {
			continue
		}
		if err := b.checkPeer(k.Src); err != nil {
			return err
		}
		if k.SrcOff < 0 || k.DstOff < 0 || k.Bytes < 0 || k.SrcOff+k.Bytes > c.Send.Size || k.DstOff+k.Bytes > c.Recv.Size {
			return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) does not fit the %d-byte send and %d-byte receive buffers",
				c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, c.Send.Size, c.Recv.Size)
		}
	}
	return nil
}

// all lists f(p) for every rank p, in rank order (the order reductions combine in).
func (b *Backend) all(f func(p int) []byte) [][]byte {
	out := make([][]byte, b.size)
	for p := range out {
		out[p] = f(p)
	}
	return out
}
