package gpu

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// The collectives of the triton implementation (kernels/triton/symmem_collectives.py)
// and of the copy engine. The triton kernels meet the same block of every other rank
// at two barriers that count up in a small symmetric area past the heap (syncArea): a
// row of pad words per block, one per rank, then one state word per block.
const (
	kReduceBF16 = "reduce_bf16" // send, recv, count, chunk, in_off, out_off, push, extra, pad, state, me, n
	kReduceF32  = "reduce_f32"
	// kStaged is two-shot all-reduce of bf16 that only writes across the links: send,
	// recv, scratch, nelem, shard, chunk, sub, pad, state, me, n.
	kStaged = "reduce_staged_bf16"
	kPush   = "push" // send, recv, nbytes, chunk, src_stride, dst_off, root, pad, state, me, n
	// kPushBF16 and kPushF32 are one-shot all-reduce for small messages, which waits
	// once: send, recv, area, cap, nelem, chunk, deliver, pad, state, me, n.
	kPushBF16 = "reduce_push_bf16"
	kPushF32  = "reduce_push_f32"
	// kLLBF16 and kLLF32 are one-shot all-reduce for the smallest messages, in LL form:
	// send, recv, area, cap, nwords, chunk, deliver, pad, state, me, n.
	kLLBF16 = "reduce_ll_bf16"
	kLLF32  = "reduce_ll_f32"
	// kLL128BF16 and kLL128F32 are one-shot all-reduce of mid-sized messages in LL128
	// form (128-byte lines of 120 bytes of data and a flag): send, recv, area, cap,
	// nwords (8-byte words), chunk (lines a block), deliver, pad, state, me, n.
	kLL128BF16 = "reduce_ll128_bf16"
	kLL128F32  = "reduce_ll128_f32"
	// kPushLL is all-gather, broadcast and all-to-all of small messages in LL form: send,
	// recv, area, cap, nwords, chunk, src_stride, dst_stride, root, deliver, pad, state,
	// me, n.
	kPushLL = "push_ll"
	// kBarrier is the copy-engine collectives' barrier on the stream, a triton kernel
	// of one block (of one warp, as its manifest says): pad, state, me, n.
	kBarrier    = "barrier"
	implBarrier = "triton"

	// MaxCollBlocks bounds the grid of a collective kernel: every block of every rank
	// must be resident at once (they wait for each other), and the sync area has a row
	// per block.
	MaxCollBlocks = 128
	// collVector is the alignment the reduce kernels' addresses keep (16-byte vectors).
	collVector = 16
	// reduceElems is how many elements a reduce kernel's block handles per step, per warp
	// (BLOCK in symmem_collectives.py: 16 per thread).
	reduceElems = 512
	// pushPerBlock is the default share of one block of the push kernel: 1 MiB all-gathers
	// get 16 blocks, 4 MiB and more the whole 128.
	pushPerBlock = 32 << 10
	// besideMin is the least own block the push collectives copy on a side stream, beside
	// the kernel; smaller ones go on the kernel's stream, before it.
	besideMin = 8 << 20

	// The one-shot push all-reduce (reduce_push_*) stages each block's part in an area of
	// the sync area: 2 halves of size slots of pushCap(size) bytes per block, for up to
	// pushBlocks blocks, on jobs of up to pushRanks ranks, pushBudget bytes a rank in all
	// (2 ranks: 128 KiB slots, all-reduces up to 16 MiB; 8 ranks: 32 KiB, 4 MiB). By
	// default a block takes pushShare bytes with pushWarps warps (1 MiB: 128 blocks),
	// which spreads the puts and the sums over more SMs than 32 blocks of 32 KiB did;
	// --blocks and --warps choose others, up to a slot a block.
	pushBudget = 64 << 20
	pushBlocks = MaxCollBlocks
	pushRanks  = 8
	pushShare  = 8 << 10
	pushWarps  = 8
	// pushAuto is the most a rank puts to each peer with the push kernel unless --algo
	// says, on 2 ranks (the whole input of a one-shot all-reduce, a block of a staged
	// reduce-scatter; larger ones fit, up to pushBlocks x pushCap(size), with --algo);
	// pushAutoMany on more, where one-shot sends each rank's whole input to n-1 peers
	// against two-shot's 2(n-1)/n of it.
	pushAuto     = 4 << 20
	pushAutoMany = 512 << 10

	// The LL all-reduce (reduce_ll_*) for the smallest messages: blocks of llWords
	// 32-bit words (LL_WORDS in symmem_collectives.py), each sent as 8 bytes with its
	// flag, in areas of 2 halves of size slots of llWords*8 bytes per block, for up to
	// llBlocks blocks (64 KiB), past the push areas; up to llAuto unless --algo or
	// EnvLL says otherwise, with llWarps warps unless --warps says.
	llWords  = 256
	llBlocks = 64
	llWarps  = 4
	llAuto   = 64 << 10
	// EnvLL turns the LL kernels off (0), LL128's too, for comparing them with the push
	// kernels.
	EnvLL = "SYMMEM_LL"

	// The LL128 all-reduce (reduce_ll128_*): 128-byte lines of ll128Data bytes of data
	// and an 8-byte flag, 16 lines a warp per pass (LL128_LINES_PER_WARP in
	// symmem_collectives.py), ll128Warps warps unless --warps says, in areas of 2
	// halves of size-1 slots (one per peer) of ll128Cap(size) bytes per block for
	// MaxCollBlocks blocks past push_ll's, ll128Budget bytes a rank in all (2 ranks:
	// slots of 1152 lines, all-reduces up to 16.9 MiB; 8 ranks: 164 lines, 2.4 MiB). A
	// block takes at least ll128MinLines lines, so small messages spread over fewer
	// blocks. It runs the all-reduces above the LL kernel's llAuto up to ll128Auto,
	// unless EnvLL128 says otherwise.
	ll128Line     = 128
	ll128Data     = 120
	ll128Warps    = 8
	ll128MinLines = 8
	// EnvLL128 is "0" (LL128 off), "1" (LL128 wherever it fits, the LL kernel's sizes
	// included: for measuring it) or unset (the sizes above).
	EnvLL128 = "SYMMEM_LL128"
	// The copy-engine broadcast copies the root's own part with the sm_store kernel of
	// defaultOwnBlocks blocks (localCopy) beside the copy engine's copy to the peers,
	// all-gather and all-to-all with the copy engine, unless EnvCopyOwn says "copy"
	// (the copy engine for all), "sm" (the kernel's own grid for all) or "sm:K" (K
	// blocks for all). On two H200s (256 MiB broadcast, one copy engine to the peer):
	// the copy engine 704 us, the kernel's full grid 715, 4 blocks 1395 (the own copy
	// the slowest), 8 blocks 707, 16 and 32 blocks 700 (docs/benchmarks.md);
	// all-gather of 512 MiB with the copy engine 714 us, the full
	// grid 719; 32 blocks not measured there, so they keep the copy engine.
	defaultOwnBlocks = 32
	ownDefault       = -2 // EnvCopyOwn unset: ownKernel decides by op
	EnvCopyOwn       = "SYMMEM_COPY_OWN"
	// push_ll (all-gather, broadcast, all-to-all in LL form) moves up to llPushWords
	// words a block, in areas of 2 halves of size slots of llPushWords*8 bytes per
	// block for MaxCollBlocks blocks past reduce_ll's: up to llPushMax bytes to each
	// peer (4 MiB of areas a rank on 2 ranks).
	llPushWords = 1024
	llPushMax   = 512 << 10

	// The two-shot all-reduce runs at most stagedWarps warps up to stagedNarrow bytes
	// unless --warps says: on two H200s (docs/benchmarks.md) 16 warps took
	// 55.39 us at 16 MiB against 57.85 with 32, while 32 were faster at 64 MiB (192
	// against 194 us) and 256 MiB (744 against 750).
	stagedWarps  = 16
	stagedNarrow = 16 << 20

	// defaultStagedSteps is how many steps the two-shot all-reduce splits each block's
	// chunk into, unless EnvStagedSteps says (a tuning knob; every rank must agree). On
	// two H200s more steps did not pay (docs/benchmarks.md, 16 MiB with 16 warps: 1 step
	// 55.39 us, 2 steps 57.35, 4 62.68, 8 62.66; 256 MiB within 1% either way): the
	// barrier per step costs more than the overlap saves.
	defaultStagedSteps = 1
	EnvStagedSteps     = "SYMMEM_STAGED_STEPS"
)

