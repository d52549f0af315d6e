package backend

import (
	"slices"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// Backend names.
const (
	CPU     = "cpu"
	NVSHMEM = "nvshmem"
)

// Impl is one implementation of the operations: a registry entry. Each backend's
// factory lists its own (Factory.Impls), each beside the code that runs it.
type Impl struct {
	Name    string
	Backend string // the backend that runs it
	Summary string // one line for help text
	// Kernels maps each operation the implementation serves to the prebuilt kernels it
	// launches (none: the copy engine, or the CPU).
	Kernels map[ops.Op][]string
	// User says it came from a user's directory of kernels (Registry.WithUser), and
	// Catalog is that directory's catalogue (nil: the one embedded in the binary).
	User    bool
	Catalog *kernels.Catalog
	// BlockAlign says, by op, what each rank's block of a collective must be a whole
	// multiple of, in bytes (triton's reduce-scatter moves 16-byte vectors); sweeps
	// leave out the sizes whose blocks are not, and run refuses them before it starts.
	BlockAlign map[ops.Op]int64
	// MaxBlock says, by op, the largest block each rank of a job of ranks ranks may
	// have, in bytes, and why (nvshmem's reduce-scatter works within NVSHMEM's reduce
	// scratch); sweeps leave out the larger sizes, and run refuses them before it starts.
	MaxBlock map[ops.Op]func(ranks int) (int64, string)
	// RedOps are the reduction operators it serves its reducing collectives with
	// (ops.Op.TakesRedOp), by name (nil: sum only; a user's, those its kernels
	// combine with).
	RedOps []string
	// Unfused says it runs a fused operation as the unfused pair, a matrix product and
	// then a collective: a baseline the fused implementations are measured against.
	Unfused bool
	// Variants are, by op, the variants of it (ops.Op.Variants: put-flag's orderings,
	// barrier's meetings) it runs; an op not here runs every one.
	Variants map[ops.Op][]string
}

// EveryRedOp is RedOps for an implementation that serves every operator.
func EveryRedOp() []string {
	var out []string
	for _, r := range ops.RedOps() {
		out = append(out, r.Name)
	}
	return out
}

// ServesRedOp says whether the implementation reduces with r.
func (i Impl) ServesRedOp(r ops.RedOp) bool {
	if i.RedOps == nil {
		return r.IsSum()
	}
	return slices.Contains(i.RedOps, r.String())
}

// RedOpNames are the reduction operators it serves, by name.
func (i Impl) RedOpNames() []string {
	if i.RedOps == nil {
		return []string{ops.Sum.Name}
	}
	return i.RedOps
}

// VariantsOf lists the variants of o it runs, of those algo asks for (o.Variants).
func (i Impl) VariantsOf(o ops.Op, algo string) []string {
	vs := o.Variants(algo)
	if have, ok := i.Variants[o]; ok {
		vs = slices.DeleteFunc(vs, func(v string) bool { return !slices.Contains(have, v) })
	}
	return vs
}

// Holds says whether the implementation can run op with each of ranks ranks' block
// (ops.Shape's Block) of block bytes: a whole number of its BlockAlign, within its
// MaxBlock.
func (i Impl) Holds(o ops.Op, block int64, ranks int) bool {
	if a := i.BlockAlign[o]; a != 0 && block%a != 0 {
		return false
	}
	most, _ := i.Most(o, ranks)
	return most == 0 || block <= most
}

// Most is the largest block of op each of ranks ranks may have (0: no limit) and why.
func (i Impl) Most(o ops.Op, ranks int) (int64, string) {
	if f := i.MaxBlock[o]; f != nil {
		return f(ranks)
	}
	return 0, ""
}

// Supports says whether the implementation can carry out op.
func (i Impl) Supports(o ops.Op) bool { _, ok := i.Kernels[o]; return ok }

// Ops lists the operations the implementation serves, in table order.
func (i Impl) Ops() []ops.Op {
	var out []ops.Op
	for _, o := range ops.All() {
		if i.Supports(o) {
			out = append(out, o)
		}
	}
	return out
}

// NeedsGPU says whether the implementation runs on GPUs.
func (i Impl) NeedsGPU() bool { return i.Backend != CPU }
