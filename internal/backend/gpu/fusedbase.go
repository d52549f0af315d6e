package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// The unfused baselines of the fused operations: cuBLASLt's product beside a
// collective, one after the other on the stream, as a program without fused kernels
// runs them. all-gather-matmul gathers every rank's A into the scratch (M x K), then
// multiplies it by B into C; matmul-reduce-scatter multiplies A by B into the scratch
// (M x N), then reduce-scatters it by rows into C. The collective is NCCL's
// (cublas+nccl) or triton's kernels (cublas+triton), which pick their algorithm by
// size as they do for a collective of their own.

const (
	implCublasNCCL   = "cublas+nccl"
	implCublasTriton = "cublas+triton"
)

// cublasColl is a baseline whose collective is coll's (implNCCL or implTriton).
type cublasColl struct{ coll string }

var _ interface {
	fuser
	preloader
} = cublasColl{}

var (
	_ = registerImpl(backend.Impl{Name: implCublasNCCL, Unfused: true, Summary: "the unfused pair: cuBLASLt's GEMM and NCCL's all-gather or reduce-scatter",
		Kernels: map[ops.Op][]string{ops.AllGatherMatmul: nil, ops.MatmulReduceScatter: nil}}, cublasColl{coll: implNCCL})
	_ = registerImpl(backend.Impl{Name: implCublasTriton, Unfused: true, Summary: "the unfused pair: cuBLASLt's GEMM and triton's all-gather or reduce-scatter kernels",
		Kernels: map[ops.Op][]string{ops.AllGatherMatmul: nil, ops.MatmulReduceScatter: nil}}, cublasColl{coll: implTriton})
)

func (cublasColl) home() home { return onHeap }

// reach: NCCL's transports, or triton's collective kernels through the mappings.
func (c cublasColl) reach(backend.Impl, ops.Op) reach {
	if c.coll == implTriton {
		return byMapping
	}
	return byCalls
}

// collOf is the collective a fused operation's baseline runs beside its product.
var collOf = map[ops.Op]ops.Op{ops.AllGatherMatmul: ops.AllGather, ops.MatmulReduceScatter: ops.ReduceScatter}

// preload opens cuBLASLt and the collective's side: NCCL's communicator, or triton's
// collective kernels and their sync area.
func (c cublasColl) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	if _, err := b.blas(); err != nil {
		return err
	}
	if c.coll == implNCCL {
		_, err := b.communicator()
		return err
	}
	t, _ := b.reg.ByName(implTriton)
	return preloadColl(b, t, collOf[op], n, l, true)
}

func (c cublasColl) fused(b *Backend, impl backend.Impl, f backend.Fused, l backend.Launch, st stream) error {
	// The drop and fused faults act in symmem's kernels where they deliver; NCCL's
	// and cuBLAS's deliveries are out of their reach.
	if b.drop {
		return setting.Errorf("%s %s %s: the drop fault needs a kernel of symmem's to drop its delivery, and %s's collective is not reached by it: use %s %s",
			f.Op, setting.Impl, impl.Name, impl.Name, setting.Impl, implTriton)
	}
	if err := b.noFusedFault(impl, f); err != nil {
		return err
	}
	dt := ops.Canonical(f.DType)
	if c.coll == implTriton && f.Op == ops.MatmulReduceScatter && dt != "bf16" {
		return setting.Errorf("%s %s %s sums with triton's reduce-scatter kernels, which sum bf16: use %s bf16, or %s %s",
			f.Op, setting.Impl, impl.Name, setting.DType, setting.Impl, implCublasNCCL)
	}
	g, err := b.blas()
	if err != nil {
		return err
	}
	mm, n := f.Shape, b.size
	elem := ops.ElemSize(dt)
	if f.Op == ops.AllGatherMatmul {
		gathered := f.Scratch.Slice(0, int64(mm.M)*int64(mm.K)*elem)
		if err := c.collective(b, backend.Collective{Op: ops.AllGather, DType: dt, Bytes: gathered.Size, Send: f.A, Recv: gathered}, l, st); err != nil {
			return err
		}
		return g.Gemm(dt, mm, b.addr(gathered), b.addr(f.B), b.addr(f.C), st)
	}
	product := f.Scratch.Slice(0, int64(mm.M)*int64(mm.N)*elem)
	if err := g.Gemm(dt, mm, b.addr(f.A), b.addr(f.B), b.addr(product), st); err != nil {
		return err
	}
	out := f.C.Slice(0, product.Size/int64(n))
	return c.collective(b, backend.Collective{Op: ops.ReduceScatter, DType: dt, Bytes: product.Size, Send: product, Recv: out}, l, st)
}

// collective queues x (an all-gather or a reduce-scatter of elements of x.DType) with
// c's collective.
func (c cublasColl) collective(b *Backend, x backend.Collective, l backend.Launch, st stream) error {
	if c.coll == implTriton {
		t, _ := b.reg.ByName(implTriton)
		x.Scratch = x.Recv // where the drop fault would deliver, which fused refuses
		return triton{}.run(b, t, x, l, st)
	}
	cm, err := b.communicator()
	if err != nil {
		return err
	}
	dt, err := nccl.DataTypeOf(x.DType)
	if err != nil {
		return setting.Errorf("%s %s %s: %v", x.Op, setting.Impl, implCublasNCCL, err)
	}
	count := int(x.Bytes / int64(b.size) / int64(dt.Size()))
	if x.Op == ops.AllGather {
		return cm.AllGather(b.addr(x.Send), b.addr(x.Recv), count, dt, st)
	}
	return cm.ReduceScatter(b.addr(x.Send), b.addr(x.Recv), count, dt, nccl.Sum, st)
}