// kernelColl says whether impl runs the collective or fused op with its own kernels,
// which meet at the sync area's barriers (the registry lists none for NCCL's and the
// copy engine's collectives).
func kernelColl(impl backend.Impl, op ops.Op) bool {
	return !impl.User && (op.IsCollective() || op.Family() == ops.FamilyFused) && len(impl.Kernels[op]) > 0
}

// reduceKernel is the reduce kernel for an element type.
func reduceKernel(impl string, op ops.Op, dtype string) (string, error) {
	switch ops.Canonical(dtype) {
	case "bf16":
		return kReduceBF16, nil
	case "float32":
		return kReduceF32, nil
	}
	return "", setting.Errorf("%s %s %s sums bf16 and float32, not %s: use %s bf16 or float32, or %s %s", op, setting.Impl, impl, dtype, setting.DType, setting.Impl, implNCCL)
}

// algorithm is the all-reduce algorithm the triton implementation runs for c with l,
// unless --algo says: one-shot where the push kernel takes it, up to pushAuto
// (one wait instead of two barriers), two-shot above (bf16: writes only across the
// links). On two H200s (docs/benchmarks.md) one-shot push took 10.55 us at
// 1 MiB (two-shot 15.92), 13.58 at 2 MiB (16.83), 20.69 at 4 MiB (22.31), 34.57 at
// 8 MiB (34.53) and 71.49 at 16 MiB (56.46): the local sum of every rank's whole
// input catches up with the link's savings past 4 MiB. On four H200s
// one-shot push took 14.61 us at 512 KiB (NCCL 14.46) but 50.20 at 4 MiB (NCCL 39.75),
// where two-shot took 282.6 GB/s busbw at 16 MiB against NCCL's 258.8.
// Reduce-scatter likewise: staged (reduce_push with a stride) while a rank's block is
// at most pushAuto (pushAutoMany), pull above; on two H200s staged took 8.0 us at
// 1 MiB against 13.3-13.9 pulling, 20.5 at 8 MiB against 25.2 (docs/results/reducescatter-h200x2.json).
// Where LL128 runs (ll128Use: by size up to ll128Auto, or SYMMEM_LL128=1 wherever it
// fits) the all-reduce is one-shot at any size: on 2 ranks it sends each input across
// once, as two-shot does, without two-shot's barrier between its phases.
func (b *Backend) algorithm(c backend.Collective, l backend.Launch) string {
	if c.Algo != "" {
		return c.Algo
	}
	auto := int64(pushAuto)
	if b.size > 2 {
		auto = pushAutoMany
	}
	small := pushFits(c, b.size) && pushBytes(c, b.size) <= auto
	switch {
	case c.Op == ops.ReduceScatter && small && b.pushGridFits(c, l): // not with --blocks too few for the slots
		return ops.Staged
	case c.Op == ops.ReduceScatter:
		return ops.Pull
	case small:
		return ops.OneShot
	case c.Op == ops.AllReduce:
		// LL128 sends each input across once, as two-shot does, in one launch without
		// a barrier. (A failed NVLink probe is Collective's to report.)
		if ll128, _ := b.ll128Use(c, l); ll128 {
			return ops.OneShot
		}
	}
	return ops.TwoShot
}

