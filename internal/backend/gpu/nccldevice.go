package gpu

import (
	"slices"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// The nccl-device implementation: kernels of symmem's own (kernels/cuda/nccl_device.cu)
// calling NCCL's device API on the NCCL window (ncclwin.go). They take window offsets,
// not addresses: ncclGetLsaPointer(window, offset, peer) finds a peer's bytes, as
// NVSHMEM device calls take symmetric addresses. The all-reduce kernels also take the
// device communicator, whose LSA barriers pair the ranks' blocks.

// The all-reduce kernels' names; the point-to-point ones share the cuda
// implementation's (put_block, get_block, put_signal_block, wait_signal, pingpong).
const (
	kDevOneShotBF16 = "allreduce_oneshot_bf16" // win, devcomm, send, recv, count, chunk
	kDevOneShotF32  = "allreduce_oneshot_f32"
	kDevTwoShotBF16 = "allreduce_twoshot_bf16" // win, devcomm, send, recv, count, per, chunk
	kDevTwoShotF32  = "allreduce_twoshot_f32"
)

const (
	// devBlocks is the most blocks an all-reduce kernel runs: block b syncs on LSA
	// barrier b, and the device communicator is made with this many.
	devBlocks = 32
	// devOneShotMax is the largest all-reduce that runs one-shot when --algo is not
	// given: above it every rank reading every input costs more links than two-shot's
	// reduce-scatter and all-gather (the same rule as NCCL's own LSA examples).
	devOneShotMax = 256 << 10
	// devVector is what the kernels move at once where they can: slices and chunks are
	// whole multiples of it.
	devVector = 16
)

// deviceComm returns the job's device communicator, made (collectively) on first use;
// the window exists by then (useHome).
func (b *Backend) deviceComm() (*ncclSpace, error) {
	if b.nwin == nil || !b.nwin.on {
		return nil, setting.Errorf("%s %s: the buffers are not in the NCCL window", setting.Impl, implNCCLDevice)
	}
	if b.nwin.dev != nil {
		return b.nwin, nil
	}
	wc, err := b.windows(implNCCLDevice)
	if err != nil {
		return nil, err
	}
	d, err := wc.DevComm(devBlocks)
	if err != nil {
		return nil, setting.Errorf("%s %s: %w", setting.Impl, implNCCLDevice, err)
	}
	switch {
	case len(d.bytes) != nccl.DevCommBytes:
		d.destroy()
		return nil, setting.Errorf("%s %s: the device communicator is %d bytes, the kernels were built for %d (NCCL 2.28's ncclDevComm)", setting.Impl, implNCCLDevice, len(d.bytes), nccl.DevCommBytes)
	case d.lsaSize != b.size || d.lsaRank != b.rank:
		d.destroy()
		return nil, setting.Errorf("%s %s reaches its peers by load and store only: NCCL puts rank %d at %d of an LSA team of %d, and the job has %d ranks; run it on one node with NVLink or PCIe P2P between every GPU, or use %s %s",
			setting.Impl, implNCCLDevice, b.rank, d.lsaRank, d.lsaSize, b.size, setting.Impl, implNCCLSymm)
	}
	mem, err := b.uploadBytes(implNCCLDevice, d.bytes)
	if err != nil {
		d.destroy()
		return nil, err
	}
	b.nwin.dev, b.nwin.devMem = &d, mem
	return b.nwin, nil
}

// winOff is the window offset of buf (the window mirrors the heap).
func winOff(buf backend.Buffer) uint64 { return uint64(buf.Off) }

// ncclDevice is CUDA kernels calling NCCL's device API (the registry's "nccl-device"),
// on the NCCL window. built is the catalogue its kernels must be in (nil: the one
// embedded in the binary; tests give others).
type ncclDevice struct{ built *kernels.Catalog }

var _ interface {
	mover
	signaller
	pinger
	collective
	chooser
	checker
	preloader
	ownKernel
	ncclUser
} = ncclDevice{}

// It serves what kernels/cuda/nccl_device.manifest.json says.
var _ = registerImpl(backend.Impl{Name: implNCCLDevice, Summary: "CUDA kernels calling NCCL's device API: LSA loads, stores and barriers (NCCL 2.28+)"}, ncclDevice{})

func (ncclDevice) ownKernel() {}

func (ncclDevice) home() home { return inWindow }

// reach: its kernels reach every peer by load and store in NCCL's LSA team.
func (ncclDevice) reach(backend.Impl, ops.Op) reach { return byMapping }

// needs: NCCL 2.28's device API, and its kernels built into this binary.
func (d ncclDevice) needs(l *nccl.Lib) error {
	if err := l.Device(); err != nil {
		return err
	}
	c := d.built
	if c == nil {
		c = kernels.Default()
	}
	if !slices.Contains(c.Impls(), implNCCLDevice) {
		return setting.Errorf("its kernels are not in this binary: build them on a machine with nvcc and the nvidia-nccl wheel (python3 kernels/build-kernels.py --only nccl-device), then rebuild symmem or point %s at the %s directory", kernels.DirEnv, setting.Out)
	}
	return nil
}

// preload makes the device communicator and loads the kernels, outside any timing.
func (ncclDevice) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	if _, err := b.deviceComm(); err != nil {
		return err
	}
	return b.loadKernels(impl, op, n, l)
}

