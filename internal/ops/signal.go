package ops

// Signal is a signal operation alone (nvshmemx_signal_op): a rank sets or adds to an
// 8-byte signal word on its peer, which waits until the word reaches a value
// (nvshmem_signal_wait_until) and checks what it holds. Bench times it as a ping-pong.
const Signal = "signal"

var _ = define(Signal, def{order: 11, family: FamilySignal, bare: true, help: "signal ops alone (set, add, set, add) on a peer's word, which must then hold the last round's value", runs: true, extra: true, deliver: copyFrom,
	title: "signal (half round trip of a signal op and a wait on it)"})

// NVSHMEM's signal operations (nvshmemx_signal_op's sig_op) in NVSHMEM 3.x, as the
// device library reads them (kernels/triton/nvshmem_device.py: SIGNAL_SET, SIGNAL_ADD).
const (
	SignalSet uint64 = 9
	SignalAdd uint64 = 10
)

// SignalRound is what round k (from 1) of a stream of signals with step does to the
// peer's word, which holds SignalWord(k-1, step) before it and SignalWord(k, step)
// after: odd rounds set it, even rounds add step. Both operations are in every
// stream, and each betrays the other: an add where a set was meant leaves the sum of
// the two words, a set where an add was meant leaves step alone.
func SignalRound(k int, step uint64) (op, value uint64) {
	if k%2 == 1 {
		return SignalSet, SignalWord(k, step)
	}
	return SignalAdd, step
}

// SignalWord is what the peer's word holds after k rounds of SignalRound.
func SignalWord(k int, step uint64) uint64 { return uint64(k) * step }
