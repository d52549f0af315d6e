package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/internal/units"
)

// collectives are a sweep's buffers and data for collective operations.
type collectives struct {
	send, recv, scratch backend.Buffer
	// scratchAll is scratch with room for a guard after it; a measurement writes the
	// guard (what guard holds) right after the scratch it gives the implementation (all
	// of it, or for a user's kernel what it is promised) and checks it afterwards: an
	// implementation that writes past its scratch fails the row there instead of
	// reaching what lies beyond, unused scratch or the collectives' sync area at the
	// heap's end.
	scratchAll backend.Buffer
	routing    *coll.Routing
	data       map[dataKey]*coll.Data
	guard      []byte // what the guard after an output holds (coll.GuardByte)
}

// dataKey picks a measurement's check data: the element type and operator of a
// reduction (the zero key: bytes only moved).
type dataKey struct {
	dtype, redop string
}

// redOps are the operators op is measured with: the sweep's for an operation that
// takes one (ops.Op.TakesRedOp), the zero RedOp (no operator) for the others.
func (r *Runner) redOps(op ops.Op) []ops.RedOp {
	if !op.Takes(ops.RedOpSetting) {
		return []ops.RedOp{{}}
	}
	rs, _ := RedOps(r.S) // ValidateCollectives refused what does not parse
	return rs
}

// RedOps are the operators s measures its reductions with (sum where it names none).
func RedOps(s result.BenchSpec) ([]ops.RedOp, error) {
	return ops.ParseRedOps(strings.Join(s.RedOps, ","))
}

// redSuffix names red beside op in messages, where op takes an operator.
func redSuffix(op ops.Op, red ops.RedOp) string {
	if !op.Takes(ops.RedOpSetting) {
		return ""
	}
	return " --redop " + red.String()
}

// hasCollectives says whether the sweep measures any collective.
func hasCollectives(s result.BenchSpec) bool {
	return has(s, inArea(collArea))
}

// sized says yes for the collectives measured at the sweep's sizes (not at a MoE
// layer's).
func sized(e engine) bool { return e.area == collArea && !e.routed }

// hasMoE says whether the sweep measures dispatch or combine.
func hasMoE(s result.BenchSpec) bool {
	return has(s, func(e engine) bool { return e.routed })
}

// collectiveBytes is the most a rank's send or receive buffer of a collective holds:
// the largest size (all-gather's output, reduce-scatter's input) and the MoE layer's
// tokens and received copies.
func collectiveBytes(s result.BenchSpec, n int) (int64, error) {
	var most int64
	if has(s, sized) {
		most = s.MaxSize // the sizes are only the other collectives'
	}
	if hasMoE(s) {
		rt, err := routing(s, n)
		if err != nil {
			return 0, err
		}
		most = max(most, rt.Bytes(), rt.MaxSlots())
	}
	return most, nil
}

// scratchBytes is the scratch the sweep's collectives take beside outputs of up to
// most bytes: the most any of its implementations asks for (backend.Registry.ScratchBytes) for
// the largest size, or for dispatch and combine the layer's token buffer.
func scratchBytes(reg *backend.Registry, s result.BenchSpec, most int64, n int) int64 {
	out := most
	for _, name := range s.Ops {
		op := ops.Op(name)
		e := engineOf(op)
		if e.area != collArea {
			continue
		}
		size := most
		if e.routed {
			if rt, err := routing(s, n); err == nil {
				size = rt.Bytes()
			}
		}
		for _, impl := range s.Impls {
			out = max(out, reg.ScratchBytes(op, impl, size, most, n))
		}
	}
	return out
}

func routing(s result.BenchSpec, n int) (*coll.Routing, error) {
	m := coll.DefaultMoE
	if s.MoE != nil {
		m = *s.MoE
	}
	return m.Route(n, ops.ElemSize(s.DType))
}