// collGrid splits span units (elements, or bytes for push) into blocks of chunk units,
// chunk a multiple of unit; the grid is the same on every rank, as the kernels' barriers
// pair blocks across ranks. By default a block takes about perBlock units, with at most
// MaxCollBlocks blocks; the reduce kernels ask for one step a block, as a small sum is
// bound by the latency of a remote load and each block should wait for one only.
func collGrid(span, unit, perBlock int64, l backend.Launch) (blocks int, chunk int64, err error) {
	if l.Blocks > MaxCollBlocks {
		return 0, 0, setting.Errorf("%s %d: collective kernels run at most %d blocks (each waits for the same block on every rank, so all must fit on the GPU at once)", setting.Blocks, l.Blocks, MaxCollBlocks)
	}
	blocks = l.Blocks
	if blocks == 0 {
		blocks = int(min(max((span+perBlock-1)/perBlock, 1), MaxCollBlocks))
	}
	chunk = backend.Align(max((span+int64(blocks)-1)/int64(blocks), 1), unit)
	return int(max((span+chunk-1)/chunk, 1)), chunk, nil
}

// stagedSteps splits a block's chunk of the two-shot all-reduce (elements, a multiple
// of step, the kernel's BLOCK) into steps of sub elements, whole BLOCKs each: as many
// as b.steps asks (SYMMEM_STAGED_STEPS, default defaultStagedSteps) and the chunk has
// BLOCKs. Every rank computes the same.
func (b *Backend) stagedSteps(chunk, step int64) (sub int64, steps int) {
	k := max(min(int64(b.steps), chunk/step), 1)
	sub = backend.Align((chunk+k-1)/k, step)
	return sub, int((chunk + sub - 1) / sub)
}

