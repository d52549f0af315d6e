// Package gpu is the NVSHMEM backend: one GPU per rank, an NVSHMEM team bootstrapped
// through the launcher's store, one symmetric heap allocated up front, and operations
// run by the prebuilt kernels of pkg/kernels (Triton or CUDA C, calling NVSHMEM device
// functions), by the copy engine or by plain SM stores into a peer's mapping.
package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/kernels"
	"github.com/symmem/symmem/internal/launch"
	"github.com/symmem/symmem/internal/nvshmem"
	"github.com/symmem/symmem/internal/store"
)

// Implementations lists what Launch.Impl may name, in the order bench shows them.
var Implementations = []string{"triton", "cuda", "copy-engine", "sm-store"}

// Probe says whether the GPU backend can run nproc ranks here; the error says why not.
func Probe(nproc int, lib string) error {
	n, err := gpuCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the NVIDIA driver sees no GPU")
	}
	if n < nproc {
		return fmt.Errorf("--nproc %d needs %d GPUs, this machine has %d: lower --nproc or use --backend cpu", nproc, nproc, n)
	}
	// Finding the library is enough here: loading it (tens of MB) is the workers' job,
	// and a library that fails to load fails there with its own message.
	s := nvshmem.Find(lib)
	if lib != "" && s.Chosen == "" {
		return fmt.Errorf("NVSHMEM host library %s (--nvshmem-lib or SYMMEM_NVSHMEM_LIB): no such file", lib)
	}
	if s.Chosen == "" || s.Chosen == nvshmem.LibName && !nvshmem.Loadable() {
		return fmt.Errorf("NVSHMEM host library %s not found; %s. Searched, in order:\n  %s\n  (and the dynamic loader's path)",
			nvshmem.LibName, nvshmem.InstallHint, strings.Join(s.Tried[:len(s.Tried)-1], "\n  "))
	}
	return nil
}

// Defaults are NVSHMEM settings symmem applies unless the user set them.
// NVSHMEM_DISABLE_NCCL: NVSHMEM otherwise loads NCCL and builds a communicator for its
// collectives, which symmem never calls; measured on 2 x H200 that cost 570 ms of init
// and 480 ms of finalize, half of a whole `run put`.
var Defaults = map[string]string{"NVSHMEM_DISABLE_NCCL": "1"}

