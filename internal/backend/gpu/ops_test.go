package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/ops"
)

// pair opens ranks 0 and 1 of a two-rank job on fake GPUs, with a source and a
// destination buffer of n bytes and a signal word; rank r's source holds pattern(r).
type pair struct {
	w             *fakeWorld
	b             [2]*Backend
	g             [2]*fakeGPU
	src, dst, sig backend.Buffer
}

func newPair(t *testing.T, n int64, cfg Config) *pair {
	t.Helper()
	p := &pair{w: newWorld(t, 2, 4*n+1<<16)}
	for r := range 2 {
		p.b[r], p.g[r] = p.w.open(t, r, cfg)
		var err error
		if p.src, err = p.b[r].Alloc(n); err != nil {
			t.Fatal(err)
		}
		if p.dst, err = p.b[r].Alloc(n); err != nil {
			t.Fatal(err)
		}
		if p.sig, err = p.b[r].Alloc(8); err != nil {
			t.Fatal(err)
		}
		copy(p.heap(r, p.src), pattern(r, n))
	}
	return p
}

// heap is rank r's part of buf, in the fake's memory.
func (p *pair) heap(r int, buf backend.Buffer) []byte {
	return p.w.heaps[r][buf.Off : buf.Off+buf.Size]
}

func pattern(r int, n int64) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i*7 + r*101 + i>>8)
	}
	return out
}

// NVSHMEM kernels get symmetric addresses and the peer's number; the copy engine and
// the store kernel get the peer's mapping; every implementation delivers the bytes.
func TestPutGetAddresses(t *testing.T) {
	const n = 300<<10 + 5 // three blocks, the last one short
	peerMap := func(off int64) uint64 { return fakeMapBase + 1<<32 + uint64(off) }
	for _, impl := range backend.Builtin(Factory{}).Of(backend.NVSHMEM) {
		if !impl.Supports(ops.Put) || windowImpl(impl.Name) {
			continue // collectives only: collective_test.go; on NCCL's window: nccldevice_test.go
		}
		for _, op := range []string{ops.Put, ops.Get} {
			t.Run(impl.Name+"/"+op, func(t *testing.T) {
				p := newPair(t, n, Config{})
				b, g := p.b[0], p.g[0]
				l := backend.Launch{Impl: impl.Name}
				var err error
				if op == ops.Put {
					err = b.Put(p.dst, p.src, 1, l)
				} else {
					err = b.Get(p.dst, p.src, 1, l)
				}
				if err != nil {
					t.Fatal(err)
				}
				// What arrived: rank 0's source in rank 1's dst, or the reverse.
				to, from := 1, 0
				if op == ops.Get {
					to, from = 0, 1
				}
				if !bytes.Equal(p.heap(to, p.dst), pattern(from, n)) {
					t.Errorf("rank %d's dst does not hold rank %d's source", to, from)
				}
				if other := p.heap(from, p.dst); !bytes.Equal(other, make([]byte, n)) {
					t.Errorf("rank %d's own dst was written", from)
				}
				dst, src := b.addr(p.dst), b.addr(p.src)
				if op == ops.Put {
					dst = peerMap(p.dst.Off)
				} else {
					src = peerMap(p.src.Off)
				}
				switch impl.Name {
				case implCopyEngine:
					want := []fakeCopy{{stream: 0, dst: dst, src: src, size: n}}
					if !slices.Equal(g.copies, want) || len(g.launches) != 0 {
						t.Errorf("copies %+v, launches %d; want %+v", g.copies, len(g.launches), want)
					}
				case implSMStore:
					sh := ShapeFor(n, l)
					checkLaunch(t, g, kStore, dst, src, n, uint64(sh.Chunk))
				default:
					sh := ShapeFor(n, l)
					checkLaunch(t, g, map[string]string{ops.Put: kPut, ops.Get: kGet}[op],
						b.addr(p.dst), b.addr(p.src), n, uint64(sh.Chunk), 1)
				}
			})
		}
	}
}

