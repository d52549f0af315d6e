package gpu

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// userCollective imitates a user's collective as kernels.Signatures promises it (the
// ones of examples/one_shot_all_reduce.py and push_collectives.py): it meets every
// rank's launch, refuses launches that disagree on what the contract says is the same
// everywhere (seq, the element count, the signal words, the root, the grid) or that
// name another rank or size, and then writes what the op defines into each rank's
// recv as that rank gave it. A kernel whose peer stays away gives up when it is
// bounded, as the examples do (waiting for the peer's signal of this launch, which
// stands at the last one), and spins on otherwise: its stream never finishes.
func (g *fakeGPU) userCollective(s *fakeStream, l fakeLaunch) error {
	w := g.w
	if w.absent >= 0 {
		mb, ok := l.bounded()
		if !ok || g.unbounded {
			s.stuck = true
			return nil
		}
		seq, _ := l.param("seq")
		return g.trap(mb, gaveUpSignal, seq, seq-1, uint64(w.absent))
	}
	w.userCalls = append(w.userCalls, stagedCall{g, l})
	if len(w.userCalls) < w.size {
		return nil
	}
	calls := w.userCalls
	w.userCalls = nil
	// What the table says the kernel does: its op, element type and operator.
	k, _ := userTableKernel(l.kernel)
	dtype, elem, red := k.DType, int64(1), ops.Sum
	if dtype != "" {
		elem = ops.ElemSize(dtype)
	}
	if k.RedOp != "" {
		var err error
		if red, err = ops.LookupRedOp(k.RedOp); err != nil {
			return err
		}
	}
	if w.userSums {
		red = ops.Sum // a kernel that combines with another operator than it promises
	}
	p := func(c stagedCall, name string) uint64 { v, _ := c.l.param(name); return v }
	first := calls[0]
	for _, c := range calls {
		for _, name := range []string{"nelem", "sig", "seq", "n", "root", "tokens", "hidden"} {
			if p(c, name) != p(first, name) {
				return fmt.Errorf("fake: %s: rank %d passes %s %d, rank %d %d", c.l.kernel, c.g.rank, name, p(c, name), first.g.rank, p(first, name))
			}
		}
		if c.l.dim.Grid != first.l.dim.Grid || c.l.kernel != first.l.kernel {
			return fmt.Errorf("fake: rank %d launched %s x%d, rank %d %s x%d", c.g.rank, c.l.kernel, c.l.dim.Grid, first.g.rank, first.l.kernel, first.l.dim.Grid)
		}
		if me := p(c, "me"); me != uint64(c.g.rank) || p(c, "n") != uint64(w.size) {
			return fmt.Errorf("fake: rank %d passes me %d, n %d", c.g.rank, me, p(c, "n"))
		}
		if c.l.dim.Grid > MaxCollBlocks {
			return fmt.Errorf("fake: %s launched with %d blocks: the signal words hold %d", c.l.kernel, c.l.dim.Grid, MaxCollBlocks)
		}
	}
	if strings.HasPrefix(l.kernel, "moe_") {
		return userMoE(w, calls)
	}
	share := int64(p(first, "nelem")) * elem
	n := int64(w.size)
	// in(q, k) is block k (of share bytes) of rank q's send.
	in := func(q int, k int64) ([]byte, error) {
		send, err := calls[q].g.sym(p(calls[q], "send"))
		if err != nil {
			return nil, err
		}
		return w.bytes(q, send+k*share, share)
	}
	outs := make([][]byte, n)
	for r := range w.size {
		var out []byte
		switch k.Op {
		case string(ops.AllReduce), string(ops.ReduceScatter):
			blk := int64(r) // reduce-scatter combines block r
			if k.Op == string(ops.AllReduce) {
				blk = 0
			}
			var srcs [][]byte
			for q := range w.size {
				b, err := in(q, blk)
				if err != nil {
					return err
				}
				srcs = append(srcs, b)
			}
			out = make([]byte, share)
			if err := coll.Reduce(red, dtype, out, srcs...); err != nil {
				return err
			}
		case string(ops.AllGather), string(ops.AllToAll):
			k := int64(0)
			if l.kernel == "all_to_all" {
				k = int64(r)
			}
			for q := range w.size {
				b, err := in(q, k)
				if err != nil {
					return err
				}
				out = append(out, b...)
			}
		case string(ops.Broadcast):
			b, err := in(int(p(first, "root")), 0)
			if err != nil {
				return err
			}
			out = append(out, b...)
		default:
			return fmt.Errorf("fake: no imitation of a user's %s", l.kernel)
		}
		outs[r] = out
	}
	for r, c := range calls {
		recv, err := c.g.sym(p(c, "recv"))
		if err != nil {
			return err
		}
		d, err := w.bytes(r, recv, int64(len(outs[r])))
		if err != nil {
			return err
		}
		copy(d, outs[r])
	}
	return nil
}

