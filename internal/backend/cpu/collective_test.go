package cpu

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
)

// poison is what every rank's output holds before a collective: what a rank the
// collective leaves nothing must still hold after it.
const poison = 0xEE

// collRanks is a job of n ranks in this process, each with its own mapping of one
// heap, and a send and a receive buffer of up to most bytes on every rank.
type collRanks struct {
	b          []*Backend
	send, recv backend.Buffer
}

func openColl(t *testing.T, n int, most int64) *collRanks {
	t.Helper()
	ShmDir = t.TempDir()
	path := HeapPath("coll")
	heap := 2*backend.Align(most, backend.HeapAlign) + backend.HeapAlign
	if err := Create(path, n, heap); err != nil {
		t.Fatal(err)
	}
	j := &collRanks{}
	for r := range n {
		b, err := Open(path, r, n, heap)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		j.send, _ = b.Alloc(most)
		j.recv, _ = b.Alloc(most)
		j.b = append(j.b, b)
	}
	return j
}

// run writes every rank's input for op of size bytes (coll's check data, as bench and
// run write it, in dtype under red: "" for an op that only moves bytes), fills every
// output with the poison, runs the collective with root on every rank at once (each
// rank its own goroutine, as it would be its own process) and returns what each
// rank's output holds and what it must hold: coll's Want, or where that is nil (the
// rank holds nothing of op's) the poison, untouched.
func (j *collRanks) run(t *testing.T, op ops.Op, dtype string, red ops.RedOp, size int64, root int) (got, want [][]byte) {
	t.Helper()
	n := len(j.b)
	elem := int64(1)
	if dtype != "" {
		elem = ops.ElemSize(dtype)
	}
	shape, err := op.Shape(size, n, elem)
	if err != nil {
		t.Fatal(err)
	}
	const seq = 3
	data := coll.NewData(dtype, red, n, shape.Send)
	c := backend.Collective{Op: op, DType: dtype, RedOp: red, Bytes: shape.Bytes, Root: root,
		Send: j.send.Slice(0, shape.Send), Recv: j.recv.Slice(0, shape.Recv)}
	untouched := bytes.Repeat([]byte{poison}, int(shape.Recv))
	for r, b := range j.b {
		if err := b.Write(c.Send, data.Input(r, seq, shape.Send)); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(c.Recv, untouched); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, b := range j.b {
		wg.Go(func() { errs[r] = b.Collective(c, backend.Launch{}) })
	}
	wg.Wait()
	for r, b := range j.b {
		if errs[r] != nil {
			t.Fatalf("%s on rank %d: %v", op, r, errs[r])
		}
		w, err := data.Want(shape, r, root, seq)
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			w = untouched
		}
		g := make([]byte, shape.Recv)
		if err := b.Read(c.Recv, g); err != nil {
			t.Fatal(err)
		}
		got, want = append(got, g), append(want, w)
	}
	return got, want
}

// check runs op on every rank with every root given and fails where a rank's output
// is not what it must be, byte for byte.
func (j *collRanks) check(t *testing.T, op ops.Op, dtype string, red ops.RedOp, size int64, roots ...int) {
	t.Helper()
	for _, root := range roots {
		got, want := j.run(t, op, dtype, red, size, root)
		for r := range got {
			if i := firstDiff(got[r], want[r]); i >= 0 {
				what := "its result"
				if bytes.Equal(want[r], bytes.Repeat([]byte{poison}, len(want[r]))) {
					what = "nothing, its output untouched"
				}
				name := string(op)
				if op.Reduces() {
					name += fmt.Sprintf(" %s %s", dtype, red)
				}
				t.Errorf("%s of %d bytes, %d ranks, root %d: rank %d must hold %s; byte %d is %#x, not %#x",
					name, size, len(got), root, r, what, i, got[r][i], want[r][i])
			}
		}
	}
}

// firstDiff is the first byte where a and b differ (-1: none).
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// Reduce leaves the combined inputs on the root, under every operator and in float
// and integer types, and writes nothing into any other rank's output, on 2 and 3
// ranks with the first and the last rank as root, at a size that is no multiple of
// the ranks.
func TestReduce(t *testing.T) {
	for _, n := range []int{2, 3} {
		j := openColl(t, n, 1<<12)
		for _, dtype := range []string{"bf16", "float32", "int32"} {
			for _, red := range ops.RedOps() {
				j.check(t, ops.Reduce, dtype, red, 1000, 0, n-1)
			}
		}
	}
}

// Gather leaves every rank's input, block by block in rank order, on the root and
// writes nothing into any other rank's output, on 2 and 3 ranks with the first and
// the last rank as root, at a size that is no multiple of the ranks.
func TestGather(t *testing.T) {
	for _, n := range []int{2, 3} {
		openColl(t, n, 1<<12).check(t, ops.Gather, "", ops.Sum, 1000, 0, n-1)
	}
}

// Scatter leaves block r of the root's input on rank r, the root included, on 2 and 3
// ranks with the first and the last rank as root, at a size that is no multiple of
// the ranks.
func TestScatter(t *testing.T) {
	for _, n := range []int{2, 3} {
		openColl(t, n, 1<<12).check(t, ops.Scatter, "", ops.Sum, 1000, 0, n-1)
	}
}

// A root out of the job is refused on every rank, before any rank reads or writes.
func TestRootOutOfRange(t *testing.T) {
	j := openColl(t, 2, 1<<10)
	for _, root := range []int{-1, 2} {
		for _, b := range j.b {
			c := backend.Collective{Op: ops.Reduce, DType: "float32", Bytes: 64, Root: root, Send: j.send.Slice(0, 64), Recv: j.recv.Slice(0, 64)}
			err := b.collective(c, backend.Launch{})
			if want := fmt.Sprintf("reduce root %d out of range: the job has ranks 0..1", root); err == nil || err.Error() != want {
				t.Errorf("root %d on rank %d: %v, want %q", root, b.rank, err, want)
			}
		}
	}
}
