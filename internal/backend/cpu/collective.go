package cpu

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
)

// TwoShotMin is the smallest all-reduce the CPU backend splits into a reduce-scatter
// and an all-gather when the caller leaves the algorithm to it: below it, one pass
// over every input costs less than the extra barrier.
const TwoShotMin = 256 << 10

// Algorithm says which all-reduce algorithm Collective runs for c.
func (b *Backend) Algorithm(c backend.Collective, _ backend.Launch) string {
	if c.Op != backend.OpAllReduce {
		return ""
	}
	if c.Algo != "" {
		return c.Algo
	}
	if c.Bytes >= TwoShotMin && b.size > 1 {
		return coll.TwoShot
	}
	return coll.OneShot
}

// Collective runs c over the shared heap: every rank reads its peers' parts of the
// mapping directly (a pull, as NVSHMEM's loads through peer mappings do) between
// barriers that say every input is written and that every reader is done. The drop
// fault skips the reads and sums, never the barriers, so peers are not left waiting.
func (b *Backend) Collective(c backend.Collective, l backend.Launch) error {
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
	recv := b.region(me, c.Recv)
	send := func(p int) []byte { return b.region(p, c.Send) }
	blk := func(buf []byte, i int, size int64) []byte { return buf[int64(i)*size : int64(i+1)*size] }
	switch c.Op {
	case backend.OpAllReduce:
		elem := coll.ElemSize(c.DType)
		if elem == 0 {
			return coll.Sum(c.DType, nil) // the error names the types there are
		}
		if b.Algorithm(c, l) == coll.OneShot {
			if b.drop {
				return nil
			}
			return coll.Sum(c.DType, recv[:c.Bytes], b.all(func(p int) []byte { return send(p)[:c.Bytes] })...)
		}
		// Two-shot: rank me sums its chunk of every input, then gathers the others'
		// sums from their Recv once every chunk is done. A dropping rank skips both
		// but still meets the others in the middle barrier.
		count := c.Bytes / elem
		part := func(i int) (int64, int64) { f, k := coll.Chunk(count, n, i); return f * elem, (f + k) * elem }
		lo, hi := part(me)
		if !b.drop {
			if err := coll.Sum(c.DType, recv[lo:hi], b.all(func(p int) []byte { return send(p)[lo:hi] })...); err != nil {
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
	case backend.OpReduceScatter:
		size := c.Bytes / int64(n)
		if b.drop {
			return nil
		}
		return coll.Sum(c.DType, recv[:size], b.all(func(p int) []byte { return blk(send(p), me, size) })...)
	case backend.OpAllGather:
		size := c.Bytes / int64(n)
		for p := 0; p < n && !b.drop; p++ {
			copy(blk(recv, p, size), send(p)[:size])
		}
		return nil
	case backend.OpBroadcast:
		if c.Root < 0 || c.Root >= n {
			return fmt.Errorf("broadcast root %d out of range: the job has ranks 0..%d", c.Root, n-1)
		}
		if !b.drop {
			copy(recv[:c.Bytes], send(c.Root)[:c.Bytes])
		}
		return nil
	case backend.OpAllToAll:
		size := c.Bytes / int64(n)
		for p := 0; p < n && !b.drop; p++ {
			copy(blk(recv, p, size), blk(send(p), me, size))
		}
		return nil
	case backend.OpDispatch, backend.OpCombine:
		if b.drop {
			return nil
		}
		sum := c.Op == backend.OpCombine
		if sum {
			for _, k := range c.Blocks {
				if k.Dst == me {
					clear(recv[k.DstOff : k.DstOff+k.Bytes])
				}
			}
		}
		for _, k := range c.Blocks {
			if k.Dst != me {
				continue
			}
			if err := b.checkPeer(k.Src); err != nil {
				return err
			}
			if k.SrcOff < 0 || k.DstOff < 0 || k.Bytes < 0 || k.SrcOff+k.Bytes > c.Send.Size || k.DstOff+k.Bytes > c.Recv.Size {
				return fmt.Errorf("%s block %d->%d (%d bytes at %d, to %d) does not fit the %d-byte send and %d-byte receive buffers",
					c.Op, k.Src, k.Dst, k.Bytes, k.SrcOff, k.DstOff, c.Send.Size, c.Recv.Size)
			}
			src, dst := send(k.Src)[k.SrcOff:k.SrcOff+k.Bytes], recv[k.DstOff:k.DstOff+k.Bytes]
			if !sum {
				copy(dst, src)
			} else if err := coll.Sum(c.DType, dst, dst, src); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("the cpu backend has no collective %q", c.Op)
}

// all lists f(p) for every rank p, in rank order (the order sums add in).
func (b *Backend) all(f func(p int) []byte) [][]byte {
	out := make([][]byte, b.size)
	for p := range out {
		out[p] = f(p)
	}
	return out
}
