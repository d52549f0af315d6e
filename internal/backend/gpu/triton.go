package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// triton is symmem's own collective kernels (the registry's "triton"): the reduce
// kernels (one-shot pull and push, two-shot, staged, LL, LL128) for all-reduce and
// reduce-scatter, push and push_ll for all-gather, broadcast and all-to-all, the
// MoE kernels for dispatch and combine (moe.go), and the fused matrix products
// (fused.go).
type triton struct{ nvshmemKernels }

var _ interface {
	mover
	signaller
	pinger
	collective
	chooser
	preloader
	ownKernel
	fuser
} = triton{}

// implTriton names symmem's own kernels in the registry.
const implTriton = "triton"

// What triton serves, with which kernels and reduction operators, is what the manifests
// of kernels/triton's modules say (triton's signal_op serves nothing: its signal
// operation runs once per thread, not a block's, so signal is cuda's until it is).
var _ = registerImpl(backend.Impl{Name: implTriton, Summary: "prebuilt Triton kernels calling NVSHMEM device functions",
	BlockAlign: map[ops.Op]int64{ops.ReduceScatter: 16}}, triton{})

func (triton) ownKernel() {}

func (triton) home() home { return onHeap }

// reach: its collective and fused kernels load and store through the peers' mappings;
// the point-to-point ones call NVSHMEM.
func (triton) reach(impl backend.Impl, op ops.Op) reach {
	if kernelColl(impl, op) {
		return byMapping
	}
	return byCalls
}

// preload: the collective kernels' sync area where they run op, and the kernels.
func (triton) preload(b *Backend, impl backend.Impl, op ops.Op, n int64, l backend.Launch) error {
	return preloadColl(b, impl, op, n, l, kernelColl(impl, op))
}

// algorithm is what run picks for c: algorithm for the reductions, combineAlgorithm for
// combine (an --algo it refuses is returned as asked, and run says why).
func (triton) algorithm(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch) string {
	switch {
	case c.Op.Routed() && c.Op.Reduces():
		if a, err := combineAlgorithm(impl.Name, c); err == nil {
			return a
		}
	case c.Op.Reduces() && !c.Op.Routed():
		return b.algorithm(c, l)
	}
	return c.Algo
}

// run queues c as triton's collective kernels on st. Under the drop fault every output
// this rank writes (into its own Recv or a peer's) goes to the same place in Scratch
// instead.
func (triton) run(b *Backend, impl backend.Impl, c backend.Collective, l backend.Launch, st stream) error {
	// The kernels share one set of barrier words: two collectives in flight on two
	// lanes would meet each other's phases.
	if l.Lane != 0 {
		return setting.Errorf("%s %s runs collectives on one stream only (lane %d asked)", setting.Impl, impl.Name, l.Lane)
	}
	// They reach every peer through its nvshmem_ptr mapping, and tell Triton their
	// addresses are whole 16-byte vectors.
	if err := b.allMapped(c.Op, impl.Name); err != nil {
		return err
	}
	for _, buf := range []backend.Buffer{c.Send, c.Recv, c.Scratch} {
		if b.addr(buf)%collVector != 0 {
			return setting.Errorf("%s %s %s: buffer at heap offset %d is not %d-byte aligned", c.Op, setting.Impl, impl.Name, buf.Off, collVector)
		}
	}
	if err := b.ensureSync(); err != nil {
		return err
	}
	recv := c.Recv
	if b.drop {
		recv = c.Scratch
	}
	pad, state := b.syncWords()
	llState := state + MaxCollBlocks*8
	sh := ShapeFor(c.Bytes, l)
	k := tritonCall{b: b, impl: impl, c: c, l: l, st: st, sh: sh, recv: recv, pad: pad, state: state, llState: llState}
	switch {
	case c.Op.Routed():
		return b.moeCollective(impl.Name, c, l, st, sh, recv, pad, state)
	case c.Op.Reduces():
		return k.reduce()
	}
	return k.push()
}

// tritonCall is one collective run queues: what its kernels are launched with.
type tritonCall struct {
	b                   *Backend
	impl                backend.Impl
	c                   backend.Collective
	l                   backend.Launch
	st                  stream
	sh                  Shape
	recv                backend.Buffer
	pad, state, llState uint64
}

