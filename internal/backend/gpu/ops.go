package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

func (b *Backend) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	return b.move(dst, src, peer, l, ops.Put)
}

func (b *Backend) Get(dst, src backend.Buffer, peer int, l backend.Launch) error {
	return b.move(dst, src, peer, l, ops.Get)
}

// PutAll puts src into dst on every other rank: with one launch where the
// implementation's kernel reaches them all itself (a user's, backend.Impl.ReachesAll),
// else a put to each in turn.
func (b *Backend) PutAll(dst, src backend.Buffer, l backend.Launch) error {
	impl, err := b.implFor(l, ops.Put)
	if err != nil || b.size < 2 {
		return err
	}
	if !impl.ReachesAll(ops.Put) {
		for q := range b.size {
			if q == b.rank {
				continue
			}
			if err := b.Put(dst, src, q, l); err != nil {
				return fmt.Errorf("to rank %d: %w", q, err)
			}
		}
		return nil
	}
	// The kernel computes its peers: the one it is given is any other rank.
	peer := (b.rank + 1) % b.size
	impl, st, err := b.prepare(peer, l, ops.Put)
	if err != nil || st == nil {
		return err
	}
	return b.kernelMove(impl, dst, src, peer, l, ops.Put, st)
}

// prepare checks an operation to peer and picks its implementation and stream; a nil
// stream with no error means the drop fault is on: deliver nothing.
func (b *Backend) prepare(peer int, l backend.Launch, op ops.Op) (backend.Impl, stream, error) {
	if err := b.checkPeer(peer); err != nil {
		return backend.Impl{}, nil, err
	}
	impl, err := b.implFor(l, op)
	if err != nil || b.drop {
		return impl, nil, err
	}
	if err := b.useHome(impl.Name); err != nil {
		return impl, nil, err
	}
	st, err := b.on(l)
	return impl, st, err
}

// move copies src into dst where one side lives on peer: dst for a put, src for a get,
// with the implementation l names (implOf): the NVSHMEM kernels take symmetric
// addresses and the peer's number (kernelMove); the copy engine and the plain-store
// kernel reach the peer through its nvshmem_ptr mapping instead (mappedMove).
func (b *Backend) move(dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op) error {
	impl, st, err := b.prepare(peer, l, op)
	if err != nil || st == nil {
		return err
	}
	m, err := capability[mover](impl, op)
	if err != nil {
		return err
	}
	return m.move(b, impl, dst, src, peer, l, op, st)
}

// kernelMove is a put or get by NVSHMEM's device functions in impl's put_block or
// get_block kernel: symmetric addresses and the peer's number.
func (b *Backend) kernelMove(impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	kernel := kPut
	if op.Pulls() {
		kernel = kGet
	}
	return b.launch(st, impl.Name, kernel, sh, sh.Blocks, b.addr(dst), b.addr(src), uint64(n), uint64(sh.Chunk), uint64(peer))
}

// mappedMove resolves a put's destination or a get's source on peer through its
// nvshmem_ptr mapping, for the implementations that copy or store plainly.
func (b *Backend) mappedMove(dst, src backend.Buffer, peer int, op ops.Op) (to, from uint64, n int64, err error) {
	to, from, n = b.addr(dst), b.addr(src), min(dst.Size, src.Size)
	if op.Pulls() {
		from, err = b.peerAddr(src, peer, op)
	} else {
		to, err = b.peerAddr(dst, peer, op)
	}
	return to, from, n, err
}

// peerAddr is where this rank reaches buf on peer with plain copies and stores.
func (b *Backend) peerAddr(buf backend.Buffer, peer int, op ops.Op) (uint64, error) {
	if b.peers[peer] == 0 {
		return 0, setting.Errorf("rank %d's memory is not mapped here (no NVLink or PCIe P2P path): use %s %s",
			peer, setting.Impl, strings.Join(b.viaNVSHMEM(op), " or "))
	}
	return uint64(b.peers[peer]) + uint64(buf.Off), nil
}

// allMapped refuses op by impl, whose kernels reach every peer through its mapping,
// where a peer's memory is not mapped here: a null address would fault the GPU.
func (b *Backend) allMapped(op ops.Op, impl string) error {
	for q := range b.size {
		if q != b.rank && b.peers[q] == 0 {
			return setting.Errorf("%s %s %s: rank %d's memory is not mapped here (no NVLink or PCIe P2P path): use %s %s",
				op, setting.Impl, impl, q, setting.Impl, strings.Join(b.viaNVSHMEM(op), " or "))
		}
	}
	return nil
}

func (b *Backend) checkPeer(peer int) error {
	if peer < 0 || peer >= b.size {
		return fmt.Errorf("peer %d out of range: the job has ranks 0..%d", peer, b.size-1)
	}
	return nil
}

