package gpu

import (
	"fmt"
	"maps"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// gpuImpl is one GPU implementation, in a file of its own (triton.go, cuda.go,
// copyengine.go, smstore.go, nccl.go, nccldevice.go, usercoll.go); the registry
// (backend.Impl) says which ops it serves, and the Backend asks the implementation,
// never its name, how to run them. Most implementations embed nvshmemKernels, which
// launches the catalogue's kernels on the NVSHMEM heap, and override what differs.
type gpuImpl interface {
	// move queues a put (dst on peer) or a get (src on peer) of op on st.
	move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error
	// putSignal queues a put of src into dst on peer on st, after which each block of
	// the kernel adds one to sig on peer.
	putSignal(b *Backend, impl backend.Impl, dst, src, sig backend.Buffer, peer int, l backend.Launch, st stream) error
	// wait queues on the main stream a one-warp wait until sig reaches target.
	wait(b *Backend, impl backend.Impl, sig backend.Buffer, target uint64) error
	// pingArgs is the ping-pong kernel's argument list.
	pingArgs(b *Backend, dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool) ([]uint64, error)
	// run queues c on st. Under the drop fault the rank still takes part, or its peers
	// would wait for it forever, but what it delivers lands in c.Scratch.
	run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error
	// algorithm is the algorithm it runs c with (c.Algo where it has no choice).
	algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string
	// check refuses, before any rank starts, a collective it cannot run: op on dtype
	// with blocks blocks (0: ShapeFor's choice) and algo (an --algo of op's, or "").
	check(impl backend.Impl, op ops.Op, dtype string, blocks int, algo string) error
	// preload loads what op of n bytes with l will launch or open (kernels, NCCL's
	// communicator), so that timings separate loading from work.
	preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error
	// grid is the grid bench prints for n bytes with l: blocks and warps, or for the
	// copy engine the streams a transfer is split over and no warps.
	grid(n int64, l backend.Launch) (blocks, warps int)
	// own says it runs c by one kernel of its own (Kerneler names it).
	own() bool
	// window says its buffers live in NCCL's registered window, not NVSHMEM's heap.
	window() bool
	// needsMapping says it reaches the peer of op through its nvshmem_ptr mapping (or
	// NCCL's LSA team), not by NVSHMEM calls alone: a rank with no NVLink or P2P path to
	// the peer cannot use it.
	needsMapping(impl backend.Impl, op ops.Op) bool
	// needs says whether the NCCL library l can serve it: nil, or what is missing.
	needs(l *nccl.Lib) error
}

// nvshmemKernels is what an implementation launching the catalogue's NVSHMEM kernels
// on the heap embeds: put-signal, the wait and the ping-pong by its kernels of those
// names, no collective, no NCCL.
type nvshmemKernels struct{}

// move is the put_block or get_block kernel: symmetric addresses and the peer's number.
func (nvshmemKernels) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	return b.kernelMove(impl, dst, src, peer, l, op, st)
}

func (nvshmemKernels) putSignal(b *Backend, impl backend.Impl, dst, src, sig backend.Buffer, peer int, l backend.Launch, st stream) error {
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	return b.launch(st, impl.Name, kPutSignal, sh, sh.Blocks, b.addr(dst), b.addr(src), uint64(n), uint64(sh.Chunk), b.addr(sig), uint64(peer))
}

func (nvshmemKernels) wait(b *Backend, impl backend.Impl, sig backend.Buffer, target uint64) error {
	return b.launch(b.main, impl.Name, kWaitSignal, Shape{}, 1, b.addr(sig), target)
}

func (nvshmemKernels) pingArgs(b *Backend, dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool) ([]uint64, error) {
	return []uint64{b.addr(dst), b.addr(src), b.addr(sig), uint64(n), uint64(iters), uint64(peer), flag(initiator), b.addr(stamps)}, nil
}

func (nvshmemKernels) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	return noCollective(impl, c.Op)
}