// ValidateCollectives checks what a sweep's collectives and fused operations need on
// n ranks.
func ValidateCollectives(s result.BenchSpec, n int) error {
	if err := validateFused(s, n); err != nil {
		return err
	}
	if !hasCollectives(s) {
		return nil
	}
	if ops.ElemSize(s.DType) == 0 {
		return setting.Errorf("%s %q: collectives take one of %v", setting.DType, s.DType, ops.ReduceTypes)
	}
	if _, err := RedOps(s); err != nil {
		return setting.Errorf("%s: %v", setting.RedOp, err)
	}
	if s.Algo != "" && ops.ForAlgo(s.Algo) == nil {
		return setting.Errorf("%s %q: use %s or %s for all-reduce, %s or %s for reduce-scatter and combine (or leave it out: the implementation chooses)",
			setting.Algo, s.Algo, ops.OneShot, ops.TwoShot, ops.Staged, ops.Pull)
	}
	if s.Root < 0 || s.Root >= n {
		return setting.Errorf("%s %d out of range: the job has ranks 0..%d", setting.Root, s.Root, n-1)
	}
	for _, op := range s.Ops {
		if sized(engineOf(ops.Op(op))) {
			if _, err := ops.Op(op).Shape(s.MaxSize, n, ops.ElemSize(s.DType)); err != nil {
				return setting.Errorf("%s: %w", setting.MaxSize, err)
			}
		}
	}
	if hasMoE(s) {
		if _, err := routing(s, n); err != nil {
			return err
		}
	}
	return nil
}

// collSizes lists the sizes op is measured at with impl: the sweep's (those that hold
// an element per rank, in blocks impl can move: backend.Impl.Holds), or the MoE layer's
// token buffer.
func (r *Runner) collSizes(op ops.Op, impl string) []int64 {
	if engineOf(op).routed {
		return []int64{r.coll.routing.Bytes()}
	}
	return CollSizes(r.Reg, r.S, op, impl, r.B.Size())
}

// CollSizes lists the sizes of s a collective op is measured at with impl on n ranks:
// those that hold an element per rank, in blocks impl can move (not for dispatch and
// combine, measured at their layer).
func CollSizes(reg *backend.Registry, s result.BenchSpec, op ops.Op, impl string, n int) []int64 {
	im, _ := reg.ByName(impl)
	var out []int64
	for _, size := range s.Sizes() {
		if shape, err := op.Shape(size, n, ops.ElemSize(s.DType)); err == nil && im.Holds(op, shape.Block, n) {
			out = append(out, size)
		}
	}
	return out
}

// setupCollectives takes the collectives' buffers from the sweep's carved layout.
func (r *Runner) setupCollectives(carved backend.Carved) error {
	s, n := r.S, r.B.Size()
	most, err := collectiveBytes(s, n)
	if err != nil {
		return err
	}
	c := &collectives{data: map[dataKey]*coll.Data{}, guard: coll.GuardPattern()}
	// The send buffer holds every place an operation reads its input from (coll.Place);
	// the receive buffer is followed by its guard.
	c.send, c.recv = carved.One(slotCollSend).Buf, carved.One(slotCollRecv).All
	c.scratchAll, c.scratch = carved.One(slotCollScratch).All, carved.One(slotCollScratch).Buf
	if hasMoE(s) {
		if c.routing, err = routing(s, n); err != nil {
			return err
		}
	}
	c.data[dataKey{}] = coll.NewData("", ops.Sum, n, most)
	c.data[dataKey{s.DType, ops.Sum.Name}] = coll.NewData(s.DType, ops.Sum, n, most) // combine's
	reds, err := RedOps(s)
	if err != nil {
		return err
	}
	for _, red := range reds {
		c.data[dataKey{s.DType, red.Name}] = coll.NewData(s.DType, red, n, most)
	}
	r.coll = c
	return nil
}

