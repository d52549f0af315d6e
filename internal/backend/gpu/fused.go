package gpu

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
)

// The fused operations (ops.FamilyFused: all-gather-matmul, matmul-reduce-scatter):
// a matrix product fused with a collective, run by triton's fused kernels
// (kernels/triton/symmem_fused.py), by a cuBLAS product beside a collective of NCCL or
// of triton (fusedbase.go: the unfused baselines), or by a user's kernel.

// fuser runs fused operations.
type fuser interface {
	// fused queues f on st.
	fused(b *Backend, impl backend.Impl, f backend.Fused, l backend.Launch, st stream) error
}

// triton's fused kernels, one per operation and element type (kernels/triton/
// symmem_fused.py: which serves which its manifest says), and the warps they run with
// unless --warps says (they are built for 4 and 8: a 128 x 128 tile's float32
// accumulator takes 8).
const (
	kAGMatmulBF16 = "ag_matmul_bf16"
	kAGMatmulF16  = "ag_matmul_f16"
	kMatmulRSBF16 = "matmul_rs_bf16"
	kMatmulRSF16  = "matmul_rs_f16"
	fusedWarps    = 8

	// A user's all-gather-matmul and matmul-reduce-scatter kernels (pkg/kernels:
	// agMatmulParams, mrsMatmulParams), launched with fusedWarps too where they were
	// built for them.
	kUserAGMatmulBF16 = "all_gather_matmul_bf16"
	kUserAGMatmulF16  = "all_gather_matmul_f16"
	kUserMatmulRSBF16 = "matmul_reduce_scatter_bf16"
	kUserMatmulRSF16  = "matmul_reduce_scatter_f16"
)

// The fused kernels' fault argument (symmem_fused.py: FAULT_*).
const (
	faultNone  = 0
	faultSkip  = 1 // tile 0 is not delivered
	faultEarly = 2 // tile 0 is delivered before its last K step
	faultDrop  = 3 // no tile is delivered (the drop fault)
)

// SetFusedFault makes the rank's fused operations deliver a tile wrongly where their
// kernel delivers it (backend.FusedFaulter); "" turns it off.
func (b *Backend) SetFusedFault(f backend.FusedFault) { b.fusedFault = f }

// fault is the fused kernels' fault argument for this rank now.
func (b *Backend) fault() uint64 {
	switch {
	case b.drop:
		return faultDrop
	case b.fusedFault == backend.FaultSkipTile:
		return faultSkip
	case b.fusedFault == backend.FaultEarly:
		return faultEarly
	}
	return faultNone
}

// noFusedFault refuses to run f with impl under a fused fault: impl's delivery is a
// library's or a user's, which the fault cannot reach, and a fault that does nothing
// would pass.
func (b *Backend) noFusedFault(impl backend.Impl, f backend.Fused) error {
	if b.fusedFault == "" {
		return nil
	}
	return setting.Errorf("%s %s %s: the %s fault needs a kernel of symmem's to deliver wrongly, and %s's delivery is not symmem's: use %s %s",
		f.Op, setting.Impl, impl.Name, b.fusedFault, impl.Name, setting.Impl, implTriton)
}

// Fused queues f with the implementation l names (its fuser); C holds the result on
// every rank after the next Quiet or Barrier.
func (b *Backend) Fused(f backend.Fused, l backend.Launch) error {
	return b.explain(b.fused(f, l))
}

func (b *Backend) fused(f backend.Fused, l backend.Launch) error {
	impl, err := b.implFor(l, f.Op)
	if err != nil {
		return err
	}
	fu, err := capability[fuser](impl, f.Op)
	if err != nil || f.Op.Family() != ops.FamilyFused || !impl.Supports(f.Op) {
		return setting.Errorf("%s %s cannot run %s on GPUs", setting.Impl, impl.Name, f.Op)
	}
	// Checked on every rank alike: a rank that refused alone would leave its peers
	// waiting for it.
	if err := checkFused(f, b.size); err != nil {
		return err
	}
	if b.absent {
		if _, user := fu.(userImpl); user && f.Op == ops.MatmulReduceScatter {
			// Its peers would wait in NVSHMEM's barrier between the kernel's steps, which
			// no limit ends.
			return setting.Errorf("%s %s %s: the absent fault would leave the peers waiting in NVSHMEM's barrier between a user's steps for good: use %s %s",
				f.Op, setting.Impl, impl.Name, setting.Impl, implTriton)
		}
		return nil
	}
	if err := b.useHome(impl.Name); err != nil {
		return err
	}
	st, err := b.on(l)
	if err != nil {
		return err
	}
	if f.GemmOnly {
		return b.gemmOnly(f, st)
	}
	return fu.fused(b, impl, f, l, st)
}

