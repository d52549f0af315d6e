// Package cpu is the CPU backend: every rank is a process, and the symmetric heap is one
// shared-memory file that all of them map. A put is a memory copy into the peer's part
// of the mapping, a signal is an atomic add on a word there, and barriers spin on a
// counter in the file's header. It runs anywhere, which is what lets CI exercise the
// launcher, the ops and the tables without a GPU.
package cpu

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/lazyre"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/proc"
)

const headerSize = 4096

// ShmDir is where heaps live: /dev/shm, or EnvTestShmDir where it is set (tests keep
// each script's heaps apart, and see what one left behind, that way).
var ShmDir = cmp.Or(os.Getenv(EnvTestShmDir), "/dev/shm")

// EnvTestShmDir names another directory for the heaps, for tests.
const EnvTestShmDir = "SYMMEM_TEST_SHMDIR"

// HeapPath is the file of a job's heap.
func HeapPath(job string) string { return filepath.Join(ShmDir, "symmem-"+job+".heap") }

func regionSize(heap int64) int64 { return backend.Align(heap, 4096) }

// The header's layout: the barrier's count and generation, the barrier rounds'
// arrivals (Meet), then the pid namespace of the process that created the file (text,
// NUL-terminated), which tells a later launcher whether the pid in the file's name can
// be checked from where it runs.
const (
	offCount = 0
	offGen   = 8
	offMeet  = 16
	offPidNS = 64
)

// Create makes the heap file for nranks ranks of heap bytes each. The file is sparse:
// pages cost memory only once touched. It first removes the heaps that launchers which
// died before their ranks had mapped them left in the same directory (see RemoveStale).
func Create(path string, nranks int, heap int64) error {
	dir := filepath.Dir(path)
	RemoveStale(dir)
	size := headerSize + int64(nranks)*regionSize(heap)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cpu backend: creating the shared heap: %w", err) // the caller knows whose it may be
	} else if err != nil {
		return fmt.Errorf("cpu backend: creating the shared heap: %w; the ranks share their memory through a file in %s: it must be a directory this user can write, with room (df -h %s)", err, dir, dir)
	}
	defer f.Close()
	if err := fill(f, dir, nranks, heap, size); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// reserve gives f size bytes with every page allocated. A sparse file passes the free
// space check and takes its pages as the ranks first touch them: when /dev/shm filled
// meanwhile (another job, a file copied there), the rank whose store found no page died
// of SIGBUS with 230 lines of Go stack, and the launcher said only "exit status 2".
// Reserved, a full /dev/shm is an error here, before any rank starts. A file system
// that cannot reserve (EOPNOTSUPP) gets a sparse file, as before.
func reserve(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	for errors.Is(err, syscall.EINTR) {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	}
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}

// staleName matches the heaps of symmem's own launcher: the job ID starts with the
// launcher's pid (engine.newJobID). External launchers' job IDs do not match.
var staleName = lazyre.MustCompile(`^symmem-([0-9]+)-[0-9a-f]+\.heap$`)

// staleAge is how old a heap without a recorded pid namespace (made by an older
// symmem) must be before a dead pid is trusted: a live job maps its heap within
// seconds, the ranks' rendezvous gives up after a minute.
const staleAge = 10 * time.Minute

