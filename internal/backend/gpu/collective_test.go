package gpu

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
)

// commHub plays NCCL for a fake world: each rank's call is kept until every rank has
// made its own, then the collective moves the bytes of every rank's heap, as NCCL's
// kernels would. Ranks call one after another from the test.
type commHub struct {
	w       *fakeWorld
	pending []fakeCall
	calls   []string
}

type fakeCall struct {
	rank                 int
	op                   string
	send, recv           int64 // offsets in the spaces below
	sendSpace, recvSpace int   // fakeWorld.bytes's rank: the heap, or a rank's window (size+rank)
	count, root          int
	redop                nccl.RedOp
	dt                   nccl.DataType
}

type fakeComm struct {
	h    *commHub
	rank int
}

func (c fakeComm) arrive(op string, send, recv uint64, count int, dt nccl.DataType, root int) error {
	return c.arriveOp(op, send, recv, count, dt, root, nccl.Sum)
}

func (c fakeComm) arriveOp(op string, send, recv uint64, count int, dt nccl.DataType, root int, red nccl.RedOp) error {
	fc := fakeCall{rank: c.rank, op: op, count: count, root: root, dt: dt, redop: red}
	var sw, rw string
	var err error
	if fc.sendSpace, fc.send, sw, err = c.h.w.locate(c.rank, send); err != nil {
		return err
	}
	if fc.recvSpace, fc.recv, rw, err = c.h.w.locate(c.rank, recv); err != nil {
		return err
	}
	c.h.calls = append(c.h.calls, fmt.Sprintf("rank %d %s send=%s%d recv=%s%d count=%d %s root=%d", c.rank, op, sw, fc.send, rw, fc.recv, count, dt, root))
	c.h.pending = append(c.h.pending, fc)
	if len(c.h.pending) < c.h.w.size {
		return nil
	}
	defer func() { c.h.pending = nil }()
	return c.h.run()
}

func (h *commHub) run() error {
	n := h.w.size
	byRank := make([]fakeCall, n)
	for _, c := range h.pending {
		if c.op != h.pending[0].op || c.count != h.pending[0].count || c.dt != h.pending[0].dt || c.redop != h.pending[0].redop || c.root != h.pending[0].root {
			return fmt.Errorf("fake NCCL: ranks disagree: %+v", h.pending)
		}
		byRank[c.rank] = c
	}
	es := int64(byRank[0].dt.Size())
	k := int64(byRank[0].count) * es
	in := func(r int, off, len int64) []byte { return h.w.heaps[byRank[r].sendSpace][byRank[r].send+off:][:len] }
	out := func(r int, off, len int64) []byte { return h.w.heaps[byRank[r].recvSpace][byRank[r].recv+off:][:len] }
	for me := 0; me < n; me++ {
		c := byRank[me]
		switch c.op {
		case "all-reduce", "reduce-scatter", "reduce":
			if c.op == "reduce" && me != c.root {
				continue // NCCL writes no other rank's recv
			}
			var ins [][]byte
			for r := 0; r < n; r++ {
				off := int64(0)
				if c.op == "reduce-scatter" {
					off = int64(me) * k
				}
				ins = append(ins, append([]byte(nil), in(r, off, k)...))
			}
			red := ops.Sum
			for _, r := range ops.RedOps() {
				if nccl.RedOp(r.Code) == c.redop {
					red = r
				}
			}
			if err := coll.Reduce(red, c.dt.String(), out(me, 0, k), ins...); err != nil {
				return err
			}
		case "all-gather", "gather":
			if c.op == "gather" && me != c.root {
				continue // NCCL writes no other rank's recv
			}
			for r := 0; r < n; r++ {
				copy(out(me, int64(r)*k, k), in(r, 0, k))
			}
		case "broadcast":
			copy(out(me, 0, k), in(c.root, 0, k))
		case "all-to-all":
			for r := 0; r < n; r++ {
				copy(out(me, int64(r)*k, k), in(r, int64(me)*k, k))
			}
		case "scatter":
			copy(out(me, 0, k), in(c.root, int64(me)*k, k))
		}
	}
	return nil
}