// syncWords are the addresses of the barrier words in the sync area: a row of one pad
// word per rank for each block, then one state word per block (the phases the block's
// barriers reached: every phase counted there is announced in the peers' pad words).
// Past them, one more word per block counts the block's launches of the LL kernels,
// which announce nothing: their words carry the count as their flag.
func (b *Backend) syncWords() (pad, state uint64) {
	pad = uint64(b.sync)
	return pad, pad + uint64(MaxCollBlocks*b.size*8)
}

// ensureSync zeroes the barrier words and waits for every rank to have done so, once,
// before the first collective kernel: no peer may announce a phase into words that
// are about to be cleared.
func (b *Backend) ensureSync() error {
	if b.syncReady {
		return nil
	}
	if err := b.main.Synchronize(); err != nil {
		return err
	}
	// The words, the LL areas (a word there counts as arrived when its flag matches:
	// no leftover may) and a user's kernels' signal words. The push staging areas between them are read only where this
	// launch's puts wrote.
	if err := b.dev.Zero(uint64(b.sync), uint64(pushAreaOff(b.size))); err != nil {
		return err
	}
	if err := b.dev.Zero(uint64(b.sync)+uint64(llAreaOff(b.size)), uint64(userSigOff(b.size)+userSigArea(b.size)-llAreaOff(b.size))); err != nil {
		return err
	}
	b.lib.BarrierAll()
	b.syncReady = true
	return nil
}

// pushReduce launches reduce_push for c: count elements each rank sums, the parts for
// different ranks stride elements apart in the input (all-reduce 0: every rank sums
// all of it; reduce-scatter a block). Under the drop fault it puts nothing. false: the
// grid does not fit the staging slots (--blocks too few), and nothing was launched.
func (b *Backend) pushReduce(st stream, impl, kernel string, c backend.Collective, l backend.Launch, sh Shape, recv backend.Buffer,
	count, stride int64) (bool, error) {
	pk := kPushBF16
	if kernel == kReduceF32 {
		pk = kPushF32
	}
	sh.Warps = launchWarps(pk, c.Bytes, sh, l)
	blocks, chunk, ok, err := b.pushGrid(c, l, sh, count)
	if !ok || err != nil {
		return false, err
	}
	deliver := uint64(1)
	if b.drop {
		deliver = 0
	}
	pad, state := b.syncWords()
	return true, b.launchRed(st, impl, pk, sh, blocks, b.reduceWith(c), b.addr(c.Send), b.addr(recv), pad+uint64(pushAreaOff(b.size)),
		uint64(pushCap(b.size)), uint64(count), uint64(chunk), uint64(stride), deliver, pad, state, uint64(b.rank), uint64(b.size))
}