// collective describes op under red at size on this job: the call every rank makes,
// and the bytes each rank sends (input) and must hold afterwards (checked).
func (r *Runner) collective(op ops.Op, red ops.RedOp, size int64, impl string) (backend.Collective, ops.Shape, error) {
	n, s := r.B.Size(), r.S
	c := backend.Collective{Op: op, Root: s.Root, RedOp: red}
	if slices.Contains(ops.ForAlgo(s.Algo), op) {
		c.Algo = s.Algo // for the ops it names
	}
	c.DType = op.CombineType(s.DType)
	var shape ops.Shape
	if engineOf(op).routed {
		rt := r.coll.routing
		me := r.B.Rank()
		shape = ops.Shape{Op: op, Ranks: n, Elem: ops.ElemSize(s.DType), Bytes: rt.Bytes(), Block: rt.Token}
		var send, recv func(int) int64
		c.Blocks, send, recv = rt.Transfers(op)
		shape.Send, shape.Recv = send(me), recv(me)
	} else {
		var err error
		if shape, err = op.Shape(size, n, ops.ElemSize(s.DType)); err != nil {
			return c, shape, err
		}
	}
	c.Bytes = shape.Bytes
	c.Send, c.Recv = r.coll.send.Slice(0, max(shape.Send, 1)), r.coll.recv.Slice(0, max(shape.Recv, 1))
	c.Scratch = r.coll.scratch
	if c.Blocks != nil {
		// Ranks send and receive different amounts: a block is placed in its own rank's
		// buffer, which may be longer than this rank's part.
		// (Not the guard after the receive buffer: coll.Guard.)
		whole := r.coll.recv.Size - coll.Guard
		c.Send, c.Recv = r.coll.send.Slice(0, whole), r.coll.recv.Slice(0, whole)
	}
	if im, ok := r.Reg.ByName(impl); ok && im.User {
		// What its kernel is promised (and the output, which the drop fault sends there)
		// and no more, so that the guard after it catches a write past the promise at
		// every size, not only the sweep's largest.
		if need := r.Reg.ScratchBytes(op, impl, c.Bytes, c.Recv.Size, n); need <= c.Scratch.Size {
			c.Scratch = r.coll.scratchAll.Slice(0, need)
		}
	}
	if a, ok := r.B.(backend.Algorithmer); ok {
		c.Algo = a.Algorithm(c, backend.Launch{Impl: impl, Blocks: r.S.Blocks, Warps: r.S.Warps})
	}
	return c, shape, nil
}

// pastGuard counts the bytes of guard (which follows a buffer of at bytes) that are not
// the guard pattern as wrong, and keeps the first as the row's first wrong byte, where.
func (r *Runner) pastGuard(guard backend.Buffer, at int64, where string, res *measured) error {
	after, pattern := make([]byte, guard.Size), coll.GuardPattern()[:guard.Size]
	if err := r.B.Read(guard, after); err != nil {
		return err
	}
	for i, v := range pattern {
		if after[i] != v {
			res.wrong++
		}
	}
	if w := result.WrongAtOf(r.B.Rank(), after, pattern); w != nil && r.first == nil {
		w.Byte += at
		w.Where = where
		r.first = w
	}
	return nil
}

// sendOf is how many bytes rank p sends in c (its input in the tables).
func (r *Runner) sendOf(c backend.Collective, shape ops.Shape, p int) int64 {
	if engineOf(c.Op).routed {
		_, send, _ := r.coll.routing.Transfers(c.Op)
		return send(p)
	}
	return shape.Send
}