// userMoE imitates a user's dispatch or combine from the tables each rank was given
// (kernels.Signatures, moeParams), read from the rank's own memory: dispatch puts
// token t of rank s into slot slots_s[t*n+d] of rank d's recv; combine sums into token
// t of rank s's recv the copies at slot slots_s[t*n+d] of every rank d's send (as a
// kernel that pushes from, or pulls to, rank s: at the addresses s's arguments give). Each
// copy must also be where the receiving rank's origin table says it came from, and
// each rank's nslots its count of copies.
func userMoE(w *fakeWorld, calls []stagedCall) error {
	p := func(c stagedCall, name string) int64 { v, _ := c.l.param(name); return int64(v) }
	first := calls[0]
	n, tokens, hidden := int64(w.size), p(first, "tokens"), p(first, "hidden")
	dtype, elem := "", int64(1)
	switch first.l.kernel {
	case "moe_combine_bf16":
		dtype, elem = "bf16", 2
	case "moe_combine_f32":
		dtype, elem = "float32", 4
	}
	tok := hidden * elem
	int32s := func(g *fakeGPU, addr uint64, count int64) ([]int32, error) {
		b, err := g.devBytes(addr, uint64(4*count))
		if err != nil {
			return nil, err
		}
		out := make([]int32, count)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	}
	slots, origins := make([][]int32, n), make([][]int32, n)
	held := make([]int64, n) // copies found on each rank
	for r, c := range calls {
		var err error
		if slots[r], err = int32s(c.g, uint64(p(c, "slots")), tokens*n); err != nil {
			return err
		}
		if origins[r], err = int32s(c.g, uint64(p(c, "origin")), 2*p(c, "nslots")); err != nil {
			return err
		}
	}
	// buf is size bytes at at past rank by's symmetric buffer name, on rank on (a
	// kernel puts to, and loads from, its own arguments' addresses on its peers).
	buf := func(by int64, name string, on, at, size int64) ([]byte, error) {
		base, err := calls[by].g.sym(uint64(p(calls[by], name)))
		if err != nil {
			return nil, err
		}
		return w.bytes(int(on), base+at, size)
	}
	for s := range n {
		for t := range tokens {
			var copies [][]byte
			for d := range n {
				j := int64(slots[s][t*n+d])
				if j < 0 {
					continue
				}
				held[d]++
				if j >= p(calls[d], "nslots") || origins[d][2*j] != int32(s) || int64(origins[d][2*j+1]) != t {
					return fmt.Errorf("fake: token %d of rank %d goes to slot %d of rank %d, whose origin table does not say so", t, s, j, d)
				}
				if first.l.kernel == "moe_dispatch" {
					src, err := buf(s, "send", s, t*tok, tok)
					if err != nil {
						return err
					}
					dst, err := buf(s, "recv", d, j*tok, tok)
					if err != nil {
						return err
					}
					copy(dst, src)
					continue
				}
				src, err := buf(s, "send", d, j*tok, tok)
				if err != nil {
					return err
				}
				copies = append(copies, slices.Clone(src))
			}
			if first.l.kernel != "moe_dispatch" {
				dst, err := buf(s, "recv", s, t*tok, tok)
				if err != nil {
					return err
				}
				if err := coll.Reduce(ops.Sum, dtype, dst, copies...); err != nil {
					return err
				}
			}
		}
	}
	for d := range n {
		if held[d] != p(calls[d], "nslots") {
			return fmt.Errorf("fake: rank %d is told it holds %d copies, the tables send it %d", d, p(calls[d], "nslots"), held[d])
		}
	}
	return nil
}

// userTableKernel is the table's entry of a user's kernel (pkg/kernels).
func userTableKernel(kernel string) (kernels.UserKernel, bool) {
	for _, k := range kernels.UserKernels() {
		if k.Kernel == kernel {
			return k, true
		}
	}
	return kernels.UserKernel{}, false
}

// userNames makes each test's user implementation a name of its own: the registry
// keeps a name with the directory it first came from.
var userNames = map[string]int{}

// addUser writes a user's catalogue of the given collective kernels (with the wait
// limit and mailbox when bounded, in warps 4 and 32) to a new directory, registers it,
// and has every fake world in ws load its images. It returns the implementation's
// name.
func addUser(t *testing.T, ws []*fakeWorld, ks []string, bounded bool) string {
	t.Helper()
	return addUserWith(t, ws, ks, bounded, nil)
}

