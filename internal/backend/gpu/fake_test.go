package gpu

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch/store/storetest"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// The fake device: every rank of a job in one process, each rank's symmetric heap a
// byte slice, and each kernel of the catalogue imitated on those slices with the
// argument list the real one takes, so that a wrong address, peer, chunk or grid shows
// up as wrong bytes. Work runs when it is queued, in order; a device clock advances by
// fakeOp for each kernel or copy and by fakeSync for each quiet or barrier, and events
// take its value when they run. Every call lands in a log the tests read for order.

const (
	fakeSym = 0x7f00_0000_0000 // where nvshmem_malloc puts the heap, on every rank
	// Rank pe's heap is mapped for its peers at fakeMapBase + pe<<32.
	fakeMapBase = 0x5000_0000_0000
	// Mapped host words (MapHostWords) are at fakeHostBase on the GPU.
	fakeHostBase = 0x6000_0000_0000
	fakeCC       = 90 // an H200

	fakeOp   = int64(time.Millisecond)
	fakeSync = int64(time.Millisecond / 2)
)

// fakeWorld is a job: the heaps of its ranks and which rank can map which.
type fakeWorld struct {
	size   int
	heap   int64 // the job's heap; total adds the collective kernels' sync area
	total  int64
	heaps  [][]byte
	staged []stagedCall // launches of the staged all-reduce waiting for every rank
	// absent is a rank that never comes to a wait (-1: none): the bounded wait kernels
	// of the others give up (trap) instead of moving data.
	absent   int
	unmapped map[[2]int]bool // {from, to}: nvshmem_ptr returns 0
	files    map[[32]byte]string
	// user are the artifacts of a user's catalogue the fake driver knows too
	// (addUser); a user's all-reduce launches meet in userCalls.
	user      []*kernels.Artifact
	userCalls []stagedCall
	// userSums makes a user's reducing collectives sum whatever operator their kernel
	// combines with, and userSetOnly a user's signal kernel set the word whatever
	// operator it is given (kernels that do not deliver what they promise).
	userSums, userSetOnly bool
	// userFlagHalf makes a user's put-flag kernels put the first half of the data
	// alone before the flag, and userNoMeet its barrier kernels meet nobody.
	userFlagHalf, userNoMeet bool
	// userAddNoGet makes a user's get-add kernel add what tmp holds without getting
	// the peer's source into it.
	userAddNoGet bool
	// meetCalls are the barrier rounds launched so far, until every rank's is there;
	// barriers the ranks whose stream has reached NVSHMEM's barrier, until every one's
	// has (BarrierOnStream).
	meetCalls []stagedCall
	barriers  []*fakeGPU
	// wins are the ranks' NCCL windows (ncclfake_test.go), nil before one registers;
	// a window's bytes are heaps[size+rank].
	wins []*fakeWin
	hub  *commHub // the fake NCCL the ranks open
	// reg is the registry the world's ranks open with (symmem's own GPU
	// implementations; addUser adds to it), opened the ranks opened so far.
	reg    *backend.Registry
	opened []*Backend
}

// The fake GPU's ranks hold their whole symmetric heap in memory, and ensureSync
// clears the LL areas of every rank a test opens: at the real LL128 budget (36 MiB)
// the clearing would be most of the package's time. Tests that need the real size set
// it back (withLL128Budget).
func init() { ll128Budget = 8 << 20 }

// withLL128Budget runs f with the LL128 areas at their real size.
func withLL128Budget(f func()) {
	old := ll128Budget
	ll128Budget = 36 << 20
	defer func() { ll128Budget = old }()
	f()
}

func newWorld(t testing.TB, size int, heap int64) *fakeWorld {
	w := &fakeWorld{size: size, heap: heap, unmapped: map[[2]int]bool{}, files: imageFiles(), absent: -1, reg: backend.Builtin(Factory{})}
	w.total = backend.Align(heap, backend.HeapAlign) + syncArea(size) // what start asks nvshmem_malloc for
	for range size {
		w.heaps = append(w.heaps, deviceMemory(t, w.total))
	}
	return w
}

