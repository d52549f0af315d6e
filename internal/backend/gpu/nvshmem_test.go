package gpu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// nvshmemColl imitates kernels/cuda/nvshmem_collectives.cu: once every rank has
// launched (NVSHMEM's collectives meet on the world team), each rank's output is what
// NVSHMEM's block collective gives it, finished as the kernel finishes it (avg divides
// the sum; the first-input fault keeps this rank's own input). NVSHMEM's block
// collectives take one block, launched cooperatively; anything else is refused.
func (g *fakeGPU) nvshmemColl(l fakeLaunch) error {
	if l.dim.Grid != 1 || !l.cooperative {
		return fmt.Errorf("fake: nvshmem/%s launched with %d blocks, cooperative %v: NVSHMEM's block collectives take one block, launched cooperatively", l.kernel, l.dim.Grid, l.cooperative)
	}
	calls := g.w.meet(g, l)
	if calls == nil {
		g.holding = true
		return nil
	}
	if err := g.nvshmemDeliver(l, calls); err != nil {
		return err
	}
	for _, c := range calls {
		if c.g != g {
			if err := c.g.release(); err != nil {
				return err
			}
		}
	}
	return nil
}

// nvshmemDeliver writes what the collective that every rank has launched (calls) gives
// every rank.
func (g *fakeGPU) nvshmemDeliver(l fakeLaunch, calls []stagedCall) error {
	p := func(c stagedCall, name string) uint64 { v, _ := c.l.param(name); return v }
	for _, c := range calls[1:] {
		for _, name := range []string{"src", "nelem", "nbytes", "root", "n"} {
			if p(c, name) != p(calls[0], name) || c.l.kernel != l.kernel {
				return fmt.Errorf("fake: nvshmem: rank %d launched %s with %s %#x, rank %d %s with %#x", c.g.rank, c.l.kernel, name, p(c, name), calls[0].g.rank, l.kernel, p(calls[0], name))
			}
		}
	}
	// Every rank passes the same src; dst may differ under the drop fault, and where
	// it does, what a rank writes lands at its own dst wherever it writes (NVSHMEM
	// takes every address as symmetric): a reduction's result on itself, the blocks
	// of all-gather, all-to-all and broadcast on every rank it pushes them to.
	n := int64(len(calls))
	src, err := g.sym(p(calls[0], "src"))
	if err != nil {
		return err
	}
	dsts := make([]int64, n)
	for _, c := range calls {
		if dsts[c.g.rank], err = g.sym(p(c, "dst")); err != nil {
			return err
		}
	}
	// in is rank r's m bytes of src from offset off; out is rank r's m bytes at
	// writer w's dst.
	in := func(r int, off, m int64) ([]byte, error) { return g.w.bytes(r, src+off, m) }
	outAt := func(r, w int, m int64) ([]byte, error) { return g.w.bytes(r, dsts[w], m) }
	out := func(r int, m int64) ([]byte, error) { return outAt(r, r, m) }
	prefix, suffix, _ := strings.Cut(l.kernel, "_")
	switch prefix {
	case "allreduce", "reducescatter":
		var dtype string
		for _, t := range nvshmemTypes {
			if t.suffix == suffix {
				dtype = t.dtype
			}
		}
		count, elem := int64(p(calls[0], "nelem")), ops.ElemSize(dtype)
		if p(calls[0], "n") != uint64(n) {
			return fmt.Errorf("fake: nvshmem/%s told of %d ranks, the job has %d", l.kernel, p(calls[0], "n"), n)
		}
		m := count * elem
		results := make([][]byte, n)
		for _, c := range calls {
			r := c.g.rank
			off := int64(0)
			if prefix == "reducescatter" {
				off = int64(r) * m
			}
			code := int(int32(p(c, "op")))
			var srcs [][]byte
			for q := range int(n) {
				b, err := in(q, off, m)
				if err != nil {
					return err
				}
				if code == ops.First.Code && q != r {
					continue
				}
				srcs = append(srcs, b)
			}
			red := ops.First
			for _, o := range ops.RedOps() {
				if o.Code == code {
					red = o
				}
			}
			results[r] = make([]byte, m)
			if err := coll.Reduce(red, dtype, results[r], srcs...); err != nil {
				return err
			}
		}
		for r, res := range results {
			o, err := out(r, m)
			if err != nil {
				return err
			}
			copy(o, res)
		}
	case "fcollect", "alltoall":
		m := int64(p(calls[0], "nbytes"))
		for r := range int(n) {
			for q := range n {
				o, err := outAt(r, int(q), n*m)
				if err != nil {
					return err
				}
				off := int64(0)
				if prefix == "alltoall" {
					off = int64(r) * m
				}
				b, err := in(int(q), off, m)
				if err != nil {
					return err
				}
				copy(o[q*m:], b)
			}
		}
	case "broadcast":
		m, root := int64(p(calls[0], "nbytes")), int(p(calls[0], "root"))
		b, err := in(root, 0, m)
		if err != nil {
			return err
		}
		for r := range int(n) {
			o, err := outAt(r, root, m)
			if err != nil {
				return err
			}
			copy(o, b)
		}
	default:
		return fmt.Errorf("fake: no imitation of nvshmem/%s", l.kernel)
	}
	return nil
}