// addUserWith is addUser with the sidecar fields of extra (grid, cooperative).
func addUserWith(t *testing.T, ws []*fakeWorld, ks []string, bounded bool, extra map[string]any) string {
	t.Helper()
	userNames[t.Name()]++
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	name := fmt.Sprintf("mine-%s-%d", clean, userNames[t.Name()])
	dir := t.TempDir()
	for _, kernel := range ks {
		params := slicesOf(kernels.Signatures()[kernel])
		uk, _ := userTableKernel(kernel)
		if bounded && uk.Waits {
			params = append(params, kernels.Bounded...)
		}
		params = append(params, kernels.Param{Name: "global_scratch", Type: "ptr", Hidden: true}, kernels.Param{Name: "profile_scratch", Type: "ptr", Hidden: true})
		warpCounts := []int{4, 32}
		if uk.OneWarp {
			warpCounts = []int{1}
		}
		for _, warps := range warpCounts {
			stem := fmt.Sprintf("%s.%s.w%d.sm90", name, kernel, warps)
			image := []byte("fake cubin " + stem)
			sum := sha256.Sum256(image)
			meta := map[string]any{"impl": name, "kernel": kernel, "entry": "k_" + kernel, "file": stem + ".cubin", "format": "cubin",
				"target": "sm_90a", "arch": 90, "num_warps": warps, "block_threads": 32 * warps, "uses_nvshmem": true,
				"nvshmem_device_version": []int{3, 4, 5}, "sha256": hex.EncodeToString(sum[:]), "params": params}
			maps.Copy(meta, extra)
			js, err := json.Marshal(meta)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stem+".cubin"), image, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stem+".cubin.json"), js, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := kernels.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		reg, _, err := w.reg.WithUser(c)
		if err != nil {
			t.Fatal(err)
		}
		w.reg = reg
		for _, b := range w.opened {
			b.reg = reg
		}
		w.files = maps.Clone(w.files)
		for _, a := range c.Artifacts {
			data, err := a.Data()
			if err != nil {
				t.Fatal(err)
			}
			w.files[sha256.Sum256(data)] = a.File
			w.user = append(w.user, a)
		}
	}
	return name
}

func slicesOf(ps []kernels.Param) []kernels.Param { return append([]kernels.Param(nil), ps...) }

// userWorld opens n fake ranks with send and recv buffers of max bytes and the scratch
// a user's all-reduce is promised (2 x n x max).
func userWorld(t *testing.T, n int, max int64) (*fakeWorld, []*Backend, []*fakeGPU, [3]backend.Buffer) {
	t.Helper()
	scratch := 2 * int64(n) * max
	w := newWorld(t, n, 2*backend.Align(max, backend.HeapAlign)+backend.Align(scratch, backend.HeapAlign)+backend.HeapAlign)
	var bs []*Backend
	var gs []*fakeGPU
	var bufs [3]backend.Buffer
	for r := 0; r < n; r++ {
		b, g := w.open(t, r, Config{})
		for i, size := range []int64{max, max, scratch} {
			buf, err := b.Alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = buf
		}
		bs, gs = append(bs, b), append(gs, g)
	}
	return w, bs, gs, bufs
}

// userKernelsAll are every kernel of a user's collectives.
var userKernelsAll = []string{"all_reduce_bf16", "all_reduce_f32", "reduce_scatter_bf16", "reduce_scatter_f32", "all_gather", "all_to_all", "broadcast"}

// A user's collective is launched with what kernels.Signatures promises: every rank's
// send, recv and scratch, one rank's share in elements (bytes where the op only moves
// data), signal words in the sync area (zeroed before the first launch, the same on
// every rank), seq counting launches from 1 alike on every rank, this rank and the
// number of ranks, broadcast's root; the wait limit and mailbox only when the kernel
// takes them. The result lands (the fake does what the op defines), on 2 and 3 ranks,
// every op and element type, sizes that split unevenly, in a row.
func TestUserCollectives(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, bounded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d ranks, bounded %v", n, bounded), func(t *testing.T) { userCollectives(t, n, bounded) })
		}
	}
}