// MaxCopyStreams bounds how many copy engines one copy-engine transfer is split over.
const MaxCopyStreams = 8

// copyEngine copies n bytes, split over parts streams (1 = the main stream alone) so
// that several copy engines can work on one transfer; the main stream waits for all.
// Pieces are whole 4 KiB pages: a transfer under a page per part is not split.
func (b *Backend) copyEngine(main stream, dst, src uint64, n int64, parts int) error {
	parts = copyStreams(n, parts)
	if parts == 1 {
		return main.CopyDtoDAsync(dst, src, uint64(n))
	}
	chunk := backend.Align((n+int64(parts)-1)/int64(parts), 4096)
	var jobs []copyJob
	for off := int64(0); off < n; off += chunk {
		jobs = append(jobs, copyJob{dst + uint64(off), src + uint64(off), min(chunk, n-off)})
	}
	return b.copyAll(main, jobs)
}

// copyJob is one copy-engine copy.
type copyJob struct {
	dst, src uint64
	n        int64
}

// copyAll runs each job on a side stream of its own (at most MaxCopyStreams, then in
// turn), all of them after the work queued on main so far; main waits for all. A lone
// job goes on main itself: the fork and join would only add their gaps (a 2-rank
// broadcast, a transfer not split).
func (b *Backend) copyAll(main stream, jobs []copyJob) error { return b.copyAround(main, jobs, nil) }

// copyAround runs jobs as copyAll does while work (nil: none) queues on main: they
// start after what main held before, and main's work after copyAround waits for them.
func (b *Backend) copyAround(main stream, jobs []copyJob, work func() error) error {
	if len(jobs) == 1 && work == nil {
		return main.CopyDtoDAsync(jobs[0].dst, jobs[0].src, uint64(jobs[0].n))
	}
	if work == nil {
		work = func() error { return nil }
	}
	parts := min(len(jobs), MaxCopyStreams)
	if parts == 0 {
		return work()
	}
	if err := b.sideStreams(parts); err != nil {
		return err
	}
	if err := b.fork[0].Record(main); err != nil {
		return err
	}
	for i := 0; i < parts; i++ {
		s := b.side[i]
		if err := s.Wait(b.fork[0]); err != nil {
			return err
		}
		for k := i; k < len(jobs); k += parts {
			if j := jobs[k]; j.n > 0 {
				if err := s.CopyDtoDAsync(j.dst, j.src, uint64(j.n)); err != nil {
					return err
				}
			}
		}
	}
	err := work()
	for i := 0; i < parts; i++ { // joined whatever work did, so that no side stream is left running alone
		if err := b.join[i].Record(b.side[i]); err != nil {
			return err
		}
		if err := main.Wait(b.join[i]); err != nil {
			return err
		}
	}
	return err
}

// sideStreams makes sure parts side streams (with their fork and join events) exist.
func (b *Backend) sideStreams(parts int) error {
	for len(b.side) < parts {
		s, err := b.dev.NewStream()
		if err != nil {
			return err
		}
		f, err := b.dev.NewSyncEvent()
		if err != nil {
			return err
		}
		j, err := b.dev.NewSyncEvent()
		if err != nil {
			return err
		}
		b.side, b.fork, b.join = append(b.side, s), append(b.fork, f), append(b.join, j)
	}
	return nil
}

// PutSignal puts like Put, then each block of the kernel adds one to sig on peer once
// its part is delivered: WaitSignal counts on ShapeFor's block count.
func (b *Backend) PutSignal(dst, src, sig backend.Buffer, peer int, l backend.Launch) error {
	impl, st, err := b.prepare(peer, l, ops.PutSignal)
	if err != nil || st == nil {
		return err
	}
	s, err := capability[signaller](impl, ops.PutSignal)
	if err != nil {
		return err
	}
	return s.putSignal(b, impl, dst, src, sig, peer, l, st)
}

// WaitSignal runs a one-warp kernel on the main stream that spins until sig reaches
// what count put-signals of n bytes add, and waits for it up to the wait limit.
func (b *Backend) WaitSignal(sig backend.Buffer, n int64, count int, l backend.Launch) error {
	impl, err := b.implFor(l, ops.PutSignal)
	if err != nil {
		// The wait does not depend on how the data came: an implementation without
		// put-signal waits with the default's kernel.
		impl, _ = b.reg.Lookup(backend.NVSHMEM, "")
	}
	// Every block of the sender's put-signal adds one.
	target := uint64(count) * uint64(ShapeFor(n, l).Blocks)
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	var s signaller = nvshmemKernels{}
	if gi, ok := implOf(impl); ok {
		if own, ok := gi.(signaller); ok {
			s = own
		}
	}
	if err := s.wait(b, impl, sig, target); err != nil {
		return err
	}
	return b.waitStream(b.main, fmt.Sprintf("waiting for %d signals of %d bytes", count, n))
}