// gemmOnly queues this rank's matrix product of f alone into its scratch, by cuBLAS:
// the floor a fused implementation can reach on the shape.
func (b *Backend) gemmOnly(f backend.Fused, st stream) error {
	o, err := f.Op.Operands(f.Shape, b.size)
	if err != nil {
		return err
	}
	g, err := b.blas()
	if err != nil {
		return err
	}
	mm := ops.Matmul{M: o.Product, N: f.Shape.N, K: f.Shape.K}
	return g.Gemm(ops.Canonical(f.DType), mm, b.addr(f.A), b.addr(f.B), b.addr(f.Scratch), st)
}

// checkFused says whether f's buffers hold its operands on n ranks.
func checkFused(f backend.Fused, n int) error {
	dt := ops.Canonical(f.DType)
	if !slices.Contains(ops.MatmulTypes, dt) {
		return setting.Errorf("%s takes %s %v, not %s", f.Op, setting.DType, ops.MatmulTypes, f.DType)
	}
	o, err := f.Op.Operands(f.Shape, n)
	if err != nil {
		return setting.Errorf("%v", err)
	}
	elem := ops.ElemSize(dt)
	for _, x := range []struct {
		name  string
		buf   backend.Buffer
		elems int64
	}{{"A", f.A, o.A}, {"B", f.B, o.B}, {"C", f.C, o.C}, {"scratch", f.Scratch, o.Scratch}} {
		if x.buf.Size < x.elems*elem {
			return fmt.Errorf("%s of %d x %d x %d on %d ranks: %s is %d bytes, it takes %d", f.Op, f.Shape.M, f.Shape.N, f.Shape.K, n, x.name, x.buf.Size, x.elems*elem)
		}
	}
	return nil
}

// namedArgs orders the values of a kernel's visible parameters as its sidecar lists
// them, by name: a kernel's signature is written once, beside it. A parameter vals
// lacks, or a value no parameter takes, is an error naming it.
func namedArgs(a *kernels.Artifact, vals map[string]uint64) ([]uint64, error) {
	var out []uint64
	used := 0
	for _, p := range a.Params {
		if p.Hidden {
			continue
		}
		v, ok := vals[p.Name]
		if !ok {
			return nil, fmt.Errorf("kernel %s takes %q, which symmem does not pass it: rebuild the kernels (scripts/build-kernels.sh)", a.Name(), p.Name)
		}
		out = append(out, v)
		used++
	}
	if used != len(vals) {
		for name := range vals {
			if !a.Takes(name) {
				return nil, fmt.Errorf("kernel %s takes no %q: rebuild the kernels (scripts/build-kernels.sh)", a.Name(), name)
			}
		}
	}
	return out, nil
}

// tileOf is the tile (rows, columns, K step) a matrix kernel was built with, from its
// sidecar.
func tileOf(a *kernels.Artifact) ([3]int, error) {
	if len(a.Tile) != 3 || a.Tile[0] < 1 || a.Tile[1] < 1 {
		return [3]int{}, fmt.Errorf("kernel %s has no tile in its metadata (%v): rebuild the kernels (scripts/build-kernels.sh)", a.Name(), a.Tile)
	}
	return [3]int{a.Tile[0], a.Tile[1], a.Tile[2]}, nil
}

// cdiv is a / b rounded up.
func cdiv(a, b int) int { return (a + b - 1) / b }

// fusedGrid is the grid of triton's fused kernels for tiles tiles of a rank: a
// program per tile up to MaxCollBlocks (the barrier words have a row per program),
// or l.Blocks. It depends on the shape alone, so every rank launches the same grid,
// whatever its GPU: tile t is program t % grid's on every rank, which is what the
// kernels' barriers rely on.
func fusedGrid(tiles int, l backend.Launch) (int, error) {
	if l.Blocks > MaxCollBlocks {
		return 0, setting.Errorf("%s %d: the fused kernels run at most %d blocks", setting.Blocks, l.Blocks, MaxCollBlocks)
	}
	if l.Blocks > 0 {
		return l.Blocks, nil
	}
	return min(max(tiles, 1), MaxCollBlocks), nil
}