func userCollectives(t *testing.T, n int, bounded bool) {
	type tc struct {
		op            ops.Op
		dtype, kernel string
	}
	cases := []tc{
		{ops.AllReduce, "bf16", "all_reduce_bf16"}, {ops.AllReduce, "float32", "all_reduce_f32"},
		{ops.ReduceScatter, "bf16", "reduce_scatter_bf16"}, {ops.ReduceScatter, "float32", "reduce_scatter_f32"},
		{ops.AllGather, "", "all_gather"}, {ops.AllToAll, "", "all_to_all"}, {ops.Broadcast, "", "broadcast"},
	}
	// Up to 3 MiB: a grid of 24 blocks. The sums stop at 1 MiB (8 blocks): they cost
	// the fake most, and a user's kernel sees no size's choice of algorithm.
	const most, mostSum = 3 << 20, 1 << 20
	w, bs, gs, bufs := userWorld(t, n, most)
	impl := addUser(t, []*fakeWorld{w}, userKernelsAll, bounded)
	// A leftover in the signal words from before the job must not survive: the
	// first word and the last.
	words := []int64{w.total - syncArea(n) + userSigOff(n), w.total - syncArea(n) + userSigOff(n) + userSigArea(n) - 8}
	for r := range n {
		for _, at := range words {
			binary.LittleEndian.PutUint64(w.heaps[r][at:], 99)
		}
	}
	seq := uint64(0)
	for _, c := range cases {
		for _, size := range []int64{96 * int64(n), 6000 * 16 * int64(n), mostSum, most} {
			if size > mostSum && c.op.Reduces() {
				continue
			}
			seq++
			name := fmt.Sprintf("%d ranks, bounded %v, %s %s %d", n, bounded, c.op, c.dtype, size)
			got, want, err := runCollSeq(t, bs, bufs, c.op, c.dtype, "", size, backend.Launch{Impl: impl}, int(seq))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			elem := int64(1)
			if c.dtype != "" {
				elem = ops.ElemSize(c.dtype)
			}
			shape, _ := ops.Op(c.op).Shape(size, n, elem)
			for r := range got {
				if !bytes.Equal(got[r], want[r]) {
					t.Errorf("%s: rank %d holds the wrong result", name, r)
				}
				l := gs[r].launches[len(gs[r].launches)-1]
				args := map[string]uint64{}
				for _, p := range []string{"send", "recv", "scratch", "nelem", "sig", "seq", "me", "n", "root", paramLimit, paramMailbox} {
					if v, ok := l.param(p); ok {
						args[p] = v
					}
				}
				b := bs[r]
				wantArgs := map[string]uint64{"send": b.addr(bufs[0]), "recv": b.addr(bufs[1]), "scratch": b.addr(bufs[2]),
					"nelem": uint64(shape.Block / elem), "sig": uint64(b.sync) + uint64(userSigOff(n)), "seq": seq, "me": uint64(r), "n": uint64(n)}
				if c.op == ops.Broadcast {
					wantArgs["root"] = uint64(n - 1)
				}
				if bounded {
					wantArgs[paramLimit], wantArgs[paramMailbox] = uint64(b.waitLimit.Nanoseconds()), b.mail.dev
				}
				if !maps.Equal(args, wantArgs) {
					t.Errorf("%s: rank %d launched %s with %v, want %v", name, r, l.kernel, args, wantArgs)
				}
				if blocks := ShapeFor(shape.Bytes, backend.Launch{}).Blocks; l.kernel != c.kernel || l.dim.Grid != uint32(blocks) {
					t.Errorf("%s: rank %d launched %s x%d, want %s x%d", name, r, l.kernel, l.dim.Grid, c.kernel, blocks)
				}
				if k := b.Kernel(); k != c.kernel {
					t.Errorf("%s: rank %d says %q ran", name, r, k)
				}
			}
		}
	}
	for r := range n {
		for _, at := range words {
			if v := binary.LittleEndian.Uint64(w.heaps[r][at:]); v != 0 {
				t.Errorf("rank %d: the signal word at %d was not zeroed before the first launch (%d)", r, at, v)
			}
		}
	}
}

// A user's reducing kernels combine with the operator their kernel's name says (one
// kernel per element type and operator): an all-reduce or reduce-scatter with --redop
// launches that operator's kernel, and the result is checked with that operator's
// check data; an operator without a kernel is refused before a launch. A kernel that
// sums where it promises max fails the check.
func TestUserRedOps(t *testing.T) {
	const size = 96 * 1024
	w, bs, gs, bufs := userWorld(t, 2, size)
	impl := addUser(t, []*fakeWorld{w}, []string{"all_reduce_bf16", "all_reduce_bf16_max", "all_reduce_f32_min", "reduce_scatter_f32_prod"}, true)
	im, _ := w.reg.ByName(impl)
	if strings.Join(im.RedOps, ",") != "sum,prod,max,min" {
		t.Errorf("%s reduces with %v", impl, im.RedOps)
	}
	seq := 0
	for _, tc := range []struct {
		op     ops.Op
		dtype  string
		red    ops.RedOp
		kernel string
	}{
		{ops.AllReduce, "bf16", ops.Sum, "all_reduce_bf16"}, {ops.AllReduce, "bf16", ops.Max, "all_reduce_bf16_max"},
		{ops.AllReduce, "float32", ops.Min, "all_reduce_f32_min"}, {ops.ReduceScatter, "float32", ops.Prod, "reduce_scatter_f32_prod"},
	} {
		seq++
		got, want, err := runCollRed(t, bs, bufs, tc.op, tc.dtype, "", tc.red, size, backend.Launch{Impl: impl}, seq)
		if err != nil {
			t.Fatalf("%s %s %s: %v", tc.op, tc.dtype, tc.red, err)
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%s %s %s: rank %d holds the wrong result", tc.op, tc.dtype, tc.red, r)
			}
			if l := gs[r].launches[len(gs[r].launches)-1]; l.kernel != tc.kernel {
				t.Errorf("%s %s %s: rank %d launched %s, want %s", tc.op, tc.dtype, tc.red, r, l.kernel, tc.kernel)
			}
		}
	}
	for _, tc := range []struct {
		c    backend.Collective
		want string
	}{
		{backend.Collective{Op: ops.AllReduce, DType: "bf16", RedOp: ops.Min}, `all-reduce {impl} ` + impl + `: no min kernel for bf16 (its bf16 kernels combine with sum, max): build one under SYMMEM_KERNELS key "all-reduce:min", or use {dtype} float32`},
		{backend.Collective{Op: ops.AllReduce, DType: "float32", RedOp: ops.Avg}, `all-reduce {impl} ` + impl + `: its kernels combine with sum, max, min, not avg: build one under SYMMEM_KERNELS key "all-reduce:float32:avg", or use {redop} sum or max or min`},
		{backend.Collective{Op: ops.ReduceScatter, DType: "float32", RedOp: ops.Sum}, `reduce-scatter {impl} ` + impl + `: its kernels combine with prod, not sum`},
	} {
		if err := CheckCollective(w.reg, impl, tc.c, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %s: %v, want %q", tc.c.Op, tc.c.DType, tc.c.RedOp, err, tc.want)
		}
	}
	// The max kernel that sums.
	w.userSums = true
	got, want, err := runCollRed(t, bs, bufs, ops.AllReduce, "bf16", "", ops.Max, size, backend.Launch{Impl: impl}, seq+1)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got[0], want[0]) {
		t.Error("an all-reduce --redop max whose kernel sums passed the check")
	}
}