// move is Put and Get: block i moves bytes [i*chunk, (i+1)*chunk).
func (ncclDevice) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	sp, err := b.deviceComm()
	if err != nil {
		return err
	}
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	kernel := kGet
	if op == ops.Put {
		kernel = kPut
	}
	return b.launch(st, implNCCLDevice, kernel, sh, sh.Blocks, sp.w.handle, winOff(dst), winOff(src), uint64(n), uint64(sh.Chunk), uint64(peer))
}

// putSignal puts as move does, and each block adds one to sig on peer once its part is
// stored (WaitSignal counts on ShapeFor's blocks, as for the other kernels).
func (ncclDevice) putSignal(b *Backend, impl backend.Impl, dst, src, sig backend.Buffer, peer int, l backend.Launch, st stream) error {
	sp, err := b.deviceComm()
	if err != nil {
		return err
	}
	n := min(dst.Size, src.Size)
	sh := ShapeFor(n, l)
	return b.launch(st, implNCCLDevice, kPutSignal, sh, sh.Blocks, sp.w.handle, winOff(dst), winOff(src), uint64(n), uint64(sh.Chunk), winOff(sig), uint64(peer))
}

// wait queues the one-warp wait for target on sig in this rank's window.
func (ncclDevice) wait(b *Backend, impl backend.Impl, sig backend.Buffer, target uint64) error {
	sp, err := b.deviceComm()
	if err != nil {
		return err
	}
	return b.launch(b.main, implNCCLDevice, kWaitSignal, Shape{}, 1, sp.w.handle, winOff(sig), target)
}

// pingArgs is the window, then the NVSHMEM kernels' arguments with window offsets.
func (ncclDevice) pingArgs(b *Backend, dst, src, sig, stamps backend.Buffer, n int64, iters, peer int, initiator bool) ([]uint64, error) {
	sp, err := b.deviceComm()
	if err != nil {
		return nil, err
	}
	return []uint64{sp.w.handle, winOff(dst), winOff(src), winOff(sig), uint64(n), uint64(iters), uint64(peer), flag(initiator), winOff(stamps)}, nil
}

// devAlgorithm is the all-reduce algorithm nccl-device runs c with.
func devAlgorithm(c backend.Collective) string {
	switch {
	case c.Algo != "":
		return c.Algo
	case c.Bytes <= devOneShotMax:
		return ops.OneShot
	}
	return ops.TwoShot
}

// devKernel is the all-reduce kernel for c's element type and algorithm.
func devKernel(c backend.Collective) (string, error) {
	algo := devAlgorithm(c)
	if algo != ops.OneShot && algo != ops.TwoShot {
		return "", setting.Errorf("%s %s: %s %s runs %s or %s", setting.Algo, algo, setting.Impl, implNCCLDevice, ops.OneShot, ops.TwoShot)
	}
	bf := ops.Canonical(c.DType) == "bf16"
	if !bf && ops.Canonical(c.DType) != "float32" {
		return "", setting.Errorf("all-reduce %s %s sums bf16 and float32, not %s: use %s bf16 or float32, or %s %s", setting.Impl, implNCCLDevice, c.DType, setting.DType, setting.Impl, implNCCLSymm)
	}
	switch {
	case algo == ops.OneShot && bf:
		return kDevOneShotBF16, nil
	case algo == ops.OneShot:
		return kDevOneShotF32, nil
	case bf:
		return kDevTwoShotBF16, nil
	}
	return kDevTwoShotF32, nil
}

// run queues c, an all-reduce, as nccl-device's kernel: one-shot sums every
// rank's input in blocks of chunk elements; two-shot gives rank r elements
// [r*per, (r+1)*per), which it sums and stores into every rank's output. Under the drop
// fault the output goes to c.Scratch (the rank still takes part in the barriers).
func (ncclDevice) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	if c.Op != ops.AllReduce {
		return setting.Errorf("%s %s has no %s: use %s %s", setting.Impl, implNCCLDevice, c.Op, setting.Impl, implNCCLSymm)
	}
	kernel, err := devKernel(c)
	if err != nil {
		return err
	}
	sp, err := b.deviceComm()
	if err != nil {
		return err
	}
	elem := int64(2)
	if ops.Canonical(c.DType) == "float32" {
		elem = 4
	}
	count := c.Bytes / elem
	vec := devVector / elem
	recv := c.Recv
	if b.drop {
		recv = c.Scratch
	}
	vals := []uint64{sp.w.handle, sp.devMem, winOff(c.Send), winOff(recv), uint64(count)}
	span := count // the elements one rank's blocks share
	if kernel == kDevTwoShotBF16 || kernel == kDevTwoShotF32 {
		per := backend.Align((count+int64(b.size)-1)/int64(b.size), vec)
		vals, span = append(vals, uint64(per)), per
	}
	sh := ShapeFor(span*elem, l)
	blocks := min(sh.Blocks, devBlocks)
	chunk := backend.Align((span+int64(blocks)-1)/int64(blocks), vec)
	return b.launch(st, implNCCLDevice, kernel, sh, blocks, append(vals, uint64(chunk))...)
}

func (ncclDevice) algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string {
	if c.Op == ops.AllReduce {
		return devAlgorithm(c)
	}
	return c.Algo
}

// check: the all-reduce kernels sum bf16 and float32, one-shot or two-shot; nccl-symm
// has the rest.
func (ncclDevice) check(impl backend.Impl, c backend.Collective, blocks int) error {
	if c.Op != ops.AllReduce {
		return nil
	}
	_, err := devKernel(backend.Collective{Op: c.Op, DType: c.DType, Algo: c.Algo})
	return err
}