// fused queues f as triton's fused kernel of its op and element type: every rank the
// same grid, each program through its tiles, meeting the same program of every rank at
// the barriers of the collective kernels (the sync area).
func (triton) fused(b *Backend, impl backend.Impl, f backend.Fused, l backend.Launch, st stream) error {
	if l.Lane != 0 {
		return setting.Errorf("%s %s runs fused operations on one stream only (lane %d asked)", setting.Impl, impl.Name, l.Lane)
	}
	// Its tiles go straight into the peers' C (or scratch) through their mappings, as
	// 16-byte vectors where a row allows.
	if err := b.allMapped(f.Op, impl.Name); err != nil {
		return err
	}
	for _, buf := range []backend.Buffer{f.A, f.B, f.C, f.Scratch} {
		if b.addr(buf)%collVector != 0 {
			return setting.Errorf("%s %s %s: buffer at heap offset %d is not %d-byte aligned", f.Op, setting.Impl, impl.Name, buf.Off, collVector)
		}
	}
	if err := b.ensureSync(); err != nil {
		return err
	}
	kernel, has := kernelFor(b.cat, impl, f.Op, f.DType)
	if kernel == "" {
		return setting.Errorf("%s %s %s: no kernel for %s (it has %s): use %s %s", f.Op, setting.Impl, impl.Name, f.DType, strings.Join(has, ", "), setting.DType, strings.Join(has, " or "))
	}
	sh := Shape{Warps: b.builtWarps(impl.Name, kernel, launchWarps(kernel, 0, Shape{Warps: l.Warps}, l), l)}
	_, a, err := b.function(impl.Name, kernel, sh.Warps)
	if err != nil {
		return err
	}
	tile, err := tileOf(a)
	if err != nil {
		return err
	}
	mm, n := f.Shape, b.size
	rows := mm.M / n
	grid, err := fusedGrid(cdiv(rows, tile[0])*cdiv(mm.N, tile[1]), l)
	if err != nil {
		return err
	}
	pad, state := b.syncWords()
	vals := map[string]uint64{"a": b.addr(f.A), "b": b.addr(f.B), "c": b.addr(f.C), "n": uint64(mm.N), "k": uint64(mm.K),
		"pad": pad, "state": state, "me": uint64(b.rank), "nranks": uint64(n), "fault": b.fault()}
	if f.Op == ops.AllGatherMatmul {
		vals["rows"] = uint64(rows)
	} else {
		vals["m"], vals["scratch"] = uint64(mm.M), b.addr(f.Scratch)
	}
	return b.launchNamed(st, impl.Name, kernel, sh, cuda.Dim{Grid: uint32(grid)}, vals)
}

// launchNamed queues kernel of impl on st on dim's grid (its threads and shared memory
// are the kernel's) with sh's warps, its arguments given by name (namedArgs); a kernel
// that takes the wait limit and the mailbox gets them (mailbox.go).
func (b *Backend) launchNamed(st stream, impl, kernel string, sh Shape, dim cuda.Dim, vals map[string]uint64) error {
	warps := b.warpsOf(impl, kernel, sh)
	f, a, err := b.function(impl, kernel, warps)
	if err != nil {
		return err
	}
	if a.Takes(paramLimit) && a.Takes(paramMailbox) {
		vals[paramLimit], vals[paramMailbox] = uint64(b.waitLimit.Nanoseconds()), b.mail.dev
	}
	named, err := namedArgs(a, vals)
	if err != nil {
		return err
	}
	args, err := a.Args(named...)
	if err != nil {
		return err
	}
	dim.Block, dim.Shared = uint32(a.BlockThreads), uint32(a.Shared)
	if dim.Block == 0 {
		dim.Block = uint32(32 * warps)
	}
	if err := f.Launch(st, dim, args, a.Cooperative); err != nil {
		return b.explain(fmt.Errorf("%s/%s: %w", impl, kernel, err))
	}
	if kernel != b.ran.kernel {
		b.ran.kernel, b.ran.kernels = kernel, b.ran.kernels+1
	}
	return nil
}

// userTypedKernel is impl's kernel of op for dtype (pkg/kernels' table: one per
// element type, as all-gather-matmul's and get-add's); the error says which types it
// has and under which key the missing one is built.
func userTypedKernel(impl backend.Impl, op ops.Op, dtype string) (string, error) {
	var have []string
	key := string(op)
	for _, k := range kernels.UserKernels() {
		if k.Op != string(op) {
			continue
		}
		if k.DType == ops.Canonical(dtype) {
			key = k.Key
		}
		if !slices.Contains(impl.Kernels[op], k.Kernel) {
			continue
		}
		if k.DType == ops.Canonical(dtype) {
			return k.Kernel, nil
		}
		have = append(have, k.DType)
	}
	return "", setting.Errorf("%s %s %s has kernels of %v, not of %s: give %s %s, or build its kernel of %s (SYMMEM_KERNELS key %q)",
		op, setting.Impl, impl.Name, have, dtype, setting.DType, strings.Join(have, " or "), dtype, key)
}

