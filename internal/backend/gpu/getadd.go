package gpu

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// getAdder runs get-add (ops.GetAdd): dst here is local plus src got from peer.
// symmem's own implementations have no kernel of it; a user's has one per element
// type (kernels.Signatures: get_add_f32, get_add_bf16, ...).
type getAdder interface {
	getAdd(b *Backend, impl backend.Impl, dst, local, src, tmp backend.Buffer, peer int, dtype string, l backend.Launch, st stream) error
}

var _ getAdder = userImpl{}

// GetAdd queues impl's get-add kernel for dtype: dst = local + src on peer, element by
// element, with tmp (dst's size, symmetric) the kernel's to get src into. The drop
// fault delivers nothing: dst keeps what it held, and the check sees every element
// wrong.
func (b *Backend) GetAdd(dst, local, src, tmp backend.Buffer, peer int, dtype string, l backend.Launch) error {
	impl, st, err := b.prepare(peer, l, ops.GetAdd)
	if err != nil || st == nil {
		return err
	}
	g, err := capability[getAdder](impl, ops.GetAdd)
	if err != nil {
		return err
	}
	return g.getAdd(b, impl, dst, local, src, tmp, peer, dtype, l, st)
}

// getAdd is the user's kernel of dtype, one block (a kernel written as PyTorch's is
// launched, for one block of its tl.constexpr size): dst, local, src, tmp, the
// elements, the peer. A message of more elements than its block holds is refused
// before the launch, as the launcher refuses it before any rank starts.
func (userImpl) getAdd(b *Backend, impl backend.Impl, dst, local, src, tmp backend.Buffer, peer int, dtype string, l backend.Launch, st stream) error {
	kernel, err := userTypedKernel(impl, ops.GetAdd, dtype)
	if err != nil {
		return err
	}
	elem := ops.ElemSize(dtype)
	if elem == 0 || dst.Size%elem != 0 {
		return fmt.Errorf("get-add of %d bytes of %s: give a whole number of elements of a type that adds", dst.Size, dtype)
	}
	for _, buf := range []backend.Buffer{local, src, tmp} {
		if buf.Size < dst.Size {
			return fmt.Errorf("get-add of %d bytes: a buffer of %d bytes is too small (local, src and tmp hold the message)", dst.Size, buf.Size)
		}
	}
	n := dst.Size / elem
	if impl.Catalog != nil {
		if err := impl.Catalog.CheckElems(impl.Name, []string{kernel}, dtype, n); err != nil {
			return err
		}
	}
	sh := ShapeFor(dst.Size, l)
	return b.launch(st, impl.Name, kernel, sh, 1, b.addr(dst), b.addr(local), b.addr(src), b.addr(tmp), uint64(n), uint64(peer))
}