// measureCollective measures one collective at one size: every rank times its own
// operations and checks its own output; the row's time is the ranks' mean (Merge).
func (r *Runner) measureCollective(op ops.Op, red ops.RedOp, impl string, size int64) ([]result.Row, error) {
	b, s := r.B, r.S
	cl, ok := b.(backend.Collectiver)
	if !ok {
		return nil, fmt.Errorf("the %s backend runs no collectives", b.Name())
	}
	c, shape, err := r.collective(op, red, size, impl)
	if err != nil {
		return nil, err
	}
	l := backend.Launch{Impl: impl, Blocks: s.Blocks, Warps: s.Warps}
	if p, ok := b.(backend.Preloader); ok {
		// NCCL's communicator, kernels: made before anything is timed.
		if err := p.Preload(op, shape.Bytes, l); err != nil {
			return nil, err
		}
	}
	row := result.Row{Op: string(op), Impl: impl, Size: shape.Bytes, Src: -1, Dst: -1, Ranks: b.Size(), DType: c.DType, Algo: c.Algo, Graph: s.Graph}
	if op.Takes(ops.RedOpSetting) {
		row.RedOp = red.String()
	}
	routed := engineOf(op).routed
	if routed {
		row.DType = s.DType
		blocks, _, _ := r.coll.routing.Transfers(op)
		row.Crossed = coll.Crossed(blocks, b.Size())
	}
	// The bytes each collective sends from this rank over its links: what bus bandwidth
	// counts (dispatch, combine: the bytes that crossed), the payload of the wire
	// columns where the links' counters are read.
	moved := int64(float64(shape.Bytes) * op.BusFactor(b.Size()))
	if row.Crossed > 0 || routed {
		moved = row.Crossed
	}
	for rep := 0; rep < s.Reps; rep++ {
		res, err := r.onceCollective(cl, c, shape, l, false, moved)
		if err != nil {
			return nil, err
		}
		row.TimesUS = append(row.TimesUS, res.us)
		row.Wrong += res.wrong
		row.Checked = true
		if res.link != nil {
			if row.Link == nil {
				row.Link = &result.LinkTraffic{}
			}
			row.Link.Add(uint64(moved)*uint64(s.Warmup+s.Iters), res.link.DataTx, res.link.RawTx)
		}
	}
	if k, ok := b.(backend.Kerneler); ok {
		row.Kernel = k.Kernel()
	}
	if shape.Bytes <= s.PerIterMax && !s.Graph {
		res, err := r.onceCollective(cl, c, shape, l, true, moved)
		if err != nil {
			return nil, err
		}
		row.Wrong += res.wrong
		row.PerIter = result.IterStatsOf(res.each, 1)
	}
	return []result.Row{row}, nil
}

// onceCollective is one checked measurement of c: inputs from this measurement's
// windows, outputs poisoned with the complement of what must arrive, warm-ups and
// timed operations, then every rank's check of its own output.
func (r *Runner) onceCollective(cl backend.Collectiver, c backend.Collective, shape ops.Shape, l backend.Launch, perIter bool, moved int64) (measured, error) {
	b := r.B
	seq := r.seq
	r.seq++
	if r.BeforeMeasure != nil {
		r.BeforeMeasure(seq)
	}
	me := b.Rank()
	all := r.coll.data[dataKey{}]
	if c.DType != "" { // combined in that type
		all = r.coll.data[dataKey{c.DType, c.RedOp.String()}]
	}
	// Every operation reads its input from its place in the send buffer (coll.Place):
	// what must be in Recv at the end is the last one's output, unlike any earlier one's.
	total := r.S.Warmup + r.S.Iters
	data := all.At(coll.Place(total-1, total))
	var want []byte
	var err error
	if engineOf(c.Op).routed {
		want, err = data.WantBlocks(c.Op, c.Blocks, me, seq, func(p int) int64 { return r.sendOf(c, shape, p) }, shape.Recv)
	} else {
		want, err = data.Want(shape, me, c.Root, seq)
	}
	if err != nil {
		return measured{}, err
	}
	fill := complement(want)
	if want == nil {
		// The operation leaves this rank nothing (a non-root of a reduce or gather): its
		// whole output must keep what was written there, a pattern no delivery writes.
		want = make([]byte, shape.Recv)
		for i := range want {
			want[i] = coll.GuardByte(i + 1)
		}
		fill = want
	}
	in := r.sendOf(c, shape, me) + coll.PlaceSlack
	if err := b.Write(r.coll.send.Slice(0, in), all.Input(me, seq, in)); err != nil {
		return measured{}, err
	}
	guard := r.coll.recv.Slice(c.Recv.Off-r.coll.recv.Off+int64(len(want)), coll.Guard)
	if err := b.Write(guard, r.coll.guard); err != nil {
		return measured{}, err
	}
	if err := b.Write(c.Recv.Slice(0, int64(len(want))), fill); err != nil {
		return measured{}, err
	}
	scratchGuard := r.coll.scratchAll.Slice(c.Scratch.Size, coll.Guard)
	if err := b.Write(scratchGuard, r.coll.guard); err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	do := func(i int) error {
		c := c
		c.Send = r.coll.send.Slice(int64(coll.Place(i, total))*coll.PlaceStep, c.Send.Size)
		return cl.Collective(c, l)
	}
	res, err := r.drive(do, moved, r.S.Iters, perIter, true)
	if err != nil {
		return measured{}, err
	}
	if err := b.Barrier(); err != nil {
		return measured{}, err
	}
	got := make([]byte, len(want))
	if err := b.Read(c.Recv.Slice(0, int64(len(want))), got); err != nil {
		return measured{}, err
	}
	res.wrong, res.checked = r.wrongBytes(got, want), true
	// What was written past the output, or past the scratch, counts too (each
	// measurement writes the guards afresh).
	if err := r.pastGuard(guard, int64(len(want)), "(past the output)", &res); err != nil {
		return measured{}, err
	}
	if err := r.pastGuard(scratchGuard, c.Scratch.Size, fmt.Sprintf("(past the scratch: the implementation was given %d bytes)", c.Scratch.Size), &res); err != nil {
		return measured{}, err
	}
	// Nobody may poison the next measurement's buffers before every rank has checked.
	return res, b.Barrier()
}