// RemoveStale removes the heaps in dir whose launcher is no longer running. A heap is
// unlinked as soon as every rank has mapped it, so one that outlives its launcher
// belongs to a launcher killed (SIGKILL cannot be caught) while its ranks were starting.
// A heap is removed only when its launcher's pid is not a live process in the pid
// namespace that made it (recorded in its header), so a heap of a live job in another
// container sharing /dev/shm is never touched; one from an older symmem, which did not
// record it, only once it is staleAge old. It returns the files removed.
func RemoveStale(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	self := pidNamespace()
	var removed []string
	for _, e := range entries {
		m := staleName().FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || running(pid) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		ns, ok := recordedPidNS(path)
		if !ok {
			continue // not ours to read
		}
		if ns != self {
			if info, err := e.Info(); ns != "" || err != nil || time.Since(info.ModTime()) < staleAge {
				continue
			}
		}
		if os.Remove(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}

// running says whether pid is a live process here. EPERM means it is, but another
// user's. A zombie is not: a launcher killed after its parent had gone stays one for
// as long as nobody reaps it (for good under a container's init that does not), and its
// heap with it.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, ok, _ := proc.Read(pid)
	return !ok || st.State != "Z" // where /proc does not say, trust kill
}

// pidNamespace names this process's pid namespace ("pid:[4026531836]"), or "" where
// /proc does not say.
func pidNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// recordedPidNS reads the pid namespace a heap's creator recorded ("" when none).
func recordedPidNS(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, _ := f.ReadAt(buf, offPidNS)
	ns, _, _ := bytes.Cut(buf[:n], []byte{0})
	return string(ns), true
}

// Backend is one rank's handle on the shared heap.
type Backend struct {
	rank, size int
	heap       int64
	mem        []byte
	alloc      backend.Bump
	drop       bool
	wrongOp    ops.RedOp // the fault hook's operator (zero: the one asked)
	// slow is the slow fault's percentage (SetSlow; 0: none).
	slow float64
	// unordered drops the orderings operations promise (SetUnordered); late holds
	// put-flag's data that lands once the next barrier is over.
	unordered bool
	late      []lateCopy
	// lateStamp writes the unordered fault's stamp of the last barrier round, once the
	// next round's meeting is over (Meet).
	lateStamp func()
	// meets counts this rank's barrier rounds (Meet).
	meets uint64
	// fusedFault is the fused fault (SetFusedFault; "": none).
	fusedFault backend.FusedFault
	// crowded: more ranks than this process may use cores (see backoff).
	crowded bool
	// WaitLimit bounds WaitSignal (backend.DefaultWaitLimit when zero).
	WaitLimit time.Duration
}

// SetDrop makes Put, Get, PutSignal and GetAdd skip their copies and signals (a test
// fault at the point of delivery; see backend.Dropper).
func (b *Backend) SetDrop(drop bool) { b.drop = drop }

// SetRedOpFault makes the rank's reductions combine with op instead of the one asked
// (the zero RedOp: the one asked): the fault hook's wrong operator.
func (b *Backend) SetRedOpFault(op ops.RedOp) { b.wrongOp = op }

// SetSlow delays every Put, Get, PutSignal, WaitSignal and collective of this rank by
// pct percent of its own time (a test fault at the point of delivery; see
// backend.Slower).
func (b *Backend) SetSlow(pct float64) { b.slow = max(pct, 0) }

// delay holds an operation that began at start for b.slow percent of the time it has
// taken: asleep for all but the last 200 us of a long delay, spinning for the rest (a
// sleep's resolution is tens of microseconds, a small copy's time well below one). It
// reads the clock twice at least (some 40 ns here), which operations of tens of
// nanoseconds (tiny messages) show as more than b.slow percent.
func (b *Backend) delay(start time.Time) {
	now := time.Now()
	end := now.Add(time.Duration(float64(now.Sub(start)) * b.slow / 100))
	for ; now.Before(end) && !stopped.Load(); now = time.Now() {
		if left := end.Sub(now); left > time.Millisecond {
			time.Sleep(left - 200*time.Microsecond)
		}
	}
}

// ErrStopped is what a wait returns once the process has been asked to stop.
var ErrStopped = backend.ErrStopped

// stopped is set when this process gets SIGTERM (the launcher stopping the job, or
// Ctrl-C reaching it through the launcher) while a backend of it is open. Waits poll it,
// so that a rank waiting for a peer that will never come returns at once instead of
// holding out for the launcher's grace period and its SIGKILL. A rank stuck elsewhere
// is the engine's to end; the backend never ends the process.
var (
	stopped atomic.Bool
	watch   struct {
		sync.Mutex
		open int
		ch   chan os.Signal
	}
)

// watchStop makes SIGTERM stop this process's waits while a backend is open
// (unwatchStop, at Close, undoes it: a program that embeds the engine gets SIGTERM's
// default back). The process's own handler (the command line's signal.NotifyContext)
// still gets the signal too.
func watchStop() {
	watch.Lock()
	defer watch.Unlock()
	if watch.open++; watch.open > 1 {
		return
	}
	stopped.Store(false)
	watch.ch = make(chan os.Signal, 1)
	signal.Notify(watch.ch, syscall.SIGTERM)
	go func(ch chan os.Signal) {
		for range ch {
			stopped.Store(true)
		}
	}(watch.ch)
}

func unwatchStop() {
	watch.Lock()
	defer watch.Unlock()
	if watch.open--; watch.open == 0 {
		signal.Stop(watch.ch)
		close(watch.ch)
	}
}

// Open maps the heap file created by Create. From then on, SIGTERM makes every wait
// of this backend return ErrStopped.
func Open(path string, rank, size int, heap int64) (*Backend, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cpu backend: opening the shared heap: %w", err)
	}
	defer f.Close()
	total := headerSize + int64(size)*regionSize(heap)
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != total {
		return nil, fmt.Errorf("cpu backend: shared heap %s is %d bytes, want %d for %d ranks", path, st.Size(), total, size)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(total), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("cpu backend: mapping the shared heap (%d bytes): %w", total, err)
	}
	watchStop()
	return &Backend{rank: rank, size: size, heap: heap, mem: mem, alloc: backend.Bump{Limit: heap}, crowded: size > runtime.NumCPU()}, nil
}

func (b *Backend) Name() string { return "cpu" }
func (b *Backend) Rank() int    { return b.rank }
func (b *Backend) Size() int    { return b.size }

func (b *Backend) Alloc(size int64) (backend.Buffer, error) { return b.alloc.Alloc(size) }

func (b *Backend) region(rank int, buf backend.Buffer) []byte {
	base := headerSize + int64(rank)*regionSize(b.heap) + buf.Off
	return b.mem[base : base+buf.Size : base+buf.Size]
}