// PingPong runs iters round trips of n bytes with a signal between this rank and peer,
// on the device: each side puts its src into the other's dst, every round's number in
// the first 8 bytes. stamps (iters+2 words) is the kernel's scratch: the initiator's
// clock before the first round and after each, then this rank's count of rounds whose
// number was not in dst when their signal was. It is filled with ones first, so a
// kernel that wrote nothing cannot pass for one that did.
func (b *Backend) PingPong(dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	res, err := b.pingPong(dst, src, sig, stamps, n, iters, peer, initiator, l)
	return res, b.explain(err)
}

func (b *Backend) pingPong(dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	var res backend.PingPongResult
	impl, err := b.implFor(l, ops.Latency)
	if err != nil {
		return res, err
	}
	switch {
	case iters < 0:
		return res, fmt.Errorf("ping-pong of %d rounds: the count cannot be negative", iters)
	case n < 8:
		return res, fmt.Errorf("ping-pong of %d bytes: each round carries its number in 8 bytes; send 8 or more", n)
	case stamps.Size < int64(iters+2)*8:
		return res, fmt.Errorf("ping-pong of %d rounds needs %d bytes of stamps, got %d", iters, (iters+2)*8, stamps.Size)
	}
	if b.drop {
		return res, nil
	}
	p, err := capability[pinger](impl, ops.Latency)
	if err != nil {
		return res, err
	}
	if err := b.useHome(impl.Name); err != nil {
		return res, err
	}
	vals, err := p.pingArgs(b, dst, src, sig, stamps, n, iters, peer, initiator)
	if err != nil {
		return res, err
	}
	scratch := stamps.Slice(0, int64(iters+2)*8)
	if err := b.Write(scratch, bytes.Repeat([]byte{0xff}, int(scratch.Size))); err != nil {
		return res, err
	}
	start, err := b.dev.NewEvent()
	if err != nil {
		return res, err
	}
	defer start.Destroy()
	end, err := b.dev.NewEvent()
	if err != nil {
		return res, err
	}
	defer end.Destroy()
	if err := start.Record(b.main); err != nil {
		return res, err
	}
	if err := b.launch(b.main, impl.Name, kPingPong, Shape{}, 1, vals...); err != nil {
		return res, err
	}
	if err := end.Record(b.main); err != nil {
		return res, err
	}
	done, err := end.WaitFor(b.hostLimit())
	switch {
	case err != nil:
		return res, b.explain(err)
	case b.gaveUp() != nil:
		return res, b.gaveUp()
	case !done:
		return res, fmt.Errorf("rank %d: ping-pong with rank %d did not finish within %s: %w", b.rank, peer, b.hostLimit(), backend.ErrUndelivered)
	}
	ms, err := end.Since(start)
	if err != nil {
		return res, b.explain(err)
	}
	res.Total = msDuration(ms)
	return res, b.readStamps(&res, scratch, iters, initiator)
}

// readStamps reads what the ping-pong kernel left in scratch into res: this rank's
// count of late rounds and, on the initiator, each round's time. A word still all ones
// is one the kernel never wrote.
func (b *Backend) readStamps(res *backend.PingPongResult, scratch backend.Buffer, iters int, initiator bool) error {
	raw := make([]byte, scratch.Size)
	if err := b.Read(scratch, raw); err != nil {
		return err
	}
	late := binary.LittleEndian.Uint64(raw[8*(iters+1):])
	if late > uint64(iters) {
		return fmt.Errorf("rank %d: the ping-pong kernel reported no check of its rounds (%#x)", b.rank, late)
	}
	res.Late = int(late)
	if initiator {
		for i := 0; i <= iters; i++ {
			if binary.LittleEndian.Uint64(raw[8*i:]) == ^uint64(0) {
				return fmt.Errorf("rank %d: the ping-pong kernel wrote no clock stamp for round %d", b.rank, i)
			}
		}
		res.Rounds = rounds(raw[:8*(iters+1)])
	}
	return nil
}

// rounds turns the initiator's stamps (the GPU's nanosecond clock before the first
// round and after each, little-endian words) into the time of each round.
func rounds(stamps []byte) []time.Duration {
	out := make([]time.Duration, len(stamps)/8-1)
	for i := range out {
		out[i] = time.Duration(binary.LittleEndian.Uint64(stamps[8*i+8:]) - binary.LittleEndian.Uint64(stamps[8*i:]))
	}
	return out
}

// copyStreams is how many streams a copy-engine transfer of n bytes is split over when
// asked for `asked`: at most MaxCopyStreams, and none split below a page per stream.
// Shape reports the same number, so the bench's grid column is what ran.
func copyStreams(n int64, asked int) int {
	parts := min(max(asked, 1), MaxCopyStreams)
	if n < int64(parts)*4096 {
		return 1
	}
	return parts
}
