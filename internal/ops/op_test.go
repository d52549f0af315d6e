package ops

import (
	"fmt"
	"testing"
)

func TestShapeOf(t *testing.T) {
	for _, c := range []struct {
		op                       Op
		size                     int64
		n                        int
		bytes, send, recv, block int64
	}{
		{AllReduce, 1 << 20, 3, 1 << 20, 1 << 20, 1 << 20, 1 << 20},
		{AllGather, 1000, 3, 996, 332, 996, 332},
		{ReduceScatter, 1000, 4, 992, 992, 248, 248},
		{AllToAll, 64, 3, 60, 60, 60, 20},
		{Broadcast, 6, 4, 4, 4, 4, 4},
		{Reduce, 1002, 3, 1000, 1000, 1000, 1000},
		{Gather, 1000, 3, 996, 332, 996, 332},
		{Scatter, 1000, 4, 992, 992, 248, 248},
	} {
		s, err := c.op.Shape(c.size, c.n, 4)
		if err != nil {
			t.Fatal(err)
		}
		if s.Bytes != c.bytes || s.Send != c.send || s.Recv != c.recv || s.Block != c.block {
			t.Errorf("%s %d over %d: got %+v", c.op, c.size, c.n, s)
		}
	}
	if _, err := Op(AllGather).Shape(8, 4, 4); err == nil {
		t.Error("8 bytes over 4 ranks of float32: want an error")
	}
}

func TestBusFactor(t *testing.T) {
	if f := Op(AllReduce).BusFactor(4); f != 1.5 {
		t.Errorf("all-reduce over 4: %g, want 1.5", f)
	}
	if f := Op(AllGather).BusFactor(2); f != 0.5 {
		t.Errorf("all-gather over 2: %g, want 0.5", f)
	}
	if f := Op(Broadcast).BusFactor(8); f != 1 {
		t.Errorf("broadcast: %g, want 1", f)
	}
	if f := Op(Reduce).BusFactor(8); f != 1 { // nccl-tests' ReduceGetBw: busBw = algBw
		t.Errorf("reduce: %g, want 1", f)
	}
	if f := Op(Gather).BusFactor(4); f != 0.75 {
		t.Errorf("gather over 4: %g, want 0.75", f)
	}
	if f := Op(Scatter).BusFactor(4); f != 0.75 {
		t.Errorf("scatter over 4: %g, want 0.75", f)
	}
}

