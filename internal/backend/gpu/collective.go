package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/setting"
)

// Algorithm is the algorithm the implementation l names runs c with (its chooser's
// algorithm, else c.Algo): triton's all-reduce and reduce-scatter by size (algorithm),
// its combine pull unless c asks for staged; NCCL picks its own, and says which only in
// its debug output, so rows of the nccl implementation name none.
func (b *Backend) Algorithm(c backend.Collective, l backend.Launch) string {
	impl, err := b.implFor(l, c.Op)
	if err != nil {
		return c.Algo
	}
	ch, err := capability[chooser](impl, c.Op)
	if err != nil || !impl.Supports(c.Op) {
		return c.Algo
	}
	return ch.algorithm(b, impl, c, l)
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

// Libraries names the libraries this rank opened beyond NVSHMEM (NCCL and cuBLASLt,
// once used).
func (b *Backend) Libraries() map[string]string {
	if b.comm == nil && b.gemm == nil {
		return nil
	}
	libs := map[string]string{}
	if b.comm != nil {
		libs["nccl"] = b.comm.Describe()
	}
	if b.gemm != nil {
		libs["cublas"] = b.gemm.Describe()
	}
	return libs
}

// Collective queues c on l's lane with the implementation l names (implOf: each in a
// file of its own); its result is there after the next Quiet or Barrier. Under the drop fault the rank still takes part, or its peers
// would wait for it forever, but what it delivers lands in c.Scratch instead of c.Recv.
func (b *Backend) Collective(c backend.Collective, l backend.Launch) error {
	return b.explain(b.collective(c, l))
}

func (b *Backend) collective(c backend.Collective, l backend.Launch) error {
	impl, err := b.implFor(l, c.Op)
	if err != nil {
		return err
	}
	ci, err := capability[collective](impl, c.Op)
	if err != nil || !c.Op.IsCollective() || !impl.Supports(c.Op) {
		return noCollective(impl, c.Op)
	}
	_, own := ci.(ownKernel)
	b.ran = ran{own: own}
	// Checked on every rank, not only on one under the drop fault (which sends its
	// output there): a rank that refused alone would leave its peers waiting for it.
	if c.Scratch.Size < c.Recv.Size {
		return setting.Errorf("%s %s %s: the %d-byte scratch cannot take the %d-byte output", c.Op, setting.Impl, impl.Name, c.Scratch.Size, c.Recv.Size)
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
	return ci.run(b, impl, c, l, st)
}
