package gpu

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// implNCCL names NCCL in the registry.
const implNCCL = "nccl"

// comm is what the nccl implementation needs of a communicator: NCCL's (ncclComm), or
// the tests' fake. Buffers are device addresses; work is queued on st.
type comm interface {
	AllReduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, st stream) error
	AllGather(send, recv uint64, sendCount int, dt nccl.DataType, st stream) error
	ReduceScatter(send, recv uint64, recvCount int, dt nccl.DataType, op nccl.RedOp, st stream) error
	Broadcast(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error
	Reduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, root int, st stream) error
	Gather(send, recv uint64, sendCount int, dt nccl.DataType, root int, st stream) error
	Scatter(send, recv uint64, recvCount int, dt nccl.DataType, root int, st stream) error
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
			return nil, setting.Errorf("%s nccl: libnccl.so.2 not found; %s", setting.Impl, nccl.InstallHint)
		}
		l, err := nccl.Open(s.Chosen)
		if err != nil {
			return nil, setting.Errorf("%s nccl: %v; %s", setting.Impl, err, nccl.InstallHint)
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

// redOp is NCCL's ncclRedOp_t for c's operator (ops.RedOp's codes are NCCL's), or
// the fault hook's wrong one (SetRedOpFault).
func (b *Backend) redOp(c backend.Collective) nccl.RedOp {
	return nccl.RedOp(b.reduceWith(c).Code)
}

func handle(st stream) uintptr { return st.(cudaStream).H }

func (n ncclComm) AllReduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, st stream) error {
	return n.c.AllReduce(uintptr(send), uintptr(recv), count, dt, op, handle(st))
}
func (n ncclComm) AllGather(send, recv uint64, sendCount int, dt nccl.DataType, st stream) error {
	return n.c.AllGather(uintptr(send), uintptr(recv), sendCount, dt, handle(st))
}
func (n ncclComm) ReduceScatter(send, recv uint64, recvCount int, dt nccl.DataType, op nccl.RedOp, st stream) error {
	return n.c.ReduceScatter(uintptr(send), uintptr(recv), recvCount, dt, op, handle(st))
}
func (n ncclComm) Broadcast(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error {
	return n.c.Broadcast(uintptr(send), uintptr(recv), count, dt, root, handle(st))
}
func (n ncclComm) Reduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, root int, st stream) error {
	return n.c.Reduce(uintptr(send), uintptr(recv), count, dt, op, root, handle(st))
}
func (n ncclComm) Gather(send, recv uint64, sendCount int, dt nccl.DataType, root int, st stream) error {
	return n.c.Gather(uintptr(send), uintptr(recv), sendCount, dt, root, handle(st))
}
func (n ncclComm) Scatter(send, recv uint64, recvCount int, dt nccl.DataType, root int, st stream) error {
	return n.c.Scatter(uintptr(send), uintptr(recv), recvCount, dt, root, handle(st))
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
		b.commErr = setting.Errorf("%s nccl: this rank was opened without a way to bootstrap NCCL", setting.Impl)
		return nil, b.commErr
	}
	b.comm, b.commErr = b.openComm()
	return b.comm, b.commErr
}

// ncclImpl serves the collectives NCCL has (all-to-all, gather and scatter as grouped
// sends and receives, as nccl-tests does) on the backend's streams; operations that only move bytes go as
// int8. In NCCL's registered window (nccl-symm) it runs the same calls there, for the
// collectives NCCL's symmetric kernels cover.
type ncclImpl struct {
	inWindow bool
}

var _ interface {
	collective
	checker
	preloader
	ncclUser
} = ncclImpl{}

// ncclRedOps are the operators NCCL reduces with, ncclRedOp_t's (avg since NCCL 2.10),
// by their names in package ops, whose codes are NCCL's.
var ncclRedOps = []string{ops.Sum.Name, ops.Prod.Name, ops.Max.Name, ops.Min.Name, ops.Avg.Name}

var (
	_ = registerImpl(backend.Impl{Name: implNCCL, Summary: "NCCL's collectives (libnccl.so.2 opened with dlopen, bootstrapped through symmem's store)",
		Kernels: map[ops.Op][]string{ops.AllReduce: nil, ops.AllGather: nil, ops.ReduceScatter: nil, ops.Broadcast: nil, ops.AllToAll: nil,
			ops.Reduce: nil, ops.Gather: nil, ops.Scatter: nil}, RedOps: ncclRedOps}, ncclImpl{})
	_ = registerImpl(backend.Impl{Name: implNCCLSymm, Summary: "NCCL's symmetric-memory collectives on registered windows (NCCL 2.27+)",
		Kernels: map[ops.Op][]string{ops.AllReduce: nil, ops.AllGather: nil, ops.ReduceScatter: nil}, RedOps: ncclRedOps}, ncclImpl{inWindow: true})
)

func (n ncclImpl) home() home {
	if n.inWindow {
		return inWindow
	}
	return onHeap
}

// reach: NCCL's transports, whichever it finds.
func (ncclImpl) reach(backend.Impl, ops.Op) reach { return byCalls }

// needs: the window calls are NCCL 2.27's.
func (n ncclImpl) needs(l *nccl.Lib) error {
	if n.inWindow {
		return l.Symmetric()
	}
	return nil
}

// check: NCCL picks its own algorithms.
func (ncclImpl) check(impl backend.Impl, c backend.Collective, blocks int) error {
	if c.Algo != "" {
		return ncclAlgo(c.Algo, impl.Name)
	}
	return nil
}

// preload opens NCCL's communicator, whose init is no part of any timing.
func (ncclImpl) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	_, err := b.communicator()
	return err
}

func (ncclImpl) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	if c.Algo != "" {
		return ncclAlgo(c.Algo, impl.Name)
	}
	dt, elem := nccl.Int8, int64(1)
	if c.Op.Reduces() {
		var err error
		if dt, err = nccl.DataTypeOf(c.DType); err != nil {
			return setting.Errorf("%s %s %s: %w", c.Op, setting.Impl, impl.Name, err)
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
		return cm.AllReduce(send, recv, int(c.Bytes/elem), dt, b.redOp(c), st)
	case ops.AllGather:
		return cm.AllGather(send, recv, int(c.Bytes/n/elem), dt, st)
	case ops.ReduceScatter:
		return cm.ReduceScatter(send, recv, int(c.Bytes/n/elem), dt, b.redOp(c), st)
	case ops.Broadcast:
		return cm.Broadcast(send, recv, int(c.Bytes/elem), dt, c.Root, st)
	case ops.Reduce:
		return cm.Reduce(send, recv, int(c.Bytes/elem), dt, b.redOp(c), c.Root, st)
	case ops.Gather:
		return cm.Gather(send, recv, int(c.Bytes/n/elem), dt, c.Root, st)
	case ops.Scatter:
		return cm.Scatter(send, recv, int(c.Bytes/n/elem), dt, c.Root, st)
	case ops.AllToAll:
		return cm.AllToAll(send, recv, int(c.Bytes/n/elem), dt, st)
	}
	return setting.Errorf("%s %s has no %s", setting.Impl, impl.Name, c.Op)
}
