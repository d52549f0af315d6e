package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// The kernels' names in the catalogue (pkg/kernels), each with its own argument list,
// which the launches below pass; what each serves, with how many warps, is its
// manifest's to say (the registry's entries are read from it).
const (
	kPut        = "put_block"        // dst, src, n, chunk, peer
	kGet        = "get_block"        // dst, src, n, chunk, peer
	kPutSignal  = "put_signal_block" // dst, src, n, chunk, sig, peer
	kWaitSignal = "wait_signal"      // sig, target
	kPingPong   = "pingpong"         // dst, src, sig, n, iters, peer, initiator, stamps
	kStore      = "sm_store"         // to, from, n, chunk (mapped addresses)
)

// implFor finds l.Impl in the registry and checks that it serves op; the error says
// what to use instead. Answers are kept: the registry does not change, and looking the
// default up costs allocations on every operation otherwise.
func (b *Backend) implFor(l backend.Launch, op ops.Op) (backend.Impl, error) {
	key := [2]string{l.Impl, string(op)}
	if r, ok := b.impls[key]; ok {
		return r.impl, r.err
	}
	impl, err := b.reg.Lookup(backend.NVSHMEM, l.Impl)
	if err == nil {
		err = b.reg.CheckOp(impl, op)
	}
	if b.impls == nil {
		b.impls = map[[2]string]resolved{}
	}
	b.impls[key] = resolved{impl, err}
	return impl, err
}

// resolved is a registry answer implFor keeps.
type resolved struct {
	impl backend.Impl
	err  error
}

// viaNVSHMEM lists the implementations of op that need no mapping of the peer
// (NVSHMEM's own calls, NCCL's transports): what a rank without an NVLink or P2P path
// to it can still use.
func (b *Backend) viaNVSHMEM(op ops.Op) []string {
	var out []string
	for _, i := range b.reg.Of(backend.NVSHMEM) {
		if gi, ok := implOf(i); ok && i.Supports(op) && gi.reach(i, op) == byCalls {
			out = append(out, i.Name)
		}
	}
	return out
}

// Shape is the grid a data kernel runs with.
type Shape struct {
	Blocks, Warps int
	Chunk         int64
}

// ShapeFor picks the grid for n bytes: the Launch's blocks and warps where given, else
// a block per 128 KiB up to 128 blocks, and 32 warps for anything past 64 KiB. Both
// sides of a put-signal compute it alike, so the receiver knows how many signals come.
func ShapeFor(n int64, l backend.Launch) Shape {
	s := Shape{Blocks: l.Blocks, Warps: l.Warps}
	if s.Blocks == 0 {
		s.Blocks = int(min(max((n+128<<10-1)/(128<<10), 1), 128))
	}
	if s.Warps == 0 {
		s.Warps = 4
		if n > 64<<10 {
			s.Warps = 32
		}
	}
	s.Chunk = backend.Align((n+int64(s.Blocks)-1)/int64(s.Blocks), 16)
	if s.Chunk == 0 {
		s.Chunk = 16
	}
	// Blocks past the end of the data would idle; drop them (put-signal counts on it).
	s.Blocks = int(max((n+s.Chunk-1)/s.Chunk, 1))
	return s
}

// Shape reports the grid l's implementation runs n bytes with (ShapeFor's, or its
// gridder's): what bench prints; for the copy engine, the number of streams a transfer
// is split over.
func (b *Backend) Shape(n int64, l backend.Launch) (blocks, warps int) {
	if g, ok := named(l.Impl).(gridder); ok {
		return g.grid(n, l)
	}
	sh := ShapeFor(n, l)
	return sh.Blocks, sh.Warps
}

// warpsOf is the warp count impl's kernel is selected and launched with: one for a
// kernel its catalogue says runs as one warp (those that wait on a signal word, the
// barriers: kernels.Catalog.OneWarp, from their manifests), whatever the Launch asks;
// else sh's. The answer is kept, as every launch asks.
func (b *Backend) warpsOf(impl, kernel string, sh Shape) int {
	key := [2]string{impl, kernel}
	one, ok := b.oneWarp[key]
	if !ok {
		cat, name := b.catalog(impl, kernel)
		one = cat.OneWarp(name, kernel)
		if b.oneWarp == nil {
			b.oneWarp = map[[2]string]bool{}
		}
		b.oneWarp[key] = one
	}
	if one {
		return 1
	}
	return sh.Warps
}