// NVSHMEM's collectives reach every rank with the right addresses, counts, operator
// and root, one block launched cooperatively: checked by what lands in every rank's
// heap against coll's check data (as run and bench check it), for every operator and
// element type, on 2 and 3 ranks, at sizes that split unevenly.
func TestNVSHMEMCollectivesDeliver(t *testing.T) {
	l := backend.Launch{Impl: implNVSHMEM}
	for _, n := range []int{2, 3} {
		const most = 1 << 16
		bs, gs, bufs := collWorld(t, n, most)
		seq := 0
		run := func(name string, op ops.Op, dtype string, red ops.RedOp, size int64) {
			roots := []int{n - 1}
			if op.Rooted() {
				roots = []int{0, n - 1}
			}
			for _, root := range roots {
				seq++
				got, want, err := runCollRoot(t, bs, bufs, op, dtype, "", red, size, l, seq, root)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for r := range got {
					if !bytes.Equal(got[r], want[r]) {
						t.Errorf("%s, root %d: rank %d holds the wrong result", name, root, r)
					}
				}
			}
			for _, g := range gs {
				if last := g.launches[len(g.launches)-1]; last.dim.Grid != 1 || !last.cooperative {
					t.Errorf("%s: launched %s with %d blocks, cooperative %v", name, last.kernel, last.dim.Grid, last.cooperative)
				}
			}
		}
		for _, size := range []int64{48 * int64(n), most} {
			for _, dtype := range []string{"bf16", "float32"} {
				for _, red := range ops.RedOps() {
					for _, op := range []ops.Op{ops.AllReduce, ops.ReduceScatter, ops.Reduce} {
						run(fmt.Sprintf("%d ranks %s %s %s %d", n, op, dtype, red, size), op, dtype, red, size)
					}
				}
			}
			for _, op := range []ops.Op{ops.AllGather, ops.AllToAll, ops.Broadcast} {
				run(fmt.Sprintf("%d ranks %s %d", n, op, size), op, "", ops.Sum, size)
			}
		}
	}
}

