package gpu

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
)

// userGetAdd imitates a user's get-add kernel as kernels.Signatures promises it (dst,
// local, src, tmp, nelem, peer): nelem elements of src on peer into tmp here, then dst
// = local + tmp in dtype. One that never gets (userAddNoGet) adds tmp as it was.
func (g *fakeGPU) userGetAdd(l fakeLaunch, dtype string) error {
	a := l.args
	if l.dim.Grid != 1 {
		return fmt.Errorf("fake: %s launched on %d blocks, written for one", l.kernel, l.dim.Grid)
	}
	var off [4]int64
	for i := range off {
		o, err := g.sym(a[i])
		if err != nil {
			return err
		}
		off[i] = o
	}
	n, peer := int64(a[4])*ops.ElemSize(dtype), int(a[5])
	if !g.w.userAddNoGet {
		if err := g.move(g.rank, off[3], peer, off[2], n); err != nil {
			return err
		}
	}
	var bufs [4][]byte
	for i := range bufs {
		b, err := g.w.bytes(g.rank, off[i], n)
		if err != nil {
			return err
		}
		bufs[i] = b
	}
	return coll.Reduce(ops.Sum, dtype, bufs[0], bufs[1], bufs[3])
}

// A user's get-add kernel serves get-add of its element type: GetAdd launches the
// kernel of the run's type on one block with the signature's arguments, and every
// element of the receiver's dst is its own value plus its peer's, on 2 ranks (rank 0
// from 1) and 3 (each from the next), float32 and bf16, at a count within the block
// and at exactly the block. The drop fault launches nothing (dst keeps the
// complement it held); a kernel that never gets leaves sums of what tmp held, which
// the check sees; more elements than the kernel's block, a type it has no kernel of,
// and symmem's own implementations are refused.
func TestUserGetAdd(t *testing.T) {
	const block = 1024
	extra := map[string]any{"max_elems": block, "max_elems_const": "block_size", "wraps": "my_fused_get_add_kernel: out=dst (*fp32), ..."}
	for _, n := range []int{2, 3} {
		for _, dtype := range []string{"float32", "bf16"} {
			for _, count := range []int64{1000, block} {
				for _, fault := range []string{"", "drop", "no get"} {
					name := fmt.Sprintf("%d ranks, %d %s, fault %q", n, count, dtype, fault)
					t.Run(name, func(t *testing.T) { userGetAdd(t, n, dtype, count, fault, extra) })
				}
			}
		}
	}
	w := newWorld(t, 2, 1<<20)
	bs, gs := openAll(t, w)
	impl := addUserWith(t, []*fakeWorld{w}, []string{"get_add_f32", "get_add_bf16"}, false, extra)
	bufs := getAddBuffers(t, bs, block+1, 4)
	before := len(gs[0].launches)
	err := bs[0].GetAdd(bufs[0][0], bufs[0][1], bufs[0][1], bufs[0][2], 1, "float32", backend.Launch{Impl: impl})
	if want := impl + "'s get_add_f32 adds at most 1024 elements, one block of my_fused_get_add_kernel's tl.constexpr block_size, not 1025: " +
		"rebuild with symmem kernels build FILE.py --const block_size=2048 (a power of two) and run its variant " + impl + "[block_size=2048]"; err == nil || err.Error() != want {
		t.Errorf("1025 elements: %v\nwant %s", err, want)
	}
	err = bs[0].GetAdd(bufs[0][0], bufs[0][1], bufs[0][1], bufs[0][2], 1, "int32", backend.Launch{Impl: impl})
	if want := `get-add {impl} ` + impl + ` has kernels of [float32 bf16], not of int32: give {dtype} float32 or bf16, or build its kernel of int32 (SYMMEM_KERNELS key "get-add:int32")`; err == nil || err.Error() != want {
		t.Errorf("int32: %v\nwant %s", err, want)
	}
	for _, own := range []string{implTriton, implCUDA} {
		if err := bs[0].GetAdd(bufs[0][0], bufs[0][1], bufs[0][1], bufs[0][2], 1, "float32", backend.Launch{Impl: own}); err == nil || !strings.Contains(err.Error(), "cannot run get-add") {
			t.Errorf("%s: %v", own, err)
		}
	}
	if len(gs[0].launches) != before {
		t.Errorf("the refusals launched %v", gs[0].launches[before:])
	}
	// Before any rank starts: the type (the planner's check), as for a collective.
	im, _ := w.reg.ByName(impl)
	if got := strings.Join(im.Kernels[ops.GetAdd], ","); got != "get_add_f32,get_add_bf16" {
		t.Errorf("%s serves get-add with %s", impl, got)
	}
	if err := CheckCollective(w.reg, impl, backend.Collective{Op: ops.GetAdd, DType: "int64"}, 0); err == nil || !strings.Contains(err.Error(), "not of int64") {
		t.Errorf("planned with int64: %v", err)
	}
	if err := CheckCollective(w.reg, impl, backend.Collective{Op: ops.GetAdd, DType: "bfloat16"}, 0); err != nil {
		t.Errorf("planned with bfloat16: %v", err)
	}
}