// deviceMemory is a rank's symmetric heap: n zeroed bytes mapped outside Go's heap and
// unmapped when the test ends. Every heap holds the whole sync area (the push areas
// alone are 64 MiB); on Go's heap, the collector would keep a test's worlds long after
// it ended and the race detector would shadow every byte. What the fake GPU's kernels do to device memory
// concurrently is no Go data race (a GPU's own memory model orders it), so the race
// detector need not watch it; the backend's own state stays on Go's heap.
func deviceMemory(t testing.TB, n int64) []byte {
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mapping a fake heap of %d bytes: %v", n, err)
	}
	t.Cleanup(func() {
		if err := syscall.Munmap(b); err != nil {
			t.Errorf("unmapping a fake heap: %v", err)
		}
	})
	return b
}

// imageFiles maps the hash of each image in the catalogue to its file: the fake module
// loader knows an image by its bytes, as the driver would.
var imageFiles = sync.OnceValue(func() map[[32]byte]string {
	files := map[[32]byte]string{}
	for _, a := range kernels.Default().Artifacts {
		data, err := a.Data()
		if err != nil {
			panic(err)
		}
		files[sha256.Sum256(data)] = a.File
	}
	return files
})

// open starts rank's backend on a fake GPU, past NVSHMEM's init; the log starts empty.
func (w *fakeWorld) open(t *testing.T, rank int, cfg Config) (*Backend, *fakeGPU) {
	t.Helper()
	g := &fakeGPU{w: w, rank: rank, live: map[string]int{}}
	t.Cleanup(g.forget)
	cfg.Heap = w.heap
	if cfg.Registry == nil {
		cfg.Registry = w.reg
	}
	b, err := start(Place{Rank: rank, LocalRank: rank, Size: w.size}, g, g, fakeCC, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.cat = kernels.Default()
	b.dev = moeDevice{g} // nccl-device uploads its device communicator
	// Every rank of the world meets the same fake NCCL (collective_test.go); a test
	// of a rank without one sets openComm to nil.
	if w.hub == nil {
		w.hub = &commHub{w: w}
	}
	b.openComm = func() (comm, error) { return fakeComm{w.hub, rank}, nil }
	b.openGemm = func() (gemmer, error) { return &fakeGemm{g: g}, nil }
	w.opened = append(w.opened, b)
	b.info = cuda.DeviceInfo{Name: "NVIDIA H200", CC: fakeCC, PCIBusID: fmt.Sprintf("00000000:%02x:00.0", 0x18+rank)}
	g.log = nil
	return b, g
}

// bytes is n bytes of rank's heap from off, or an error for a range outside it. Ranks
// size and up name the NCCL windows (fakeWin).
func (w *fakeWorld) bytes(rank int, off, n int64) ([]byte, error) {
	if rank < 0 || rank >= len(w.heaps) || off < 0 || n < 0 || off+n > int64(len(w.heaps[rank])) {
		return nil, fmt.Errorf("fake: %d bytes at offset %d of rank %d's heap: out of range", n, off, rank)
	}
	return w.heaps[rank][off : off+n], nil
}

// call is one logged call; s is its stream, e its event, from the stream the event
// was last recorded on (for a wait).
type call struct {
	op       string
	s, e     int
	from     int
	what     string
	captured bool
}

// String drops the event's number: the tests compare the shape of the work.
func (c call) String() string {
	switch c.op {
	case "record":
		return fmt.Sprintf("record@s%d", c.s)
	case "wait":
		return fmt.Sprintf("s%d waits s%d", c.s, c.from)
	case "launch", "copy":
		return fmt.Sprintf("%s %s@s%d", c.op, c.what, c.s)
	}
	if c.s < 0 { // not on a stream
		return c.op
	}
	return fmt.Sprintf("%s@s%d", c.op, c.s)
}

type fakeLaunch struct {
	stream       int
	impl, kernel string
	warps        int
	dim          cuda.Dim
	args         []uint64
	a            *kernels.Artifact
	cooperative  bool
}

// param is the launch's argument for the kernel's parameter name.
func (l fakeLaunch) param(name string) (uint64, bool) {
	for i, p := range l.a.Params {
		if p.Name == name && i < len(l.args) {
			return l.args[i], true
		}
	}
	return 0, false
}

// bounded says whether the kernel bounds its waits on the device (it takes a mailbox),
// and where its mailbox is.
func (l fakeLaunch) bounded() (mailbox uint64, ok bool) {
	if _, ok := l.param(paramLimit); !ok {
		return 0, false
	}
	return l.param(paramMailbox)
}

type fakeCopy struct {
	stream         int
	dst, src, size uint64
}

// fakeGPU is one rank's device and NVSHMEM library.
type fakeGPU struct {
	w    *fakeWorld
	rank int
	now  int64

	log      []call
	launches []fakeLaunch
	copies   []fakeCopy
	limits   []time.Duration // what WaitFor was given
	loaded   []string        // impl/kernel[ wN] of each function looked up
	inited   []string        // files given to nvshmemx_cumodule_init
	linked   []string        // "FILE+LIB..." of each PTX linked at load (LinkModule)
	capture  *fakeGraph
	// skipPingPongCount makes the ping-pong imitation leave its check count unwritten.
	skipPingPongCount bool
	// host is the mapped host memory (MapHostWords), hostFreed says it was freed.
	host      []uint64
	hostFreed bool
	// trapped is the sticky error every call returns once a kernel has trapped, as
	// the driver's CUDA_ERROR_LAUNCH_FAILED; unbounded makes the wait kernels imitate
	// ones without a limit of their own (they spin on, the stream stays busy).
	trapped   error
	unbounded bool
	// holding says this rank launched an NVSHMEM collective that its peers have not
	// all launched yet (nvshmemColl): the work queued after it, which on a GPU waits
	// on the stream for the collective to end, is held until it does.
	holding bool
	held    []func() error

	streams, events int
	live            map[string]int // streams, events, modules, graphs not yet destroyed
	finalized       bool
	freed, released bool

	// phases counts, per block, the barrier phases the collective kernels launched here
	// pass (what their state words count, and what they announce to every peer), and
	// llPhases the LL kernels' launches: every rank must count alike, or a barrier on
	// the GPU waits for announcements that never come (barrierPhases).
	phases, llPhases [MaxCollBlocks]uint64
}

// barrierPhases is how many barrier phases launch l passes in each of its blocks, and
// whether it is an LL kernel (which counts launches apart, announcing nothing).
func barrierPhases(l fakeLaunch) (k uint64, ll bool) {
	switch l.kernel {
	case kReduceBF16, kReduceF32:
		extra, _ := l.param("extra")
		return 2 + extra, false
	case kStaged:
		chunk, _ := l.param("chunk")
		sub, _ := l.param("sub")
		return 1 + (chunk+sub-1)/max(sub, 1), false
	case kPush, kDispatch, kCombineBF16, kCombineF32, kCombineStagedBF16, kCombineStagedF32:
		return 2, false
	case kPushBF16, kPushF32, kBarrier:
		return 1, false
	case kAGMatmulBF16, kAGMatmulF16, kMatmulRSBF16, kMatmulRSF16:
		return 2, false
	case kLLBF16, kLLF32, kPushLL, kLL128BF16, kLL128F32:
		return 1, true
	}
	return 0, false
}

// trace is the log as strings, keeping the calls whose op is in ops (all when none).
func (g *fakeGPU) trace(ops ...string) []string {
	var out []string
	for _, c := range g.log {
		if len(ops) == 0 || strings.Contains(" "+strings.Join(ops, " ")+" ", " "+c.op+" ") {
			out = append(out, c.String())
		}
	}
	return out
}

// enqueue logs c on s and runs it now, or keeps it for the graph being captured.
func (g *fakeGPU) enqueue(s *fakeStream, c call, cost int64, run func() error) error {
	if g.trapped != nil {
		return g.trapped
	}
	c.s = s.id
	c.captured = g.capture != nil
	g.log = append(g.log, c)
	do := func() error {
		g.now += cost
		if run == nil {
			return nil
		}
		return run()
	}
	if g.capture != nil {
		g.capture.ops = append(g.capture.ops, do)
		return nil
	}
	if g.holding {
		g.held = append(g.held, do)
		return nil
	}
	return do()
}

// release runs the work held while the rank's collective waited for its peers, up to
// the next collective that waits.
func (g *fakeGPU) release() error {
	g.holding = false
	for len(g.held) > 0 && !g.holding {
		do := g.held[0]
		g.held = g.held[1:]
		if err := do(); err != nil {
			return err
		}
	}
	return nil
}

// resolve maps a device address to a rank's heap: the local heap at fakeSym, a peer's
// through its mapping (when nvshmem_ptr gave one out).
func (g *fakeGPU) resolve(addr, n uint64) (int, int64, error) {
	if addr >= fakeSym && addr < fakeSym+uint64(g.w.total) {
		return g.rank, int64(addr - fakeSym), nil
	}
	if space, off, ok := g.w.inWindow(g.rank, addr); ok {
		return space, off, nil
	}
	for pe := range g.w.size {
		base := uint64(fakeMapBase) + uint64(pe)<<32
		if addr >= base && addr < base+uint64(g.w.total) && !g.w.unmapped[[2]int{g.rank, pe}] {
			return pe, int64(addr - base), nil
		}
	}
	return 0, 0, fmt.Errorf("fake: rank %d has nothing at %#x", g.rank, addr)
}

// sym is the heap offset of a symmetric address, as NVSHMEM device calls take it.
func (g *fakeGPU) sym(addr uint64) (int64, error) {
	if addr < fakeSym || addr >= fakeSym+uint64(g.w.total) {
		return 0, fmt.Errorf("fake: %#x is not a symmetric address", addr)
	}
	return int64(addr - fakeSym), nil
}

// dstSrc resolves a launch's first two arguments, its destination and source.
func (g *fakeGPU) dstSrc(a []uint64) (dst, src int64, err error) {
	if dst, err = g.sym(a[0]); err == nil {
		src, err = g.sym(a[1])
	}
	return dst, src, err
}

// move copies n bytes between two ranks' heaps.
func (g *fakeGPU) move(toRank int, to int64, fromRank int, from int64, n int64) error {
	d, err := g.w.bytes(toRank, to, n)
	if err != nil {
		return err
	}
	s, err := g.w.bytes(fromRank, from, n)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (g *fakeGPU) word(rank int, addr uint64) ([]byte, error) {
	off, err := g.sym(addr)
	if err != nil {
		return nil, err
	}
	return g.w.bytes(rank, off, 8)
}

// device

func (g *fakeGPU) NewStream() (stream, error) {
	g.live["stream"]++
	g.streams++
	return &fakeStream{g: g, id: g.streams - 1}, nil
}

func (g *fakeGPU) newEvent(timing bool) (event, error) {
	g.live["event"]++
	g.events++
	return &fakeEvent{g: g, id: g.events - 1, on: -1, done: true, timing: timing}, nil
}

func (g *fakeGPU) NewEvent() (event, error)     { return g.newEvent(true) }
func (g *fakeGPU) NewSyncEvent() (event, error) { return g.newEvent(false) }

func (g *fakeGPU) LoadModule(image []byte) (module, error) {
	file, ok := g.w.files[sha256.Sum256(image)]
	if !ok {
		return nil, fmt.Errorf("fake: CUDA_ERROR_INVALID_IMAGE: not one of the catalogue's images")
	}
	g.live["module"]++
	return &fakeModule{g: g, file: file}, nil
}

// LinkModule links PTX as the driver would: only a catalogue image, and only with
// libraries that are there.
func (g *fakeGPU) LinkModule(ptx []byte, name string, libs []string) (module, error) {
	for _, l := range libs {
		if _, err := os.Stat(l); err != nil {
			return nil, fmt.Errorf("fake: cuLinkAddFile(%s): CUDA_ERROR_FILE_NOT_FOUND", l)
		}
	}
	g.linked = append(g.linked, name+"+"+strings.Join(libs, "+"))
	return g.LoadModule(ptx)
}

func (g *fakeGPU) CopyHtoD(dst uint64, src []byte) error {
	g.log = append(g.log, call{op: "htod", s: -1})
	if g.trapped != nil {
		return g.trapped
	}
	r, off, err := g.resolve(dst, uint64(len(src)))
	if err != nil {
		return err
	}
	d, err := g.w.bytes(r, off, int64(len(src)))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

// Zero zeroes as the driver's memset would: the whole pages of the range are handed
// back to the kernel (the heaps are anonymous mappings, which read as zero after it),
// the ends cleared. Writing megabytes of zeros into pages never touched made the
// collective tests spend most of their time on page faults.
func (g *fakeGPU) Zero(dst, n uint64) error {
	g.log = append(g.log, call{op: "zero", s: -1})
	if g.trapped != nil {
		return g.trapped
	}
	r, off, err := g.resolve(dst, n)
	if err != nil {
		return err
	}
	d, err := g.w.bytes(r, off, int64(n))
	if err != nil {
		return err
	}
	page := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	lo := min((page-base%page)%page, uintptr(len(d)))
	hi := lo + (uintptr(len(d))-lo)/page*page
	clear(d[:lo])
	clear(d[hi:])
	if hi > lo {
		if err := unix.Madvise(d[lo:hi], unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("fake: zeroing %d bytes: %w", hi-lo, err)
		}
	}
	return nil
}

func (g *fakeGPU) CopyDtoH(dst []byte, src uint64) error {
	g.log = append(g.log, call{op: "dtoh", s: -1})
	if g.trapped != nil {
		return g.trapped
	}
	r, off, err := g.resolve(src, uint64(len(dst)))
	if err != nil {
		return err
	}
	s, err := g.w.bytes(r, off, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (g *fakeGPU) Release() error { g.released = true; return nil }

func (g *fakeGPU) MapHostWords(n int) (uint64, []uint64, func() error, error) {
	g.host = make([]uint64, n)
	return fakeHostBase, g.host, func() error { g.hostFreed = true; return nil }, nil
}

// hostWords is the mapped host memory at GPU address addr, n words.
func (g *fakeGPU) hostWords(addr uint64, n int) ([]uint64, error) {
	if addr < fakeHostBase || addr+uint64(n)*8 > fakeHostBase+uint64(len(g.host))*8 || addr%8 != 0 {
		return nil, fmt.Errorf("fake: rank %d has no mapped host words at %#x", g.rank, addr)
	}
	i := (addr - fakeHostBase) / 8
	return g.host[i : i+uint64(n)], nil
}

// trap imitates a kernel that gave up: it writes the mailbox at addr as the kernels do
// (kernels/triton/nvshmem_device.py give_up) and fails the context.
func (g *fakeGPU) trap(mailbox uint64, what, want, seen, where uint64) error {
	m, err := g.hostWords(mailbox, 4)
	if err != nil {
		return err
	}
	m[1], m[2], m[3], m[0] = want, seen, where, what
	g.trapped = fmt.Errorf("fake: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure")
	return nil
}

// shmem

func (g *fakeGPU) NewUID() (nvshmem.UID, error) {
	var u nvshmem.UID
	copy(u[:], fmt.Sprintf("fake uid of rank %d", g.rank))
	return u, nil
}

func (g *fakeGPU) Init(rank, n int, uid nvshmem.UID) error { return nil }

func (g *fakeGPU) Malloc(n uint64) (uintptr, error) {
	if int64(n) > g.w.total {
		return 0, fmt.Errorf("fake: nvshmem_malloc(%d) on a heap of %d", n, g.w.total)
	}
	return fakeSym, nil
}

func (g *fakeGPU) Free(p uintptr) { g.freed = true }

func (g *fakeGPU) PeerPtr(p uintptr, pe int) uintptr {
	switch {
	case pe == g.rank:
		return p
	case g.w.unmapped[[2]int{g.rank, pe}]:
		return 0
	}
	return fakeMapBase + uintptr(pe)<<32 + (p - fakeSym)
}

func (g *fakeGPU) QuietOnStream(s stream) {
	g.enqueue(s.(*fakeStream), call{op: "quiet"}, fakeSync, nil)
}

// BarrierOnStream holds the work queued on the rank after it until every rank's
// stream has reached its own barrier, as nvshmemx_barrier_all_on_stream does; an
// error of the work it holds back, or of a peer's it lets go, sticks to that rank as a
// trap's would (the call returns nothing).
func (g *fakeGPU) BarrierOnStream(s stream) {
	if err := g.enqueue(s.(*fakeStream), call{op: "barrier"}, fakeSync, g.barrierAll); err != nil && g.trapped == nil {
		g.trapped = err
	}
}

// barrierAll is the barrier's arrival on the device: until every rank has arrived, the
// rank holds what comes after it; the last to arrive lets every other one go on.
func (g *fakeGPU) barrierAll() error {
	w := g.w
	w.barriers = append(w.barriers, g)
	if len(w.barriers) < w.size {
		g.holding = true
		return nil
	}
	met := w.barriers
	w.barriers = nil
	for _, o := range met {
		if o == g {
			continue
		}
		if err := o.release(); err != nil && o.trapped == nil {
			o.trapped = err
		}
	}
	return nil
}

func (g *fakeGPU) BarrierAll() { g.log = append(g.log, call{op: "barrier-all", s: -1}) }
func (g *fakeGPU) ModuleInit(m module) error {
	g.inited = append(g.inited, m.(*fakeModule).file)
	return nil
}
func (g *fakeGPU) ModuleFinalize(m module) {}
func (g *fakeGPU) Finalize()               { g.finalized = true }
func (g *fakeGPU) HostVersion() [3]int     { return [3]int{3, 4, 5} }
func (g *fakeGPU) VersionString() string   { return "3.4.5" }

type fakeStream struct {
	g  *fakeGPU
	id int
	// stuck: a wait kernel on it never saw its signal, so nothing queued after it
	// completes.
	stuck bool
}

func (s *fakeStream) Synchronize() error {
	s.g.log = append(s.g.log, call{op: "sync", s: s.id})
	if s.g.trapped != nil {
		return s.g.trapped
	}
	if s.stuck {
		return fmt.Errorf("fake: s%d never finishes (a real synchronize would hang)", s.id)
	}
	return nil
}

func (s *fakeStream) Wait(e event) error {
	fe := e.(*fakeEvent)
	return s.g.enqueue(s, call{op: "wait", e: fe.id, from: fe.on}, 0, func() error {
		s.stuck = s.stuck || !fe.done
		return nil
	})
}

func (s *fakeStream) CopyDtoDAsync(dst, src, n uint64) error {
	g := s.g
	g.copies = append(g.copies, fakeCopy{stream: s.id, dst: dst, src: src, size: n})
	return g.enqueue(s, call{op: "copy", what: fmt.Sprint(n)}, fakeOp, func() error {
		tr, to, err := g.resolve(dst, n)
		if err != nil {
			return err
		}
		fr, from, err := g.resolve(src, n)
		if err != nil {
			return err
		}
		return g.move(tr, to, fr, from, int64(n))
	})
}

func (s *fakeStream) Capture(fill func() error) (graph, error) {
	if s.g.capture != nil {
		return nil, fmt.Errorf("fake: nested capture")
	}
	s.g.capture = &fakeGraph{g: s.g}
	err := fill()
	gr := s.g.capture
	s.g.capture = nil
	if err != nil {
		return nil, err
	}
	s.g.live["graph"]++
	return gr, nil
}

func (s *fakeStream) Destroy() error { s.g.live["stream"]--; return nil }

type fakeEvent struct {
	g      *fakeGPU
	id, on int
	t      int64
	done   bool
	timing bool
}

func (e *fakeEvent) Record(s stream) error {
	fs := s.(*fakeStream)
	e.on = fs.id
	return e.g.enqueue(fs, call{op: "record", e: e.id}, 0, func() error {
		e.t, e.done = e.g.now, !fs.stuck
		return nil
	})
}

func (e *fakeEvent) Since(start event) (float32, error) {
	if e.g.trapped != nil {
		return 0, e.g.trapped
	}
	st := start.(*fakeEvent)
	if !e.timing || !st.timing {
		return 0, fmt.Errorf("fake: CUDA_ERROR_INVALID_HANDLE: timing with an event made without timing")
	}
	if !e.done || !st.done {
		return 0, fmt.Errorf("fake: e%d never completes (a real cuEventSynchronize would hang)", e.id)
	}
	return float32(float64(e.t-st.t) / float64(time.Millisecond)), nil
}

func (e *fakeEvent) WaitFor(limit time.Duration) (bool, error) {
	e.g.limits = append(e.g.limits, limit)
	if e.g.trapped != nil {
		return false, e.g.trapped
	}
	return e.done, nil
}

func (e *fakeEvent) Destroy() error { e.g.live["event"]--; return nil }

type fakeGraph struct {
	g   *fakeGPU
	ops []func() error
}

func (gr *fakeGraph) Upload(s stream) error { return nil }

func (gr *fakeGraph) Launch(s stream) error {
	return gr.g.enqueue(s.(*fakeStream), call{op: "graph"}, 0, func() error {
		for _, op := range gr.ops {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (gr *fakeGraph) Destroy() { gr.g.live["graph"]-- }

type fakeModule struct {
	g    *fakeGPU
	file string
}

func (m *fakeModule) Function(entry string) (function, error) {
	for _, a := range append(slices.Clip(kernels.Default().Artifacts), m.g.w.user...) {
		if a.File == m.file && a.Entry == entry {
			name := a.Impl + "/" + a.Kernel
			if a.NumWarps > 0 {
				name += fmt.Sprintf(" w%d", a.NumWarps)
			}
			m.g.loaded = append(m.g.loaded, name)
			return &fakeFunction{g: m.g, a: a}, nil
		}
	}
	return nil, fmt.Errorf("fake: CUDA_ERROR_NOT_FOUND: no %s in %s", entry, m.file)
}

func (m *fakeModule) Unload() error { m.g.live["module"]--; return nil }

type fakeFunction struct {
	g *fakeGPU
	a *kernels.Artifact
}

func (f *fakeFunction) Launch(s stream, dim cuda.Dim, args []uint64, cooperative bool) error {
	fs := s.(*fakeStream)
	if len(args) != len(f.a.Params) {
		return fmt.Errorf("fake: %s takes %d parameters, got %d", f.a.Name(), len(f.a.Params), len(args))
	}
	l := fakeLaunch{stream: fs.id, impl: f.a.Impl, kernel: f.a.Kernel, warps: f.a.NumWarps, dim: dim, args: args, a: f.a, cooperative: cooperative}
	f.g.launches = append(f.g.launches, l)
	switch l.impl {
	case implNCCLDevice:
		return f.g.enqueue(fs, call{op: "launch", what: f.a.Kernel}, fakeOp, func() error { return f.g.ncclDevice(fs, l) })
	case implNVSHMEM:
		return f.g.enqueue(fs, call{op: "launch", what: f.a.Kernel}, fakeOp, func() error { return f.g.nvshmemColl(l) })
	}
	if k, ll := barrierPhases(l); k > 0 {
		for b := range min(int(dim.Grid), MaxCollBlocks) {
			if ll {
				f.g.llPhases[b] += k
			} else {
				f.g.phases[b] += k
			}
		}
	}
	return f.g.enqueue(fs, call{op: "launch", what: f.a.Kernel}, fakeOp, func() error { return f.g.run(fs, l) })
}

// run imitates a kernel of the catalogue (kernels/cuda/symmem_nvshmem.cu and
// sm_store.cu; the Triton ones follow the same contract): block i moves bytes
// [i*chunk, min((i+1)*chunk, n)).
func (g *fakeGPU) run(s *fakeStream, l fakeLaunch) error {
	a := l.args
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
		if l.a.Peers == kernels.PeersAll {
			return g.userPutAll(l)
		}
		dst, src, err := g.dstSrc(a)
		if err != nil {
			return err
		}
		n, chunk, peer := int64(a[2]), int64(a[3]), int(a[4])
		if l.kernel == kPutSignal {
			peer = int(a[5])
		}
		to, from := peer, g.rank
		if l.kernel == kGet {
			to, from = g.rank, peer
		}
		if err := blocks(n, chunk, func(off, m int64) error { return g.move(to, dst+off, from, src+off, m) }); err != nil {
			return err
		}
		if l.kernel == kPutSignal {
			w, err := g.word(peer, a[4])
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)+uint64(l.dim.Grid)) // one per block
		}
		return nil
	case kStore:
		tr, to, err := g.resolve(a[0], a[2])
		if err != nil {
			return err
		}
		fr, from, err := g.resolve(a[1], a[2])
		if err != nil {
			return err
		}
		return blocks(int64(a[2]), int64(a[3]), func(off, m int64) error { return g.move(tr, to+off, fr, from+off, m) })
	case kWaitSignal:
		w, err := g.word(g.rank, a[0])
		if err != nil {
			return err
		}
		seen := binary.LittleEndian.Uint64(w)
		if mb, ok := l.bounded(); ok && seen < a[1] && !g.unbounded {
			return g.trap(mb, gaveUpSignal, a[1], seen, 0)
		}
		s.stuck = s.stuck || seen < a[1]
		return nil
	case kSignalOp:
		return g.signalOp(l)
	case kWaitFlag:
		w, err := g.word(g.rank, a[0])
		if err != nil {
			return err
		}
		s.stuck = s.stuck || binary.LittleEndian.Uint64(w) < a[1] // no limit of its own
		return nil
	case kPutFlag:
		return g.putFlag(l)
	case "put_flag_fence", "put_flag_quiet":
		return g.userPutFlag(l)
	case kBarrierAll, kSyncAll:
		return g.meet(l)
	case kPingPong:
		if mb, ok := l.bounded(); ok && g.w.absent >= 0 {
			return g.trap(mb, gaveUpRound, 1, 0, a[5])
		}
		return g.pingpong(a)
	case kReduceBF16, kReduceF32, kPush, kStaged, kPushBF16, kPushF32, kBarrier, kLLBF16, kLLF32, kPushLL, kLL128BF16, kLL128F32:
		if mb, ok := l.bounded(); ok && g.w.absent >= 0 {
			return g.barrierGiveUp(l, mb)
		}
	}
	switch l.kernel {
	case kBarrier:
		// The fake's ranks take turns: everything before it has landed. Its words are
		// the barrier kernels'.
		a := l.args
		if l.dim.Grid != 1 || len(a) < 4 {
			return fmt.Errorf("fake: barrier launched with %d blocks, %d arguments", l.dim.Grid, len(a))
		}
		return g.checkColl(l, a[0], a[1], a[2], a[3])
	case kReduceBF16, kReduceF32:
		return g.reduce(l)
	case kPush:
		return g.push(l)
	case kStaged:
		return g.staged(l)
	case kPushBF16, kPushF32:
		return g.pushed(l)
	case kLLBF16, kLLF32:
		return g.llReduce(l)
	case kLL128BF16, kLL128F32:
		return g.ll128Reduce(l)
	case kPushLL:
		return g.llPush(l)
	case kDispatch, kCombineBF16, kCombineF32, kCombineStagedBF16, kCombineStagedF32:
		return g.moe(l)
	case kAGMatmulBF16, kAGMatmulF16, kMatmulRSBF16, kMatmulRSF16:
		return g.fusedKernel(l)
	case kUserAGMatmulBF16, kUserAGMatmulF16:
		return g.userAGMatmul(l)
	case kUserMatmulRSBF16, kUserMatmulRSF16:
		return g.userMatmulRS(l)
	}
	if k, ok := userTableKernel(l.kernel); ok && k.Coll {
		return g.userCollective(s, l)
	} else if ok && k.Op == ops.GetAdd {
		return g.userGetAdd(l, k.DType)
	}
	return fmt.Errorf("fake: no imitation of kernel %s", l.kernel)
}

// barrierGiveUp imitates a collective kernel whose first barrier waits for the absent
// rank past the limit: block 0 reports the phase it waited for (its state word + 1) and
// what the absent rank's word here holds, then traps.
func (g *fakeGPU) barrierGiveUp(l fakeLaunch, mailbox uint64) error {
	pad, _ := l.param("pad")
	state, _ := l.param("state")
	st, err := g.word(g.rank, state)
	if err != nil {
		return err
	}
	p, err := g.word(g.rank, pad+uint64(g.w.absent)*8)
	if err != nil {
		return err
	}
	phase, seen := binary.LittleEndian.Uint64(st)+1, binary.LittleEndian.Uint64(p)
	return g.trap(mailbox, gaveUpBarrier, phase, seen, uint64(g.w.absent))
}

// pingpong imitates the ping-pong kernel without its waits: each side's payload, the
// last round's number in its first 8 bytes, lands in the other's dst, the signal ends
// at iters, and every round checked out (count 0 after the stamps, unless
// skipPingPongCount). The initiator's stamps make round i take i+1 microseconds.
func (g *fakeGPU) pingpong(a []uint64) error {
	dst, src, err := g.dstSrc(a)
	if err != nil {
		return err
	}
	n, iters, peer, initiator := int64(a[3]), int(a[4]), int(a[5]), a[6] == 1
	tag, err := g.w.bytes(g.rank, src, 8)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(tag, uint64(iters))
	if err := g.move(peer, dst, g.rank, src, n); err != nil {
		return err
	}
	w, err := g.word(peer, a[2])
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(w, uint64(iters))
	off, err := g.sym(a[7])
	if err != nil {
		return err
	}
	stamps, err := g.w.bytes(g.rank, off, int64(iters+2)*8)
	if err != nil {
		return err
	}
	if !g.skipPingPongCount {
		binary.LittleEndian.PutUint64(stamps[8*(iters+1):], 0)
	}
	if !initiator {
		return nil
	}
	t := uint64(1e9)
	for i := range iters + 1 {
		t += uint64(i) * 1000
		binary.LittleEndian.PutUint64(stamps[8*i:], t)
	}
	return nil
}

func newKV() *storetest.KV { return storetest.New() }