// pushGrid is the push kernel's grid for count elements a rank sums on grid sh; ok:
// every block's part fits a staging slot.
func (b *Backend) pushGrid(c backend.Collective, l backend.Launch, sh Shape, count int64) (blocks int, chunk int64, ok bool, err error) {
	elem := ops.ElemSize(c.DType)
	blocks, chunk, err = collGrid(count, collVector/elem, min(int64(reduceElems*sh.Warps), pushShare/elem), l)
	return blocks, chunk, err == nil && blocks <= pushBlocks && chunk*elem <= pushCap(b.size), err
}

// pushGridFits says whether the push kernel's grid for c with l fits its staging
// slots (pushGrid, with the warps the launch would take).
func (b *Backend) pushGridFits(c backend.Collective, l backend.Launch) bool {
	sh := ShapeFor(c.Bytes, l)
	sh.Warps = launchWarps(kPushBF16, c.Bytes, sh, l)
	_, _, ok, _ := b.pushGrid(c, l, sh, pushBytes(c, b.size)/max(ops.ElemSize(c.DType), 1))
	return ok
}

// pushPlan says what a collective that only moves bytes sends: nbytes from Send +
// q*stride to Recv + dstOff on every rank q, by every rank or (root >= 0) by root only.
func pushPlan(c backend.Collective, n, me int64) (nbytes, stride, dstOff int64, root int64) {
	switch c.Op {
	case ops.AllGather:
		return c.Bytes / n, 0, me * (c.Bytes / n), -1
	case ops.AllToAll:
		return c.Bytes / n, c.Bytes / n, me * (c.Bytes / n), -1
	}
	return c.Bytes, 0, 0, int64(c.Root) // broadcast
}

// localCopy copies j within this GPU with the sm_store kernel of blocks blocks (0: its
// own grid): SM loads and stores, which leave the copy engines to the copies across
// the links.
func (b *Backend) localCopy(st stream, j copyJob, blocks int) error {
	sh := ShapeFor(j.n, backend.Launch{Blocks: blocks})
	return b.launch(st, implSMStore, kStore, sh, sh.Blocks, j.dst, j.src, uint64(j.n), uint64(sh.Chunk))
}

// ownKernel is how many blocks copy op's own part with the sm_store kernel (0: its
// own grid), or -1 where the copy engine copies it.
func (b *Backend) ownKernel(op ops.Op) int {
	if b.ownBlocks != ownDefault {
		return b.ownBlocks
	}
	if op == ops.Broadcast {
		return defaultOwnBlocks
	}
	return -1
}

// ownLane is the side stream a copy-engine collective's own part runs on: past those
// copyAll takes, with fork and join events of its own.
const ownLane = MaxCopyStreams

// ownSide queues work on the own part's side stream, after what st holds so far;
// ownJoin makes st wait for it.
func (b *Backend) ownSide(st stream, work func(side stream) error) error {
	if err := b.sideStreams(ownLane + 1); err != nil {
		return err
	}
	if err := b.fork[ownLane].Record(st); err != nil {
		return err
	}
	if err := b.side[ownLane].Wait(b.fork[ownLane]); err != nil {
		return err
	}
	return work(b.side[ownLane])
}

// ownJoin makes st wait for the work ownSide queued.
func (b *Backend) ownJoin(st stream) error {
	if err := b.join[ownLane].Record(b.side[ownLane]); err != nil {
		return err
	}
	return st.Wait(b.join[ownLane])
}

// streamBarrier queues the barrier kernel on st: every rank's work queued before it
// on st (copies included) has ended, on every rank, once it ends. It waits like the
// collective kernels: past the wait limit it names the peer that did not come.
func (b *Backend) streamBarrier(st stream) error {
	if err := b.ensureSync(); err != nil {
		return err
	}
	pad, state := b.syncWords()
	return b.launch(st, implBarrier, kBarrier, Shape{Blocks: 1}, 1, pad, state,
		uint64(b.rank), uint64(b.size))
}