// getAddBuffers allocates on every rank, at the same offsets, get-add's dst, src
// (each rank's own operand and the one its receiver gets) and tmp of count elements of
// size bytes.
func getAddBuffers(t *testing.T, bs []*Backend, count, size int64) [][3]backend.Buffer {
	t.Helper()
	out := make([][3]backend.Buffer, len(bs))
	for r, b := range bs {
		for i := range out[r] {
			buf, err := b.Alloc(count * size)
			if err != nil {
				t.Fatal(err)
			}
			out[r][i] = buf
		}
	}
	return out
}

func userGetAdd(t *testing.T, n int, dtype string, count int64, fault string, extra map[string]any) {
	w := newWorld(t, n, 1<<20)
	bs, gs := openAll(t, w)
	impl := addUserWith(t, []*fakeWorld{w}, []string{"get_add_f32", "get_add_bf16"}, false, extra)
	w.userAddNoGet = fault == "no get"
	d, err := ops.LookupDType(dtype)
	if err != nil {
		t.Fatal(err)
	}
	bufs := getAddBuffers(t, bs, count, d.Size)
	value := func(r int) []byte {
		b, err := d.Encode(float64(r + 1))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	complement := func(b []byte) []byte {
		c := slices.Clone(b)
		for i := range c {
			c[i] ^= 0xff
		}
		return c
	}
	// As the run test lays them out: each rank's value in src, the complement of what
	// must arrive in dst and of the peer's value in tmp.
	want := make([][]byte, n)
	from := func(r int) int { return (r + 1) % n }
	receives := func(r int) bool { return n > 2 || r == 0 }
	for r, b := range bs {
		if err := b.Write(bufs[r][1], bytes.Repeat(value(r), int(count))); err != nil {
			t.Fatal(err)
		}
		if want[r], err = d.Encode(float64(r + 1 + from(r) + 1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(bufs[r][0], bytes.Repeat(complement(want[r]), int(count))); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(bufs[r][2], bytes.Repeat(complement(value(from(r))), int(count))); err != nil {
			t.Fatal(err)
		}
	}
	for r, b := range bs {
		if !receives(r) {
			continue
		}
		b.SetDrop(fault == "drop")
		before := len(gs[r].launches)
		dst, src, tmp := bufs[r][0], bufs[r][1], bufs[r][2]
		if err := b.GetAdd(dst, src, src, tmp, from(r), dtype, backend.Launch{Impl: impl}); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		launched := gs[r].launches[before:]
		if fault == "drop" {
			if len(launched) != 0 {
				t.Errorf("rank %d drops, and launched %v", r, launched)
			}
			continue
		}
		kernel := map[string]string{"float32": "get_add_f32", "bf16": "get_add_bf16"}[dtype]
		args := []uint64{b.addr(dst), b.addr(src), b.addr(src), b.addr(tmp), uint64(count), uint64(from(r))}
		if len(launched) != 1 || launched[0].impl != impl || launched[0].kernel != kernel || !slices.Equal(launched[0].args[:6], args) || launched[0].dim.Grid != 1 {
			t.Errorf("rank %d launched %+v, want %s/%s x1 with %v", r, launched, impl, kernel, args)
		}
	}
	// The check: every element of each receiver's dst.
	for r, b := range bs {
		if !receives(r) {
			continue
		}
		got := make([]byte, count*d.Size)
		if err := b.Read(bufs[r][0], got); err != nil {
			t.Fatal(err)
		}
		if ok := bytes.Equal(got, bytes.Repeat(want[r], int(count))); ok != (fault == "") {
			t.Errorf("rank %d: every element right %v, want %v (fault %q)", r, ok, fault == "", fault)
		}
	}
}