// reduce queues all-reduce or reduce-scatter: the algorithm (algorithm, or --algo) and
// the size pick one of the reduce kernels. It is one function, past 80 lines, because
// its cases share the shard, the staged steps and the grid computed at its top.
func (k tritonCall) reduce() error {
	b, impl, c, l, st, sh, recv, pad, state, llState := k.b, k.impl, k.c, k.l, k.st, k.sh, k.recv, k.pad, k.state, k.llState
	n, me := int64(b.size), int64(b.rank)
	kernel, err := reduceKernel(impl.Name, c.Op, c.DType)
	if err != nil {
		return err
	}
	elem := ops.ElemSize(c.DType)
	nelem := c.Bytes / elem
	var span, count, inOff, outOff int64
	push, extra := uint64(0), uint64(0)
	// The two-shot shard: whole vectors, so the last ranks' may be short or empty.
	shard := backend.Align((nelem+n-1)/n, 64)
	algo := b.algorithm(c, l) // once: small operations are bound by the host
	stages := c.Op == ops.AllReduce && algo == ops.TwoShot && kernel == kReduceBF16 &&
		c.Scratch.Size >= n*shard*elem
	ll128 := false
	if c.Op == ops.AllReduce {
		if ll128, err = b.ll128Use(c, l); err != nil {
			return err
		}
		ll128 = ll128 && algo == ops.OneShot
	}
	var sub int64
	var steps int
	if stages {
		// The staged kernel's warps and steps, on every rank, a dropping one included
		// (it launches the pull kernel with the same grid and as many barriers).
		sh.Warps = launchWarps(kStaged, c.Bytes, sh, l)
		step := int64(reduceElems * sh.Warps)
		_, chunk, err := collGrid(shard, step, step, l)
		if err != nil {
			return err
		}
		sub, steps = b.stagedSteps(chunk, step)
	}
	switch {
	case c.Op == ops.ReduceScatter:
		// The registry's alignment (backend.Impl.BlockAlign), which run and bench
		// check before any rank starts.
		if a := impl.BlockAlign[c.Op]; !impl.Holds(c.Op, c.Bytes/n, int(n)) {
			return setting.Errorf("reduce-scatter %s %s moves %d-byte vectors: each rank's block (%d bytes) must be a multiple of %d; use a size that is a multiple of %d, or %s %s",
				setting.Impl, impl.Name, a, c.Bytes/n, a, a*n, setting.Impl, implNCCL)
		}
		switch algo {
		case ops.Staged:
			// Small: every rank puts each peer's block of its input into that peer's
			// staging area, waits once, and sums its own block locally.
			if !pushFits(c, b.size) {
				return setting.Errorf("reduce-scatter %s %s %s %s stages each rank's block (%d bytes) in areas of %d: use %s %s",
					setting.Impl, impl.Name, setting.Algo, ops.Staged, c.Bytes/n, pushBlocks*pushCap(b.size), setting.Algo, ops.Pull)
			}
			if ok, err := b.pushReduce(st, impl.Name, kernel, c, l, sh, recv, nelem/n, nelem/n); ok || err != nil {
				return err
			}
			return setting.Errorf("reduce-scatter %s %s %s %s: %s %d leave more than a staging slot (%d bytes) to a block: use more blocks, or %s %s",
				setting.Impl, impl.Name, setting.Algo, ops.Staged, setting.Blocks, l.Blocks, pushCap(b.size), setting.Algo, ops.Pull)
		case ops.Pull:
		default:
			return setting.Errorf("%s %s: %s %s runs reduce-scatter as %s or %s", setting.Algo, c.Algo, setting.Impl, impl.Name, ops.Staged, ops.Pull)
		}
		span, count, inOff = nelem/n, nelem/n, me*(c.Bytes/n)
	case ll128:
		// Mid-sized: 128-byte lines, each with its flag, stored whole by a warp; no
		// fence and no barrier. Under the drop fault the lines carry zero data.
		lk := kLL128BF16
		if kernel == kReduceF32 {
			lk = kLL128F32
		}
		sh.Warps = launchWarps(lk, c.Bytes, sh, l)
		blocks, chunk := ll128Grid(ll128Lines(c.Bytes))
		deliver := uint64(1)
		if b.drop {
			deliver = 0
		}
		return b.launchRed(st, impl.Name, lk, sh, blocks, b.reduceWith(c), b.addr(c.Send), b.addr(recv),
			uint64(pad)+uint64(ll128AreaOff(b.size)), uint64(ll128Cap(b.size)), uint64(c.Bytes/8), uint64(chunk), deliver, pad,
			llState, uint64(me), uint64(n))
	case algo == ops.OneShot && b.llFits(c, b.size) && c.Bytes <= llAuto && l.Blocks == 0:
		// The smallest: LL words, one 8-byte store each with its flag, no fence and
		// no barrier. Under the drop fault the words carry zero data.
		lk := kLLBF16
		if kernel == kReduceF32 {
			lk = kLLF32
		}
		sh.Warps = launchWarps(lk, c.Bytes, sh, l)
		nwords := c.Bytes / 4
		deliver := uint64(1)
		if b.drop {
			deliver = 0
		}
		return b.launchRed(st, impl.Name, lk, sh, int((nwords+llWords-1)/llWords), b.reduceWith(c), b.addr(c.Send), b.addr(recv),
			uint64(pad)+uint64(llAreaOff(b.size)), uint64(llWords*8), uint64(nwords), uint64(llWords), deliver, pad, llState,
			uint64(me), uint64(n))
	case algo == ops.OneShot && pushFits(c, b.size):
		// Small: each block puts its part into its slot of the peers' staging areas,
		// waits once, and sums locally.
		if ok, err := b.pushReduce(st, impl.Name, kernel, c, l, sh, recv, nelem, 0); ok || err != nil {
			return err
		}
		span, count = nelem, nelem // --blocks too few for the slots: the one-shot pull kernel
	case algo == ops.OneShot:
		span, count = nelem, nelem
	case stages && !b.drop:
		// Every rank puts its part of shard q into slot me of rank q's scratch, then
		// sums its own shard from local memory and stores it everywhere: writes
		// only cross the links, in steps whose puts overlap the sums of the step
		// before. (Under the drop fault the output goes to scratch, where this
		// kernel stages: the rank runs the two-shot kernel below instead, which
		// stages nothing, computes the same sums and meets as many barriers.)
		step := int64(reduceElems * sh.Warps)
		blocks, chunk, err := collGrid(shard, step, step, l)
		if err != nil {
			return err
		}
		return b.launchRed(st, impl.Name, kStaged, sh, blocks, b.reduceWith(c), b.addr(c.Send), b.addr(recv), b.addr(c.Scratch), uint64(nelem),
			uint64(shard), uint64(chunk), uint64(sub), pad, state, uint64(me), uint64(n))
	case algo == ops.TwoShot:
		// Each rank sums its shard of every input and stores it everywhere.
		span = shard
		count = min(max(nelem-me*span, 0), span)
		inOff, outOff, push = me*span*elem, me*span*elem, 1
		if stages { // the drop fault: as many barriers as the peers' steps
			extra = uint64(steps - 1)
		}
	default:
		return setting.Errorf("%s %s: %s %s runs all-reduce as %s or %s", setting.Algo, c.Algo, setting.Impl, impl.Name, ops.OneShot, ops.TwoShot)
	}
	step := int64(reduceElems * sh.Warps)
	blocks, chunk, err := collGrid(span, step, step, l)
	if err != nil {
		return err
	}
	return b.launchRed(st, impl.Name, kernel, sh, blocks, b.reduceWith(c), b.addr(c.Send), b.addr(recv), uint64(count), uint64(chunk),
		uint64(inOff), uint64(outOff), push, extra, pad, state, uint64(me), uint64(n))
}