func (b *Backend) checkPeer(peer int) error {
	if peer < 0 || peer >= b.size {
		return fmt.Errorf("peer %d out of range: the job has ranks 0..%d", peer, b.size-1)
	}
	return nil
}

func (b *Backend) Write(buf backend.Buffer, data []byte) error {
	copy(b.region(b.rank, buf), data)
	return nil
}

func (b *Backend) Read(buf backend.Buffer, out []byte) error {
	copy(out, b.region(b.rank, buf))
	return nil
}

func (b *Backend) Put(dst, src backend.Buffer, peer int, _ backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	return b.put(dst, src, peer)
}

func (b *Backend) put(dst, src backend.Buffer, peer int) error {
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	copy(b.region(peer, dst), b.region(b.rank, src))
	return nil
}

func (b *Backend) Get(dst, src backend.Buffer, peer int, _ backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	copy(b.region(b.rank, dst), b.region(peer, src))
	return nil
}

// GetAdd reads src from peer and adds it to this rank's local, element by element in
// dtype, into dst: the drop fault leaves dst as it was. It reads the peer's heap where
// it lies, needing no tmp.
func (b *Backend) GetAdd(dst, local, src, _ backend.Buffer, peer int, dtype string, _ backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	return coll.Reduce(ops.Sum, dtype, b.region(b.rank, dst), b.region(b.rank, local), b.region(peer, src))
}

func (b *Backend) word(rank int, buf backend.Buffer) *uint64 {
	return (*uint64)(unsafe.Pointer(&b.region(rank, buf.Slice(0, 8))[0]))
}

func (b *Backend) PutSignal(dst, src, sig backend.Buffer, peer int, _ backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	if err := b.put(dst, src, peer); err != nil || b.drop {
		return err
	}
	// The atomic add orders after the copy: a reader that sees the new signal value
	// sees the data (x86-TSO and the Go memory model's sequentially consistent atomics).
	atomic.AddUint64(b.word(peer, sig), 1)
	return nil
}

// WaitSignal waits for the signal word to reach count. The limit runs from the last
// change of the word, so a long stream of signals that keeps arriving is never cut off;
// one that stops is, with how far it got.
func (b *Backend) WaitSignal(sig backend.Buffer, _ int64, count int, _ backend.Launch) error {
	if b.slow > 0 {
		defer b.delay(time.Now())
	}
	limit := b.WaitLimit
	if limit <= 0 {
		limit = backend.DefaultWaitLimit
	}
	w := b.word(b.rank, sig)
	bo := backoff{crowded: b.crowded}
	last, since := atomic.LoadUint64(w), time.Now()
	for v := last; v < uint64(count); v = atomic.LoadUint64(w) {
		if stopped.Load() {
			return fmt.Errorf("rank %d: waiting for signal %d of %d: %w", b.rank, v+1, count, ErrStopped)
		}
		if v != last {
			last, since = v, time.Now()
		} else if bo.n%64 == 0 && time.Since(since) > limit {
			return fmt.Errorf("rank %d: %d of %d signals arrived, then none for %s: %w", b.rank, v, count, limit, backend.ErrUndelivered)
		}
		bo.wait()
	}
	return nil
}

func (b *Backend) Quiet() error { return nil }

// Barrier is a sense-reversing barrier on two words of the header.
func (b *Backend) Barrier() error {
	count := (*uint64)(unsafe.Pointer(&b.mem[offCount]))
	gen := (*uint64)(unsafe.Pointer(&b.mem[offGen]))
	g := atomic.LoadUint64(gen)
	if atomic.AddUint64(count, 1) == uint64(b.size) {
		atomic.StoreUint64(count, 0)
		atomic.AddUint64(gen, 1)
		b.deliverLate()
		return nil
	}
	bo := backoff{crowded: b.crowded}
	for atomic.LoadUint64(gen) == g {
		if stopped.Load() {
			return fmt.Errorf("rank %d: waiting in the barrier: %w", b.rank, ErrStopped)
		}
		bo.wait()
	}
	b.deliverLate()
	return nil
}

func (b *Backend) Close() error {
	if b.mem == nil {
		return errors.New("cpu backend: closed twice")
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	unwatchStop()
	return err
}

// backoff spins briefly, then yields the processor, then sleeps: a peer a few
// microseconds behind is caught by the spin, and a 2-core CI machine running four ranks
// is not starved by waiters that have long to wait. With more ranks than cores
// (crowded) the yield is the kernel's (sched_yield): the peer being waited for is
// another process, which runtime.Gosched would not let run. Otherwise it is the Go
// scheduler's, which costs no system call (0.5 against 0.75 us per 8-byte ping-pong
// half round trip on two cores).
type backoff struct {
	n       int
	crowded bool
}

func (b *backoff) wait() {
	b.n++
	if b.n < 256 {
		return // busy spin (small enough to inline into the waits' loops)
	}
	b.slow()
}

func (b *backoff) slow() {
	switch {
	case b.n < 20000 && b.crowded:
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	case b.n < 20000:
		runtime.Gosched()
	default:
		time.Sleep(100 * time.Microsecond)
	}
}