// A collective written for PyTorch's module is launched as its author launched it:
// the grid its sidecar names (one block) whatever the message, cooperatively; symmem's
// grid and a plain launch otherwise.
func TestUserCollectiveGridAndCooperative(t *testing.T) {
	const size = 1 << 20 // ShapeFor: 8 blocks
	w, bs, gs, bufs := userWorld(t, 2, size)
	torchy := addUserWith(t, []*fakeWorld{w}, []string{"all_reduce_bf16", "all_to_all"}, false, map[string]any{"grid": 1, "cooperative": true})
	plain := addUser(t, []*fakeWorld{w}, []string{"all_reduce_bf16"}, false)
	for _, tc := range []struct {
		impl        string
		op          ops.Op
		dtype       string
		grid        uint32
		cooperative bool
	}{{torchy, ops.AllReduce, "bf16", 1, true}, {torchy, ops.AllToAll, "", 1, true}, {plain, ops.AllReduce, "bf16", 8, false}} {
		got, want, err := runColl(t, bs, bufs, tc.op, tc.dtype, "", size, backend.Launch{Impl: tc.impl})
		if err != nil {
			t.Fatalf("%s %s: %v", tc.impl, tc.op, err)
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%s %s: rank %d holds the wrong result", tc.impl, tc.op, r)
			}
			if l := gs[r].launches[len(gs[r].launches)-1]; l.dim.Grid != tc.grid || l.cooperative != tc.cooperative {
				t.Errorf("%s %s: rank %d launched %d blocks, cooperative %v; want %d, %v", tc.impl, tc.op, r, l.dim.Grid, l.cooperative, tc.grid, tc.cooperative)
			}
		}
	}
}

// A user's collective built for one warp count alone (torch's reduce, a one-thread
// collective, is built as one warp) runs with it where --warps is not given: the
// shape's 8 warps at 1 MiB were refused ("built for [1] warps, not 8").
func TestUserCollectiveBuiltWarps(t *testing.T) {
	const size = 1 << 20
	w, bs, gs, bufs := userWorld(t, 2, size)
	one := addUserWith(t, []*fakeWorld{w}, []string{"all_reduce_bf16"}, false,
		map[string]any{"grid": 1, "cooperative": true, "num_warps": 1, "block_threads": 32})
	got, want, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", "", size, backend.Launch{Impl: one})
	if err != nil {
		t.Fatal(err)
	}
	for r := range got {
		if !bytes.Equal(got[r], want[r]) {
			t.Errorf("rank %d holds the wrong result", r)
		}
		if l := gs[r].launches[len(gs[r].launches)-1]; l.dim.Block != 32 {
			t.Errorf("rank %d launched blocks of %d threads, want 32", r, l.dim.Block)
		}
	}
	if _, _, err := runColl(t, bs, bufs, ops.AllReduce, "bf16", "", size, backend.Launch{Impl: one, Warps: 4}); err == nil || !strings.Contains(err.Error(), "was built for [1] warps, not 4") {
		t.Errorf("--warps 4: %v", err)
	}
}

// Under the drop fault the dropping rank's kernel writes its output into scratch: its
// own result stays undelivered, and the run is wrong, for every op. Reverting the
// redirection makes this test fail.
func TestUserCollectivesDrop(t *testing.T) {
	w, bs, gs, bufs := userWorld(t, 2, 1<<16)
	impl := addUser(t, []*fakeWorld{w}, userKernelsAll, true)
	bs[1].SetDrop(true)
	for _, op := range []ops.Op{ops.AllReduce, ops.ReduceScatter, ops.AllGather, ops.AllToAll, ops.Broadcast} {
		dtype := ""
		if ops.Op(op).Reduces() {
			dtype = "bf16"
		}
		got, want, err := runColl(t, bs, bufs, op, dtype, "", 1<<16, backend.Launch{Impl: impl})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], want[0]) || bytes.Equal(got[1], want[1]) {
			t.Errorf("%s: rank 0 right %v (want true), rank 1 right %v (want false)", op, bytes.Equal(got[0], want[0]), bytes.Equal(got[1], want[1]))
		}
		if recv, _ := gs[1].launches[len(gs[1].launches)-1].param("recv"); recv != bs[1].addr(bufs[2]) {
			t.Errorf("%s: the dropping rank's recv is %#x, want its scratch %#x", op, recv, bs[1].addr(bufs[2]))
		}
	}
}

