package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/backend"
)

// The kernels that wait on a peer (wait_signal, pingpong, the collective kernels'
// barriers) bound every wait on the device: past the job's wait limit, measured with the
// GPU's own clock, they write what they waited for into the rank's mailbox and end the
// kernel with a trap. A wait that can never end so does not hold the GPU, and the host
// learns which wait it was even though the driver reports only a failed launch. The
// mailbox is four words of pinned host memory the GPU writes through its mapping
// (readable after the context has failed); kernels/triton/nvshmem_device.py and
// kernels/cuda/symmem_nvshmem.cu write this layout.
const (
	mailboxWords = 4 // what, the value waited for, the last value seen, where

	gaveUpSignal  = 1 // wait_signal: where is 0
	gaveUpRound   = 2 // pingpong: want is the round, where the peer
	gaveUpBarrier = 3 // a collective barrier: where is the peer | block<<32, want the phase
)

// The parameters a kernel declares (last among its visible ones) to be bounded on the
// device: launch passes the limit and the mailbox's device address.
const (
	paramLimit   = "limit_ns"
	paramMailbox = "mailbox"
)

type mailbox struct {
	dev   uint64
	words []uint64
	free  func() error
}

// openMailbox maps the rank's mailbox.
func openMailbox(dev device) (mailbox, error) {
	d, w, free, err := dev.MapHostWords(mailboxWords)
	if err != nil {
		return mailbox{}, fmt.Errorf("mapping the wait kernels' mailbox into host memory: %w", err)
	}
	return mailbox{dev: d, words: w, free: free}, nil
}

// hostLimit is how long the host waits for work that holds a wait bounded on the device:
// past the device's limit, so that the kernel's own account arrives first. It is the
// backstop for kernels without a limit of their own (a user's).
func (b *Backend) hostLimit() time.Duration { return b.waitLimit + max(b.waitLimit/2, time.Second) }

// gaveUp is the mailbox's account of a kernel that gave up waiting, as an error that
// wraps backend.ErrUndelivered (a peer's data or signal never came), or nil.
func (b *Backend) gaveUp() error {
	w := b.mail.words
	if len(w) < mailboxWords {
		return nil
	}
	what := atomic.LoadUint64(&w[0])
	want, seen, where := atomic.LoadUint64(&w[1]), atomic.LoadUint64(&w[2]), atomic.LoadUint64(&w[3])
	lim := b.waitLimit
	switch what {
	case 0:
		return nil
	case gaveUpSignal:
		return fmt.Errorf("rank %d: the GPU gave up waiting for a signal after %s (the wait limit, on the GPU's clock): it reached %d of %d; the data it announces never came: %w",
			b.rank, lim, seen, want, backend.ErrUndelivered)
	case gaveUpRound:
		return fmt.Errorf("rank %d: the GPU gave up on ping-pong round %d after %s (the wait limit, on the GPU's clock): rank %d's signal for it never came (it stood at %d): %w",
			b.rank, want, lim, int64(where), seen, backend.ErrUndelivered)
	case gaveUpBarrier:
		peer, block := int64(where&0xffffffff), where>>32
		return fmt.Errorf("rank %d: the GPU gave up after %s (the wait limit, on the GPU's clock) waiting for rank %d at a collective's barrier (block %d, phase %d; rank %d's count stood at %d): rank %d never came: %w",
			b.rank, lim, peer, block, want, peer, seen, peer, backend.ErrUndelivered)
	}
	return fmt.Errorf("rank %d: a kernel gave up waiting, with an account symmem cannot read (%d, %d, %d, %d): %w", b.rank, what, want, seen, where, backend.ErrUndelivered)
}

// explain puts the mailbox's account in front of err, which the driver gives only as
// a failed launch when a kernel gave up (its trap). Errors with an empty mailbox pass
// unchanged.
func (b *Backend) explain(err error) error {
	if err == nil || errors.Is(err, backend.ErrUndelivered) { // nil, or told already
		return err
	}
	if why := b.gaveUp(); why != nil {
		return fmt.Errorf("%w (then: %v)", why, err)
	}
	return err
}
