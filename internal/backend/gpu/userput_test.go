package gpu

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/ops"
)

// userPutAll imitates a user's put whose kernel reaches every other rank itself
// (kernels.Artifact.Peers), as its entry runs it on the grid it is launched with: each
// block puts its chunk of src into its own dst, then from there into dst on every
// other rank; a kernel of a block per chunk and peer (PerPeer) has block i put chunk
// i / (n-1) into the (i mod (n-1))-th other rank alone. A grid too small for its chunks
// and peers leaves some undelivered, as the real kernel would.
func (g *fakeGPU) userPutAll(l fakeLaunch) error {
	a := l.args
	dst, src, err := g.dstSrc(a)
	if err != nil {
		return err
	}
	n, chunk, peers := int64(a[2]), int64(a[3]), g.w.size-1
	for i := range int64(l.dim.Grid) {
		c, to := i, []int{}
		for q := range g.w.size {
			if q != g.rank {
				to = append(to, q)
			}
		}
		if l.a.PerPeer {
			c, to = i/int64(peers), to[i%int64(peers):i%int64(peers)+1]
		}
		off := c * chunk
		m := min(chunk, n-off)
		if m <= 0 {
			continue
		}
		if err := g.move(g.rank, dst+off, g.rank, src+off, m); err != nil {
			return err
		}
		for _, q := range to {
			if err := g.move(q, dst+off, g.rank, dst+off, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// A user's put whose kernel reaches every peer itself (the sidecar's peers: PyTorch's
// puts in place to every peer) is launched once by the sender for the one-to-all put,
// on symmem's grid, times the peers where a block serves one chunk and peer; every
// other rank then holds the whole message. A put to one peer is refused on more than
// 2 ranks (it would reach them all) and launched on 2. Under the drop fault the sender
// launches nothing and every receiver keeps what it held. symmem's own put reaches the
// peers one launch each.
func TestUserPutToEveryPeer(t *testing.T) {
	const n = 300<<10 + 5 // three chunks, the last one short
	for _, perPeer := range []bool{false, true} {
		for _, ranks := range []int{2, 3, 4} {
			name := fmt.Sprintf("per_peer=%v/%d ranks", perPeer, ranks)
			w := newWorld(t, ranks, 4*n+1<<16)
			bs, gs := openAll(t, w)
			extra := map[string]any{"peers": "all"}
			if perPeer {
				extra["per_peer"] = true
			}
			impl := addUserWith(t, []*fakeWorld{w}, []string{kPut}, false, extra)
			if im, _ := w.reg.ByName(impl); !im.ReachesAll(ops.Put) {
				t.Fatalf("%s: %s does not reach every peer", name, impl)
			}
			var src, dst backend.Buffer
			for r := range ranks {
				var err error
				if src, err = bs[r].Alloc(n); err != nil {
					t.Fatal(err)
				}
				if dst, err = bs[r].Alloc(n); err != nil {
					t.Fatal(err)
				}
			}
			heap := func(r int, b backend.Buffer) []byte { return w.heaps[r][b.Off : b.Off+b.Size] }
			// Rank 0 sends; every receiver's dst holds other data first.
			reset := func() {
				copy(heap(0, src), pattern(0, n))
				for r := 1; r < ranks; r++ {
					copy(heap(r, dst), pattern(r, n))
				}
			}
			reset()
			l := backend.Launch{Impl: impl}
			if err := bs[0].PutAll(dst, src, l); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sh := ShapeFor(n, l)
			grid := sh.Blocks
			if perPeer {
				grid *= ranks - 1
			}
			if ls := gs[0].launches; len(ls) != 1 || ls[0].kernel != kPut || ls[0].impl != impl || int(ls[0].dim.Grid) != grid || ls[0].args[3] != uint64(sh.Chunk) {
				t.Errorf("%s: launched %v, want one %s of %d blocks", name, ls, kPut, grid)
			}
			for r := 1; r < ranks; r++ {
				if !bytes.Equal(heap(r, dst), pattern(0, n)) {
					t.Errorf("%s: rank %d's dst does not hold rank 0's message", name, r)
				}
			}
			err := bs[0].Put(dst, src, 1, l)
			if ranks > 2 && (err == nil || !strings.Contains(err.Error(), "put {impl} "+impl+" puts to every other rank from one launch, not to rank 1 alone: run put with {pattern} one-to-all")) ||
				ranks == 2 && (err != nil || len(gs[0].launches) != 2) {
				t.Errorf("%s: a put to rank 1: %v (%d launches)", name, err, len(gs[0].launches))
			}
			reset()
			bs[0].SetDrop(true)
			before := len(gs[0].launches)
			if err := bs[0].PutAll(dst, src, l); err != nil || len(gs[0].launches) != before {
				t.Errorf("%s: dropped: %v, %d launches", name, err, len(gs[0].launches)-before)
			}
			for r := 1; r < ranks; r++ {
				if !bytes.Equal(heap(r, dst), pattern(r, n)) {
					t.Errorf("%s: dropped: rank %d's dst was written", name, r)
				}
			}
			bs[0].SetDrop(false)
			// symmem's own put: a launch to each peer in turn.
			before = len(gs[0].launches)
			if err := bs[0].PutAll(dst, src, backend.Launch{Impl: implTriton}); err != nil {
				t.Fatal(err)
			}
			if ls := gs[0].launches[before:]; len(ls) != ranks-1 || ls[len(ls)-1].args[4] != uint64(ranks-1) {
				t.Errorf("%s: triton: launched %v, want a put to each of %d peers", name, ls, ranks-1)
			}
		}
	}
}
