package gpu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// A ping-pong whose peer never answers ends on the device: the kernel gets the job's
// limit and the mailbox, and the error names the round and the peer.
func TestPingPongGivesUp(t *testing.T) {
	p := newPair(t, 4096, Config{WaitLimit: 2 * time.Second})
	p.w.absent = 1
	stamps, err := p.b[0].Alloc(8 * 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"triton", "cuda"} {
		p.g[0].trapped, p.g[0].host[0] = nil, 0
		_, err = p.b[0].PingPong(p.dst, p.src, p.sig, stamps, 4096, 4, 1, true, backend.Launch{Impl: impl})
		if !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), "rank 0: the GPU gave up on ping-pong round 1 after 2s") ||
			!strings.Contains(err.Error(), "rank 1's signal for it never came") {
			t.Errorf("%s: ping-pong with a peer that never answers: %v", impl, err)
		}
		l := p.g[0].launches[len(p.g[0].launches)-1]
		if lim, _ := l.param(paramLimit); lim != uint64(2*time.Second) {
			t.Errorf("%s: limit_ns %d", impl, lim)
		}
	}
}

// A collective kernel whose peer never comes to its barrier (the absent fault) ends on
// the device; the error names the peer and the barrier, on every call that follows,
// and nothing waits past the limit. The absent rank launches nothing.
func TestCollectiveGivesUpOnAbsentPeer(t *testing.T) {
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather} {
		bs, gs, bufs := collWorld(t, 2, 1<<20)
		bs[1].SetAbsent(true)
		gs[0].w.absent = 1
		dtype := ""
		if ops.Op(op).Reduces() {
			dtype = "bf16"
		}
		shape, err := ops.Op(op).Shape(1<<20, 2, max(ops.ElemSize(dtype), 1))
		if err != nil {
			t.Fatal(err)
		}
		c := backend.Collective{Op: op, DType: dtype, Bytes: shape.Bytes, Send: bufs[0].Slice(0, shape.Send), Recv: bufs[1].Slice(0, shape.Recv), Scratch: bufs[2]}
		if err := bs[1].Collective(c, backend.Launch{Impl: "triton"}); err != nil || len(gs[1].launches) != 0 {
			t.Fatalf("%s: the absent rank: %v, launched %d kernels", op, err, len(gs[1].launches))
		}
		err = bs[0].Collective(c, backend.Launch{Impl: "triton"})
		if err == nil {
			err = bs[0].Barrier()
		}
		if !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), "waiting for rank 1 at a collective's barrier (block 0, phase 1; rank 1's count stood at 0): rank 1 never came") {
			t.Errorf("%s: a peer that never comes: %v", op, err)
		}
		if err := bs[0].Read(c.Recv, make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "rank 1 never came") {
			t.Errorf("%s: read after the trap: %v", op, err)
		}
		// The host did not wait past its own limit for any of it.
		for _, l := range gs[0].limits {
			if l > bs[0].hostLimit() {
				t.Errorf("%s: the host waited %s", op, l)
			}
		}
		bs[0].Close()
		if !gs[0].hostFreed || bs[0].mail.words != nil {
			t.Errorf("%s: the mailbox was not freed, or is still read after Close", op)
		}
	}
}