// noCollective refuses collective op by impl, which has no code for it.
func noCollective(impl backend.Impl, op ops.Op) error {
	return setting.Errorf("{impl} %s cannot run %s on GPUs: use {impl} %s", impl.Name, op, implNCCL)
}

func (nvshmemKernels) algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string {
	return c.Algo
}

func (nvshmemKernels) check(impl backend.Impl, op ops.Op, dtype string, blocks int, algo string) error {
	return nil
}

// preload loads the kernels the registry lists for op, and the collective kernels'
// sync area where they run op.
func (nvshmemKernels) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	if kernelColl(impl, op) || userColl(impl, op) {
		if err := b.ensureSync(); err != nil {
			return err
		}
	}
	return b.loadKernels(impl, op, n, l)
}

func (nvshmemKernels) grid(n int64, l backend.Launch) (blocks, warps int) {
	sh := ShapeFor(n, l)
	return sh.Blocks, sh.Warps
}

func (nvshmemKernels) own() bool                                      { return false }
func (nvshmemKernels) window() bool                                   { return false }
func (nvshmemKernels) needsMapping(impl backend.Impl, op ops.Op) bool { return false }
func (nvshmemKernels) needs(l *nccl.Lib) error                        { return nil }

// loadKernels loads every kernel the registry lists for impl's op, with the warps each
// will run with for n bytes with l.
func (b *Backend) loadKernels(impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	sh := ShapeFor(n, l)
	for _, k := range impl.Kernels[op] {
		if _, _, err := b.function(impl.Name, k, launchWarps(k, n, sh, l)); err != nil {
			return err
		}
	}
	return nil
}

// flag is a kernel's 0/1 argument.
func flag(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// gpuImpls are symmem's own implementations by registry name, and entries their
// registry entries with the place each takes in help and tables: each file adds its
// own at initialisation, and nothing changes them after.
var (
	gpuImpls = map[string]gpuImpl{}
	entries  = map[int]backend.Impl{}
)

// registerImpl adds implementation gi with its registry entry at place pos (the
// lowest: the backend's default) of Factory.Impls.
func registerImpl(pos int, entry backend.Impl, gi gpuImpl) bool {
	if _, dup := gpuImpls[entry.Name]; dup {
		panic("GPU implementation " + entry.Name + " registered twice")
	}
	if other, dup := entries[pos]; dup {
		panic(fmt.Sprintf("GPU implementations %s and %s both take place %d", other.Name, entry.Name, pos))
	}
	entry.Backend = backend.NVSHMEM
	gpuImpls[entry.Name], entries[pos] = gi, entry
	return true
}

// Impls lists symmem's own GPU implementations, its default first.
func (Factory) Impls() []backend.Impl {
	var out []backend.Impl
	for _, pos := range slices.Sorted(maps.Keys(entries)) {
		out = append(out, entries[pos])
	}
	return out
}

// implOf is impl's code: a user's kernels (userImpl) or one of symmem's own.
func implOf(impl backend.Impl) (gpuImpl, bool) {
	if impl.User {
		return userImpl{}, true
	}
	gi, ok := gpuImpls[impl.Name]
	return gi, ok
}

// codeOf is impl's code, or why it cannot run op here: a registry entry of the GPU
// backend that no file of this package implements.
func codeOf(impl backend.Impl, op ops.Op) (gpuImpl, error) {
	if gi, ok := implOf(impl); ok {
		return gi, nil
	}
	return nil, setting.Errorf("{impl} %s cannot run %s on GPUs", impl.Name, op)
}

// named is symmem's own implementation called name, or nvshmemKernels where name is
// a user's (or the default, ""), whose kernels run as symmem's NVSHMEM kernels do.
func named(name string) gpuImpl {
	if gi, ok := gpuImpls[name]; ok {
		return gi
	}
	return nvshmemKernels{}
}

// windowImpl says whether impl's buffers live in the NCCL window.
func windowImpl(impl string) bool { return named(impl).window() }
