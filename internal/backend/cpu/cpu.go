// Package cpu is the CPU backend: every rank is a process, and the symmetric heap is one
// shared-memory file that all of them map. A put is a memory copy into the peer's part
// of the mapping, a signal is an atomic add on a word there, and barriers spin on a
// counter in the file's header. It runs anywhere, which is what lets CI exercise the
// launcher, the ops and the tables without a GPU.
package cpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/backend"
)

const headerSize = 4096

// ShmDir is where heaps live; tests point it elsewhere.
var ShmDir = "/dev/shm"

// HeapPath is the file of a job's heap.
func HeapPath(job string) string { return filepath.Join(ShmDir, "symmem-"+job+".heap") }

func regionSize(heap int64) int64 { return backend.Align(heap, 4096) }

// Create makes the heap file for nranks ranks of heap bytes each. The file is sparse:
// pages cost memory only once touched.
func Create(path string, nranks int, heap int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cpu backend: creating the shared heap: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(headerSize + int64(nranks)*regionSize(heap)); err != nil {
		os.Remove(path)
		return fmt.Errorf("cpu backend: sizing the shared heap %s: %w", path, err)
	}
	return nil
}

// Backend is one rank's handle on the shared heap.
type Backend struct {
	rank, size int
	heap       int64
	mem        []byte
	alloc      backend.Bump
	drop       bool
	// WaitLimit bounds WaitSignal (backend.DefaultWaitLimit when zero).
	WaitLimit time.Duration
}

// SetDrop makes Put, Get and PutSignal skip their copies and signals (a test fault at
// the point of delivery; see backend.Dropper).
func (b *Backend) SetDrop(drop bool) { b.drop = drop }

// Open maps the heap file created by Create.
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
	return &Backend{rank: rank, size: size, heap: heap, mem: mem, alloc: backend.Bump{Limit: heap}}, nil
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
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	copy(b.region(peer, dst), b.region(b.rank, src))
	return nil
}

func (b *Backend) Get(dst, src backend.Buffer, peer int, _ backend.Launch) error {
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	copy(b.region(b.rank, dst), b.region(peer, src))
	return nil
}

func (b *Backend) word(rank int, buf backend.Buffer) *uint64 {
	return (*uint64)(unsafe.Pointer(&b.region(rank, buf.Slice(0, 8))[0]))
}

func (b *Backend) PutSignal(dst, src, sig backend.Buffer, peer int, l backend.Launch) error {
	if err := b.Put(dst, src, peer, l); err != nil || b.drop {
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
	limit := b.WaitLimit
	if limit <= 0 {
		limit = backend.DefaultWaitLimit
	}
	w := b.word(b.rank, sig)
	var bo backoff
	last, since := atomic.LoadUint64(w), time.Now()
	for v := last; v < uint64(count); v = atomic.LoadUint64(w) {
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
	count := (*uint64)(unsafe.Pointer(&b.mem[0]))
	gen := (*uint64)(unsafe.Pointer(&b.mem[8]))
	g := atomic.LoadUint64(gen)
	if atomic.AddUint64(count, 1) == uint64(b.size) {
		atomic.StoreUint64(count, 0)
		atomic.AddUint64(gen, 1)
		return nil
	}
	var bo backoff
	for atomic.LoadUint64(gen) == g {
		bo.wait()
	}
	return nil
}

func (b *Backend) Close() error {
	if b.mem == nil {
		return errors.New("cpu backend: closed twice")
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	return err
}

// backoff spins briefly, then yields the processor, then sleeps: a peer a few
// microseconds behind is caught by the spin, and a 2-core CI machine running four ranks
// is not starved by waiters that have long to wait.
type backoff struct{ n int }

func (b *backoff) wait() {
	b.n++
	switch {
	case b.n < 256:
		// busy spin
	case b.n < 20000:
		runtime.Gosched()
	default:
		time.Sleep(100 * time.Microsecond)
	}
}
