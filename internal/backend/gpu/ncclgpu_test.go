//go:build gpu

package gpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
)

// One rank (NCCL refuses two on one GPU) runs every NCCL path against itself: nccl and
// nccl-symm's collectives, and nccl-device's kernels (put, get, put-signal and its wait,
// the ping-pong to itself, one-shot and two-shot all-reduce), each checked byte for
// byte. What one rank cannot show: a peer's bytes crossing NVLink, and the barriers
// pairing two ranks' blocks. Run it alone (-test.run TestNCCLOneRank): NVSHMEM
// initialises once per process.
func TestNCCLOneRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b, err := Open(ctx, Place{Rank: 0, LocalRank: 0, Size: 1}, newKV(), Config{Heap: 64 << 20, NCCLLib: os.Getenv("SYMMEM_NCCL_LIB")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const max = 4<<20 + 64
	send, _ := b.Alloc(max + coll.PlaceSlack)
	recv, _ := b.Alloc(max)
	scratch, _ := b.Alloc(max)
	for _, impl := range []string{implNCCL, implNCCLSymm, implNCCLDevice} {
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Reduce, ops.Gather, ops.Scatter} {
			im, _ := backend.Builtin(Factory{}).ByName(impl)
			if !im.Supports(op) {
				continue
			}
			for _, dt := range []string{"bf16", "float32"} {
				for _, algo := range algosOf(impl, op) {
					for _, size := range []int64{8, 6004, 4 << 20} {
						// No t.Run: a subtest's goroutine is not the OS thread Open
						// made the GPU's context current on (cuMemcpyHtoD then fails
						// with CUDA_ERROR_INVALID_CONTEXT).
						if !ops.Op(op).Reduces() && dt != "bf16" {
							continue // moves bytes: one element type is enough
						}
						t.Logf("case %s/%s/%s/%s/%d", impl, op, dt, algo, size)
						oneCollective(t, b, impl, op, dt, algo, size, send, recv, scratch)
					}
				}
			}
		}
	}
	t.Log("case nccl-device/point")
	devPointToSelf(t, b, send, recv, scratch)
	t.Logf("libraries: %v", b.Libraries())
}

// algosOf is what --algo values to try: nccl-device's two all-reduces, else NCCL's choice.
func algosOf(impl string, op ops.Op) []string {
	if impl == implNCCLDevice && op == ops.AllReduce {
		return []string{ops.OneShot, ops.TwoShot}
	}
	return []string{""}
}

func oneCollective(t *testing.T, b *Backend, impl string, op ops.Op, dt, algo string, size int64, send, recv, scratch backend.Buffer) {
	elem := ops.ElemSize(dt)
	shape, err := ops.Op(op).Shape(size, 1, elem)
	if err != nil {
		t.Logf("skipped: %v", err)
		return
	}
	data := coll.NewData(dt, ops.Sum, 1, shape.Send)
	l := backend.Launch{Impl: impl}
	c := backend.Collective{Op: op, DType: dt, Bytes: shape.Bytes, Send: send.Slice(0, shape.Send), Recv: recv.Slice(0, shape.Recv),
		Scratch: scratch.Slice(0, shape.Recv), Algo: algo}
	if err := b.Preload(op, shape.Bytes, l); err != nil {
		t.Fatal(err)
	}
	want, err := data.Want(shape, 0, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(c.Send, data.Input(0, 3, shape.Send)); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(c.Recv, complementOf(want)); err != nil {
		t.Fatal(err)
	}
	if err := b.Collective(c, l); err != nil {
		t.Fatal(err)
	}
	if err := b.Quiet(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := b.Read(c.Recv, got); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Errorf("%s %s %s %d: byte %d of %d: got %#x, want %#x (kernel %q)", impl, op, dt, size, i, len(want), got[i], want[i], b.Kernel())
	}
	if k := b.Kernel(); k != "" {
		t.Logf("kernel %s", k)
	}
}

// devPointToSelf runs nccl-device's point-to-point kernels with this rank as the peer.
func devPointToSelf(t *testing.T, b *Backend, src, dst, sig backend.Buffer) {
	l := backend.Launch{Impl: implNCCLDevice}
	const n = 3<<20 + 5
	in := make([]byte, n)
	for i := range in {
		in[i] = byte(i*7 + 1)
	}
	for _, op := range []ops.Op{ops.Put, ops.Get, ops.PutSignal} {
		if err := b.Preload(op, n, l); err != nil {
			t.Fatal(err)
		}
		b.Write(src.Slice(0, n), in)
		b.Write(dst.Slice(0, n), make([]byte, n))
		b.Write(sig.Slice(0, 8), make([]byte, 8))
		var err error
		switch op {
		case ops.Put:
			err = b.Put(dst.Slice(0, n), src.Slice(0, n), 0, l)
		case ops.Get:
			err = b.Get(dst.Slice(0, n), src.Slice(0, n), 0, l)
		case ops.PutSignal:
			if err = b.PutSignal(dst.Slice(0, n), src.Slice(0, n), sig.Slice(0, 8), 0, l); err == nil {
				err = b.WaitSignal(sig.Slice(0, 8), n, 1, l)
			}
		}
		if err == nil {
			err = b.Quiet()
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		got := make([]byte, n)
		b.Read(dst.Slice(0, n), got)
		if i := firstDiff(got, in); i >= 0 {
			t.Errorf("%s: byte %d of %d wrong", op, i, n)
		}
	}
	if err := b.Preload(ops.Latency, 64, l); err != nil {
		t.Fatal(err)
	}
	stamps := sig.Slice(64, 8*12)
	b.Write(sig.Slice(0, 8), make([]byte, 8))
	res, err := b.PingPong(dst.Slice(0, 64), src.Slice(0, 64), sig.Slice(0, 8), stamps, 64, 10, 0, true, l)
	if err != nil {
		t.Fatalf("ping-pong: %v", err)
	}
	if res.Late != 0 || len(res.Rounds) != 10 {
		t.Errorf("ping-pong to itself: %d late rounds, %d rounds", res.Late, len(res.Rounds))
	}
	got := make([]byte, 8)
	b.Read(dst.Slice(0, 8), got)
	if v := binary.LittleEndian.Uint64(got); v != 10 {
		t.Errorf("ping-pong: the last payload carries round %d, want 10", v)
	}
	t.Logf("ping-pong to itself: %v for 10 rounds, first %v", res.Total, res.Rounds[0])
}

func complementOf(b []byte) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = ^v
	}
	return out
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
