// Package gpu is the NVSHMEM backend: one GPU per rank, an NVSHMEM team bootstrapped
// from a unique ID the ranks exchange through a small key-value interface, one symmetric
// heap allocated up front, and operations run by the prebuilt kernels of
// pkg/kernels (Triton or CUDA C, calling NVSHMEM device functions), by the copy
// engine or by plain SM stores into a peer's mapping.
//
// Files: impl.go is the interface every implementation meets, and each implementation
// is a file of its own with its registry entry (triton.go, cuda.go, copyengine.go,
// smstore.go, nccl.go for nccl and nccl-symm, nccldevice.go, usercoll.go for a user's
// kernels); open.go sets a rank up and tears it down; ops.go moves data; collective.go
// runs a collective by its implementation, collkernels.go and moe.go hold triton's
// collective and MoE launches; fused.go runs the fused matrix products (triton's
// kernels, fusedbase.go's cuBLAS baselines, a user's), blas.go opens cuBLASLt for them; kernels.go picks, loads and launches kernels; lanes.go
// and timing.go run and time work on several streams; device.go is the seam to the
// driver and NVSHMEM that the tests fake; ncclwin.go keeps the NCCL window that
// nccl-symm and nccl-device run on.
package gpu

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// Backend is one rank on one GPU.
type Backend struct {
	rank, size int
	dev        device
	lib        shmem
	cat        *kernels.Catalog
	reg        *backend.Registry // which implementation serves which op
	cc         int               // the GPU's compute capability, major*10+minor: picks the kernels
	waitLimit  time.Duration
	steps      int       // the two-shot all-reduce's steps per block (stagedSteps)
	ll         bool      // the LL all-reduce is on (EnvLL)
	ptxOnly    bool      // load kernels from their PTX only (EnvPTX)
	ll128      ll128Mode // where the LL128 all-reduce runs (EnvLL128)
	// nvlink: every rank's GPU has an active NVLink, as probeLinks (run once, the
	// first time ll128Use asks) found, unless it failed (probeErr); LL128 runs by size
	// only then.
	nvlink     bool
	probeLinks func() (bool, error)
	probeErr   error
	ran        ran     // what the last Collective launched (Kernel)
	ownBlocks  int     // copy-engine collectives copy the rank's own part with a kernel of so many blocks (0: its own grid; -1: no kernel; ownDefault: by op; EnvCopyOwn)
	mail       mailbox // where kernels that gave up waiting say so (mailbox.go)
	drop       bool
	wrongOp    ops.RedOp      // the fault hook's operator (zero: the one asked)
	unordered  bool           // SetUnordered (sync.go)
	late       []func() error // the puts the unordered fault holds back until a barrier (deliverLate)
	absent     bool

	base      uintptr // the heap, at the same address on every rank
	sync      uintptr // the collective kernels' barrier words, past the heap (syncArea)
	syncReady bool    // zeroed on every rank (ensureSync)
	userSeq   uint64  // launches of a user's collective kernels (usercoll.go)
	mark      event   // MarkProgress's event; marked says it was recorded and not yet waited for
	marked    bool
	peers     []uintptr // nvshmem_ptr(base, pe), 0 where not mapped
	alloc     backend.Bump

	main       stream   // lane 0, where everything not on another lane runs
	lanes      []stream // lanes[0] is main; see Lanes
	laneDone   []event  // one per lane, for joining a lane into another
	side       []stream // extra streams for split copy-engine transfers
	fork, join []event

	impls      map[[2]string]resolved  // by Launch.Impl and op; see implFor
	funcs      map[string]function     // by artifact file/entry
	selected   map[selectKey]selection // function's answers, so that a launch does not search the catalogue
	oneWarp    map[[2]string]bool      // warpsOf's answers, by implementation and kernel
	byFile     map[string]module
	modules    []module
	registered []module // modules passed to nvshmemx_cumodule_init

	moe map[moeKey]*moeTable // the MoE kernels' tables in device memory, by routing (moe.go)
	// users are the routing tables of users' dispatch and combine kernels (usercoll.go).
	users map[userKey]*userTable

	// The NCCL communicator of the nccl implementation, made on first use by openComm.
	comm     comm
	commErr  error
	openComm func() (comm, error)
	nwin     *ncclSpace // the NCCL window implementations' buffers (ncclwin.go)
	// The matrix products of the fused operations' baselines, opened on first use by
	// openGemm (blas.go); fusedFault is the fused operations' test fault (fused.go).
	gemm       gemmer
	gemmErr    error
	openGemm   func() (gemmer, error)
	fusedFault backend.FusedFault

	// What Describe, PCIBusID and Breakdown report.
	info    cuda.DeviceInfo
	driver  int // CUDA driver version, e.g. 13000
	libPath string
	times   map[string]float64
}

// The contracts the engine and the bench loop look for.
var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.Timer        = (*Backend)(nil)
	_ backend.Laner        = (*Backend)(nil)
	_ backend.Dropper      = (*Backend)(nil)
	_ backend.Absenter     = (*Backend)(nil)
	_ backend.Shaper       = (*Backend)(nil)
	_ backend.GraphTimer   = (*Backend)(nil)
	_ backend.PingPonger   = (*Backend)(nil)
	_ backend.Preloader    = (*Backend)(nil)
	_ backend.Describer    = (*Backend)(nil)
	_ backend.Transporter  = (*Backend)(nil)
	_ backend.Breakdowner  = (*Backend)(nil)
	_ backend.Collectiver  = (*Backend)(nil)
	_ backend.Librarian    = (*Backend)(nil)
	_ backend.Fuser        = (*Backend)(nil)
	_ backend.FusedFaulter = (*Backend)(nil)
)