// What a user's collective cannot run is refused on every rank before anything is
// launched, saying what to do: an element type it has no kernel for (and run and
// bench ask CheckCollective before any rank starts), --algo, another lane, a
// scratch smaller than promised.
func TestUserCollectiveRefusals(t *testing.T) {
	w, bs, gs, bufs := userWorld(t, 2, 1<<16)
	impl := addUser(t, []*fakeWorld{w}, []string{"all_reduce_bf16"}, false)
	c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1 << 16, Send: bufs[0], Recv: bufs[1], Scratch: bufs[2]}
	f32 := c
	f32.DType = "float32"
	algo := c
	algo.Algo = ops.OneShot
	small := c
	small.Scratch = bufs[2].Slice(0, 3<<16)
	for _, tc := range []struct {
		name string
		c    backend.Collective
		l    backend.Launch
		want string
	}{
		{"float32", f32, backend.Launch{Impl: impl}, `all-reduce {impl} ` + impl + `: no kernel for float32 (it has bf16): build one under SYMMEM_KERNELS key "all-reduce:float32", or use {dtype} bf16`},
		{"algo", algo, backend.Launch{Impl: impl}, "{algo} one-shot: a user's kernel runs its own algorithm; leave {algo} out for {impl} " + impl},
		{"lane", c, backend.Launch{Impl: impl, Lane: 1}, "{impl} " + impl + " runs collectives on one stream only (lane 1 asked)"},
		{"scratch", small, backend.Launch{Impl: impl}, "the 196608-byte scratch is smaller than the 262144 bytes its kernel is promised (2 x 2 ranks x 65536 bytes)"},
	} {
		for r, b := range bs {
			if err := b.Lanes(2); err != nil {
				t.Fatal(err)
			}
			if err := b.Collective(tc.c, tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: rank %d: %v\nwant %q", tc.name, r, err, tc.want)
			}
		}
	}
	for r := range bs {
		if len(gs[r].launches) != 0 {
			t.Errorf("rank %d launched %v", r, grids(gs[r]))
		}
	}
	if err := CheckCollective(w.reg, impl, backend.Collective{Op: ops.AllReduce, DType: "float32"}, 0); err == nil || !strings.Contains(err.Error(), "no kernel for float32") {
		t.Errorf("CheckCollective float32: %v", err)
	}
	if err := CheckCollective(w.reg, impl, backend.Collective{Op: ops.AllReduce, DType: "bf16"}, 0); err != nil {
		t.Errorf("CheckCollective bf16: %v", err)
	}
	if err := CheckCollective(w.reg, implNCCL, backend.Collective{Op: ops.AllReduce, DType: "bf16", Algo: ops.OneShot}, 0); err == nil || !strings.Contains(err.Error(), "{algo} one-shot: NCCL picks its own algorithms") {
		t.Errorf("CheckCollective nccl algo one-shot: %v", err)
	}
	if err := CheckCollective(w.reg, implNCCL, backend.Collective{Op: ops.AllGather, DType: "bf16", Algo: ops.OneShot}, 0); err != nil {
		t.Errorf("CheckCollective nccl all-gather, algo one-shot (for all-reduce only): %v", err)
	}
	if err := CheckCollective(w.reg, "triton", backend.Collective{Op: ops.AllReduce, DType: "float32"}, 0); err != nil {
		t.Errorf("CheckCollective of symmem's own: %v", err)
	}
}

// The areas of the sync area follow each other without overlap and end inside it: a
// user's signal words that overlapped the LL128 areas, say, would be flags to them.
func TestSyncAreasAreDisjoint(t *testing.T) {
	withLL128Budget(func() {
		for n := 1; n <= 2*pushRanks; n++ {
			_, state := (&Backend{size: n}).syncWords()
			areas := []struct {
				name      string
				off, size int64
			}{
				{"barrier and launch words", 0, int64(state) + 2*MaxCollBlocks*8},
				{"push", pushAreaOff(n), pushArea(n)},
				{"LL", llAreaOff(n), llArea(n)},
				{"push_ll", llPushAreaOff(n), llPushArea(n)},
				{"LL128", ll128AreaOff(n), ll128Area(n)},
				{"user signal words", userSigOff(n), userSigArea(n)},
			}
			for i := 1; i < len(areas); i++ {
				if prev, a := areas[i-1], areas[i]; a.off < prev.off+prev.size {
					t.Errorf("%d ranks: the %s area at %d overlaps the %s area [%d, %d)", n, a.name, a.off, prev.name, prev.off, prev.off+prev.size)
				}
			}
			if last := areas[len(areas)-1]; last.off+last.size > syncArea(n) {
				t.Errorf("%d ranks: the %s area ends at %d, past the sync area's %d", n, last.name, last.off+last.size, syncArea(n))
			}
		}
	})
}