func (c fakeComm) AllReduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, st stream) error {
	return c.arriveOp("all-reduce", send, recv, count, dt, 0, op)
}
func (c fakeComm) AllGather(send, recv uint64, count int, dt nccl.DataType, st stream) error {
	return c.arrive("all-gather", send, recv, count, dt, 0)
}
func (c fakeComm) ReduceScatter(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, st stream) error {
	return c.arriveOp("reduce-scatter", send, recv, count, dt, 0, op)
}
func (c fakeComm) Broadcast(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error {
	return c.arrive("broadcast", send, recv, count, dt, root)
}
func (c fakeComm) Reduce(send, recv uint64, count int, dt nccl.DataType, op nccl.RedOp, root int, st stream) error {
	return c.arriveOp("reduce", send, recv, count, dt, root, op)
}
func (c fakeComm) Gather(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error {
	return c.arrive("gather", send, recv, count, dt, root)
}
func (c fakeComm) Scatter(send, recv uint64, count int, dt nccl.DataType, root int, st stream) error {
	return c.arrive("scatter", send, recv, count, dt, root)
}
func (c fakeComm) AllToAll(send, recv uint64, count int, dt nccl.DataType, st stream) error {
	return c.arrive("all-to-all", send, recv, count, dt, 0)
}
func (c fakeComm) Describe() string { return "2.27.3 (fake)" }
func (c fakeComm) Destroy() error   { return nil }

// The nccl implementation hands NCCL the right buffers, counts and types: checked by
// what lands in every rank's heap (from coll's check data) on 3 fake ranks.
func TestNCCLCollectivesDeliver(t *testing.T) {
	const n = 3
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.AllToAll} {
		dt := ""
		if ops.Op(op).Reduces() {
			dt = "bf16"
		}
		shape, err := ops.Op(op).Shape(6000, n, 2)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(t, n, 1<<16)
		hub := &commHub{w: w}
		data := coll.NewData(dt, ops.Sum, n, shape.Send)
		var bs []*Backend
		var c backend.Collective
		for r := 0; r < n; r++ {
			b, _ := w.open(t, r, Config{})
			b.openComm = func() (comm, error) { return fakeComm{hub, r}, nil }
			send, _ := b.Alloc(shape.Send)
			recv, _ := b.Alloc(shape.Recv)
			scratch, _ := b.Alloc(shape.Recv)
			c = backend.Collective{Op: op, DType: dt, Bytes: shape.Bytes, Send: send, Recv: recv, Scratch: scratch, Root: 1}
			if err := b.Write(send, data.Input(r, 5, shape.Send)); err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		for _, b := range bs {
			if err := b.Collective(c, backend.Launch{Impl: "nccl"}); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		for r, b := range bs {
			want, _ := data.Want(shape, r, 1, 5)
			got := make([]byte, shape.Recv)
			b.Read(c.Recv, got)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: rank %d holds the wrong result; calls:\n%s", op, r, strings.Join(hub.calls, "\n"))
			}
		}
		if lib := bs[0].Libraries()["nccl"]; lib != "2.27.3 (fake)" {
			t.Errorf("Libraries after use: %q", lib)
		}
	}
}

// The rooted collectives NCCL serves reach the root NCCL is given and the buffers,
// counts, types and operator they must: every byte of every rank's output checked
// against coll's check data, on 2 and 3 fake ranks with the first and the last rank
// as root, at a size that is no multiple of the ranks; a rank the op leaves nothing
// must hold what it held before (runCollRoot).
func TestNCCLRootedDeliver(t *testing.T) {
	l := backend.Launch{Impl: implNCCL}
	im, _ := backend.Builtin(Factory{}).ByName(implNCCL)
	for _, red := range ops.RedOps() {
		if !im.ServesRedOp(red) {
			t.Errorf("nccl does not serve %s", red)
		}
	}
	for _, n := range []int{2, 3} {
		bs, _, bufs := collWorld(t, n, 1<<12)
		seq := 0
		check := func(op ops.Op, dtype string, red ops.RedOp) {
			name := fmt.Sprintf("%d ranks, %s", n, op)
			if op.Reduces() {
				name += fmt.Sprintf(" %s %s", dtype, red)
			}
			for _, root := range []int{0, n - 1} {
				seq++
				got, want, err := runCollRoot(t, bs, bufs, op, dtype, "", red, 1000, l, seq, root)
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				for r := range got {
					if !bytes.Equal(got[r], want[r]) {
						t.Errorf("%s, root %d: rank %d holds the wrong bytes; calls:\n%s", name, root, r, strings.Join(lastCalls(bs, n), "\n"))
					}
				}
			}
		}
		for _, dtype := range []string{"bf16", "float32"} {
			for _, red := range ops.RedOps() {
				check(ops.Reduce, dtype, red)
			}
		}
		check(ops.Gather, "", ops.Sum)
		check(ops.Scatter, "", ops.Sum)
	}
}

// Under the drop fault the rank still calls NCCL (its peers would wait forever
// otherwise), with its output in the scratch buffer: its Recv keeps what was there.
func TestNCCLDropLandsInScratch(t *testing.T) {
	w := newWorld(t, 2, 1<<16)
	hub := &commHub{w: w}
	var bs []*Backend
	var c backend.Collective
	for r := 0; r < 2; r++ {
		b, _ := w.open(t, r, Config{})
		b.openComm = func() (comm, error) { return fakeComm{hub, r}, nil }
		send, _ := b.Alloc(1024)
		recv, _ := b.Alloc(1024)
		scratch, _ := b.Alloc(1024)
		c = backend.Collective{Op: ops.AllGather, Bytes: 1024, Send: send, Recv: recv, Scratch: scratch}
		b.Write(send, bytes.Repeat([]byte{byte(r + 1)}, 512))
		b.Write(recv, make([]byte, 1024))
		bs = append(bs, b)
	}
	bs[1].SetDrop(true)
	for _, b := range bs {
		if err := b.Collective(c, backend.Launch{Impl: "nccl"}); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, 1024)
	bs[1].Read(c.Recv, got)
	if !bytes.Equal(got, make([]byte, 1024)) {
		t.Error("the dropping rank's output reached its Recv")
	}
	bs[0].Read(c.Recv, got)
	if got[0] != 1 || got[1023] != 2 {
		t.Error("the other rank's all-gather went wrong")
	}
	if len(hub.calls) != 2 || !strings.Contains(hub.calls[1], fmt.Sprintf("recv=%d", c.Scratch.Off)) {
		t.Errorf("calls: %v", hub.calls)
	}
}

func TestNCCLRefusals(t *testing.T) {
	w := newWorld(t, 2, 1<<16)
	b, _ := w.open(t, 0, Config{})
	b.openComm = nil
	buf, _ := b.Alloc(1024)
	c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1024, Send: buf, Recv: buf, Scratch: buf}
	if err := b.Collective(c, backend.Launch{Impl: "cuda"}); err == nil || !strings.Contains(err.Error(), "{impl} cuda cannot run all-reduce") {
		t.Errorf("cuda all-reduce: %v", err)
	}
	if err := b.Collective(c, backend.Launch{Impl: "nccl"}); err == nil || !strings.Contains(err.Error(), "without a way to bootstrap NCCL") {
		t.Errorf("no communicator: %v", err)
	}
	c.DType = "int16"
	b.openComm = func() (comm, error) { return fakeComm{&commHub{w: w}, 0}, nil }
	if err := b.Collective(c, backend.Launch{Impl: "nccl"}); err == nil || !strings.Contains(err.Error(), `NCCL has no element type "int16"`) {
		t.Errorf("int16 sum: %v", err)
	}
}

// The registry's reduce-scatter alignment for triton (what run and bench check before
// any rank starts) is the vector its kernels move.
func TestTritonBlockAlignIsTheKernelsVector(t *testing.T) {
	im, _ := backend.Builtin(Factory{}).ByName("triton")
	if got := im.BlockAlign[ops.ReduceScatter]; got != collVector {
		t.Errorf("triton's reduce-scatter BlockAlign %d, the kernels move %d-byte vectors", got, collVector)
	}
}

// lastCalls are the calls of the fake NCCL's last collective on n ranks.
func lastCalls(bs []*Backend, n int) []string {
	calls := bs[0].comm.(fakeComm).h.calls
	return calls[max(0, len(calls)-n):]
}