// launchWarps is the warp count kernel runs with on grid sh for n bytes: sh's,
// except where --warps is not given that the push all-reduce takes at most pushWarps,
// the LL one llWarps, the LL128 one ll128Warps, combine's pull at most combineWarps, the two-shot
// all-reduce at most stagedWarps up to stagedNarrow bytes, and the fused matrix
// products fusedWarps whatever their size.
func launchWarps(kernel string, n int64, sh Shape, l backend.Launch) int {
	if l.Warps == 0 {
		switch kernel {
		case kStaged:
			if n <= stagedNarrow {
				return min(sh.Warps, stagedWarps)
			}
		case kPushBF16, kPushF32:
			return min(sh.Warps, pushWarps)
		case kLLBF16, kLLF32, kPushLL:
			return llWarps
		case kLL128BF16, kLL128F32:
			return ll128Warps
		case kCombineBF16, kCombineF32:
			return min(sh.Warps, combineWarps)
		case kAGMatmulBF16, kAGMatmulF16, kMatmulRSBF16, kMatmulRSF16, kUserAGMatmulBF16, kUserAGMatmulF16, kUserMatmulRSBF16, kUserMatmulRSF16:
			return fusedWarps
		}
	}
	return sh.Warps
}

// builtWarps is the warp count kernel of impl runs with where warps is the shape's
// choice: that one where it was built for it or --warps asked for it (a count it was
// not built for is the selection's error), else the largest it was built for below
// warps, else its smallest (a user's kernel that calls a one-thread collective is built
// as one warp alone).
func (b *Backend) builtWarps(impl, kernel string, warps int, l backend.Launch) int {
	if l.Warps != 0 {
		return warps
	}
	cat, name := b.catalog(impl, kernel)
	ws := cat.Warps(name, kernel)
	if len(ws) == 0 || slices.Contains(ws, warps) {
		return warps
	}
	fit := ws[0]
	for _, w := range ws {
		if w <= warps {
			fit = w
		}
	}
	return fit
}

// Preload loads what op will launch or open for n bytes with l (its implementation's
// preloader, else the kernels the registry lists), after moving the buffers to where it works, so that timings separate
// loading from work.
func (b *Backend) Preload(op ops.Op, n int64, l backend.Launch) error {
	impl, err := b.implFor(l, op)
	if err != nil {
		return err
	}
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	if p, err := capability[preloader](impl, op); err == nil {
		return p.preload(b, impl, op, n, l)
	}
	return b.loadKernels(impl, op, n, l)
}

// catalog is where impl's kernel comes from: a user's catalogue (symmem run --kernels
// DIR) or the embedded one. A user's put-signal without its own wait_signal is waited
// for with the default implementation's, which counts the same signal.
func (b *Backend) catalog(impl, kernel string) (*kernels.Catalog, string) {
	c, user := b.reg.Catalog(impl)
	if !user {
		return b.cat, impl
	}
	if kernel == kWaitSignal && !slices.Contains(c.Kernels(impl), kernel) {
		def, _ := b.reg.Lookup(backend.NVSHMEM, "")
		return b.cat, def.Name
	}
	return c, impl
}

// selectKey is what function selects a kernel by.
type selectKey struct {
	impl, kernel string
	warps        int
}

// selection is a kernel function found and loaded.
type selection struct {
	f function
	a *kernels.Artifact
}

// function loads (once) the kernel for impl/kernel with warps. The answer is kept:
// selecting searches the whole catalogue (~1.2 us on a fast CPU, every launch, where
// small collectives are bound by the host's time per launch).
func (b *Backend) function(impl, kernel string, warps int) (function, *kernels.Artifact, error) {
	key := selectKey{impl, kernel, warps}
	if s, ok := b.selected[key]; ok {
		return s.f, s.a, nil
	}
	f, a, err := b.load(impl, kernel, warps)
	if err == nil {
		b.selected[key] = selection{f, a}
	}
	return f, a, err
}

// load selects the kernel for impl/kernel with warps and loads its module once.
func (b *Backend) load(impl, kernel string, warps int) (function, *kernels.Artifact, error) {
	cat, impl := b.catalog(impl, kernel)
	sel := cat.Select
	if b.ptxOnly {
		sel = cat.SelectPTX
	}
	a, err := sel(impl, kernel, warps, b.cc)
	if errors.Is(err, kernels.ErrNoPTX) {
		err = fmt.Errorf("%w (%s=1 loads PTX only)", err, EnvPTX)
	}
	var we *kernels.WarpsError
	if errors.As(err, &we) {
		err = setting.Naming(err, setting.Warps, func(s string) { we.Setting = s })
	}
	if err != nil {
		return nil, nil, err
	}
	key := a.Path() + "/" + a.Entry
	if f, ok := b.funcs[key]; ok {
		return f, a, nil
	}
	if err := a.CheckHost(b.lib.HostVersion()); err != nil {
		return nil, nil, err
	}
	m, err := b.module(a)
	if err != nil {
		return nil, nil, err
	}
	f, err := m.Function(a.Entry)
	if err != nil {
		return nil, nil, fmt.Errorf("kernel %s: %w", a.Name(), err)
	}
	b.funcs[key] = f
	return f, a, nil
}