// checkLaunch wants g to have launched exactly one kernel, with these visible
// arguments and ShapeFor's grid.
func checkLaunch(t *testing.T, g *fakeGPU, kernel string, args ...uint64) {
	t.Helper()
	if len(g.launches) != 1 || len(g.copies) != 0 {
		t.Fatalf("%d launches and %d copies, want one launch of %s", len(g.launches), len(g.copies), kernel)
	}
	l := g.launches[0]
	if l.kernel != kernel || !slices.Equal(l.args[:len(args)], args) {
		t.Errorf("launched %s%#x, want %s%#x", l.kernel, l.args, kernel, args)
	}
	if want := ShapeFor(int64(args[2]), backend.Launch{}); int(l.dim.Grid) != want.Blocks {
		t.Errorf("grid %d, want %d", l.dim.Grid, want.Blocks)
	}
}

func TestUnmappedPeer(t *testing.T) {
	p := newPair(t, 4096, Config{})
	p.w.unmapped[[2]int{0, 1}] = true
	b, err := start(Place{Rank: 0, Size: 2}, p.g[0], p.g[0], fakeCC, Config{Heap: p.w.heap})
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{implCopyEngine, implSMStore} {
		err := b.Put(p.dst, p.src, 1, backend.Launch{Impl: impl})
		if err == nil || !strings.Contains(err.Error(), "rank 1's memory is not mapped here") ||
			!strings.HasSuffix(err.Error(), "use {impl} triton or cuda") { // not nccl-device, which reaches peers by load and store too
			t.Errorf("%s to an unmapped peer: %v", impl, err)
		}
	}
	// NVSHMEM's own calls need no mapping; and this rank is always mapped to itself.
	if err := b.Put(p.dst, p.src, 1, backend.Launch{Impl: "cuda"}); err != nil {
		t.Error(err)
	}
	if err := b.Get(p.dst, p.src, 0, backend.Launch{Impl: implCopyEngine}); err != nil {
		t.Error(err)
	}
}

func TestBadPeerAndImpl(t *testing.T) {
	p := newPair(t, 4096, Config{Registry: backend.Builtin(Factory{}, cpu.Factory{})})
	b := p.b[0]
	for _, peer := range []int{-1, 2} {
		if err := b.Put(p.dst, p.src, peer, backend.Launch{}); err == nil || !strings.Contains(err.Error(), "ranks 0..1") {
			t.Errorf("peer %d: %v", peer, err)
		}
	}
	if err := b.Put(p.dst, p.src, 1, backend.Launch{Impl: "memcpy"}); err == nil || !strings.Contains(err.Error(), "cpu backend") {
		t.Errorf("the CPU's implementation: %v", err)
	}
	if err := b.Put(p.dst, p.src, 1, backend.Launch{Lane: 1}); err == nil || !strings.Contains(err.Error(), "lane 1") {
		t.Errorf("a lane never made: %v", err)
	}
	// Put-signal and latency need NVSHMEM device calls; the registry says who has them.
	if err := b.PutSignal(p.dst, p.src, p.sig, 1, backend.Launch{Impl: implSMStore}); err == nil ||
		!strings.Contains(err.Error(), "cannot run put-signal") || !strings.Contains(err.Error(), "triton or cuda") {
		t.Errorf("put-signal by plain stores: %v", err)
	}
	if _, err := b.PingPong(p.dst, p.src, p.sig, p.src, 8, 1, 1, true, backend.Launch{Impl: implCopyEngine}); err == nil ||
		!strings.Contains(err.Error(), "cannot run latency") {
		t.Errorf("latency by the copy engine: %v", err)
	}
	if len(p.g[0].launches)+len(p.g[0].copies) != 0 {
		t.Error("a refused operation launched something")
	}
}