func (b *Backend) Name() string { return backend.NVSHMEM }
func (b *Backend) Rank() int    { return b.rank }
func (b *Backend) Size() int    { return b.size }

// Describe names the GPU, the NVSHMEM library and the driver, for result headers.
func (b *Backend) Describe() (gpu, lib, driver string) {
	gpu = b.info.Name
	if b.info.UUID != "" {
		gpu += " (" + b.info.UUID + ")"
	}
	return gpu, b.lib.VersionString() + " (" + b.libPath + ")", fmt.Sprintf("CUDA %d.%d", b.driver/1000, b.driver%1000/10)
}

// PCIBusID is the GPU's PCI bus id, which NVML's NVLink counters are looked up by.
func (b *Backend) PCIBusID() string { return b.info.PCIBusID }

// Breakdown is how long each step of Open took, in milliseconds.
func (b *Backend) Breakdown() map[string]float64 { return b.times }

// SetDrop makes Put, Get, PutSignal, GetAdd and PingPong return without launching
// anything (a test fault at the point of delivery; see backend.Dropper).
func (b *Backend) SetDrop(drop bool) { b.drop = drop }

// SetRedOpFault makes the rank's reductions combine with op instead of the one asked
// (the zero RedOp: the one asked), in the kernel's or NCCL's own combining.
func (b *Backend) SetRedOpFault(op ops.RedOp) { b.wrongOp = op }

// reduceWith is the operator c's reduction combines with on this rank: c's, or the
// fault hook's.
func (b *Backend) reduceWith(c backend.Collective) ops.RedOp {
	if b.wrongOp.Name != "" && c.Op.TakesRedOp() {
		return b.wrongOp
	}
	return c.RedOp.Or()
}

// SetAbsent makes Collective return without launching anything, not even the barriers
// the peers' kernels wait at (a test fault; see backend.Absenter).
func (b *Backend) SetAbsent(absent bool) { b.absent = absent }

func (b *Backend) Alloc(size int64) (backend.Buffer, error) { return b.alloc.Alloc(size) }

// addr is buf's address on this rank; as the heap is symmetric, it is also the address
// NVSHMEM device calls take for buf on any peer.
// While an NCCL window implementation runs, the buffers are in its window instead
// (ncclwin.go).
func (b *Backend) addr(buf backend.Buffer) uint64 {
	if b.nwin != nil && b.nwin.on {
		return b.nwin.w.base + uint64(buf.Off)
	}
	return uint64(b.base) + uint64(buf.Off)
}

// Write copies data, up to buf's size, into this rank's part of buf once the work
// queued on the main stream is done.
func (b *Backend) Write(buf backend.Buffer, data []byte) error {
	if err := b.main.Synchronize(); err != nil {
		return b.explain(err)
	}
	return b.explain(b.dev.CopyHtoD(b.addr(buf), data[:min(int64(len(data)), buf.Size)]))
}

// Read copies this rank's part of buf, up to len(out), into out once the work queued
// on the main stream is done.
func (b *Backend) Read(buf backend.Buffer, out []byte) error {
	if err := b.main.Synchronize(); err != nil {
		return b.explain(err)
	}
	return b.explain(b.dev.CopyDtoH(out[:min(int64(len(out)), buf.Size)], b.addr(buf)))
}

func (b *Backend) Quiet() error {
	if err := b.joinLanes(); err != nil {
		return b.explain(err)
	}
	b.lib.QuietOnStream(b.main)
	return b.explain(b.main.Synchronize())
}

func (b *Backend) Barrier() error {
	if err := b.joinLanes(); err != nil {
		return b.explain(err)
	}
	// A kernel that gave up has ended (trapped) by now or soon; its account beats
	// waiting in NVSHMEM's barrier for a peer that is not coming. (Work that is still
	// running past the host's limit fails the rank here; every caller has waited for
	// its operations' completion before, so only a wait that never ends gets that far.)
	if err := b.waitStream(b.main, "the work before a barrier"); err != nil {
		return err
	}
	b.lib.BarrierOnStream(b.main)
	if err := b.main.Synchronize(); err != nil {
		return b.explain(err)
	}
	return b.deliverLate()
}

// waitStream waits, up to the host's limit, for the work queued so far on st; what
// says what the work was, for the error. A kernel that gave up on the device is
// reported as such (the mailbox).
func (b *Backend) waitStream(st stream, what string) error {
	e, err := b.dev.NewEvent()
	if err != nil {
		return b.explain(err)
	}
	defer e.Destroy()
	if err := e.Record(st); err != nil {
		return b.explain(err)
	}
	done, err := e.WaitFor(b.hostLimit())
	switch {
	case err != nil:
		return b.explain(err)
	case !done && b.gaveUp() == nil:
		// A kernel without a limit of its own is still spinning; the caller fails this
		// rank, and process exit releases the GPU.
		return fmt.Errorf("rank %d: %s did not finish within %s: %w", b.rank, what, b.hostLimit(), backend.ErrUndelivered)
	}
	return b.gaveUp()
}

// Transport says how this rank reaches peer: "p2p" when the peer's heap is mapped
// here (NVLink or PCIe peer access: loads, stores and the copy engine work), "remote"
// when only NVSHMEM's remote transport (NVSHMEM_REMOTE_TRANSPORT: IB, UCX,
// libfabric) carries it, "self" for this rank.
func (b *Backend) Transport(peer int) string {
	switch {
	case peer == b.rank:
		return "self"
	case peer >= 0 && peer < len(b.peers) && b.peers[peer] != 0:
		return "p2p"
	}
	return "remote"
}
