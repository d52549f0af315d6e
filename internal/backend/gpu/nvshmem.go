package gpu

import (
	"fmt"
	"os"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
	"github.com/symmem/symmem/pkg/kernels"
)

// implNVSHMEM names NVSHMEM's own device collectives (kernels/cuda/nvshmem_collectives.cu):
// the baseline a user's kernels and symmem's are set beside, on the same buffers.
const implNVSHMEM = "nvshmem"

// nvshmemColl runs each collective as one block calling NVSHMEM's block collective on
// the world team (nvshmemx_<type>_<op>_reduce_block, _reducescatter_block,
// nvshmemx_fcollectmem_block, alltoallmem_block, int8_broadcast_block), launched
// cooperatively as nvshmemx_collective_launch does (their sidecars say grid 1,
// cooperative, as a user's NVSHMEM collectives' do); barrier rounds are the cuda
// implementation's kernels (nvshmemx_barrier_all_block, sync_all_block) built into
// the same module. NVSHMEM reduces to all only: reduce is its all-reduce into the
// scratch, which the root alone then copies into its output.
type nvshmemColl struct{}

var _ interface {
	collective
	checker
	gridder
	ownKernel
} = nvshmemColl{}

const (
	kNVFcollect  = "fcollect"  // dst, src, nbytes (each rank's)
	kNVAllToAll  = "alltoall"  // dst, src, nbytes (to each rank)
	kNVBroadcast = "broadcast" // dst, src, nbytes, root
)

// What it serves, its reduce kernels' element types and operators (nvshmem_collectives.cu's
// switch on the op argument; avg is their sum divided by the ranks) are what
// kernels/cuda/nvshmem_collectives.manifest.json says: bf16 and float32, as triton's
// (NVSHMEM inlines every algorithm of every operator into each kernel, some 2 MB of
// cubin a type and architecture).
var _ = registerImpl(backend.Impl{Name: implNVSHMEM, Summary: "NVSHMEM's own device collectives, one block each, launched cooperatively",
	MaxBlock: map[ops.Op]func(int) (int64, string){ops.ReduceScatter: nvshmemScatterMost}}, nvshmemColl{})

// envReduceScratch is NVSHMEM's setting of its collectives' scratch space (a team's, in
// bytes), and defaultReduceScratch its default.
const (
	envReduceScratch     = "NVSHMEM_REDUCE_SCRATCH_SIZE"
	defaultReduceScratch = 512 << 10
)

// nvshmemScatterMost is the largest block of NVSHMEM's reduce-scatter on ranks ranks:
// it pushes every rank's whole input into half of the team's reduce scratch (more stops
// the kernel with a device-side assert), and the scratch of every team NVSHMEM can make
// is taken from the symmetric heap at start, so symmem leaves its size to the user.
func nvshmemScatterMost(ranks int) (int64, string) {
	if ranks < 2 {
		return 0, ""
	}
	scratch, set := int64(defaultReduceScratch), ""
	if v := os.Getenv(envReduceScratch); v != "" {
		if n, err := units.ParseSize(v); err == nil && n > 0 {
			scratch, set = n, " as set"
		}
	}
	return scratch / 2 / int64(ranks), fmt.Sprintf("NVSHMEM's reduce-scatter pushes every rank's input into half of %s, %s%s: raise it for more",
		envReduceScratch, units.FormatSize(scratch), set)
}

func (nvshmemColl) ownKernel() {}

// nvshmemAlgo refuses an --algo: NVSHMEM picks its own algorithm.
func nvshmemAlgo(algo, impl string) error {
	return setting.Errorf("%s %s: NVSHMEM picks its own algorithms (NVSHMEM_REDUCE_ALGO and the like set them); leave %s out for %s %s", setting.Algo, algo, setting.Algo, setting.Impl, impl)
}

func (nvshmemColl) home() home { return onHeap }

func (nvshmemColl) reach(backend.Impl, ops.Op) reach { return byCalls }

// nvWarps is the most warps a block of NVSHMEM's collectives runs unless --warps says
// otherwise: their registers leave no room for 1024 threads on an SM, which a
// cooperative launch refuses (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE).
const nvWarps = 8

// nvShape is the one block an nvshmem kernel runs for n bytes with l.
func nvShape(n int64, l backend.Launch) Shape {
	sh := ShapeFor(n, l)
	sh.Blocks = 1
	if l.Warps == 0 {
		sh.Warps = min(sh.Warps, nvWarps)
	}
	return sh
}

// grid: one block (nvShape).
func (nvshmemColl) grid(n int64, l backend.Launch) (blocks, warps int) {
	return 1, nvShape(n, l).Warps
}

// check refuses an --algo (NVSHMEM picks its own) and an element type it has no
// reduce kernel for.
func (nvshmemColl) check(impl backend.Impl, c backend.Collective, blocks int) error {
	if c.Algo != "" {
		return nvshmemAlgo(c.Algo, impl.Name)
	}
	if !c.Op.Reduces() {
		return nil
	}
	if k, has := kernelFor(kernels.Default(), impl, c.Op, c.DType); k == "" {
		return setting.Errorf("%s %s reduces %s, not %s: use %s %s, or %s nccl", setting.Impl, impl.Name, strings.Join(has, " and "), c.DType, setting.DType, strings.Join(has, " or "), setting.Impl)
	}
	return nil
}

func (nvshmemColl) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	if c.Algo != "" {
		return nvshmemAlgo(c.Algo, impl.Name)
	}
	recv := c.Recv
	if b.drop {
		recv = c.Scratch
	}
	send, dst, n := b.addr(c.Send), b.addr(recv), int64(b.size)
	sh := nvShape(c.Bytes, l)
	switch c.Op {
	case ops.AllReduce, ops.ReduceScatter, ops.Reduce:
		kernel, has := kernelFor(b.cat, impl, c.Op, c.DType)
		if kernel == "" {
			return setting.Errorf("%s %s reduces %s, not %s: use %s %s", setting.Impl, impl.Name, strings.Join(has, " and "), c.DType, setting.DType, strings.Join(has, " or "))
		}
		count := c.Bytes / ops.ElemSize(c.DType)
		if c.Op == ops.ReduceScatter {
			count /= n
		}
		if c.Op == ops.Reduce {
			dst = b.addr(c.Scratch) // symmetric on every rank, and at least the output's size
		}
		if err := b.launchRed(st, impl.Name, kernel, sh, 1, b.reduceWith(c), dst, send, uint64(count), uint64(n)); err != nil {
			return err
		}
		if c.Op != ops.Reduce || b.rank != c.Root || b.drop {
			return nil // no other rank's output is reduce's to write
		}
		return st.CopyDtoDAsync(b.addr(c.Recv), dst, uint64(c.Bytes))
	case ops.AllGather:
		return b.launch(st, impl.Name, kNVFcollect, sh, 1, dst, send, uint64(c.Bytes/n))
	case ops.AllToAll:
		return b.launch(st, impl.Name, kNVAllToAll, sh, 1, dst, send, uint64(c.Bytes/n))
	case ops.Broadcast:
		return b.launch(st, impl.Name, kNVBroadcast, sh, 1, dst, send, uint64(c.Bytes), uint64(c.Root))
	}
	return noCollective(impl, c.Op)
}