// userSteps are the launches of a user's fused kernel of each operation on b's rank,
// in order (pkg/kernels: agMatmulParams, mrsMatmulParams): the values each takes
// beside userMatmulVals', nil for a barrier of every rank (NVSHMEM's on the stream,
// which completes the puts before it). all-gather-matmul: once per peer (on one rank,
// once, to itself); its puts are complete after the next quiet. matmul-reduce-scatter:
// a barrier (a peer may still be summing its slots of the last call), step 0 once per
// peer with this rank last (so that its own slot is free to stage in before), a barrier
// (every slot has landed), step 1 on its own slots.
var userSteps = map[ops.Op]func(b *Backend, f backend.Fused) []map[string]uint64{
	ops.AllGatherMatmul: func(b *Backend, f backend.Fused) []map[string]uint64 {
		var out []map[string]uint64
		for i := range max(b.size-1, 1) {
			out = append(out, map[string]uint64{"peer": uint64((b.rank + 1 + i) % b.size)})
		}
		return out
	},
	ops.MatmulReduceScatter: func(b *Backend, f backend.Fused) []map[string]uint64 {
		launch := func(peer, step int) map[string]uint64 {
			return map[string]uint64{"scratch_ptr": b.addr(f.Scratch), "peer": uint64(peer), "ranks": uint64(b.size), "step": uint64(step)}
		}
		out := []map[string]uint64{nil}
		for i := range b.size {
			out = append(out, launch((b.rank+1+i)%b.size, 0))
		}
		return append(out, nil, launch(b.rank, 1))
	},
}

// userFusedOps are the operations a user's fused kernel may serve (userSteps' keys).
func userFusedOps() []string {
	var out []string
	for op := range userSteps {
		out = append(out, string(op))
	}
	slices.Sort(out)
	return out
}

// userMatmulVals are the values every launch of a user's fused kernel of f takes: its
// matrices, its shape with rows a rank, row-major strides in elements, and this rank.
func (b *Backend) userMatmulVals(f backend.Fused) map[string]uint64 {
	mm := f.Shape
	return map[string]uint64{"a_ptr": b.addr(f.A), "b_ptr": b.addr(f.B), "c_ptr": b.addr(f.C), "m_local": uint64(mm.M / b.size),
		"n": uint64(mm.N), "k": uint64(mm.K), "stride_am": uint64(mm.K), "stride_ak": 1, "stride_bk": uint64(mm.N),
		"stride_bn": 1, "stride_cm": uint64(mm.N), "stride_cn": 1, "rank": uint64(b.rank)}
}

// fused queues f as the user's kernel of its operation and element type, its launches
// and barriers userSteps', each launch on a grid of row blocks by column blocks of its
// tile.
func (userImpl) fused(b *Backend, impl backend.Impl, f backend.Fused, l backend.Launch, st stream) error {
	if b.drop {
		return setting.Errorf("%s %s %s: the drop fault cannot reach into a user's kernel: use %s %s", f.Op, setting.Impl, impl.Name, setting.Impl, implTriton)
	}
	if err := b.noFusedFault(impl, f); err != nil {
		return err
	}
	steps, ok := userSteps[f.Op]
	if !ok {
		return setting.Errorf("%s %s: a user's fused kernels serve %s, not %s: use %s %s",
			setting.Impl, impl.Name, strings.Join(userFusedOps(), " and "), f.Op, setting.Impl, implTriton)
	}
	kernel, err := userTypedKernel(impl, f.Op, f.DType)
	if err != nil {
		return err
	}
	sh := Shape{Warps: b.builtWarps(impl.Name, kernel, launchWarps(kernel, 0, Shape{Warps: l.Warps}, l), l)}
	_, a, err := b.function(impl.Name, kernel, sh.Warps)
	if err != nil {
		return err
	}
	tile, err := tileOf(a)
	if err != nil {
		return err
	}
	dim := cuda.Dim{Grid: uint32(cdiv(f.Shape.M/b.size, tile[0])), GridY: uint32(cdiv(f.Shape.N, tile[1]))}
	vals := b.userMatmulVals(f)
	for _, step := range steps(b, f) {
		if step == nil {
			b.lib.BarrierOnStream(st)
			continue
		}
		if err := b.launchNamed(st, impl.Name, kernel, sh, dim, withVals(vals, step)); err != nil {
			return err
		}
	}
	return nil
}

// withVals is a copy of vals with more's values too.
func withVals(vals, more map[string]uint64) map[string]uint64 {
	out := maps.Clone(vals)
	maps.Copy(out, more)
	return out
}