// A copy-engine transfer over k streams: page-aligned pieces, each on its own stream
// after the main stream's earlier work, and the main stream waits for all of them.
func TestCopyEngineSplit(t *testing.T) {
	const n = 1<<20 + 100
	for _, tc := range []struct {
		blocks, streams int
	}{{0, 1}, {1, 1}, {3, 3}, {4, 4}, {MaxCopyStreams + 5, MaxCopyStreams}} {
		t.Run(fmt.Sprint(tc.blocks), func(t *testing.T) {
			p := newPair(t, n, Config{})
			b, g := p.b[0], p.g[0]
			l := backend.Launch{Impl: implCopyEngine, Blocks: tc.blocks}
			// Shape reports the streams asked for even past MaxCopyStreams, where the
			// copy uses MaxCopyStreams: only the cases within it are checked.
			if blocks, _ := b.Shape(n, l); blocks != tc.streams && tc.blocks <= MaxCopyStreams {
				t.Errorf("Shape says %d streams, want %d", blocks, tc.streams)
			}
			if err := b.Put(p.dst, p.src, 1, l); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.heap(1, p.dst), pattern(0, n)) {
				t.Fatal("wrong data")
			}
			if len(g.copies) != tc.streams {
				t.Fatalf("%d copies, want %d", len(g.copies), tc.streams)
			}
			var next uint64
			for i, c := range g.copies {
				if c.dst-uint64(b.peers[1]+uintptr(p.dst.Off)) != next || (i < tc.streams-1 && c.size%4096 != 0) {
					t.Errorf("piece %d at %d, %d bytes: not contiguous or not whole pages", i, c.dst, c.size)
				}
				next += c.size
			}
			if next != n {
				t.Errorf("pieces cover %d bytes of %d", next, n)
			}
			if tc.streams == 1 {
				if want := []string{"copy 1048676@s0"}; !slices.Equal(g.trace(), want) {
					t.Errorf("calls %q, want %q", g.trace(), want)
				}
				return
			}
			want := []string{"record@s0"}
			for i, c := range g.copies {
				s := fmt.Sprintf("s%d", i+1)
				want = append(want, s+" waits s0", fmt.Sprintf("copy %d@%s", c.size, s))
			}
			for i := range g.copies {
				s := fmt.Sprintf("s%d", i+1)
				want = append(want, "record@"+s, "s0 waits "+s)
			}
			if !slices.Equal(g.trace(), want) {
				t.Errorf("calls\n %q\nwant\n %q", g.trace(), want)
			}
		})
	}
	// Under a page per stream, the transfer is not split.
	p := newPair(t, 3*4096-1, Config{})
	if err := p.b[0].Put(p.dst, p.src, 1, backend.Launch{Impl: implCopyEngine, Blocks: 3}); err != nil {
		t.Fatal(err)
	}
	if len(p.g[0].copies) != 1 || p.g[0].copies[0].stream != 0 {
		t.Errorf("a small transfer was split: %+v", p.g[0].copies)
	}
}

// With drop on, the operations return without queuing anything, so nothing arrives.
func TestDropLaunchesNothing(t *testing.T) {
	for _, impl := range backend.Builtin(Factory{}).Serving(backend.NVSHMEM, ops.Put) {
		p := newPair(t, 4096, Config{})
		b := p.b[0]
		l := backend.Launch{Impl: impl}
		if windowImpl(impl) {
			// Both ranks' buffers move into NCCL's window first, as bench's Preload does.
			for r := range 2 {
				if err := p.b[r].Preload(ops.Put, 4096, l); err != nil {
					t.Fatal(err)
				}
			}
			p.g[0].log = nil
		}
		dst := func(r int) []byte {
			got := make([]byte, 4096)
			p.b[r].Read(p.dst, got)
			return got
		}
		b.SetDrop(true)
		ops := map[string]func() error{
			"put": func() error { return b.Put(p.dst, p.src, 1, l) },
			"get": func() error { return b.Get(p.dst, p.src, 1, l) },
			"put-signal": func() error {
				return b.PutSignal(p.dst, p.src, p.sig, 1, backend.Launch{})
			},
			"ping-pong": func() error {
				_, err := b.PingPong(p.dst, p.src, p.sig, p.src, 8, 1, 1, true, backend.Launch{})
				return err
			},
		}
		for name, op := range ops {
			if err := op(); err != nil {
				t.Errorf("%s %s under drop: %v", impl, name, err)
			}
		}
		if calls := p.g[0].trace(); len(calls) != 0 {
			t.Errorf("%s: dropped operations queued %q", impl, calls)
		}
		if !bytes.Equal(dst(1), make([]byte, 4096)) || !bytes.Equal(dst(0), make([]byte, 4096)) {
			t.Errorf("%s: data moved under drop", impl)
		}
		b.SetDrop(false)
		if err := ops["put"](); err != nil || !bytes.Equal(dst(1), pattern(0, 4096)) {
			t.Errorf("%s: put after drop is off: %v", impl, err)
		}
	}
}