// A rank that stays away from a user's collective (the absent fault) launches nothing;
// its peer's kernel gives up on the device when it takes the wait limit and mailbox
// (the error names the signal it waited for); when it does not, the host gives up on it
// at the next barrier past its own limit (inside a bench's timed window nothing but
// --timeout does: TestNoteOnAnUnboundedUserCollective, docs/kernels.md).
func TestUserCollectiveAbsentPeer(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		w, bs, gs, bufs := userWorld(t, 2, 1<<16)
		impl := addUser(t, []*fakeWorld{w}, []string{"all_reduce_bf16"}, bounded)
		bs[1].SetAbsent(true)
		w.absent = 1
		c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1 << 16, Send: bufs[0], Recv: bufs[1], Scratch: bufs[2]}
		if err := bs[1].Collective(c, backend.Launch{Impl: impl}); err != nil || len(gs[1].launches) != 0 {
			t.Fatalf("bounded %v: the absent rank: %v, launched %d kernels", bounded, err, len(gs[1].launches))
		}
		err := bs[0].Collective(c, backend.Launch{Impl: impl})
		if err == nil {
			err = bs[0].Barrier()
		}
		want := "rank 0: the GPU gave up waiting for a signal"
		if !bounded {
			want = "did not finish within"
		}
		if !errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), want) {
			t.Errorf("bounded %v: a peer that never comes: %v\nwant %q", bounded, err, want)
		}
	}
}

// Inside a timed window nothing bounds a kernel that does not bound its own wait but
// the mark bench sets after a measurement's first warm-up: a first operation that has
// not finished within the host's limit fails the rank (it ran into --timeout). Without
// a mark the window is waited for as before: on a GPU, until --timeout.
func TestTimedWindowWaitsForTheMarkOnly(t *testing.T) {
	for _, marked := range []bool{true, false} {
		w, bs, _, bufs := userWorld(t, 2, 1<<16)
		impl := addUser(t, []*fakeWorld{w}, []string{"all_reduce_bf16"}, false)
		bs[1].SetAbsent(true)
		w.absent = 1
		c := backend.Collective{Op: ops.AllReduce, DType: "bf16", Bytes: 1 << 16, Send: bufs[0], Recv: bufs[1], Scratch: bufs[2]}
		op := func(int) error { return bs[0].Collective(c, backend.Launch{Impl: impl}) }
		if err := op(0); err != nil { // the warm-up
			t.Fatal(err)
		}
		if marked {
			if err := bs[0].MarkProgress(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := bs[0].TimeOps(2, op)
		want := "rank 0: this measurement's first operation did not finish within 15s: a peer that never came"
		if marked && (!errors.Is(err, backend.ErrUndelivered) || !strings.Contains(err.Error(), want)) {
			t.Errorf("marked: %v\nwant %q", err, want)
		}
		if !marked && (err == nil || !strings.Contains(err.Error(), "a real cuEventSynchronize would hang")) {
			t.Errorf("unmarked: %v, want the fake's account of a wait that would hang", err)
		}
	}
}

// A user's dispatch and combine get this rank's routing tables (kernels.Signatures,
// moeParams) and land what bench checks (coll.Data.WantBlocks, as the CPU backend
// computes it): the fake moves and sums by the tables alone and refuses tables whose
// directions disagree (slots on one rank, origin on the other) or whose nslots is not
// the copies a rank receives. 2 and 3 ranks, the uneven shapes of the MoE tests, both
// element types, twice per routing (the second from the kept tables, uploaded once),
// freed by Close.
func TestUserMoE(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, m := range moeShapes {
			for _, dtype := range []string{"bf16", "float32"} {
				j := newMoEJobScratch(t, n, m, dtype, 2*int64(n))
				impl := addUser(t, []*fakeWorld{j.gs[0].w}, []string{"moe_dispatch", "moe_combine_bf16", "moe_combine_f32"}, true)
				for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
					name := fmt.Sprintf("%d ranks/%+v/%s/%s", n, m, dtype, op)
					c := j.collective(op, dtype)
					for seq := range 2 {
						got, want, err := j.run(t, c, backend.Launch{Impl: impl}, seq)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for r := range got {
							if !bytes.Equal(got[r], want[r]) {
								t.Errorf("%s: rank %d holds the wrong result (call %d)", name, r, seq+1)
							}
							l := j.gs[r].launches[len(j.gs[r].launches)-1]
							hidden, _ := l.param("hidden")
							tokens, _ := l.param("tokens")
							nslots, _ := l.param("nslots")
							wantHidden := uint64(j.rt.Token)
							if op == ops.Combine {
								wantHidden = uint64(m.Hidden)
							}
							if hidden != wantHidden || tokens != uint64(m.Tokens) || nslots != uint64(j.rt.Slots[r]) {
								t.Errorf("%s: rank %d launched %s with tokens %d, nslots %d, hidden %d; want %d, %d, %d",
									name, r, l.kernel, tokens, nslots, hidden, m.Tokens, j.rt.Slots[r], wantHidden)
							}
						}
					}
				}
				for r, g := range j.gs {
					if mem := g.mem(); mem.allocs != 2 { // dispatch's tables and combine's
						t.Errorf("%d ranks/%+v/%s: rank %d uploaded %d tables, want 2", n, m, dtype, r, mem.allocs)
					}
					if err := j.bs[r].Close(); err != nil {
						t.Fatal(err)
					}
					if mem := g.mem(); len(mem.live) != 0 {
						t.Errorf("rank %d: Close left %d tables in device memory", r, len(mem.live))
					}
				}
			}
		}
	}
}