// module loads (once) the file holding a, registering it with NVSHMEM when its kernels
// call NVSHMEM. The CUDA kernels share one module per file.
func (b *Backend) module(a *kernels.Artifact) (module, error) {
	if m, ok := b.byFile[a.Path()]; ok {
		return m, nil
	}
	data, err := a.Data()
	if err != nil {
		return nil, err
	}
	var m module
	if len(a.Link) > 0 {
		libs, lerr := linkLibs(a, b.libPath)
		if lerr != nil {
			return nil, lerr
		}
		m, err = b.dev.LinkModule(data, a.File, libs)
	} else {
		m, err = b.dev.LoadModule(data)
	}
	if err != nil {
		return nil, fmt.Errorf("loading kernel %s for sm_%d: %w", a.Name(), b.cc, err)
	}
	if a.UsesNVSHMEM {
		if err := b.lib.ModuleInit(m); err != nil {
			m.Unload()
			return nil, fmt.Errorf("loading kernel %s for sm_%d: %w (it needs NVSHMEM device library %s; host library is %s)",
				a.Name(), b.cc, err, deviceVersion(a), b.lib.VersionString())
		}
		b.registered = append(b.registered, m)
	}
	b.modules = append(b.modules, m)
	b.byFile[a.Path()] = m
	return m, nil
}

// linkLibs finds the device libraries a's PTX is linked with: NVSHMEM's device
// archive, installed beside the host library at hostLib (the file nvshmem.Open
// opened), or beside the file it links to.
func linkLibs(a *kernels.Artifact, hostLib string) ([]string, error) {
	dirs := []string{filepath.Dir(hostLib)}
	if real, err := filepath.EvalSymlinks(hostLib); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	var libs []string
	for _, name := range a.Link {
		i := slices.IndexFunc(dirs, func(d string) bool {
			st, err := os.Stat(filepath.Join(d, name))
			return err == nil && st.Mode().IsRegular()
		})
		if i < 0 {
			return nil, fmt.Errorf("kernel %s is PTX the driver links with NVSHMEM's device library at load, and %s is not beside the host library %s: "+
				"install NVSHMEM with its device library (pip install nvidia-nvshmem-cu13, or -cu12) or point NVSHMEM_HOME at one that has lib/%s",
				a.Name(), name, hostLib, name)
		}
		libs = append(libs, filepath.Join(dirs[i], name))
	}
	return libs, nil
}

// launch queues kernel of impl on st with blocks blocks and sh's warps; vals are the
// kernel's visible arguments, in order.
func (b *Backend) launch(st stream, impl, kernel string, sh Shape, blocks int, vals ...uint64) error {
	return b.launchWith(st, impl, kernel, sh, blocks, nil, vals...)
}

// EnvPTX (test-only, like SYMMEM_TEST_FAULT) set to 1 loads every kernel from its PTX,
// even where a cubin runs on the GPU, and fails a kernel that has none: the GPU checks
// take the path a GPU newer than every cubin takes (the driver compiles, and links
// NVSHMEM's device library where the PTX calls it).
const EnvPTX = "SYMMEM_TEST_PTX"

// paramOp is the reduce kernels' operator argument: ops.RedOp's Code
// (kernels/triton/symmem_collectives.py: OP_*), after the wait limit and mailbox.
const paramOp = "op"

// launchRed is launch for a reduce kernel that combines with red: a kernel that
// declares paramOp takes red's code; one built before it did sums only.
func (b *Backend) launchRed(st stream, impl, kernel string, sh Shape, blocks int, red ops.RedOp, vals ...uint64) error {
	return b.launchWith(st, impl, kernel, sh, blocks, &red, vals...)
}