// A put-signal delivers the data and one signal per block; the receiver's wait asks
// for exactly that many and returns.
func TestPutSignalThenWait(t *testing.T) {
	const n = 1<<20 + 3
	for _, impl := range []string{"", "triton", "cuda"} {
		p := newPair(t, n, Config{})
		l := backend.Launch{Impl: impl}
		for range 2 {
			if err := p.b[0].PutSignal(p.dst, p.src, p.sig, 1, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.b[1].WaitSignal(p.sig, n, 2, l); err != nil {
			t.Fatalf("%q: %v", impl, err)
		}
		if !bytes.Equal(p.heap(1, p.dst), pattern(0, n)) {
			t.Errorf("%q: wrong data", impl)
		}
		w := p.g[1].launches[0]
		if blocks := ShapeFor(n, l).Blocks; w.kernel != kWaitSignal || w.args[1] != uint64(2*blocks) || w.dim.Grid != 1 || w.dim.Block != 32 {
			t.Errorf("%q: wait launched %s grid %d block %d for %d signals, want %d", impl, w.kernel, w.dim.Grid, w.dim.Block, w.args[1], 2*blocks)
		}
	}
}

// A wait whose signal never comes gives up at the job's limit with ErrUndelivered:
// on the device (the wait kernel takes the limit and the mailbox, traps, and the host
// says what it waited for), and, for a kernel without a limit of its own, on the host a
// little later.
func TestWaitSignalUndelivered(t *testing.T) {
	const limit = 250 * time.Millisecond
	p := newPair(t, 4096, Config{WaitLimit: limit})
	if err := p.b[0].PutSignal(p.dst, p.src, p.sig, 1, backend.Launch{}); err != nil {
		t.Fatal(err)
	}
	err := p.b[1].WaitSignal(p.sig, 4096, 2, backend.Launch{}) // one of two came
	if !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), "rank 1: the GPU gave up waiting for a signal after 250ms") ||
		!strings.Contains(err.Error(), "reached 1 of 2") {
		t.Errorf("wait for a signal that never comes: %v", err)
	}
	w := p.g[1].launches[0]
	if lim, _ := w.param(paramLimit); lim != uint64(limit.Nanoseconds()) {
		t.Errorf("the wait kernel got limit_ns %d, want %d", lim, limit.Nanoseconds())
	}
	if mb, _ := w.param(paramMailbox); mb != fakeHostBase {
		t.Errorf("the wait kernel got mailbox %#x, want the mapped host words at %#x", mb, fakeHostBase)
	}
	// Once the kernel has trapped, every later call fails with the same account.
	if err := p.b[1].Read(p.dst, make([]byte, 8)); !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), "gave up waiting for a signal") {
		t.Errorf("read after the trap: %v", err)
	}

	// A wait kernel that does not give up by itself (unbounded: a user's, say) is given
	// up on by the host, past the device's limit (so that a kernel's own account comes
	// first); unset, the limit is the default.
	q := newPair(t, 4096, Config{})
	q.g[1].unbounded = true
	err = q.b[1].WaitSignal(q.sig, 4096, 1, backend.Launch{Impl: implCopyEngine})
	if !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), "did not finish within 15s") {
		t.Errorf("wait for a signal never sent: %v", err)
	}
	if !slices.Equal(q.g[1].limits, []time.Duration{backend.DefaultWaitLimit * 3 / 2}) {
		t.Errorf("default limit: %v", q.g[1].limits)
	}
	// An implementation without put-signal waits with the default's kernel.
	if l := q.g[1].launches; len(l) != 1 || l[0].impl != "triton" {
		t.Errorf("copy-engine's wait launched %+v", l)
	}
}

