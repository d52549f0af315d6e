package gpu

import (
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// Signals, flags and barrier rounds (ops.Signal, ops.PutFlag, ops.Barrier) by the
// kernels of kernels/triton/symmem_sync.py and kernels/cuda/symmem_nvshmem_sync.cu, which
// take the same arguments: the registry entries of triton and cuda list them (as their
// manifests say), and nvshmemKernels' implementations launch them alike. Waits on a
// signal or a flag are the wait_signal kernel's (bounded on the device).
const (
	kSignalOp       = "signal_op"       // sig, op, value, peer
	kPutFlag        = "put_flag"        // dst, src, n, flag, value, order, peer
	kSignalPingPong = "signal_pingpong" // sig, iters, peer, initiator, stamps
	kBarrierAll     = "barrier_all"     // slots, wrong, round, me, n, meet
	kSyncAll        = "sync_all"        // slots, wrong, round, me, n, meet
	kWaitFlag       = "wait_flag"       // flag, value: a user's put-flag receiver
)

// put_flag's orderings as its order argument.
var flagOrders = map[string]uint64{ops.Fence: 0, ops.Quiet: 1}

var (
	_ backend.Signaler         = (*Backend)(nil)
	_ backend.SignalPingPonger = (*Backend)(nil)
	_ backend.Meeter           = (*Backend)(nil)
	_ backend.Unorderer        = (*Backend)(nil)
)

// SetUnordered drops the orderings of put-flag and barrier in this rank's kernels (a
// test fault at the point of delivery; see backend.Unorderer).
func (b *Backend) SetUnordered(unordered bool) { b.unordered = unordered }

// SignalOp queues the signal_op kernel: op with value to sig on peer, then a fence,
// so that the next signal to peer lands after it.
func (b *Backend) SignalOp(sig backend.Buffer, op, value uint64, peer int, l backend.Launch) error {
	if op != ops.SignalSet && op != ops.SignalAdd {
		return fmt.Errorf("signal op %d: use ops.SignalSet (%d) or ops.SignalAdd (%d)", op, ops.SignalSet, ops.SignalAdd)
	}
	impl, st, err := b.prepare(peer, l, ops.Signal)
	if err != nil || st == nil {
		return err
	}
	return b.launch(st, impl.Name, kSignalOp, Shape{}, 1, b.addr(sig), op, value, uint64(peer))
}

// flagger queues put-flag's kernel on st: the data, the ordering, the flag.
type flagger interface {
	putFlag(b *Backend, impl backend.Impl, dst, src, flag backend.Buffer, value uint64, order string, peer int, l backend.Launch, st stream) error
}

// PutFlag queues impl's put-flag kernel: the data by one block, the ordering, the flag.
func (b *Backend) PutFlag(dst, src, flag backend.Buffer, value uint64, order string, peer int, l backend.Launch) error {
	if _, ok := flagOrders[order]; !ok {
		return fmt.Errorf("put-flag ordered by %q: use %s or %s", order, ops.Fence, ops.Quiet)
	}
	impl, st, err := b.prepare(peer, l, ops.PutFlag)
	if err != nil || st == nil {
		return err
	}
	f, err := capability[flagger](impl, ops.PutFlag)
	if err != nil {
		return err
	}
	return f.putFlag(b, impl, dst, src, flag, value, order, peer, l, st)
}

// putFlag is symmem's put_flag kernel, the ordering its order argument. The unordered
// fault launches it twice: with no data now (the flag alone), and with the data once
// the next barrier is over (deliverLate). The receiver checks as soon as the flag is
// there and finds the data missing, on two GPUs or on one that the ranks share, where
// a receiver may not run at all while the sender's kernel does.
func (nvshmemKernels) putFlag(b *Backend, impl backend.Impl, dst, src, flag backend.Buffer, value uint64, order string, peer int, l backend.Launch, st stream) error {
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	put := func(st stream, n int64) error {
		return b.launch(st, impl.Name, kPutFlag, sh, 1, b.addr(dst), b.addr(src), uint64(n), b.addr(flag), value, flagOrders[order], uint64(peer))
	}
	if b.unordered {
		if err := put(st, 0); err != nil {
			return err
		}
		b.late = append(b.late, func() error { return put(b.main, n) })
		return nil
	}
	return put(st, n)
}

// deliverLate launches, after a barrier, the puts the unordered fault held back, and
// waits for them to land.
func (b *Backend) deliverLate() error {
	if len(b.late) == 0 {
		return nil
	}
	late := b.late
	b.late = nil
	for _, put := range late {
		if err := put(); err != nil {
			return err
		}
	}
	b.lib.QuietOnStream(b.main)
	return b.waitStream(b.main, "the data the unordered fault held back")
}

// WaitWord queues op's wait on word (impl's waitKernel) and waits for it up to the
// wait limit.
func (b *Backend) WaitWord(word backend.Buffer, value uint64, op ops.Op, l backend.Launch) error {
	impl, err := b.implFor(l, op)
	if err != nil {
		return err
	}
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	if err := b.launch(b.main, impl.Name, waitKernel(impl, op), Shape{}, 1, b.addr(word), value); err != nil {
		return err
	}
	return b.waitStream(b.main, fmt.Sprintf("waiting for %s's word to reach %d", op, value))
}

// waitKernel is the kernel op's receiver waits with: a user's wait_flag where the
// registry lists it for op, else wait_signal (the word reaches the value or more).
func waitKernel(impl backend.Impl, op ops.Op) string {
	if slices.Contains(impl.Kernels[op], kWaitFlag) {
		return kWaitFlag
	}
	return kWaitSignal
}

// SignalPingPong runs the signal_pingpong kernel: the ping-pong of PingPong with
// signals alone, its stamps read the same way.
func (b *Backend) SignalPingPong(sig, stamps backend.Buffer, iters, peer int, initiator bool, l backend.Launch) (backend.PingPongResult, error) {
	var res backend.PingPongResult
	if err := b.checkPeer(peer); err != nil {
		return res, err
	}
	impl, err := b.implFor(l, ops.Signal)
	if err != nil {
		return res, err
	}
	if !slices.Contains(impl.Kernels[ops.Signal], kSignalPingPong) {
		return res, backend.ErrNoSignalPingPong // a user's signal kernel: the host plays it
	}
	if stamps.Size < int64(iters+2)*8 || iters < 0 {
		return res, fmt.Errorf("signal ping-pong of %d rounds needs %d bytes of stamps, got %d", iters, (iters+2)*8, stamps.Size)
	}
	if b.drop {
		return res, nil
	}
	if err := b.useHome(impl.Name); err != nil {
		return res, err
	}
	scratch := stamps.Slice(0, int64(iters+2)*8)
	ones := make([]byte, scratch.Size)
	for i := range ones {
		ones[i] = 0xff
	}
	if err := b.Write(scratch, ones); err != nil {
		return res, err
	}
	if err := b.launch(b.main, impl.Name, kSignalPingPong, Shape{}, 1, b.addr(sig), uint64(iters), uint64(peer), flag(initiator), b.addr(stamps)); err != nil {
		return res, err
	}
	if err := b.waitStream(b.main, fmt.Sprintf("a signal ping-pong with rank %d", peer)); err != nil {
		return res, err
	}
	if err := b.readStamps(&res, scratch, iters, initiator); err != nil {
		return res, err
	}
	if initiator {
		for _, r := range res.Rounds {
			res.Total += r
		}
	}
	return res, nil
}

// The barrier kernels' meet argument: meetStamp writes this rank's stamp, meetMeet
// meets every rank, meetLate writes the stamp only once the meeting is over and some
// milliseconds more (the unordered fault: a barrier that returned before this rank's
// writes had landed, seen by its peers' checks; nobody is left waiting).
const (
	meetStamp = 1 << iota
	meetMeet
	meetLate
)

// Meet queues a barrier round: the barrier_all or sync_all kernel writes the stamp,
// meets every rank by NVSHMEM's own barrier, and counts the stamps it did not see into
// m.Wrong. The drop fault writes no stamp; the unordered fault writes it late.
func (b *Backend) Meet(m backend.Meeting, l backend.Launch) error {
	if m.Slots.Size < 8*ops.MeetSlots(b.size) || m.Wrong.Size < 8 || m.Round == 0 {
		return fmt.Errorf("barrier round %d: slots of %d bytes and a wrong word of %d for %d ranks: need round >= 1, %d and 8 bytes",
			m.Round, m.Slots.Size, m.Wrong.Size, b.size, 8*ops.MeetSlots(b.size))
	}
	impl, err := b.implFor(l, ops.Barrier)
	if err != nil {
		return err
	}
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	st, err := b.on(l)
	if err != nil {
		return err
	}
	kernel := kSyncAll
	if m.Meet.Pushes {
		kernel = kBarrierAll
	}
	meet := meetStamp | meetMeet
	if b.drop {
		meet &^= meetStamp
	}
	if b.unordered {
		meet |= meetLate
	}
	return b.launch(st, impl.Name, kernel, Shape{}, 1, b.addr(m.Slots), b.addr(m.Wrong), m.Round, uint64(b.rank), uint64(b.size), uint64(meet))
}