// Every operation's delivery, against results written out by hand: backends and the
// checks above them take their idea of a right result from Deliver, so Deliver itself
// is checked against nothing of its own. Ranks hold one byte per element; rank r's
// input is r*10 + the element's index.
func TestDeliverByHand(t *testing.T) {
	input := func(n int) func(r int) []byte {
		return func(r int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r*10 + i)
			}
			return b
		}
	}
	sum := func(dst []byte, srcs ...[]byte) error {
		acc := make([]byte, len(dst))
		for _, s := range srcs {
			for i := range acc {
				acc[i] += s[i]
			}
		}
		copy(dst, acc)
		return nil
	}
	blocks := []Block{{Src: 0, Dst: 1, SrcOff: 0, DstOff: 2, Bytes: 2}, {Src: 2, Dst: 1, SrcOff: 1, DstOff: 0, Bytes: 2},
		{Src: 1, Dst: 1, SrcOff: 0, DstOff: 2, Bytes: 2}, {Src: 0, Dst: 2, SrcOff: 0, DstOff: 0, Bytes: 4}}
	for _, c := range []struct {
		op          Op
		send, block int64
		recv        int64
		me          int
		want        []byte // nil: the rank holds nothing of the op's
	}{
		// 3 ranks, rank 1's result; the root is rank 2.
		{AllReduce, 3, 3, 3, 1, []byte{30, 33, 36}},
		{AllGather, 2, 2, 6, 1, []byte{0, 1, 10, 11, 20, 21}},
		{ReduceScatter, 6, 2, 2, 1, []byte{2 + 12 + 22, 3 + 13 + 23}},
		{Broadcast, 3, 3, 3, 1, []byte{20, 21, 22}},
		{AllToAll, 6, 2, 6, 1, []byte{2, 3, 12, 13, 22, 23}},
		{Put, 3, 3, 3, 1, []byte{20, 21, 22}}, // from rank 2
		{Dispatch, 4, 0, 4, 1, []byte{21, 22, 10, 11}},
		{Combine, 4, 0, 4, 1, []byte{21, 22, 0 + 10, 1 + 11}},
		{Reduce, 3, 3, 3, 2, []byte{30, 33, 36}},
		{Reduce, 3, 3, 3, 1, nil},
		{Gather, 2, 2, 6, 2, []byte{0, 1, 10, 11, 20, 21}},
		{Gather, 2, 2, 6, 1, nil},
		{Scatter, 6, 2, 2, 1, []byte{22, 23}},
		{Scatter, 6, 2, 2, 2, []byte{24, 25}},
	} {
		in := Inputs{Ranks: 3, Me: c.me, Root: 2, Block: c.block, Recv: c.recv, Blocks: blocks, In: input(int(c.send)), Reduce: sum}
		got, err := c.op.Deliver(in)
		if err != nil || string(got) != string(c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s on rank %d: got %v, %v; want %v", c.op, c.me, got, err, c.want)
		}
	}
	// A rank that holds nothing has nothing written into the output it was given.
	for _, op := range []Op{Reduce, Gather} {
		out := []byte{7, 7, 7}
		if got, err := op.Deliver(Inputs{Ranks: 3, Me: 0, Root: 2, Block: 1, Recv: 3, In: input(3), Reduce: sum, Out: out}); got != nil || err != nil || string(out) != "\x07\x07\x07" {
			t.Errorf("%s on a rank other than the root: got %v, %v, and the output became %v", op, got, err, out)
		}
	}
}

// The fused operations' default data tells every row of C from every other (a row
// delivered to another row's place, or another rank's, shows) and every column from
// the next, and a product of it stays exact in bf16: with the data of
// TestFusedRightAndFaultsCaught's kind, a check of C catches misrouted tiles.
func TestFusedDataTellsRowsApart(t *testing.T) {
	for _, o := range Of(FamilyFused) {
		for _, n := range []int{2, 3} {
			for _, mm := range []Matmul{{M: 96, N: 64, K: 80}, {M: 384, N: 40, K: 128}, DefaultMatmul, {M: 48, N: 33, K: 17}} {
				if _, err := o.Operands(mm, n); err != nil {
					continue // M does not split over n ranks
				}
				fill := func(r int) ([]float64, []float64) {
					return o.Operand(mm, n, r, false, func(v float64) float64 { return v })
				}
				var rows [][]float64
				for me := 0; me < n; me++ {
					c, err := o.Product(MatmulInputs{Ranks: n, Me: me, Shape: mm, Round: func(v float64) float64 { return v },
						A: func(r int) []float64 { a, _ := fill(r); return a }, B: func(r int) []float64 { _, b := fill(r); return b }})
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i+mm.N <= len(c); i += mm.N {
						rows = append(rows, c[i:i+mm.N])
					}
					if o == AllGatherMatmul {
						break // every rank holds all of C
					}
				}
				seen := map[string]int{}
				for i, r := range rows {
					key := fmt.Sprint(r)
					if j, dup := seen[key]; dup {
						t.Errorf("%s %v on %d ranks: rows %d and %d of C are the same", o, mm, n, j, i)
						break
					}
					seen[key] = i
					for _, v := range r {
						if v > 256 || v < -256 {
							t.Fatalf("%s %v: %g is past bf16's exact integers", o, mm, v)
						}
					}
				}
			}
		}
	}
}
