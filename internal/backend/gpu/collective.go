package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
)

// implNCCL names NCCL in the registry.
const implNCCL = "nccl"

// comm is what the nccl implementation needs of a communicator: NCCL's (ncclComm), or
// the tests' fake. Buffers are device addresses; work is queued on st.
type comm interface {
	AllReduce(send, recv uint64, count int, dt nccl.DataType, st stream) error
	AllGather(send, recv uint64, sendCount int, dt nccl.DataType, st stream) error
	ReduceScatter(send, recv uint64, recvCount int, dt nccl.DataType, st stream) error
	Broadcast(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error
	AllToAll(send, recv uint64, count int, dt nccl.DataType, st stream) error
	// Describe names the library for result headers: "2.27.3 (/path/libnccl.so.2)".
	Describe() string
	Destroy() error
}

// openNCCL returns how a rank makes its NCCL communicator when a job first needs one:
// the library found as nccl.Find says, the unique ID shared through kv as NVSHMEM's is.
// Every rank runs the same collectives in the same order, so all of them get here
// together.
func openNCCL(ctx context.Context, p Place, kv KV, lib string) func() (comm, error) {
	return func() (comm, error) {
		s := nccl.Find(lib)
		if s.Chosen == "" {
			return nil, fmt.Errorf("--impl nccl: libnccl.so.2 not found; %s", nccl.InstallHint)
		}
		l, err := nccl.Open(s.Chosen)
		if err != nil {
			return nil, fmt.Errorf("--impl nccl: %v; %s", err, nccl.InstallHint)
		}
		c, err := l.Bootstrap(ctx, kv, "", p.Rank, p.Size)
		if err != nil {
			return nil, fmt.Errorf("rank %d: NCCL communicator: %w", p.Rank, err)
		}
		return ncclComm{c, l}, nil
	}
}

// ncclComm queues NCCL's collectives on the backend's CUDA streams.
type ncclComm struct {
	c   *nccl.Comm
	lib *nccl.Lib
}

func handle(st stream) uintptr { return st.(cudaStream).H }

func (n ncclComm) AllReduce(send, recv uint64, count int, dt nccl.DataType, st stream) error {
	return n.c.AllReduce(uintptr(send), uintptr(recv), count, dt, nccl.Sum, handle(st))
}
func (n ncclComm) AllGather(send, recv uint64, sendCount int, dt nccl.DataType, st stream) error {
	return n.c.AllGather(uintptr(send), uintptr(recv), sendCount, dt, handle(st))
}
func (n ncclComm) ReduceScatter(send, recv uint64, recvCount int, dt nccl.DataType, st stream) error {
	return n.c.ReduceScatter(uintptr(send), uintptr(recv), recvCount, dt, nccl.Sum, handle(st))
}
func (n ncclComm) Broadcast(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error {
	return n.c.Broadcast(uintptr(send), uintptr(recv), count, dt, root, handle(st))
}
func (n ncclComm) AllToAll(send, recv uint64, count int, dt nccl.DataType, st stream) error {
	return n.c.AllToAll(uintptr(send), uintptr(recv), count, dt, handle(st))
}
func (n ncclComm) Describe() string { return n.lib.Version().String() + " (" + n.lib.Path + ")" }
func (n ncclComm) Destroy() error   { return n.c.Destroy() }

// communicator returns the job's NCCL communicator, made on first use.
func (b *Backend) communicator() (comm, error) {
	if b.comm != nil || b.commErr != nil {
		return b.comm, b.commErr
	}
	if b.openComm == nil {
		b.commErr = errors.New("--impl nccl: this rank was opened without a way to bootstrap NCCL")
		return nil, b.commErr
	}
	b.comm, b.commErr = b.openComm()
	return b.comm, b.commErr
}

// Algorithm is the algorithm the implementation l names runs c with: the triton
// all-reduce runs one-shot up to pushAuto (and where LL128 runs) and two-shot above,
// reduce-scatter staged up to pushAuto a rank and pull above (algorithm), the triton
// combine pull unless c asks for staged (combineAlgorithm; an --algo it refuses is
// returned as asked, and Collective says why); NCCL picks its own, and says which
// only in its debug output, so rows of the nccl implementation name none.
func (b *Backend) Algorithm(c backend.Collective, l backend.Launch) string {
	impl, err := b.implFor(l, c.Op)
	if err == nil && impl.Name == implNCCLDevice && c.Op == ops.AllReduce {
		return devAlgorithm(c)
	}
	if err != nil || !kernelColl(impl, c.Op) {
		return c.Algo
	}
	switch c.Op {
	case ops.AllReduce, ops.ReduceScatter:
		return b.algorithm(c, l)
	case ops.Combine:
		if a, err := combineAlgorithm(impl.Name, c); err == nil {
			return a
		}
	}
	return c.Algo
}

// ran is what the last Collective launched: how many kernels in a row differed from the
// one before, the last of them, and whether the implementation runs by its own kernel.
type ran struct {
	kernel  string
	kernels int
	own     bool
}

// Kernel names the one kernel the last Collective launched, where its implementation
// runs by a kernel of its own (backend.Kerneler).
func (b *Backend) Kernel() string {
	if b.ran.own && b.ran.kernels == 1 {
		return b.ran.kernel
	}
	return ""
}

// Libraries names the libraries this rank opened beyond NVSHMEM (NCCL, once used).
func (b *Backend) Libraries() map[string]string {
	if b.comm == nil {
		return nil
	}
	return map[string]string{"nccl": b.comm.Describe()}
}

// Collective queues c on l's lane; its result is there after the next Quiet or
// Barrier. The triton implementation runs its collective kernels, the copy engine its
// copies (collkernels.go); the nccl implementation serves the collectives NCCL has
// (all-to-all as grouped sends and receives, as nccl-tests does); operations that only
// move bytes go as int8. Under the drop fault the rank still takes part, or its peers
// would wait for it forever, but what it delivers lands in c.Scratch instead of c.Recv.
func (b *Backend) Collective(c backend.Collective, l backend.Launch) error {
	return b.explain(b.collective(c, l))
}

func (b *Backend) collective(c backend.Collective, l backend.Launch) error {
	impl, err := b.implFor(l, c.Op)
	if err != nil {
		return err
	}
	b.ran = ran{own: kernelColl(impl, c.Op) || userColl(impl, c.Op)}
	// Checked on every rank, not only on one under the drop fault (which sends its
	// output there): a rank that refused alone would leave its peers waiting for it.
	if c.Scratch.Size < c.Recv.Size {
		return fmt.Errorf("%s --impl %s: the %d-byte scratch cannot take the %d-byte output", c.Op, impl.Name, c.Scratch.Size, c.Recv.Size)
	}
	if b.absent {
		return nil
	}
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	st, err := b.on(l)
	if err != nil {
		return err
	}
	switch {
	case impl.Name == implNCCLDevice:
		return b.devCollective(c, l, st)
	case impl.Name == implCopyEngine:
		return b.copyEngineCollective(c, l, st)
	case kernelColl(impl, c.Op):
		return b.kernelCollective(impl, c, l, st)
	case userColl(impl, c.Op):
		return b.userCollective(impl, c, l, st)
	case impl.Name != implNCCL && impl.Name != implNCCLSymm:
		return fmt.Errorf("--impl %s cannot run %s on GPUs: use --impl %s", impl.Name, c.Op, implNCCL)
	}
	if c.Algo != "" {
		return ncclAlgo(c.Algo)
	}
	dt, elem := nccl.Int8, int64(1)
	if ops.Op(c.Op).Reduces() {
		if dt, err = nccl.DataTypeOf(c.DType); err != nil {
			return fmt.Errorf("%s --impl nccl: %w", c.Op, err)
		}
		elem = int64(dt.Size())
	}
	cm, err := b.communicator()
	if err != nil {
		return err
	}
	send, recv := b.addr(c.Send), b.addr(c.Recv)
	if b.drop {
		recv = b.addr(c.Scratch)
	}
	n := int64(b.size)
	switch c.Op {
	case ops.AllReduce:
		return cm.AllReduce(send, recv, int(c.Bytes/elem), dt, st)
	case ops.AllGather:
		return cm.AllGather(send, recv, int(c.Bytes/n/elem), dt, st)
	case ops.ReduceScatter:
		return cm.ReduceScatter(send, recv, int(c.Bytes/n/elem), dt, st)
	case ops.Broadcast:
		return cm.Broadcast(send, recv, int(c.Bytes/elem), dt, c.Root, st)
	case ops.AllToAll:
		return cm.AllToAll(send, recv, int(c.Bytes/n/elem), dt, st)
	}
	return fmt.Errorf("--impl nccl has no %s", c.Op)
}
