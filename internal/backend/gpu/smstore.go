package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// smStore is put and get by a kernel storing straight into the peer's mapping (the
// registry's "sm-store"): SM loads and stores, no NVSHMEM call.
type smStore struct{}

var _ mover = smStore{}

// implSMStore names it in the registry.
const implSMStore = "sm-store"

// It serves what kernels/cuda/sm_store.manifest.json says: put and get.
var _ = registerImpl(backend.Impl{Name: implSMStore, Summary: "a kernel storing straight into the peer's mapping"}, smStore{})

func (smStore) home() home { return onHeap }

// reach: it stores into the peer's mapping.
func (smStore) reach(backend.Impl, ops.Op) reach { return byMapping }

func (smStore) move(b *Backend, impl backend.Impl, dst, src backend.Buffer, peer int, l backend.Launch, op ops.Op, st stream) error {
	to, from, n, err := b.mappedMove(dst, src, peer, op)
	if err != nil {
		return err
	}
	sh := ShapeFor(n, l)
	return b.launch(st, impl.Name, kStore, sh, sh.Blocks, to, from, uint64(n), uint64(sh.Chunk))
}