// push queues all-gather, broadcast or all-to-all: push_ll for small parts, else the
// push kernel driving the links while the copy engine moves the rank's own part.
func (k tritonCall) push() error {
	b, impl, c, l, st, sh, recv, pad, state, llState := k.b, k.impl, k.c, k.l, k.st, k.sh, k.recv, k.pad, k.state, k.llState
	n, me := int64(b.size), int64(b.rank)
	// The kernel drives the links; the rank's own part goes by the copy engine on a
	// side stream at the same time.
	nbytes, stride, dstOff, root := pushPlan(c, n, me)
	// A broadcast's peers hear only from the root: on more than 2 ranks a peer could
	// then start its next LL launch while another still reads the same area half
	// (the halves' argument needs every rank to hear from every peer in every LL
	// launch), so broadcast takes push_ll on 2 ranks only.
	if b.llPushFits(nbytes, l) && (root < 0 || n == 2) {
		// Small: LL words straight into the peers' areas, no barrier, and the own
		// part copied by the same kernel: one launch.
		words := nbytes / 4
		blocks := min((words+llWords-1)/llWords, MaxCollBlocks)
		chunk := backend.Align((words+blocks-1)/blocks, llWords)
		dstStride := nbytes // all-gather, all-to-all: source r's part at r*nbytes
		if root >= 0 {
			dstStride = 0
		}
		deliver := uint64(1)
		if b.drop {
			deliver = 0
		}
		return b.launch(st, impl.Name, kPushLL, Shape{Warps: launchWarps(kPushLL, c.Bytes, sh, l)}, int((words+chunk-1)/chunk),
			b.addr(c.Send), b.addr(recv), uint64(pad)+uint64(llPushAreaOff(b.size)), uint64(llPushWords*8), uint64(words),
			uint64(chunk), uint64(stride), uint64(dstStride), uint64(root), deliver, pad, llState, uint64(me), uint64(n))
	}
	blocks, chunk, err := collGrid(nbytes, collVector, pushPerBlock, l)
	if err != nil {
		return err
	}
	var self []copyJob
	if root < 0 || root == me {
		self = []copyJob{{b.addr(recv) + uint64(dstOff), b.addr(c.Send) + uint64(me*stride), nbytes}}
	}
	if nbytes < besideMin && self != nil {
		// A small copy costs less queued before the kernel than a side stream's
		// fork and join.
		if err := st.CopyDtoDAsync(self[0].dst, self[0].src, uint64(nbytes)); err != nil {
			return err
		}
		self = nil
	}
	return b.copyAround(st, self, func() error {
		return b.launch(st, impl.Name, kPush, sh, blocks, b.addr(c.Send), b.addr(recv), uint64(nbytes), uint64(chunk),
			uint64(stride), uint64(dstOff), uint64(root), pad, state, uint64(me), uint64(n))
	})
}