// The initiator's rounds are the differences of the kernel's clock stamps; both sides
// get the other's payload; the responder gets no rounds.
func TestPingPong(t *testing.T) {
	const iters = 5
	p := newPair(t, 4096, Config{})
	stamps, err := p.b[0].Alloc(8 * (iters + 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.b[1].Alloc(8 * (iters + 2)); err != nil {
		t.Fatal(err)
	}
	res, err := p.b[0].PingPong(p.dst, p.src, p.sig, stamps, 4096, iters, 1, true, backend.Launch{Impl: "cuda"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != time.Duration(fakeOp) || res.Late != 0 {
		t.Errorf("elapsed %v, late %d; want the kernel's %v and 0", res.Total, res.Late, time.Duration(fakeOp))
	}
	want := []time.Duration{1 * time.Microsecond, 2 * time.Microsecond, 3 * time.Microsecond, 4 * time.Microsecond, 5 * time.Microsecond}
	if !slices.Equal(res.Rounds, want) {
		t.Errorf("rounds %v, want %v", res.Rounds, want)
	}
	res, err = p.b[1].PingPong(p.dst, p.src, p.sig, stamps, 4096, iters, 0, false, backend.Launch{Impl: "cuda"})
	if err != nil || res.Rounds != nil {
		t.Errorf("responder: %v, %v", res.Rounds, err)
	}
	// Each side's payload lands in the other's dst, the last round's number in front.
	tagged := func(r int) []byte {
		b := pattern(r, 4096)
		binary.LittleEndian.PutUint64(b, iters)
		return b
	}
	if !bytes.Equal(p.heap(0, p.dst), tagged(1)) || !bytes.Equal(p.heap(1, p.dst), tagged(0)) {
		t.Error("payloads not exchanged")
	}
	// A kernel that checked nothing (its count left as the poison) is an error.
	p.g[0].skipPingPongCount = true
	if _, err := p.b[0].PingPong(p.dst, p.src, p.sig, stamps, 4096, iters, 1, true, backend.Launch{Impl: "cuda"}); err == nil ||
		!strings.Contains(err.Error(), "reported no check") {
		t.Errorf("a kernel that wrote no count: %v", err)
	}
	p.g[0].skipPingPongCount = false
	l := p.g[0].launches[0]
	if l.kernel != kPingPong || l.args[4] != iters || l.args[5] != 1 || l.args[6] != 1 || l.args[7] != p.b[0].addr(stamps) {
		t.Errorf("launched %s with %v", l.kernel, l.args)
	}
	if _, err := p.b[0].PingPong(p.dst, p.src, p.sig, stamps.Slice(0, 8*(iters+1)), 4096, iters, 1, true, backend.Launch{}); err == nil ||
		!strings.Contains(err.Error(), "stamps") {
		t.Errorf("too few stamps: %v", err)
	}
}

// Write and Read stay inside the buffer, whatever the length of the host slice, and
// wait for the main stream first.
func TestWriteReadBounds(t *testing.T) {
	w := newWorld(t, 1, 1<<20)
	b, g := w.open(t, 0, Config{})
	a, _ := b.Alloc(256)
	next, _ := b.Alloc(256)
	if next.Off != a.Off+256 {
		t.Fatalf("buffers not adjacent: %+v %+v", a, next)
	}
	if err := b.Write(a, bytes.Repeat([]byte{7}, 512)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.heaps[0][next.Off:next.Off+256], make([]byte, 256)) {
		t.Error("Write ran past the buffer")
	}
	if want := []string{"sync@s0", "htod"}; !slices.Equal(g.trace(), want) {
		t.Errorf("Write's calls %q, want %q", g.trace(), want)
	}
	out := bytes.Repeat([]byte{0xee}, 512)
	if err := b.Read(a, out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:256], bytes.Repeat([]byte{7}, 256)) || !bytes.Equal(out[256:], bytes.Repeat([]byte{0xee}, 256)) {
		t.Error("Read did not fill exactly the buffer's bytes")
	}
	// A short slice moves only its own length.
	if err := b.Write(a, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	short := make([]byte, 3)
	if err := b.Read(a, short); err != nil || !bytes.Equal(short, []byte{1, 2, 7}) {
		t.Errorf("short write and read: %v, %v", short, err)
	}
}
