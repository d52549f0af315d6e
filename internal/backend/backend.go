// Package backend defines what symmem needs from a communication backend: a symmetric
// heap shared by every rank, one-sided put and get, put-with-signal, waits, quiet and
// barriers. The CPU backend (shared memory) and the NVSHMEM backend (GPUs) implement
// it; the ops, the bench loop and the tables are written once against this interface.
package backend

import (
	"errors"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// Buffer is a symmetric object: the same offset and size on every rank's heap.
type Buffer struct {
	Off  int64
	Size int64
}

// Slice returns the part of b from off, n bytes long.
func (b Buffer) Slice(off, n int64) Buffer { return Buffer{Off: b.Off + off, Size: n} }

// Launch sets how a device-side operation is spread over the GPU. Zero values mean the
// backend's defaults; the CPU backend ignores it.
type Launch struct {
	Impl   string // "triton", "cuda", "copy-engine", "sm-store"; "" = the backend's default
	Blocks int
	Warps  int
	// Lane is the stream the operation is queued on (0 = the default one). Operations
	// on different lanes may run at once; see Laner.
	Lane int
}

// Backend is one rank's view of the job.
type Backend interface {
	// Name is what the output calls it: "cpu" or "nvshmem".
	Name() string
	Rank() int
	Size() int
	// Alloc reserves a symmetric buffer. Every rank must make the same calls in the
	// same order (the heap is carved identically everywhere).
	Alloc(size int64) (Buffer, error)
	// Write and Read move bytes between host memory and this rank's part of a buffer.
	Write(b Buffer, data []byte) error
	Read(b Buffer, out []byte) error
	// Put copies src on this rank into dst on peer; Get copies src on peer into dst here.
	Put(dst, src Buffer, peer int, l Launch) error
	Get(dst, src Buffer, peer int, l Launch) error
	// PutSignal puts like Put and then, once the data is delivered, advances sig on peer.
	PutSignal(dst, src, sig Buffer, peer int, l Launch) error
	// WaitSignal returns once `count` PutSignal calls of n bytes with launch l, made by
	// peers into sig here, have been delivered (sig counted from zero). A wait that sees
	// no progress for the backend's wait limit returns an error wrapping ErrUndelivered.
	WaitSignal(sig Buffer, n int64, count int, l Launch) error
	// Quiet waits until this rank's outstanding puts are delivered.
	Quiet() error
	// Barrier synchronises every rank and completes outstanding operations.
	Barrier() error
	Close() error
}

// AllPutter is implemented by backends that put one message into every other rank
// themselves: with one launch where an implementation's kernel reaches them all
// (Impl.ReachesAll). PutAll does without it.
type AllPutter interface {
	PutAll(dst, src Buffer, l Launch) error
}

// PutAll copies src on b's rank into dst on every other rank (the one-to-all put): by
// b's own PutAll where it has one, else by a Put to each peer in turn.
func PutAll(b Backend, dst, src Buffer, l Launch) error {
	if a, ok := b.(AllPutter); ok {
		return a.PutAll(dst, src, l)
	}
	for q := range b.Size() {
		if q == b.Rank() {
			continue
		}
		if err := b.Put(dst, src, q, l); err != nil {
			return fmt.Errorf("to rank %d: %w", q, err)
		}
	}
	return nil
}

// ErrUndelivered marks a wait for a peer's signal that ran past its limit: the data or
// its signal was never delivered. Commands report it as wrong results, not a crash.
var ErrUndelivered = errors.New("never delivered")

// DefaultWaitLimit is how long a rank waits for a peer's signal before it calls the
// transfer undelivered, unless the job sets another limit.
const DefaultWaitLimit = 10 * time.Second

// Dropper is implemented by backends that can be told, for a test, to stop delivering:
// while drop is on, Put, Get, PutSignal, GetAdd and a device ping-pong return without
// moving data or advancing any signal. It sits where the data is delivered, so every
// check above it must notice.
type Dropper interface {
	SetDrop(drop bool)
}

// RedOpFaulter is implemented by backends that can be told, for a test, to reduce
// with another operator than the one asked (the zero RedOp: the one asked), where the
// data is combined: every operator's check must notice.
type RedOpFaulter interface {
	SetRedOpFault(op ops.RedOp)
}

// Slower is implemented by backends that can be told, for a test, to run slow: while
// pct is above 0, each of the rank's operations (Put, Get, PutSignal, WaitSignal, a
// collective) is delayed, where it runs, by pct percent of the time it took, so that
// what a bench measures really is that much slower.
type Slower interface {
	SetSlow(pct float64)
}

// Absenter is implemented by backends that can be told, for a test, to stay away from
// collectives altogether: while absent is on, Collective returns without taking part,
// so the peers' waits for this rank never end by themselves and must be bounded.
type Absenter interface {
	SetAbsent(absent bool)
}

// PingPongResult is what a ping-pong measured on one rank: the whole time, the time of
// each round (on the initiator), and how many rounds' payload was not in this rank's
// destination when the round's signal was (each round carries its number in the
// payload's first 8 bytes).
type PingPongResult struct {
	Total  time.Duration
	Rounds []time.Duration
	Late   int
}

// Timer is implemented by backends that can time a stream of operations themselves
// (GPU events for NVSHMEM). TimeOps returns the time of `iters` back-to-back operations
// up to their remote completion (a quiet inside the timed region). TimeEach times every
// operation on its own (an event between each), for per-iteration statistics.
type Timer interface {
	TimeOps(iters int, op func(i int) error) (time.Duration, error)
	TimeEach(iters int, op func(i int) error) ([]time.Duration, error)
}

// Progresser is implemented by backends whose operations run asynchronously (the GPU
// one). MarkProgress marks the end of the work queued so far (bench marks a
// measurement's first warm-up), and the Timer's wait for its timed operations first
// waits for the mark, up to the wait limit: a first operation that never finishes (a
// peer that never came, to a kernel that does not bound its own wait: NCCL's, a
// user's without the wait limit) fails the rank there instead of at --timeout.
type Progresser interface {
	MarkProgress() error
}

// Laner is implemented by backends whose operations are asynchronous (the GPU one):
// Lanes(n) makes lanes 0..n-1 usable, so that up to n operations are in flight at once.
// Quiet, Barrier and Timer.TimeOps cover the work of every lane.
type Laner interface {
	Lanes(n int) error
}

// Align rounds n up to a multiple of a.
func Align(n, a int64) int64 { return (n + a - 1) / a * a }

// HeapAlign is the alignment of every symmetric buffer: enough for vector stores and
// for the signal words.
const HeapAlign = 256

// Bump is the deterministic allocator both backends use to carve their heap.
type Bump struct {
	Limit int64
	next  int64
}

// Alloc returns the next aligned buffer or an error that says how much is missing.
func (a *Bump) Alloc(size int64) (Buffer, error) {
	if size <= 0 {
		return Buffer{}, fmt.Errorf("symmetric allocation of %d bytes: size must be positive", size)
	}
	off := Align(a.next, HeapAlign)
	if off+size > a.Limit {
		return Buffer{}, setting.Errorf("symmetric heap exhausted: %d bytes asked, %d of %d in use; raise %s",
			size, off, a.Limit, setting.HeapSize)
	}
	a.next = off + size
	return Buffer{Off: off, Size: size}, nil
}

// The optional capabilities below are what a backend may offer beyond Backend; the
// bench and the engine use them where they are there and do without elsewhere. They
// live here so that the whole contract is read in one file.

// Shaper can say which grid it launches for n bytes (bench prints it): blocks of warps
// for a kernel; for a transfer by copy engines, the streams it is split over and 0 warps.
type Shaper interface {
	Shape(n int64, l Launch) (blocks, warps int)
}

// GraphTimer can capture a stream of operations in a CUDA graph and time one launch
// of it. ready (nil: none) runs once the graph is captured and uploaded, before the
// clock starts: where every rank times the same collective it is a barrier, so that no
// rank's time includes waiting for a peer still capturing its graph.
type GraphTimer interface {
	TimeGraph(iters int, op func(i int) error, ready func() error) (time.Duration, error)
}

// PingPonger runs a whole ping-pong on the device: each side puts its src into the
// other's dst with a signal, every round's number in the payload's first 8 bytes; the
// initiator also returns the time of every round, and each side counts the rounds
// whose number was not there with its signal (stamps is scratch: iters+2 words).
type PingPonger interface {
	PingPong(dst, src, sig, stamps Buffer, n int64, iters, peer int, initiator bool, l Launch) (PingPongResult, error)
}

// Preloader loads its kernels ahead of the first operation, so that timings separate
// loading from work.
type Preloader interface {
	Preload(o ops.Op, n int64, l Launch) error
}

// Describer names its hardware for result headers, and the GPU whose NVLink counters
// tell what the links carried.
type Describer interface {
	Describe() (gpu, lib, driver string)
	PCIBusID() string
}

// Transporter says how this rank reaches a peer: "p2p" (NVLink or PCIe peer access),
// "remote" (NVSHMEM's remote transport) or "self".
type Transporter interface {
	Transport(peer int) string
}

// Breakdowner says where the time of opening the backend went, in milliseconds.
type Breakdowner interface {
	Breakdown() map[string]float64
}

// Collective is one collective operation, described the same way on every rank (every
// size in bytes). Send and Recv are symmetric buffers; n is the number of ranks and me
// this rank:
//
//	all-reduce      Send, Recv: Bytes each; Recv = the reduction of every rank's Send
//	all-gather      Send: Bytes/n; Recv: Bytes, block r = rank r's Send
//	reduce-scatter  Send: Bytes; Recv: Bytes/n, the reduction of block me of every rank's Send
//	broadcast       Send, Recv: Bytes; Recv = rank Root's Send (on Root too)
//	all-to-all      Send, Recv: Bytes; block p of Recv = block me of rank p's Send
//	dispatch        Blocks: each moves Bytes from Src's Send at SrcOff to Dst's Recv at DstOff
//	combine         as dispatch, but the blocks that land on the same place are summed
//	reduce          Send, Recv: Bytes each; Root's Recv = the reduction of every rank's Send;
//	                no other rank's Recv is written
//	gather          Send: Bytes/n; Root's Recv: Bytes, block r = rank r's Send; no other rank's
//	                Recv is written
//	scatter         Send: Bytes; Recv: Bytes/n = block me of rank Root's Send (on Root too)
//
// Blocks are Bytes/n long for all-gather, reduce-scatter and all-to-all. Once a
// collective has returned on a rank (on an asynchronous backend: after the next Quiet
// or Barrier), that rank's Recv holds its result and its Send may be changed; where the
// op leaves the rank nothing (ops.Op.Deliver is nil), its Recv holds what it held.
type Collective struct {
	Op    ops.Op
	DType string // the element type a reduction combines: float32, bfloat16, int32, ...
	// RedOp is the reduction's operator (the zero RedOp: sum; combine always sums).
	RedOp ops.RedOp
	Bytes int64
	Send  Buffer
	Recv  Buffer
	Root  int
	// Algo picks an algorithm where an implementation has several (all-reduce:
	// one-shot, two-shot); "" lets the implementation choose by size (Algorithmer).
	Algo string
	// Blocks are every transfer of the job for dispatch and combine, the same list on
	// every rank.
	Blocks []Block
	// Scratch is symmetric room the implementation may use, at least Recv's size (the
	// drop fault of an implementation that must still take part sends its output
	// there).
	Scratch Buffer
}

// Block is one transfer of an all-to-all-v.
type Block = ops.Block

// Collectiver runs collectives (ops.Collectives) with the implementation l names.
type Collectiver interface {
	Collective(c Collective, l Launch) error
}

// Fused is one matrix product fused with a collective (ops.FamilyFused), every rank
// making the same call: C from every rank's A and B as the operation defines them
// (ops.Op.Product), row-major, in DType with float32 accumulation.
type Fused struct {
	Op    ops.Op
	DType string
	Shape ops.Matmul
	// A, B and C are this rank's operands (ops.Op.Operands: elements), symmetric;
	// Scratch is symmetric room the implementation may use (Operands.Scratch).
	A, B, C, Scratch Buffer
	// GemmOnly asks for this rank's matrix product alone, with no communication
	// (into Scratch): the floor a fused operation can reach on the shape, for bench.
	GemmOnly bool
}

// Fuser runs fused operations with the implementation l names.
type Fuser interface {
	Fused(f Fused, l Launch) error
}

// FusedFault is a test fault of a fused operation's delivery (SYMMEM_TEST_FAULT=
// RANK:skip-tile or RANK:early): "" is none.
type FusedFault string

// The fused operations' faults.
const (
	// FaultSkipTile leaves one tile of this rank's delivery out (its first rows and
	// columns of C: all-gather-matmul's of its own rows, on every rank;
	// matmul-reduce-scatter's of its product), whatever C or the owner's scratch held
	// before stays there.
	FaultSkipTile FusedFault = "skip-tile"
	// FaultEarly delivers that tile as it was before its last steps of K were added.
	FaultEarly FusedFault = "early"
)

// FusedFaulter is implemented by backends that can be told, for a test, to deliver a
// fused operation's tile wrongly where it is delivered (FusedFault; "" turns it off).
// Every check of C must notice and name the rank and the tile's rows and columns,
// which it can only where C (and the scratch a reduce-scatter sums from) held
// something else before the call. An implementation that cannot reach into its
// delivery (a library's, a user's kernel) refuses to run under the fault rather than
// pass.
type FusedFaulter interface {
	SetFusedFault(f FusedFault)
}

// GetAdder fetches a peer's buffer and adds it to one of this rank's (ops.GetAdd).
type GetAdder interface {
	// GetAdd reads src from peer and writes local + src, element by element in dtype,
	// into dst here. tmp is symmetric room of dst's size that the implementation may
	// get src into first (a user's kernel does: kernels.Signatures' get_add_*).
	GetAdd(dst, local, src, tmp Buffer, peer int, dtype string, l Launch) error
}

// Algorithmer says which algorithm an implementation picks for a collective when the
// caller leaves Collective.Algo empty ("" where it has only one).
type Algorithmer interface {
	Algorithm(c Collective, l Launch) string
}

// Kerneler names the one kernel that a backend's last Collective launched to run its
// implementation ("" where that was not one kernel of its own: NCCL, the copy engine),
// for the result's rows: an algorithm does not name the kernel (one-shot all-reduce is
// the LL, push or LL128 kernel by size).
type Kerneler interface {
	Kernel() string
}

// Librarian names the libraries a backend opened beyond its own (NCCL), with their
// versions and paths, for result headers.
type Librarian interface {
	Libraries() map[string]string
}

// Signaler sets or adds to 8-byte signal words on peers and waits on words here: a
// signal alone (ops.Signal), and the flag put after data (ops.PutFlag).
type Signaler interface {
	// SignalOp does op (ops.SignalSet or ops.SignalAdd) with value to sig on peer
	// (nvshmemx_signal_op), after this rank's earlier signals and puts to peer.
	SignalOp(sig Buffer, op, value uint64, peer int, l Launch) error
	// PutFlag puts src into dst on peer, orders it by order (ops.Fence or ops.Quiet),
	// then puts value into the 8-byte flag on peer.
	PutFlag(dst, src, flag Buffer, value uint64, order string, peer int, l Launch) error
	// WaitWord returns once the 8-byte word here holds value or more: op's wait
	// (signal_wait_until for a signal, wait_until for a flag). A wait that sees the
	// word unchanged for the backend's wait limit returns an error wrapping
	// ErrUndelivered.
	WaitWord(word Buffer, value uint64, op ops.Op, l Launch) error
}

// ErrNoSignalPingPong is what SignalPingPong returns for an implementation without a
// ping-pong kernel of signals (a user's, whose signal kernel does one signal op): the
// caller plays the ping-pong from the host, with SignalOp and WaitWord.
var ErrNoSignalPingPong = errors.New("no ping-pong kernel of signals")

// SignalPingPonger runs a whole ping-pong of signals on the device (ops.Signal): round
// k of each side does ops.SignalRound(k, 1) to the other's sig and waits for its own
// to reach k; each side counts the rounds whose word was not k once it had reached it
// (Late), and the initiator times every round (stamps is scratch: iters+2 words).
type SignalPingPonger interface {
	SignalPingPong(sig, stamps Buffer, iters, peer int, initiator bool, l Launch) (PingPongResult, error)
}

// Meeting is one round of a barrier (ops.Barrier) on every rank: this rank writes its
// stamp (ops.MeetStamp(rank, Round)) into its word of the slots (ops.MeetSlot) as
// Meet says (into every rank's, or its own), meets every rank, then reads every
// rank's stamp (from its own slots, or from each rank's) and adds to Wrong the number
// that were not there.
type Meeting struct {
	Meet  ops.Meet
	Slots Buffer // ops.MeetSlots words
	Wrong Buffer // one word
	Round uint64 // from 1
}

// Meeter runs barrier rounds. On an asynchronous backend, Wrong holds the round's
// count after the next Quiet or Barrier.
type Meeter interface {
	Meet(m Meeting, l Launch) error
}

// Unorderer is implemented by backends that can be told, for a test, to drop the
// ordering an operation promises, at the point of delivery: while unordered is on,
// put-flag's flag lands before its data (which lands only once the next barrier is
// over), and a barrier round returns before this rank's stamp has landed (the stamp
// lands only once the next round's meeting is over, or milliseconds late on a GPU):
// its peers find it missing, and nobody is left waiting. Every check of an ordering
// must notice.
type Unorderer interface {
	SetUnordered(unordered bool)
}