// EnvDefaults returns the KEY=VALUE pairs of Defaults that env does not set.
func EnvDefaults(getenv func(string) string) []string {
	var out []string
	for k, v := range Defaults {
		if getenv(k) == "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// gpuCount counts GPUs without creating a CUDA context in the launcher (cuInit costs
// about 240 ms on an H200 host): the driver's /proc entries, when CUDA_VISIBLE_DEVICES
// does not narrow them; cuDeviceGetCount otherwise.
func gpuCount() (int, error) {
	if err := cuda.Loadable(); err != nil {
		return 0, err
	}
	if os.Getenv("CUDA_VISIBLE_DEVICES") == "" {
		if gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*"); len(gpus) > 0 {
			return len(gpus), nil
		}
	}
	d, err := cuda.Open()
	if err != nil {
		return 0, err
	}
	return d.DeviceCount()
}

// HeapEnv is the NVSHMEM_SYMMETRIC_SIZE a job of heap bytes per rank needs: the heap
// plus room for NVSHMEM's own symmetric objects, allocated once up front.
func HeapEnv(heap int64) string {
	return "NVSHMEM_SYMMETRIC_SIZE=" + strconv.FormatInt(backend.Align(heap+64<<20, 2<<20), 10)
}

// Backend is one rank on one GPU.
type Backend struct {
	rank, size int
	drv        *cuda.Driver
	ctx        *cuda.Context
	lib        *nvshmem.Lib
	stream     *cuda.Stream
	cc         int
	sms        int
	base       uintptr
	peers      []uintptr // nvshmem_ptr(base, pe), 0 where not mapped
	alloc      backend.Bump
	funcs      map[string]*cuda.Function
	modules    []*cuda.Module
	registered []*cuda.Module // modules passed to nvshmemx_cumodule_init
	side       []*cuda.Stream // extra streams for split copy-engine transfers
	fork, join []*cuda.Event
	lanes      []*cuda.Stream // lanes[0] is stream; see Lanes
	laneDone   []*cuda.Event  // one per lane, for joining a lane into another
	byFile     map[string]*cuda.Module
	cat        *kernels.Catalog
	// LoadTime is the time spent loading and registering kernel modules.
	LoadTime time.Duration
	// OpenTimes breaks Open down, in milliseconds.
	OpenTimes map[string]float64
	Device    cuda.DeviceInfo
	// WaitLimit bounds every wait on a peer's signal (backend.DefaultWaitLimit when
	// zero): past it the wait reports backend.ErrUndelivered instead of holding the GPU.
	WaitLimit time.Duration
	drop      bool
}

// SetDrop makes Put, Get, PutSignal and PingPong return without launching anything (a
// test fault at the point of delivery; see backend.Dropper).
func (b *Backend) SetDrop(drop bool) { b.drop = drop }

func (b *Backend) waitLimit() time.Duration {
	if b.WaitLimit > 0 {
		return b.WaitLimit
	}
	return backend.DefaultWaitLimit
}

// waitStream waits, up to the wait limit, for the work queued so far on st; what says
// what the work was, for the error.
func (b *Backend) waitStream(st *cuda.Stream, what string) error {
	e, err := b.ctx.NewEvent()
	if err != nil {
		return err
	}
	defer e.Destroy()
	if err := e.Record(st); err != nil {
		return err
	}
	done, err := e.WaitFor(b.waitLimit())
	if err != nil || done {
		return err
	}
	// The wait kernel is still spinning; the caller fails this rank, and process exit
	// releases the GPU.
	return fmt.Errorf("rank %d: %s did not finish within %s: %w", b.rank, what, b.waitLimit(), backend.ErrUndelivered)
}

// Open sets up rank info.Rank: its GPU (local rank), the NVSHMEM team and the heap.
func Open(ctx context.Context, info launch.RankInfo, st *store.Client, heap int64, libPath string) (*Backend, error) {
	t := time.Now()
	lap := map[string]float64{}
	step := func(name string) {
		lap[name] = float64(time.Since(t).Microseconds()) / 1000
		t = time.Now()
	}
	drv, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	if info.LocalRank >= n {
		return nil, fmt.Errorf("rank %d needs GPU %d, this node has %d GPUs: start at most %d ranks per node", info.Rank, info.LocalRank, n, n)
	}
	step("driver") // dlopen libcuda and cuInit
	b := &Backend{OpenTimes: lap, rank: info.Rank, size: info.WorldSize, drv: drv, funcs: map[string]*cuda.Function{}, byFile: map[string]*cuda.Module{}, cat: kernels.Default()}
	if b.Device, err = drv.Device(info.LocalRank); err != nil {
		return nil, err
	}
	b.cc, b.sms = b.Device.CC, b.Device.SMs
	if b.ctx, err = drv.Retain(info.LocalRank); err != nil {
		return nil, err
	}
	step("context")
	s := nvshmem.Find(libPath)
	if s.Chosen == "" {
		return nil, fmt.Errorf("NVSHMEM host library not found; %s", nvshmem.InstallHint)
	}
	if b.lib, err = nvshmem.Open(s.Chosen); err != nil {
		return nil, fmt.Errorf("%v; %s", err, nvshmem.InstallHint)
	}
	step("dlopen")
	// Under an external launcher nobody set these for us (symmem's launcher does).
	if os.Getenv("NVSHMEM_SYMMETRIC_SIZE") == "" {
		kv := HeapEnv(heap)
		os.Setenv("NVSHMEM_SYMMETRIC_SIZE", kv[len("NVSHMEM_SYMMETRIC_SIZE="):])
	}
	for _, kv := range EnvDefaults(os.Getenv) {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	var uid nvshmem.UID
	if info.Rank == 0 {
		if uid, err = b.lib.NewUID(); err != nil {
			return nil, err
		}
		if err := st.Set(ctx, "nvshmem/uid", uid[:]); err != nil {
			return nil, err
		}
	} else {
		v, err := st.Get(ctx, "nvshmem/uid")
		if err != nil {
			return nil, fmt.Errorf("waiting for rank 0's NVSHMEM unique ID: %w", err)
		}
		copy(uid[:], v)
	}
	step("uid")
	if err := b.lib.Init(info.Rank, info.WorldSize, uid); err != nil {
		return nil, fmt.Errorf("rank %d: NVSHMEM init: %w", info.Rank, err)
	}
	step("nvshmem")
	if b.base, err = b.lib.Malloc(uint64(heap)); err != nil {
		return nil, err
	}
	b.alloc = backend.Bump{Limit: heap}
	b.peers = make([]uintptr, b.size)
	for pe := range b.peers {
		b.peers[pe] = b.lib.PeerPtr(b.base, pe)
	}
	if b.stream, err = b.ctx.NewStream(); err != nil {
		return nil, err
	}
	b.lanes = []*cuda.Stream{b.stream}
	step("heap")
	return b, nil
}

func (b *Backend) Name() string { return "nvshmem" }
func (b *Backend) Rank() int    { return b.rank }
func (b *Backend) Size() int    { return b.size }

// Describe names the GPU, the NVSHMEM library and the driver, for result headers.
func (b *Backend) Describe() (gpu, lib, driver string) {
	v, _ := b.drv.Version()
	return b.Device.Name, b.lib.VersionString() + " (" + b.lib.Path + ")", fmt.Sprintf("CUDA %d.%d", v/1000, v%1000/10)
}

// Breakdown is how long each step of Open took, in milliseconds.
func (b *Backend) Breakdown() map[string]float64 { return b.OpenTimes }

// Library is the NVSHMEM host library in use.
func (b *Backend) Library() *nvshmem.Lib { return b.lib }

func (b *Backend) Alloc(size int64) (backend.Buffer, error) { return b.alloc.Alloc(size) }

func (b *Backend) addr(buf backend.Buffer) uint64 { return uint64(b.base) + uint64(buf.Off) }

func (b *Backend) Write(buf backend.Buffer, data []byte) error {
	if err := b.stream.Synchronize(); err != nil {
		return err
	}
	return b.ctx.CopyHtoD(cuda.Ptr(b.addr(buf)), data[:min(int64(len(data)), buf.Size)])
}

func (b *Backend) Read(buf backend.Buffer, out []byte) error {
	if err := b.stream.Synchronize(); err != nil {
		return err
	}
	return b.ctx.CopyDtoH(out[:min(int64(len(out)), buf.Size)], cuda.Ptr(b.addr(buf)))
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

// Shape reports the grid ShapeFor picks (bench prints it); for the copy engine, the
// number of streams a transfer is split over.
func (b *Backend) Shape(n int64, l backend.Launch) (blocks, warps int) {
	if l.Impl == "copy-engine" {
		return max(l.Blocks, 1), 0
	}
	sh := ShapeFor(n, l)
	return sh.Blocks, sh.Warps
}

func implOf(l backend.Launch) string {
	if l.Impl == "" {
		return "triton"
	}
	return l.Impl
}

// function loads (once) the kernel for impl/kernel with warps.
func (b *Backend) function(impl, kernel string, warps int) (*cuda.Function, *kernels.Artifact, error) {
	a, err := b.cat.Select(impl, kernel, warps, b.cc)
	if err != nil {
		return nil, nil, err
	}
	key := a.File + "/" + a.Entry
	if f, ok := b.funcs[key]; ok {
		return f, a, nil
	}
	t := time.Now()
	defer func() { b.LoadTime += time.Since(t) }()
	if err := a.CheckHost(b.lib.Version); err != nil {
		return nil, nil, err
	}
	data, err := a.Data()
	if err != nil {
		return nil, nil, err
	}
	m, ok := b.byFile[a.File] // the CUDA kernels share one module per file
	if !ok {
		m, err = b.ctx.LoadModule(data)
		if err != nil {
			return nil, nil, fmt.Errorf("loading kernel %s for sm_%d: %w", a.Name(), b.cc, err)
		}
		if a.UsesNVSHMEM {
			if err := b.lib.ModuleInit(m.H); err != nil {
				m.Unload()
				return nil, nil, fmt.Errorf("loading kernel %s for sm_%d: %w (the kernels need NVSHMEM device library %s; host library is %s)",
					a.Name(), b.cc, err, b.cat.DeviceVersion(), b.lib.VersionString())
			}
			b.registered = append(b.registered, m)
		}
		b.modules = append(b.modules, m)
		b.byFile[a.File] = m
	}
	f, err := m.Function(a.Entry)
	if err != nil {
		return nil, nil, fmt.Errorf("kernel %s: %w", a.Name(), err)
	}
	b.funcs[key] = f
	return f, a, nil
}

// Lanes makes lanes 0..n-1 usable: lane 0 is the default stream, every other lane a
// stream of its own, so that operations on different lanes overlap on the GPU.
func (b *Backend) Lanes(n int) error {
	for len(b.lanes) < n {
		s, err := b.ctx.NewStream()
		if err != nil {
			return err
		}
		b.lanes = append(b.lanes, s)
	}
	for len(b.laneDone) < len(b.lanes) {
		e, err := b.ctx.NewSyncEvent()
		if err != nil {
			return err
		}
		b.laneDone = append(b.laneDone, e)
	}
	return nil
}

// on returns the stream of a Launch's lane.
func (b *Backend) on(l backend.Launch) (*cuda.Stream, error) {
	if l.Lane < 0 || l.Lane >= len(b.lanes) {
		return nil, fmt.Errorf("lane %d: only lanes 0..%d exist (Lanes was not called for it)", l.Lane, len(b.lanes)-1)
	}
	return b.lanes[l.Lane], nil
}

// joinLanes makes `into` wait for the work queued so far on every other lane.
func (b *Backend) joinLanes(into *cuda.Stream) error {
	for i, s := range b.lanes {
		if s == into {
			continue
		}
		if err := b.laneDone[i].Record(s); err != nil {
			return err
		}
		if err := into.Wait(b.laneDone[i]); err != nil {
			return err
		}
	}
	return nil
}

// forkLanes makes every other lane wait for the work queued so far on `from`.
func (b *Backend) forkLanes(from *cuda.Stream) error {
	if len(b.lanes) < 2 {
		return nil
	}
	if err := b.laneDone[0].Record(from); err != nil {
		return err
	}
	for _, s := range b.lanes {
		if s != from {
			if err := s.Wait(b.laneDone[0]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) launch(impl, kernel string, sh Shape, blocks int, vals ...uint64) error {
	return b.launchOn(b.stream, impl, kernel, sh, blocks, vals...)
}

func (b *Backend) launchOn(st *cuda.Stream, impl, kernel string, sh Shape, blocks int, vals ...uint64) error {
	f, a, err := b.function(impl, kernel, sh.Warps)
	if err != nil {
		return err
	}
	args, err := a.Args(vals...)
	if err != nil {
		return err
	}
	threads := a.BlockThreads
	if threads == 0 {
		threads = 32 * sh.Warps
	}
	if err := f.Launch(st, cuda.Dim{Grid: uint32(blocks), Block: uint32(threads), Shared: uint32(a.Shared)}, args, false); err != nil {
		return fmt.Errorf("%s/%s: %w", impl, kernel, err)
	}
	return nil
}

func (b *Backend) peerAddr(buf backend.Buffer, peer int) (uint64, error) {
	if b.peers[peer] == 0 {
		return 0, fmt.Errorf("rank %d's memory is not mapped here (no NVLink or PCIe P2P path): use --impl triton or cuda", peer)
	}
	return uint64(b.peers[peer]) + uint64(buf.Off), nil
}

func (b *Backend) checkPeer(peer int) error {
	if peer < 0 || peer >= b.size {
		return fmt.Errorf("peer %d out of range: the job has ranks 0..%d", peer, b.size-1)
	}
	return nil
}

// Preload loads the kernels an op will use, so that timings separate loading from work.
func (b *Backend) Preload(op string, n int64, l backend.Launch) error {
	impl, sh := implOf(l), ShapeFor(n, l)
	var names []string
	switch {
	case impl == "sm-store":
		names = []string{"sm_store"}
	case impl == "copy-engine":
		return nil
	case op == "get":
		names = []string{"get_block"}
	case op == "put-signal":
		names = []string{"put_signal_block", "wait_signal"}
	case op == "latency":
		names = []string{"pingpong"}
	default:
		names = []string{"put_block"}
	}
	for _, k := range names {
		w := sh.Warps
		if k == "wait_signal" || k == "pingpong" {
			w = 0
		}
		if _, _, err := b.function(impl, k, w); err != nil {
			return err
		}
	}
	return nil
}

// MaxCopyStreams bounds how many copy engines one copy-engine transfer is split over.
const MaxCopyStreams = 8

// copyEngine copies n bytes, split over l.Blocks streams (1 = the main stream alone) so
// that several copy engines can work on one transfer; the main stream waits for all.
func (b *Backend) copyEngine(main *cuda.Stream, dst, src uint64, n int64, parts int) error {
	parts = min(max(parts, 1), MaxCopyStreams)
	if parts == 1 || n < int64(parts)*4096 {
		return main.CopyDtoDAsync(cuda.Ptr(dst), cuda.Ptr(src), uint64(n))
	}
	for len(b.side) < parts {
		s, err := b.ctx.NewStream()
		if err != nil {
			return err
		}
		f, err := b.ctx.NewSyncEvent()
		if err != nil {
			return err
		}
		j, err := b.ctx.NewSyncEvent()
		if err != nil {
			return err
		}
		b.side, b.fork, b.join = append(b.side, s), append(b.fork, f), append(b.join, j)
	}
	chunk := backend.Align((n+int64(parts)-1)/int64(parts), 4096)
	if err := b.fork[0].Record(main); err != nil {
		return err
	}
	for i := 0; i < parts; i++ {
		off := int64(i) * chunk
		m := min(chunk, n-off)
		if m <= 0 {
			break
		}
		s := b.side[i]
		if err := s.Wait(b.fork[0]); err != nil {
			return err
		}
		if err := s.CopyDtoDAsync(cuda.Ptr(dst+uint64(off)), cuda.Ptr(src+uint64(off)), uint64(m)); err != nil {
			return err
		}
		if err := b.join[i].Record(s); err != nil {
			return err
		}
		if err := main.Wait(b.join[i]); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) Put(dst, src backend.Buffer, peer int, l backend.Launch) error {
	return b.move(dst, src, peer, l, true)
}

func (b *Backend) Get(dst, src backend.Buffer, peer int, l backend.Launch) error {
	return b.move(dst, src, peer, l, false)
}

// move copies src into dst where one side lives on peer: dst for a put, src for a get.
// The NVSHMEM kernels take symmetric addresses and the peer's number; the copy engine
// and the plain-store kernel reach the peer through its nvshmem_ptr mapping instead.
func (b *Backend) move(dst, src backend.Buffer, peer int, l backend.Launch, put bool) error {
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	st, err := b.on(l)
	if err != nil {
		return err
	}
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	impl := implOf(l)
	if impl == "copy-engine" || impl == "sm-store" {
		to, from := b.addr(dst), b.addr(src)
		var err error
		if put {
			to, err = b.peerAddr(dst, peer)
		} else {
			from, err = b.peerAddr(src, peer)
		}
		if err != nil {
			return err
		}
		if impl == "copy-engine" {
			return b.copyEngine(st, to, from, n, l.Blocks)
		}
		return b.launchOn(st, impl, "sm_store", sh, sh.Blocks, to, from, uint64(n), uint64(sh.Chunk))
	}
	kernel := "get_block"
	if put {
		kernel = "put_block"
	}
	return b.launchOn(st, impl, kernel, sh, sh.Blocks, b.addr(dst), b.addr(src), uint64(n), uint64(sh.Chunk), uint64(peer))
}

func (b *Backend) PutSignal(dst, src, sig backend.Buffer, peer int, l backend.Launch) error {
	if err := b.checkPeer(peer); err != nil || b.drop {
		return err
	}
	impl := implOf(l)
	if impl != "triton" && impl != "cuda" {
		return fmt.Errorf("put-signal needs NVSHMEM device calls: use --impl triton or cuda, not %s", impl)
	}
	st, err := b.on(l)
	if err != nil {
		return err
	}
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	return b.launchOn(st, impl, "put_signal_block", sh, sh.Blocks, b.addr(dst), b.addr(src), uint64(n), uint64(sh.Chunk), b.addr(sig), uint64(peer))
}

func (b *Backend) WaitSignal(sig backend.Buffer, n int64, count int, l backend.Launch) error {
	impl := implOf(l)
	if impl != "triton" && impl != "cuda" {
		impl = "triton"
	}
	// Every block of the sender's put-signal adds one.
	target := uint64(count) * uint64(ShapeFor(n, l).Blocks)
	if err := b.launch(impl, "wait_signal", Shape{Warps: 1}, 1, b.addr(sig), target); err != nil {
		return err
	}
	return b.waitStream(b.stream, fmt.Sprintf("waiting for %d signals of %d bytes", count, n))
}

// PingPong runs iters round trips of n bytes with a signal between this rank and peer,
// on the device: each side puts its src into the other's dst. It returns the elapsed
// GPU time and, on the initiator, the time of every round (from the kernel's clock
// stamps, written into stamps: iters+1 words).
func (b *Backend) PingPong(dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool, l backend.Launch) (time.Duration, []time.Duration, error) {
	impl := implOf(l)
	if impl != "triton" && impl != "cuda" {
		return 0, nil, fmt.Errorf("latency needs NVSHMEM device calls: use --impl triton or cuda, not %s", impl)
	}
	if stamps.Size < int64(iters+1)*8 {
		return 0, nil, fmt.Errorf("ping-pong of %d rounds needs %d bytes of stamps, got %d", iters, (iters+1)*8, stamps.Size)
	}
	if b.drop {
		return 0, nil, nil
	}
	init := uint64(0)
	if initiator {
		init = 1
	}
	start, err := b.ctx.NewEvent()
	if err != nil {
		return 0, nil, err
	}
	defer start.Destroy()
	end, err := b.ctx.NewEvent()
	if err != nil {
		return 0, nil, err
	}
	defer end.Destroy()
	if err := start.Record(b.stream); err != nil {
		return 0, nil, err
	}
	if err := b.launch(impl, "pingpong", Shape{Warps: 1}, 1, b.addr(dst), b.addr(src), b.addr(sig), uint64(n), uint64(iters),
		uint64(peer), init, b.addr(stamps)); err != nil {
		return 0, nil, err
	}
	if err := end.Record(b.stream); err != nil {
		return 0, nil, err
	}
	done, err := end.WaitFor(b.waitLimit())
	if err != nil {
		return 0, nil, err
	}
	if !done {
		return 0, nil, fmt.Errorf("rank %d: ping-pong with rank %d did not finish within %s: %w", b.rank, peer, b.waitLimit(), backend.ErrUndelivered)
	}
	ms, err := end.Since(start)
	if err != nil || !initiator {
		return msDuration(ms), nil, err
	}
	raw := make([]byte, (iters+1)*8)
	if err := b.Read(stamps.Slice(0, int64(len(raw))), raw); err != nil {
		return 0, nil, err
	}
	rounds := make([]time.Duration, iters)
	for i := range rounds {
		rounds[i] = time.Duration(binary.LittleEndian.Uint64(raw[8*i+8:]) - binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return msDuration(ms), rounds, nil
}

func msDuration(ms float32) time.Duration {
	return time.Duration(float64(ms) * float64(time.Millisecond))
}

func (b *Backend) Quiet() error {
	if err := b.joinLanes(b.stream); err != nil {
		return err
	}
	b.lib.QuietOnStream(b.stream.H)
	return b.stream.Synchronize()
}

func (b *Backend) Barrier() error {
	if err := b.joinLanes(b.stream); err != nil {
		return err
	}
	b.lib.BarrierOnStream(b.stream.H)
	return b.stream.Synchronize()
}

// TimeOps times iters operations enqueued back to back with CUDA events. With several
// lanes, the clock starts once every lane's earlier work is done and stops when the
// last lane finishes.
func (b *Backend) TimeOps(iters int, op func(i int) error) (time.Duration, error) {
	start, err := b.ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := b.ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	if err := b.joinLanes(b.stream); err != nil {
		return 0, err
	}
	if err := start.Record(b.stream); err != nil {
		return 0, err
	}
	if err := b.forkLanes(b.stream); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := op(i); err != nil {
			return 0, err
		}
	}
	// Remote completion is part of the operation (as in NVSHMEM's perftest, which
	// quiets before it stops the clock).
	if err := b.joinLanes(b.stream); err != nil {
		return 0, err
	}
	b.lib.QuietOnStream(b.stream.H)
	if err := end.Record(b.stream); err != nil {
		return 0, err
	}
	ms, err := end.Since(start)
	return msDuration(ms), err
}

// TimeEach times iters operations one by one: an event before each and one after the
// last (which follows a quiet, like TimeOps). Operations still run back to back; each
// interval is what the GPU spent from one operation's start to the next one's.
func (b *Backend) TimeEach(iters int, op func(i int) error) ([]time.Duration, error) {
	evs := make([]*cuda.Event, iters+1)
	for i := range evs {
		e, err := b.ctx.NewEvent()
		if err != nil {
			return nil, err
		}
		defer e.Destroy()
		evs[i] = e
	}
	if err := b.joinLanes(b.stream); err != nil {
		return nil, err
	}
	for i := 0; i < iters; i++ {
		if err := evs[i].Record(b.stream); err != nil {
			return nil, err
		}
		if err := b.forkLanes(b.stream); err != nil {
			return nil, err
		}
		if err := op(i); err != nil {
			return nil, err
		}
		if err := b.joinLanes(b.stream); err != nil {
			return nil, err
		}
	}
	b.lib.QuietOnStream(b.stream.H)
	if err := evs[iters].Record(b.stream); err != nil {
		return nil, err
	}
	out := make([]time.Duration, iters)
	for i := range out {
		ms, err := evs[i+1].Since(evs[i])
		if err != nil {
			return nil, err
		}
		out[i] = msDuration(ms)
	}
	return out, nil
}

// TimeGraph captures iters operations (on every lane) into one CUDA graph, uploads it,
// and times one launch of it with CUDA events: the same kernels and copies as TimeOps
// runs, without a CPU launch for each.
func (b *Backend) TimeGraph(iters int, op func(i int) error) (time.Duration, error) {
	if err := b.joinLanes(b.stream); err != nil {
		return 0, err
	}
	g, err := b.stream.Capture(func() error {
		if err := b.forkLanes(b.stream); err != nil {
			return err
		}
		for i := 0; i < iters; i++ {
			if err := op(i); err != nil {
				return err
			}
		}
		return b.joinLanes(b.stream)
	})
	if err != nil {
		return 0, fmt.Errorf("capturing %d operations in a CUDA graph: %w", iters, err)
	}
	defer g.Destroy()
	if err := g.Upload(b.stream); err != nil {
		return 0, err
	}
	return b.TimeOps(1, func(int) error { return g.Launch(b.stream) })
}

func (b *Backend) Close() error {
	if b.stream != nil {
		b.joinLanes(b.stream)
		b.stream.Synchronize()
	}
	if b.lib != nil {
		b.lib.BarrierAll()
		for _, m := range b.registered {
			b.lib.ModuleFinalize(m.H)
		}
		if b.base != 0 {
			b.lib.Free(b.base)
		}
		b.lib.Finalize()
	}
	for i := range b.side {
		b.side[i].Destroy()
		b.fork[i].Destroy()
		b.join[i].Destroy()
	}
	for i := range b.lanes {
		if i > 0 {
			b.lanes[i].Destroy()
		}
	}
	for _, e := range b.laneDone {
		e.Destroy()
	}
	if b.stream != nil {
		b.stream.Destroy()
	}
	for _, m := range b.modules {
		m.Unload()
	}
	if b.ctx != nil {
		b.ctx.Release()
	}
	return nil
}
