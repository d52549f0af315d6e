package gpu

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
)

// The fake NCCL's windows and device communicators, and the nccl-device kernels'
// imitation. A rank's window is memory of its own at fakeWinBase + rank<<32 (ncclMemAlloc
// gives every rank another address, unlike nvshmem_malloc), reached from the host only
// by its own rank and only while registered; its ncclWindow_t is fakeWinHandle + rank.
// The kernels find a window by that handle and reach a peer's bytes by offset, as
// ncclGetLsaPointer does.

const (
	fakeWinBase   = 0x3000_0000_0000
	fakeWinHandle = 0x2000_0000_0000
)

// fakeWin is one rank's registered window.
type fakeWin struct {
	base, handle uint64
	live         bool
	frees        int // deregistrations: the test sees the window freed once
}

// inWindow says where addr is in rank's live window: fakeWorld.bytes's rank for it
// (size+rank) and the offset.
func (w *fakeWorld) inWindow(rank int, addr uint64) (int, int64, bool) {
	if rank >= len(w.wins) || w.wins[rank] == nil || !w.wins[rank].live {
		return 0, 0, false
	}
	win := w.wins[rank]
	if n := uint64(len(w.heaps[w.size+rank])); addr < win.base || addr >= win.base+n {
		return 0, 0, false
	}
	return w.size + rank, int64(addr - win.base), true
}

// locate is where an address a rank hands the fake NCCL is: its heap or its live
// window ("win:" in the calls' log); anything else fails the call, as NCCL's kernels
// would fault.
func (w *fakeWorld) locate(rank int, addr uint64) (space int, off int64, what string, err error) {
	if addr >= fakeSym && addr < fakeSym+uint64(w.total) {
		return rank, int64(addr - fakeSym), "", nil
	}
	if space, off, ok := w.inWindow(rank, addr); ok {
		return space, off, "win:", nil
	}
	return 0, 0, "", fmt.Errorf("fake NCCL: rank %d passes %#x, in neither its heap nor a live window", rank, addr)
}

// window registers rank's window of n bytes (fakeComm.Window).
func (w *fakeWorld) window(rank int, n int64) *fakeWin {
	if w.wins == nil {
		w.wins = make([]*fakeWin, w.size)
		w.heaps = append(w.heaps, make([][]byte, w.size)...)
	}
	w.heaps[w.size+rank] = make([]byte, n)
	w.wins[rank] = &fakeWin{base: fakeWinBase + uint64(rank)<<32, handle: fakeWinHandle + uint64(rank), live: true}
	return w.wins[rank]
}

// fakeNCCLVersion is what fakeComm says it is; a test sets an older one to see the
// window implementations refused.
var fakeNCCLVersion = nccl.Version{Major: 2, Minor: 28, Patch: 9}

func (c fakeComm) Serves(impl string) error {
	need := nccl.SymmetricSince
	if impl == implNCCLDevice {
		need = nccl.DeviceSince
	}
	v := fakeNCCLVersion
	if v.Major < need.Major || v.Major == need.Major && v.Minor < need.Minor {
		return &nccl.UnsupportedError{Feature: impl, Need: need, Found: v}
	}
	return nil
}

func (c fakeComm) Window(n int64) (ncclWindow, error) {
	c.h.calls = append(c.h.calls, fmt.Sprintf("rank %d window %d", c.rank, n))
	win := c.h.w.window(c.rank, n)
	free := func() error {
		if !win.live {
			return fmt.Errorf("fake NCCL: rank %d deregisters a dead window", c.rank)
		}
		win.live = false
		win.frees++
		return nil
	}
	return ncclWindow{base: win.base, handle: win.handle, free: free}, nil
}

// fakeLSA is the LSA team size the fake's device communicators report (0: the job's).
var fakeLSA int

func (c fakeComm) DevComm(lsaBarriers int) (devComm, error) {
	c.h.calls = append(c.h.calls, fmt.Sprintf("rank %d devcomm barriers=%d", c.rank, lsaBarriers))
	n := c.h.w.size
	if fakeLSA > 0 {
		n = fakeLSA
	}
	b := make([]byte, nccl.DevCommBytes)
	binary.LittleEndian.PutUint32(b[0:], uint32(c.rank))
	binary.LittleEndian.PutUint32(b[4:], uint32(c.h.w.size))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.rank%n))
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	binary.LittleEndian.PutUint32(b[20:], uint32(lsaBarriers))
	destroyed := false
	destroy := func() error {
		if destroyed {
			return fmt.Errorf("fake NCCL: rank %d destroys a device communicator twice", c.rank)
		}
		destroyed = true
		c.h.calls = append(c.h.calls, fmt.Sprintf("rank %d devcomm destroyed", c.rank))
		return nil
	}
	return devComm{bytes: b, lsaRank: c.rank % n, lsaSize: n, destroy: destroy}, nil
}

