package gpu

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// Algorithm is the algorithm the implementation l names runs c with (its
// collImpl.algorithm): triton's all-reduce and reduce-scatter by size (algorithm),
// its combine pull unless c asks for staged; NCCL picks its own, and says which only in
// its debug output, so rows of the nccl implementation name none.
func (b *Backend) Algorithm(c backend.Collective, l backend.Launch) string {
	impl, err := b.implFor(l, c.Op)
	if err != nil {
		return c.Algo
	}
	ci, ok := collImplOf(impl)
	if !ok || !impl.Supports(c.Op) {
		return c.Algo
	}
	return ci.algorithm(b, impl, c, l)
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

// Collective queues c on l's lane with the implementation l names (collImplOf: each
// in a file of its own); its result is there after the next Quiet or Barrier. Under the drop fault the rank still takes part, or its peers
// would wait for it forever, but what it delivers lands in c.Scratch instead of c.Recv.
func (b *Backend) Collective(c backend.Collective, l backend.Launch) error {
	return b.explain(b.collective(c, l))
}

func (b *Backend) collective(c backend.Collective, l backend.Launch) error {
	impl, err := b.implFor(l, c.Op)
	if err != nil {
		return err
	}
	ci, ok := collImplOf(impl)
	if !ok || !c.Op.IsCollective() || !impl.Supports(c.Op) {
		return fmt.Errorf("--impl %s cannot run %s on GPUs: use --impl %s", impl.Name, c.Op, implNCCL)
	}
	b.ran = ran{own: ci.own()}
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
	return ci.run(b, impl, c, l, st)
}

// collImpl is one GPU implementation, in a file of its own; the registry
// (backend.Impl) says which ops it serves.
type collImpl interface {
	// move queues a put (dst on peer) or a get (src on peer) of op on st.
	move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error
	// run queues c on st. Under the drop fault the rank still takes part, or its peers
	// would wait for it forever, but what it delivers lands in c.Scratch.
	run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error
	// algorithm is the algorithm it runs c with (c.Algo where it has no choice).
	algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string
	// own says it runs c by one kernel of its own (Kerneler names it).
	own() bool
}

// noColl is what an implementation of no collective embeds.
type noColl struct{}

func (noColl) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	return fmt.Errorf("--impl %s cannot run %s on GPUs: use --impl %s", impl.Name, c.Op, implNCCL)
}

func (noColl) algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string {
	return c.Algo
}

func (noColl) own() bool { return false }

// collImpls are the implementations by registry name, each added by its file.
var collImpls = map[string]collImpl{}

func registerColl(name string, ci collImpl) bool {
	if _, dup := collImpls[name]; dup {
		panic("collective implementation " + name + " registered twice")
	}
	collImpls[name] = ci
	return true
}

// collImplOf is impl's implementation of the collectives: a user's kernels (userImpl)
// or one of symmem's own.
func collImplOf(impl backend.Impl) (collImpl, bool) {
	if impl.User {
		return userImpl{}, true
	}
	ci, ok := collImpls[impl.Name]
	return ci, ok
}