// Under the drop fault a user's dispatch and combine still run on the dropping rank
// (its peers would wait for it), but what it delivers goes to scratch: the peer that
// should receive it (dispatch) and the dropping rank itself (combine) hold wrong
// bytes. A scratch smaller than the kernel is promised is refused.
func TestUserMoEDropAndScratch(t *testing.T) {
	for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
		j := newMoEJobScratch(t, 2, moeShapes[0], "bf16", 4)
		impl := addUser(t, []*fakeWorld{j.gs[0].w}, []string{"moe_dispatch", "moe_combine_bf16"}, true)
		j.bs[1].SetDrop(true)
		got, want, err := j.run(t, j.collective(op, "bf16"), backend.Launch{Impl: impl}, 0)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		wrong := 0
		if op == ops.Combine {
			wrong = 1
		}
		if bytes.Equal(got[wrong], want[wrong]) {
			t.Errorf("%s: rank %d's output is right although rank 1 dropped", op, wrong)
		}
		if len(j.gs[1].launches) == 0 {
			t.Errorf("%s: the dropping rank launched nothing", op)
		}
		small := newMoEJobScratch(t, 2, moeShapes[0], "bf16", 1)
		impl = addUser(t, []*fakeWorld{small.gs[0].w}, []string{"moe_dispatch", "moe_combine_bf16"}, true)
		err = small.bs[0].Collective(small.collective(op, "bf16"), backend.Launch{Impl: impl})
		if err == nil || !strings.Contains(err.Error(), "smaller than the") {
			t.Errorf("%s with a scratch of one buffer's size: %v, want a refusal", op, err)
		}
	}
}

// A rank's tables for a small routing written out by hand: two ranks, three tokens of
// 4 bytes; rank 0's token 0 goes to both ranks, its token 2 to rank 1, rank 1's token
// 1 to rank 0. Combine's blocks (the same copies the other way) give the same tables.
// Blocks no routing has are refused on every rank alike.
func TestUserMoETables(t *testing.T) {
	dispatch := []backend.Block{
		{Src: 0, Dst: 0, SrcOff: 0, DstOff: 0, Bytes: 4},
		{Src: 0, Dst: 1, SrcOff: 0, DstOff: 0, Bytes: 4},
		{Src: 0, Dst: 1, SrcOff: 8, DstOff: 4, Bytes: 4},
		{Src: 1, Dst: 0, SrcOff: 4, DstOff: 4, Bytes: 4},
	}
	var combine []backend.Block
	for _, b := range dispatch {
		combine = append(combine, backend.Block{Src: b.Dst, Dst: b.Src, SrcOff: b.DstOff, DstOff: b.SrcOff, Bytes: b.Bytes})
	}
	want := [][]int32{ // slots (token x rank), then origin (rank, token per slot)
		{0, 0, -1, -1, -1, 1, 0, 0, 1, 1},
		{-1, -1, 1, -1, -1, -1, 0, 0, 0, 2},
	}
	for _, op := range []ops.Op{ops.Dispatch, ops.Combine} {
		blocks := dispatch
		if op == ops.Combine {
			blocks = combine
		}
		for me := range 2 {
			var tab userTable
			b, err := userMoEWords(backend.Collective{Op: op, Bytes: 12, Blocks: blocks}, me, 2, &tab)
			if err != nil {
				t.Fatalf("%s, rank %d: %v", op, me, err)
			}
			got := make([]int32, len(b)/4)
			for i := range got {
				got[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			}
			if !slices.Equal(got, want[me]) || tab.tokens != 3 || tab.slots != 2 || tab.token != 4 {
				t.Errorf("%s, rank %d: tables %v (%d tokens, %d slots of %d bytes), want %v (3, 2 of 4)", op, me, got, tab.tokens, tab.slots, tab.token, want[me])
			}
		}
	}
	for name, bad := range map[string]func([]backend.Block) []backend.Block{
		"goes to rank 1 twice": func(bs []backend.Block) []backend.Block {
			return append(bs, backend.Block{Src: 0, Dst: 1, SrcOff: 0, DstOff: 8, Bytes: 4})
		},
		"two copies go to slot 1": func(bs []backend.Block) []backend.Block {
			return append(bs, backend.Block{Src: 1, Dst: 1, SrcOff: 0, DstOff: 4, Bytes: 4})
		},
		"in a job of ranks 0..1": func(bs []backend.Block) []backend.Block {
			return append(bs, backend.Block{Src: 0, Dst: 2, SrcOff: 0, DstOff: 0, Bytes: 4})
		},
		"is not one 4-byte token": func(bs []backend.Block) []backend.Block {
			return append(bs, backend.Block{Src: 1, Dst: 1, SrcOff: -4, DstOff: 12, Bytes: 4})
		},
		"is past the 3 tokens": func(bs []backend.Block) []backend.Block {
			return append(bs, backend.Block{Src: 1, Dst: 1, SrcOff: 12, DstOff: 12, Bytes: 4})
		},
	} {
		for me := range 2 {
			var tab userTable
			_, err := userMoEWords(backend.Collective{Op: ops.Dispatch, Bytes: 12, Blocks: bad(slices.Clone(dispatch))}, me, 2, &tab)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("rank %d, a block that %s: %v", me, name, err)
			}
		}
	}
}