// ncclDevice imitates the kernels of kernels/cuda/nccl_device.cu, reading the
// arguments by the sidecar's names: the window must be this rank's live one, peers are
// reached in their windows at the same offsets, and the all-reduce kernels meet every
// rank's launch (their LSA barriers) before any of them moves data.
func (g *fakeGPU) ncclDevice(s *fakeStream, l fakeLaunch) error {
	arg := func(name string) uint64 {
		v, ok := l.param(name)
		if !ok {
			panic(fmt.Sprintf("fake: %s has no parameter %s", l.kernel, name))
		}
		return v
	}
	win := g.w.size + g.rank
	if g.rank >= len(g.w.wins) || g.w.wins[g.rank] == nil || !g.w.wins[g.rank].live || arg("win") != g.w.wins[g.rank].handle {
		return fmt.Errorf("fake: CUDA_ERROR_ILLEGAL_ADDRESS: %s on rank %d was given window %#x, not its live window", l.kernel, g.rank, arg("win"))
	}
	space := func(rank int) int { return g.w.size + rank }
	word := func(rank int, off uint64) ([]byte, error) { return g.w.bytes(space(rank), int64(off), 8) }
	blocks := func(n, chunk int64, do func(off, m int64) error) error {
		for i := range int64(l.dim.Grid) {
			if off := i * chunk; min(chunk, n-off) > 0 {
				if err := do(off, min(chunk, n-off)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	switch l.kernel {
	case kPut, kGet, kPutSignal:
		dst, src, peer := int64(arg("dst")), int64(arg("src")), int(arg("peer"))
		to, from := space(peer), win
		if l.kernel == kGet {
			to, from = win, space(peer)
		}
		if err := blocks(int64(arg("nbytes")), int64(arg("chunk")), func(off, m int64) error { return g.move(to, dst+off, from, src+off, m) }); err != nil {
			return err
		}
		if l.kernel == kPutSignal {
			w, err := word(peer, arg("sig"))
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)+uint64(l.dim.Grid))
		}
		return nil
	case kWaitSignal:
		w, err := word(g.rank, arg("sig"))
		if err != nil {
			return err
		}
		if seen := binary.LittleEndian.Uint64(w); seen < arg("value") {
			return g.trap(arg("mailbox"), gaveUpSignal, arg("value"), seen, 0)
		}
		return nil
	case kPingPong:
		return g.devPingPong(arg)
	case kDevOneShotBF16, kDevOneShotF32, kDevTwoShotBF16, kDevTwoShotF32:
		dc, err := g.devBytes(arg("devcomm"), nccl.DevCommBytes)
		if err != nil {
			return fmt.Errorf("fake: %s: the device communicator: %w", l.kernel, err)
		}
		if r := binary.LittleEndian.Uint32(dc); int(r) != g.rank {
			return fmt.Errorf("fake: %s on rank %d was given rank %d's device communicator", l.kernel, g.rank, r)
		}
		if barriers := binary.LittleEndian.Uint32(dc[20:]); l.dim.Grid > barriers {
			return fmt.Errorf("fake: %s runs %d blocks on a device communicator of %d LSA barriers", l.kernel, l.dim.Grid, barriers)
		}
		for _, c := range g.w.meet(g, l) {
			if err := c.g.devAllReduce(c.l); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("fake: no imitation of nccl-device kernel %s", l.kernel)
}

// devAllReduce is one rank's all-reduce kernel once every rank has launched its own:
// one-shot block b sums elements [b*chunk, (b+1)*chunk) of every window's send into
// this rank's recv; two-shot block b sums part b of this rank's elements
// [rank*per, (rank+1)*per) and stores it into every rank's recv.
func (g *fakeGPU) devAllReduce(l fakeLaunch) error {
	arg := func(name string) int64 { v, _ := l.param(name); return int64(v) }
	dtype, es := "bf16", int64(2)
	if strings.HasSuffix(l.kernel, "f32") {
		dtype, es = "float32", 4
	}
	send, recv, count, chunk := arg("send"), arg("recv"), arg("count"), arg("chunk")
	lo, hi, everyone := int64(0), count, false
	if l.kernel == kDevTwoShotBF16 || l.kernel == kDevTwoShotF32 {
		per := arg("per")
		lo, hi, everyone = int64(g.rank)*per, min(int64(g.rank+1)*per, count), true
	}
	n := g.w.size
	for b := range int64(l.dim.Grid) {
		a, z := lo+b*chunk, min(lo+(b+1)*chunk, hi)
		if a >= z {
			continue
		}
		var ins [][]byte
		for p := range n {
			in, err := g.w.bytes(n+p, send+a*es, (z-a)*es)
			if err != nil {
				return err
			}
			ins = append(ins, slices.Clone(in))
		}
		for p := range n {
			if !everyone && p != g.rank {
				continue
			}
			out, err := g.w.bytes(n+p, recv+a*es, (z-a)*es)
			if err != nil {
				return err
			}
			if err := coll.Reduce(ops.Sum, dtype, out, ins...); err != nil {
				return err
			}
		}
	}
	return nil
}

// devPingPong imitates nccl_pingpong without its waits, as pingpong does the NVSHMEM
// one: the payload with the last round's number lands in the peer's dst, the peer's
// signal ends at iters, every round checked out, and the initiator's round i took i+1
// microseconds.
func (g *fakeGPU) devPingPong(arg func(string) uint64) error {
	me := g.w.size + g.rank
	peer := int(arg("peer"))
	dst, src, n, iters := int64(arg("dst")), int64(arg("src")), int64(arg("nbytes")), int(arg("iters"))
	tag, err := g.w.bytes(me, src, 8)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(tag, uint64(iters))
	if err := g.move(g.w.size+peer, dst, me, src, n); err != nil {
		return err
	}
	w, err := g.w.bytes(g.w.size+peer, int64(arg("sig")), 8)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(w, uint64(iters))
	stamps, err := g.w.bytes(me, int64(arg("stamps")), int64(iters+2)*8)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(stamps[8*(iters+1):], 0)
	if arg("initiator") != 1 {
		return nil
	}
	t := uint64(1e9)
	for i := range iters + 1 {
		t += uint64(i) * 1000
		binary.LittleEndian.PutUint64(stamps[8*i:], t)
	}
	return nil
}