// launchWith is launch, and for a reduce kernel (red not nil) launchRed: only those
// take paramOp as the operator (signal_op's op is a signal operation, one of vals).
func (b *Backend) launchWith(st stream, impl, kernel string, sh Shape, blocks int, red *ops.RedOp, vals ...uint64) error {
	warps := b.warpsOf(impl, kernel, sh)
	f, a, err := b.function(impl, kernel, warps)
	if err != nil {
		return err
	}
	// A kernel that waits on peers and declares the two takes the wait limit (on the
	// GPU's clock) and the mailbox it reports to when it gives up (mailbox.go).
	if a.Takes(paramLimit) && a.Takes(paramMailbox) {
		vals = append(vals, uint64(b.waitLimit.Nanoseconds()), b.mail.dev)
	}
	// An operator the kernel's manifest does not list is refused here, before its
	// code reaches a kernel that would not know it.
	switch {
	case red == nil:
	case !a.Combines(*red) && !a.Declared():
		return fmt.Errorf("%s/%s of this kernel catalogue sums only, not %s (its sidecar lists no operators): rebuild the kernels (scripts/build-kernels.sh --only symmem_collectives)", impl, kernel, red.Name)
	case !a.Combines(*red):
		return fmt.Errorf("%s/%s combines with %s, not %s (kernels/%s): its code is not passed to a kernel that does not know it", impl, kernel, a.RedOpNames(), red.Name, a.From)
	case a.Takes(paramOp):
		vals = append(vals, uint64(int64(red.Code)))
	}
	args, err := a.Args(vals...)
	if err != nil {
		return err
	}
	threads := a.BlockThreads
	if threads == 0 {
		threads = 32 * warps
	}
	// A kernel written for a grid of its own (one block: a user's NVSHMEM collective)
	// gets it, launched as its author launches it.
	if a.Grid > 0 {
		blocks = a.Grid
	}
	// A put to every peer whose program id picks the peer too: a block per chunk and
	// peer.
	if a.PerPeer {
		blocks *= max(b.size-1, 1)
	}
	if err := f.Launch(st, cuda.Dim{Grid: uint32(blocks), Block: uint32(threads), Shared: uint32(a.Shared)}, args, a.Cooperative); err != nil {
		return b.explain(fmt.Errorf("%s/%s: %w", impl, kernel, err))
	}
	if kernel != b.ran.kernel {
		b.ran.kernel, b.ran.kernels = kernel, b.ran.kernels+1
	}
	return nil
}

// deviceVersion is the NVSHMEM device library a was built against, for messages.
func deviceVersion(a *kernels.Artifact) string {
	if d := a.DeviceVersion; len(d) == 3 {
		return fmt.Sprintf("%d.%d.%d", d[0], d[1], d[2])
	}
	return "none"
}

// HostHere reads what decides whether a kernel loads on this machine: the compute
// capability of every GPU the driver sees, and the version of the NVSHMEM host library
// that lib (an explicit path, or "" to search) finds. It creates no CUDA context.
func HostHere(lib string) kernels.Host {
	var h kernels.Host
	if drv, err := cuda.Open(); err != nil {
		h.NoGPU = err.Error()
	} else if n, err := drv.DeviceCount(); err != nil {
		h.NoGPU = err.Error()
	} else {
		for i := 0; i < n; i++ {
			info, err := drv.Device(i)
			if err != nil {
				h.NoGPU = err.Error()
				break
			}
			h.CCs = append(h.CCs, info.CC)
		}
		if n == 0 {
			h.NoGPU = "the NVIDIA driver sees no GPU"
		}
	}
	s := nvshmem.Find(lib)
	if s.Chosen == "" {
		h.NoLib = nvshmem.LibName + " not found"
		return h
	}
	l, err := nvshmem.Open(s.Chosen)
	if err != nil {
		h.NoLib = err.Error()
		return h
	}
	h.Lib = l.Version
	return h
}

// CheckUserKernels is the check run and bench make before they start ranks that
// launch a user's kernels (--kernels DIR): that the kernels of impls registered from
// a user's directory load on the first nproc GPUs here and that the NVSHMEM host
// library lib finds can serve them.
func CheckUserKernels(reg *backend.Registry, impls []string, nproc int, lib string) error {
	var h *kernels.Host
	for _, name := range impls {
		c, user := reg.Catalog(name)
		im, ok := reg.ByName(name)
		if !user || !ok {
			continue
		}
		if h == nil {
			hh := HostHere(lib)
			h = &hh
		}
		var ks []string
		for _, op := range im.Ops() {
			ks = append(ks, im.Kernels[op]...)
		}
		if err := c.CheckLoad(name, ks, *h, nproc); err != nil {
			return err
		}
	}
	return nil
}
