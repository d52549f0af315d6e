package gpu

import (
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// order is the GPU implementations' place in help and tables, the backend's default
// first: the one list of them. An implementation's file registers it (registerImpl);
// one left out of this list is refused at start-up.
var order = []string{implTriton, implCUDA, implCopyEngine, implSMStore, implNVSHMEM, implNCCL, implNCCLSymm, implNCCLDevice,
	implCublasNCCL, implCublasTriton}

// gpuImpl is one GPU implementation, in a file of its own (triton.go, cuda.go,
// copyengine.go, smstore.go, nccl.go, nccldevice.go, fusedbase.go, usercoll.go); the registry
// (backend.Impl) says which ops it serves, and the Backend asks the implementation,
// never its name, how to run them. The core says where it works; what it runs it
// states by the optional interfaces below (mover, signaller, pinger, collective, ...),
// which the Backend finds by type assertion, as io.Copy asks a reader whether it is
// an io.WriterTo. Where an implementation lacks one, the Backend does the common
// thing (preload: load the registry's kernels; grid: ShapeFor) or refuses the op.
type gpuImpl interface {
	// home is where its buffers live: NVSHMEM's heap or NCCL's registered window.
	home() home
	// reach is how it gets at op's peer: by NVSHMEM's (or NCCL's) calls alone, or
	// through the peer's mapping (nvshmem_ptr, or NCCL's LSA team), which a rank with
	// no NVLink or P2P path to the peer lacks.
	reach(impl backend.Impl, op ops.Op) reach
}

// home is where an implementation's buffers live.
type home int

const (
	onHeap   home = iota // NVSHMEM's symmetric heap
	inWindow             // NCCL's registered window, mirroring the heap (ncclwin.go)
)

// reach is how an implementation gets at a peer.
type reach int

const (
	byCalls   reach = iota // NVSHMEM's or NCCL's calls, over whatever transport they find
	byMapping              // loads, stores or copies through the peer's mapping
)

// mover queues a put (dst on peer) or a get (src on peer) of op on st.
type mover interface {
	move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error
}

// signaller queues put-signal and the wait for it.
type signaller interface {
	// putSignal queues a put of src into dst on peer on st, after which each block of
	// the kernel adds one to sig on peer.
	putSignal(b *Backend, impl backend.Impl, dst, src, sig backend.Buffer, peer int, l backend.Launch, st stream) error
	// wait queues on the main stream a one-warp wait until sig reaches target.
	wait(b *Backend, impl backend.Impl, sig backend.Buffer, target uint64) error
}

// pinger runs the ping-pong kernel.
type pinger interface {
	// pingArgs is the ping-pong kernel's argument list.
	pingArgs(b *Backend, dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool) ([]uint64, error)
}

// collective runs collectives.
type collective interface {
	// run queues c on st. Under the drop fault the rank still takes part, or its peers
	// would wait for it forever, but what it delivers lands in c.Scratch.
	run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error
}

// chooser picks among algorithms; without it a collective runs c.Algo.
type chooser interface {
	// algorithm is the algorithm it runs c with.
	algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string
}

// checker refuses, before any rank starts, a collective it cannot run: c's op on its
// element type with its reduction operator and algorithm (an --algo of op's, or ""),
// with blocks blocks (0: ShapeFor's choice).
type checker interface {
	check(impl backend.Impl, c backend.Collective, blocks int) error
}

// preloader loads what op of n bytes with l will launch or open (kernels, NCCL's
// communicator), so that timings separate loading from work; without it the Backend
// loads the kernels the registry lists for op (loadKernels).
type preloader interface {
	preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error
}

// gridder says what grid bench prints for n bytes with l where it is not ShapeFor's
// blocks and warps (the copy engine: the streams a transfer is split over).
type gridder interface {
	grid(n int64, l backend.Launch) (blocks, warps int)
}

// ownKernel marks an implementation that runs a collective by one kernel of its own,
// which Kernel then names (backend.Kerneler).
type ownKernel interface{ ownKernel() }

// ncclUser is an implementation that needs something of the NCCL library it opens.
type ncclUser interface {
	// needs says whether the NCCL library l can serve it: nil, or what is missing.
	needs(l *nccl.Lib) error
}

// nvshmemKernels is put, get, put-signal, the wait and the ping-pong by the
// catalogue's NVSHMEM kernels of those names on the heap: what triton, cuda and a
// user's kernels embed.
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

// noCollective refuses collective op by impl, which has no code for it.
func noCollective(impl backend.Impl, op ops.Op) error {
	return setting.Errorf("%s %s cannot run %s on GPUs: use %s %s", setting.Impl, impl.Name, op, setting.Impl, implNCCL)
}

// preloadColl is the preload of an implementation whose collective kernels share the
// sync area (syncColl): the area, zeroed before the first of them, then the kernels.
func preloadColl(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch, syncColl bool) error {
	if syncColl {
		if err := b.ensureSync(); err != nil {
			return err
		}
	}
	return b.loadKernels(impl, op, n, l)
}

// loadKernels loads every kernel the registry lists for impl's op, with the warps each
// will run with for n bytes with l.
func (b *Backend) loadKernels(impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	sh := ShapeFor(n, l)
	for _, k := range impl.Kernels[op] {
		warps := b.builtWarps(impl.Name, k, b.warpsOf(impl.Name, k, Shape{Warps: launchWarps(k, n, sh, l)}), l)
		if _, _, err := b.function(impl.Name, k, warps); err != nil {
			return err
		}
	}
	return nil
}

// kernelFor is the kernel of impl's op that combines dtype, as its manifest in cat says
// ("" where none does), and the element types impl's kernels of op combine, in the
// registry's order (for messages).
func kernelFor(cat *kernels.Catalog, impl backend.Impl, op ops.Op, dtype string) (kernel string, has []string) {
	for _, k := range impl.Kernels[op] {
		m, _ := cat.ManifestOf(impl.Name, k)
		if m.DType == "" {
			continue
		}
		if m.DType == ops.Canonical(dtype) && kernel == "" {
			kernel = k
		}
		if !slices.Contains(has, m.DType) {
			has = append(has, m.DType)
		}
	}
	return kernel, has
}

// flag is a kernel's 0/1 argument.
func flag(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// gpuImpls are symmem's own implementations by registry name, and entries their
// registry entries: each file adds its own at initialisation, and nothing changes
// them after.
var (
	gpuImpls = map[string]gpuImpl{}
	entries  = map[string]backend.Impl{}
)

// registerImpl adds implementation gi with its registry entry; its place in
// Factory.Impls is its place in order. An entry without Kernels is an implementation of
// symmem's own kernels: what it serves, and with which reduction operators, is what
// their manifests say (served), as the catalogue's sidecars carry them.
func registerImpl(entry backend.Impl, gi gpuImpl) bool {
	if _, dup := gpuImpls[entry.Name]; dup {
		panic("GPU implementation " + entry.Name + " registered twice")
	}
	if !slices.Contains(order, entry.Name) {
		panic(fmt.Sprintf("GPU implementation %s has no place in the order of implementations (impl.go)", entry.Name))
	}
	entry.Backend = backend.NVSHMEM
	gpuImpls[entry.Name], entries[entry.Name] = gi, entry
	return true
}

// Impls lists symmem's own GPU implementations in order, its default first; those of
// symmem's own kernels serve what the kernels' manifests in f's catalogue say.
func (f Factory) Impls() []backend.Impl {
	ks := kernels.DefaultManifests()
	if f.Catalog != nil {
		ks = f.Catalog.Manifests()
	}
	var out []backend.Impl
	for _, name := range order {
		if e, ok := entries[name]; ok {
			if e.Kernels == nil {
				e.Kernels, e.RedOps = served(ks, name)
			}
			out = append(out, e)
		}
	}
	return out
}

// served is what impl's kernels of ks serve, as their manifests say: for each
// operation, the kernels that serve it and then those its receiver waits with, where it
// has one of its own (a wait alone serves nothing); and the reduction operators every
// kernel of its reducing collectives (ops.Op.TakesRedOp) combines with, in
// ops.RedOps' order (nil: sum only).
func served(ks []kernels.Kernel, impl string) (map[ops.Op][]string, []string) {
	out := map[ops.Op][]string{}
	var reds []string
	first := true
	for _, k := range ks {
		if k.Impl != impl {
			continue
		}
		for _, o := range k.Ops {
			op := ops.Op(o)
			out[op] = append(out[op], k.Kernel)
			if !op.TakesRedOp() {
				continue
			}
			var can []string
			for _, r := range ops.RedOps() {
				if k.Combines(r) && (first || slices.Contains(reds, r.Name)) {
					can = append(can, r.Name)
				}
			}
			reds, first = can, false
		}
	}
	for _, k := range ks {
		for _, o := range k.Receives {
			if op := ops.Op(o); k.Impl == impl && len(out[op]) > 0 {
				out[op] = append(out[op], k.Kernel)
			}
		}
	}
	if slices.Equal(reds, []string{ops.Sum.Name}) {
		reds = nil
	}
	return out, reds
}

// implOf is impl's code: a user's kernels (userImpl) or one of symmem's own.
func implOf(impl backend.Impl) (gpuImpl, bool) {
	if impl.User {
		return userImpl{}, true
	}
	gi, ok := gpuImpls[impl.Name]
	return gi, ok
}

// capability is impl's code as a T (one of the optional interfaces), or why it cannot
// run op here: a registry entry that no file of this package implements, or an
// implementation without T's code.
func capability[T any](impl backend.Impl, op ops.Op) (T, error) {
	gi, ok := implOf(impl)
	if c, has := gi.(T); ok && has {
		return c, nil
	}
	var zero T
	return zero, setting.Errorf("%s %s cannot run %s on GPUs", setting.Impl, impl.Name, op)
}

// named is symmem's own implementation called name, or userImpl where name is a
// user's (or the default, ""), whose kernels run as symmem's NVSHMEM kernels do.
func named(name string) gpuImpl {
	if gi, ok := gpuImpls[name]; ok {
		return gi
	}
	return userImpl{}
}

// windowImpl says whether impl's buffers live in the NCCL window.
func windowImpl(impl string) bool { return named(impl).home() == inWindow }
