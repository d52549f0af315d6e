package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// copyEngine is the collectives by cuMemcpyDtoDAsync into the peers' mappings (the
// registry's "copy-engine"): all-gather, broadcast and all-to-all, between barriers.
type copyEngine struct{}

var _ interface {
	mover
	collective
	preloader
	gridder
} = copyEngine{}

// implCopyEngine names it in the registry.
const implCopyEngine = "copy-engine"

var _ = registerImpl(backend.Impl{Name: implCopyEngine, Summary: "cuMemcpyDtoDAsync into the peer's mapping (nvshmem_ptr)",
	Kernels: map[ops.Op][]string{ops.Put: nil, ops.Get: nil, ops.AllGather: nil, ops.Broadcast: nil, ops.AllToAll: nil}}, copyEngine{})

func (copyEngine) home() home { return onHeap }

// reach: it copies into the peer's mapping.
func (copyEngine) reach(backend.Impl, ops.Op) reach { return byMapping }

// grid is the streams a transfer is split over (copyStreams), and no warps.
func (copyEngine) grid(n int64, l backend.Launch) (blocks, warps int) {
	return copyStreams(n, l.Blocks), 0
}

// preload: its collectives meet at the triton barrier kernel (run), and the rank's own
// part is copied by sm_store (localCopy, EnvCopyOwn).
func (copyEngine) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	if !op.IsCollective() {
		return b.loadKernels(impl, op, n, l)
	}
	if err := b.ensureSync(); err != nil {
		return err
	}
	if _, _, err := b.function(implBarrier, kBarrier, b.warpsOf(implBarrier, kBarrier, Shape{})); err != nil {
		return err
	}
	k := b.ownKernel(op)
	if k < 0 {
		return nil
	}
	_, _, err := b.function(implSMStore, kStore, ShapeFor(n, backend.Launch{Blocks: k}).Warps)
	return err
}

// move copies through the peer's mapping, split over --blocks copy engines.
func (copyEngine) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	to, from, n, err := b.mappedMove(dst, src, peer, op)
	if err != nil {
		return err
	}
	return b.copyEngine(st, to, from, n, l.Blocks)
}

// copyEngineCollective runs all-gather, broadcast or all-to-all as copy-engine copies
// into the peers' mappings, on a side stream per destination (a lone copy on the
// stream itself), between two barriers on the stream (every rank's input is ready and
// its output free before; every copy has landed after): the triton barrier kernel, one
// block that meets block 0 of every peer in the collective kernels' words. (NVSHMEM's
// barrier on a stream, used before, cost ~13 us each.) The rank's own part goes by the
// sm_store kernel on a stream of its own, from before the first barrier to after the
// last (EnvCopyOwn: or by the copy engine beside the others).
//
// --blocks K splits each copy to a peer into K page-aligned pieces, each on a stream
// of its own (up to MaxCopyStreams streams in all), so that several copy engines
// share a link.
func (copyEngine) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) (err error) {
	n, me := int64(b.size), int64(b.rank)
	// The barrier kernel adds into every peer's words through its mapping, on every
	// rank (a broadcast's receivers too).
	if err := b.allMapped(c.Op, implCopyEngine); err != nil {
		return err
	}
	nbytes, stride, dstOff, root := pushPlan(c, n, me)
	recv := c.Recv
	if b.drop {
		recv = c.Scratch
	}
	var jobs []copyJob
	var own *copyJob // the rank's own part, when a kernel copies it
	if root < 0 || root == me {
		for i := range n {
			q := (me + i) % n
			to := b.addr(recv) + uint64(dstOff)
			from := b.addr(c.Send) + uint64(q*stride)
			if q == me && b.ownKernel(c.Op) >= 0 {
				own = &copyJob{to, from, nbytes}
				continue
			}
			if q != me {
				mapped, err := b.peerAddr(recv.Slice(dstOff, nbytes), int(q), c.Op)
				if err != nil {
					return err
				}
				to = mapped
			}
			parts := int64(copyStreams(nbytes, l.Blocks))
			piece := backend.Align((nbytes+parts-1)/parts, 4096)
			for off := int64(0); off < nbytes; off += piece {
				jobs = append(jobs, copyJob{to + uint64(off), from + uint64(off), min(piece, nbytes-off)})
			}
		}
	}
	if own != nil {
		// The own part starts first, on a stream of its own: it touches nothing a peer
		// reads or writes, so it need not wait for the barrier, and the copies to the
		// peers and the barriers around them stay on st with no hop between streams.
		if err := b.ownSide(st, func(side stream) error { return b.localCopy(side, *own, b.ownKernel(c.Op)) }); err != nil {
			return err
		}
		// Joined whatever follows fails, so that no work on st runs beside it.
		defer func() {
			if jerr := b.ownJoin(st); err == nil {
				err = jerr
			}
		}()
	}
	if err := b.streamBarrier(st); err != nil {
		return err
	}
	if err := b.copyAll(st, jobs); err != nil {
		return err
	}
	return b.streamBarrier(st)
}