// A rank under the redop fault reduces with the wrong operator where NVSHMEM's kernel
// takes it, and one under the drop fault delivers into Scratch: a result is wrong on
// some rank either way (undoing either fault's redirection in nvshmem.go fails this).
func TestNVSHMEMCollectiveFaults(t *testing.T) {
	l := backend.Launch{Impl: implNVSHMEM}
	for _, tc := range []struct {
		name  string
		op    ops.Op
		red   ops.RedOp
		fault func(b *Backend)
	}{
		{"a max that keeps the first input", ops.AllReduce, ops.Max, func(b *Backend) { b.SetRedOpFault(ops.First) }},
		{"a prod that adds", ops.ReduceScatter, ops.Prod, func(b *Backend) { b.SetRedOpFault(ops.Sum) }},
		{"dropped", ops.AllGather, ops.Sum, func(b *Backend) { b.SetDrop(true) }},
		{"a reduce whose root keeps its own input", ops.Reduce, ops.Min, func(b *Backend) { b.SetRedOpFault(ops.First) }},
		{"a dropped reduce on its root", ops.Reduce, ops.Sum, func(b *Backend) { b.SetDrop(true) }},
	} {
		bs, _, bufs := collWorld(t, 2, 1<<12)
		tc.fault(bs[1])
		dtype := ""
		if tc.op.Reduces() {
			dtype = "float32"
		}
		got, want, err := runCollRed(t, bs, bufs, tc.op, dtype, "", tc.red, 1<<12, l, 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if bytes.Equal(got[0], want[0]) && bytes.Equal(got[1], want[1]) {
			t.Errorf("%s: every result is right", tc.name)
		}
	}
}

// nvshmem refuses an --algo, runs one block a collective that fits a cooperative
// launch, and serves every operator.
func TestNVSHMEMRefusals(t *testing.T) {
	impl := entries[implNVSHMEM]
	if err := (nvshmemColl{}).check(impl, backend.Collective{Op: ops.AllReduce, DType: "bf16", Algo: ops.TwoShot}, 0); err == nil || !strings.Contains(err.Error(), "leave {algo} out for {impl} nvshmem") {
		t.Errorf("--algo two-shot: %v", err)
	}
	// NVSHMEM's block collectives do not fit 1024 threads on an SM, which a
	// cooperative launch refuses: at most nvWarps unless --warps says otherwise.
	if sh := nvShape(256<<20, backend.Launch{}); sh.Blocks != 1 || sh.Warps > nvWarps {
		t.Errorf("256 MiB runs %d blocks of %d warps, want 1 of at most %d", sh.Blocks, sh.Warps, nvWarps)
	}
	if err := (nvshmemColl{}).check(impl, backend.Collective{Op: ops.AllReduce, DType: "int32"}, 0); err == nil || !strings.Contains(err.Error(), "reduces bf16 and float32, not int32") {
		t.Errorf("all-reduce of int32: %v", err)
	}
	for _, r := range ops.RedOps() {
		if !impl.ServesRedOp(r) {
			t.Errorf("nvshmem does not serve %s", r)
		}
	}
}

// Under EnvPTX the nvshmem collectives load from their PTX, which the driver links with
// NVSHMEM's device archive beside the host library, and which NVSHMEM then registers;
// the data still lands. Without the archive there, the launch fails saying what to
// install. (Selecting the cubin, or loading the PTX without the link, fails this.)
func TestNVSHMEMPTXLinksDeviceArchive(t *testing.T) {
	t.Setenv(EnvPTX, "1")
	dir := t.TempDir()
	host, archive := filepath.Join(dir, "libnvshmem_host.so.3"), filepath.Join(dir, kernels.DeviceArchive)
	for _, f := range []string{host, archive} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := backend.Launch{Impl: implNVSHMEM}
	const size = 1 << 12
	bs, gs, bufs := collWorld(t, 2, size)
	for _, b := range bs {
		b.libPath = host
	}
	got, want, err := runCollRed(t, bs, bufs, ops.AllReduce, "bf16", "", ops.Max, size, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	for r, g := range gs {
		if !bytes.Equal(got[r], want[r]) {
			t.Errorf("rank %d holds the wrong result", r)
		}
		if len(g.linked) != 1 || !strings.HasSuffix(g.linked[0], ".ptx+"+archive) {
			t.Errorf("rank %d linked %q, want the collectives' PTX with %s", r, g.linked, archive)
		}
		if len(g.inited) != 1 || !strings.HasSuffix(g.inited[0], ".ptx") {
			t.Errorf("rank %d registered %q with NVSHMEM, want the linked PTX", r, g.inited)
		}
	}

	if err := os.Remove(archive); err != nil {
		t.Fatal(err)
	}
	bs, _, bufs = collWorld(t, 2, size)
	for _, b := range bs {
		b.libPath = host
	}
	_, _, err = runCollRed(t, bs, bufs, ops.AllReduce, "bf16", "", ops.Max, size, l, 1)
	if err == nil || !strings.Contains(err.Error(), kernels.DeviceArchive+" is not beside the host library "+host) ||
		!strings.Contains(err.Error(), "pip install nvidia-nvshmem-cu13") {
		t.Errorf("without the device archive: %v", err)
	}
}

// The device archive is found beside the host library, or beside the file a host
// library reached through a symbolic link is (the soname's link to its versioned file).
func TestLinkLibsFindsTheArchive(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	for _, d := range []string{real, link} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"libnvshmem_host.so.3.4.5", kernels.DeviceArchive} {
		if err := os.WriteFile(filepath.Join(real, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host := filepath.Join(link, "libnvshmem_host.so.3")
	if err := os.Symlink("../real/libnvshmem_host.so.3.4.5", host); err != nil {
		t.Fatal(err)
	}
	a := &kernels.Artifact{Impl: "nvshmem", Kernel: "allreduce_bf16", Link: []string{kernels.DeviceArchive}}
	libs, err := linkLibs(a, host)
	if want := filepath.Join(real, kernels.DeviceArchive); err != nil || len(libs) != 1 || libs[0] != want {
		t.Errorf("through a link: %v %v, want %s", libs, err, want)
	}
}