// CheckBlocks refuses a sweep in which an implementation would measure a collective at
// no size: every size's block is one it cannot move (triton's reduce-scatter on 3 ranks,
// whose power-of-two sizes never split into whole 16-byte vectors). added are the
// implementations bench took because --impl was left out.
func CheckBlocks(reg *backend.Registry, s result.BenchSpec, n int, added []string) error {
	for _, name := range s.Ops {
		op := ops.Op(name)
		if !sized(engineOf(op)) {
			continue
		}
		for _, impl := range s.Impls {
			im, ok := reg.ByName(impl)
			if !ok || !im.Supports(op) || len(CollSizes(reg, s, op, impl, n)) > 0 {
				continue
			}
			if most, why := im.Most(op, n); most > 0 && !slices.Contains(added, impl) {
				return setting.Errorf("%s %s %s on %d ranks moves blocks of at most %s (%s), and every size of this sweep gives each rank more: give %s %s or less (%d ranks x %s), or leave %s out of %s",
					op, setting.Impl, impl, n, units.FormatSize(most), why, setting.MinSize, units.FormatSize(most*int64(n)), n, units.FormatSize(most), impl, setting.Impl)
			}
			if im.BlockAlign[op] == 0 {
				continue
			}
			a := im.BlockAlign[op]
			why := setting.Textf("")
			if slices.Contains(added, impl) {
				why = setting.Textf(" (bench took it because %s was left out: name the implementations to run with %s)", setting.Impl, setting.Impl)
			}
			return setting.Errorf("%s %s %s moves %d-byte vectors, and no size of this sweep gives each of %d ranks whole ones: give %s a multiple of %d (%d ranks x %d bytes), or leave %s out of %s%s",
				op, setting.Impl, impl, a, n, setting.MinSize, int64(n)*a, n, a, impl, setting.Impl, why)
		}
	}
	return nil
}

// LeftOut says, before any rank starts, which sizes of the sweep an implementation
// leaves out because their blocks are larger than it moves (Impl.MaxBlock): a note
// each, naming its settings by value.
func LeftOut(reg *backend.Registry, s result.BenchSpec, n int) []setting.Text {
	var notes []setting.Text
	for _, name := range s.Ops {
		op := ops.Op(name)
		if !sized(engineOf(op)) {
			continue
		}
		for _, impl := range s.Impls {
			im, ok := reg.ByName(impl)
			if !ok || !im.Supports(op) {
				continue
			}
			most, why := im.Most(op, n)
			sizes := s.Sizes()
			if most == 0 || len(sizes) == 0 || sizes[len(sizes)-1] <= most*int64(n) {
				continue
			}
			notes = append(notes, setting.Textf("%s %s %s on %d ranks moves blocks of at most %s (%s): sizes above %s are left out of its rows",
				op, setting.Impl, impl, n, units.FormatSize(most), why, units.FormatSize(most*int64(n))))
		}
	}
	return notes
}
