package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/coll"
	"github.com/symmem/symmem/internal/nccl"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

// windowWorld opens n ranks, each with send, recv and scratch buffers for c's shape, and
// preloads impl for op on every rank (the window is registered there).
func windowWorld(t *testing.T, n int, op ops.Op, dt, impl string, size int64) (*fakeWorld, []*Backend, []*fakeGPU, backend.Collective, ops.Shape, *coll.Data) {
	t.Helper()
	elem := int64(1)
	if dt != "" {
		elem = ops.ElemSize(dt)
	}
	shape, err := ops.Op(op).Shape(size, n, elem)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, n, 3*shape.Send+1<<16)
	data := coll.NewData(dt, ops.Sum, n, shape.Send)
	var bs []*Backend
	var gs []*fakeGPU
	var c backend.Collective
	for r := 0; r < n; r++ {
		b, g := w.open(t, r, Config{})
		send, err := b.Alloc(shape.Send)
		recv, err2 := b.Alloc(shape.Recv)
		scratch, err3 := b.Alloc(shape.Recv)
		if err := errors.Join(err, err2, err3); err != nil {
			t.Fatal(err)
		}
		c = backend.Collective{Op: op, DType: dt, Bytes: shape.Bytes, Send: send, Recv: recv, Scratch: scratch, Root: 1}
		bs, gs = append(bs, b), append(gs, g)
	}
	for r, b := range bs {
		if err := b.Preload(op, shape.Bytes, backend.Launch{Impl: impl}); err != nil {
			t.Fatalf("rank %d: Preload %s %s: %v", r, impl, op, err)
		}
		if err := b.Write(c.Send, data.Input(r, 5, shape.Send)); err != nil {
			t.Fatal(err)
		}
	}
	return w, bs, gs, c, shape, data
}

// nccl-symm hands NCCL buffers in the registered window, never the heap, and the
// results land there: checked by what every rank reads back, and by where the fake
// NCCL was pointed. Moving back to the heap (another implementation's Preload) carries
// the result along, and Close frees each window once.
func TestNCCLSymmCollectivesDeliver(t *testing.T) {
	const n = 3
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter} {
		dt := ""
		if ops.Op(op).Reduces() {
			dt = "bf16"
		}
		w, bs, _, c, shape, data := windowWorld(t, n, op, dt, implNCCLSymm, 6000)
		for _, b := range bs {
			if err := b.Collective(c, backend.Launch{Impl: implNCCLSymm}); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		for r, b := range bs {
			want, _ := data.Want(shape, r, 1, 5)
			got := make([]byte, shape.Recv)
			b.Read(c.Recv, got)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: rank %d holds the wrong result; calls:\n%s", op, r, strings.Join(w.hub.calls, "\n"))
			}
			if heap := w.heaps[r][c.Recv.Off:][:shape.Recv]; bytes.Equal(heap, want) {
				t.Errorf("%s: rank %d's result is in the heap: NCCL was given the heap", op, r)
			}
		}
		wins := 0
		for _, call := range w.hub.calls {
			switch {
			case strings.Contains(call, " window "):
				wins++
				if !strings.HasSuffix(call, fmt.Sprint(" window ", w.heap)) {
					t.Errorf("%s: %q: the window is not the heap's size (%d)", op, call, w.heap)
				}
			case !strings.Contains(call, "send=win:") || !strings.Contains(call, "recv=win:"):
				t.Errorf("%s: %q: a buffer outside the window", op, call)
			}
		}
		if wins != n {
			t.Errorf("%s: %d windows registered, want one a rank", op, wins)
		}
		// Back to the heap: the bytes come along.
		for r, b := range bs {
			if err := b.Preload(op, shape.Bytes, backend.Launch{Impl: "triton"}); err != nil {
				t.Fatal(err)
			}
			want, _ := data.Want(shape, r, 1, 5)
			got := make([]byte, shape.Recv)
			b.Read(c.Recv, got)
			if !bytes.Equal(got, want) || !bytes.Equal(w.heaps[r][c.Recv.Off:][:shape.Recv], want) {
				t.Errorf("%s: rank %d's result did not come back to the heap", op, r)
			}
		}
		for r, b := range bs {
			b.Close()
			if win := w.wins[r]; win.live || win.frees != 1 {
				t.Errorf("%s: rank %d's window after Close: live %v, freed %d times", op, r, win.live, win.frees)
			}
		}
	}
}

// nccl-device's all-reduce, one-shot and two-shot, bf16 and float32, on 3 ranks at a
// size whose per-rank share is not a whole number of vectors: every rank's result is
// the sum, through the device communicator made once per rank with devBlocks barriers.
func TestNCCLDeviceAllReduce(t *testing.T) {
	const n = 3
	for _, dt := range []string{"bf16", "float32"} {
		for _, algo := range []string{"", ops.OneShot, ops.TwoShot} {
			for _, size := range []int64{6004, 3<<20 + 12} {
				name := fmt.Sprintf("%s/%s/%d", dt, algo, size)
				w, bs, gs, c, shape, data := windowWorld(t, n, ops.AllReduce, dt, implNCCLDevice, size)
				c.Algo = algo
				for _, b := range bs {
					if err := b.Collective(c, backend.Launch{Impl: implNCCLDevice}); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				for r, b := range bs {
					want, _ := data.Want(shape, r, 1, 5)
					got := make([]byte, shape.Recv)
					if err := b.Read(c.Recv, got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s: rank %d holds the wrong sum", name, r)
					}
				}
				l := gs[0].launches[len(gs[0].launches)-1]
				wantAlgo := devAlgorithm(c)
				if !strings.Contains(l.kernel, strings.ReplaceAll(wantAlgo, "-", "")) || bs[0].Algorithm(c, backend.Launch{Impl: implNCCLDevice}) != wantAlgo {
					t.Errorf("%s: launched %s, Algorithm says %s", name, l.kernel, bs[0].Algorithm(c, backend.Launch{Impl: implNCCLDevice}))
				}
				if bs[0].Kernel() != l.kernel {
					t.Errorf("%s: Kernel() = %q, launched %s", name, bs[0].Kernel(), l.kernel)
				}
				devcomms := 0
				for _, call := range w.hub.calls {
					if strings.Contains(call, "devcomm barriers=") {
						devcomms++
						if !strings.HasSuffix(call, fmt.Sprint("barriers=", devBlocks)) {
							t.Errorf("%s: %q", name, call)
						}
					}
				}
				if devcomms != n {
					t.Errorf("%s: %d device communicators, want one a rank", name, devcomms)
				}
			}
		}
	}
}

// Under the drop fault the rank's all-reduce still runs (its peers' barriers wait for
// it), with the output in the scratch.
func TestNCCLDeviceDropLandsInScratch(t *testing.T) {
	_, bs, _, c, shape, data := windowWorld(t, 2, ops.AllReduce, "float32", implNCCLDevice, 4096)
	bs[1].SetDrop(true)
	for _, b := range bs {
		b.Write(c.Recv, make([]byte, shape.Recv))
		if err := b.Collective(c, backend.Launch{Impl: implNCCLDevice}); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := data.Want(shape, 1, 1, 5)
	got := make([]byte, shape.Recv)
	bs[1].Read(c.Recv, got)
	if !bytes.Equal(got, make([]byte, shape.Recv)) {
		t.Error("the dropping rank's output reached its Recv")
	}
	bs[1].Read(c.Scratch, got)
	if !bytes.Equal(got, want) {
		t.Error("the dropping rank's output is not in its scratch")
	}
}

// Put, get, put-signal with its wait, and the ping-pong, through nccl-device: the
// bytes arrive in the peer's window at the buffer's offset, and the kernels get the
// window handle and offsets, not addresses.
func TestNCCLDevicePointToPoint(t *testing.T) {
	const n = 300<<10 + 5
	for _, op := range []ops.Op{ops.Put, ops.Get, ops.PutSignal, ops.Latency} {
		p := newPair(t, n, Config{})
		stamps, _ := p.b[0].Alloc(64)
		p.b[1].Alloc(64)
		l := backend.Launch{Impl: implNCCLDevice}
		for r := range 2 {
			if err := p.b[r].Preload(op, n, l); err != nil {
				t.Fatal(err)
			}
			// The pattern newPair left in the heap came over to the window.
			got := make([]byte, n)
			p.b[r].Read(p.src, got)
			if !bytes.Equal(got, pattern(r, n)) {
				t.Fatalf("%s: rank %d's source did not come into the window", op, r)
			}
		}
		to, from := 1, 0
		var err error
		switch op {
		case ops.Put:
			err = p.b[0].Put(p.dst, p.src, 1, l)
		case ops.Get:
			err = p.b[0].Get(p.dst, p.src, 1, l)
			to, from = 0, 1
		case ops.PutSignal:
			if err = p.b[0].PutSignal(p.dst, p.src, p.sig, 1, l); err == nil {
				err = p.b[1].WaitSignal(p.sig, n, 1, l)
			}
		case ops.Latency:
			var res backend.PingPongResult
			if res, err = p.b[0].PingPong(p.dst, p.src, p.sig, stamps, 64, 3, 1, true, l); err == nil && len(res.Rounds) != 3 {
				t.Errorf("ping-pong rounds: %v", res.Rounds)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		got := make([]byte, n)
		p.b[to].Read(p.dst, got)
		if op == ops.Latency {
			want := pattern(0, 64)
			binary.LittleEndian.PutUint64(want, 3) // the last round's number
			if !bytes.Equal(got[:64], want) {
				t.Errorf("latency: rank 1's dst does not hold rank 0's payload")
			}
			continue
		}
		if !bytes.Equal(got, pattern(from, n)) {
			t.Errorf("%s: rank %d's dst does not hold rank %d's source", op, to, from)
		}
		k := p.g[0].launches[0]
		if w, _ := k.param("win"); w != p.w.wins[0].handle {
			t.Errorf("%s: the kernel got window %#x, want rank 0's handle %#x", op, w, p.w.wins[0].handle)
		}
		if d, _ := k.param("dst"); d != uint64(p.dst.Off) {
			t.Errorf("%s: dst %#x, want the window offset %#x", op, d, p.dst.Off)
		}
	}
}

// What cannot run is refused with what to do: an NCCL too old for either path, an LSA
// team smaller than the job, a kernel handed a window that is no longer registered.
func TestNCCLWindowRefusals(t *testing.T) {
	defer func(v nccl.Version) { fakeNCCLVersion = v }(fakeNCCLVersion)
	for _, tc := range []struct {
		version nccl.Version
		impl    string
		says    string
	}{
		{nccl.Version{Major: 2, Minor: 26}, implNCCLSymm, "needs NCCL 2.27 or newer"},
		{nccl.Version{Major: 2, Minor: 27, Patch: 3}, implNCCLDevice, "needs NCCL 2.28 or newer"},
	} {
		fakeNCCLVersion = tc.version
		w := newWorld(t, 1, 1<<16)
		b, _ := w.open(t, 0, Config{})
		err := b.Preload(ops.AllReduce, 1024, backend.Launch{Impl: tc.impl})
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "{impl} "+tc.impl) {
			t.Errorf("%s on NCCL %s: %v, want %q", tc.impl, tc.version, err, tc.says)
		}
	}
	fakeNCCLVersion = nccl.Version{Major: 2, Minor: 28, Patch: 9}

	fakeLSA = 1
	p := newPair(t, 1024, Config{})
	err := p.b[0].Preload(ops.Put, 1024, backend.Launch{Impl: implNCCLDevice})
	fakeLSA = 0
	if err == nil || !strings.Contains(err.Error(), "LSA team of 1, and the job has 2 ranks") {
		t.Errorf("an LSA team of 1 in a job of 2: %v", err)
	}

	p = newPair(t, 1024, Config{})
	l := backend.Launch{Impl: implNCCLDevice}
	for r := range 2 {
		if err := p.b[r].Preload(ops.Put, 1024, l); err != nil {
			t.Fatal(err)
		}
	}
	p.w.wins[0].live = false // deregistered behind the backend's back
	if err := p.b[0].Put(p.dst, p.src, 1, l); err == nil || !strings.Contains(err.Error(), "not its live window") {
		t.Errorf("a put through a deregistered window: %v", err)
	}

	for _, tc := range []struct {
		op             ops.Op
		dt, algo, says string
	}{
		{ops.AllReduce, "int32", "", "sums bf16 and float32, not int32"},
		{ops.AllReduce, "bf16", ops.TwoShot, ""},
		{ops.AllGather, "", "", ""},
	} {
		err := CheckCollective(backend.Builtin(Factory{}), implNCCLDevice, backend.Collective{Op: tc.op, DType: tc.dt, Algo: tc.algo}, 0)
		if (tc.says == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("CheckCollective(nccl-device, %s, %s, %s) = %v, want %q", tc.op, tc.dt, tc.algo, err, tc.says)
		}
	}
	if err := CheckCollective(backend.Builtin(Factory{}), implNCCLSymm, backend.Collective{Op: ops.AllReduce, DType: "bf16", Algo: ops.TwoShot}, 0); err == nil || !strings.Contains(err.Error(), "NCCL picks its own") {
		t.Errorf("nccl-symm algo two-shot: %v", err)
	}
}

// CheckNCCLImpls, what run and bench ask before any rank starts, names the release
// needed and the one found, from a real library (the fake libnccl of internal/nccl,
// compiled here at two versions).
func TestCheckNCCLImpls(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake libnccl.so.2")
	}
	src := "../../nccl/testdata/fake_nccl.c"
	if _, err := os.Stat(src); err != nil {
		t.Skipf("the fake libnccl's source is not here (%v): run the test from its package", err)
	}
	dir := t.TempDir()
	lib := func(version string) string {
		out := filepath.Join(dir, version, nccl.LibName)
		os.MkdirAll(filepath.Dir(out), 0o755)
		if b, err := exec.Command(cc, "-shared", "-fPIC", "-o", out, src, "-DVERSION="+version).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		return out
	}
	older, old, new := lib("22605"), lib("22703"), lib("22809")
	if err := CheckNCCLImpls([]string{"triton", implNCCLSymm}, old); err != nil {
		t.Errorf("nccl-symm on 2.27.3: %v", err)
	}
	// Symmetric windows came in 2.27: nccl-symm is refused before, plain nccl is not.
	err = CheckNCCLImpls([]string{implNCCL, implNCCLSymm}, older)
	var unsupported *nccl.UnsupportedError
	if !errors.As(err, &unsupported) || !strings.HasPrefix(err.Error(), "{impl} nccl-symm: ") || !strings.Contains(err.Error(), "symmetric windows") || !strings.HasSuffix(err.Error(), "(found at "+older+")") {
		t.Errorf("nccl-symm on 2.26.5: %v", err)
	}
	if err := CheckNCCLImpls([]string{implNCCL}, older); err != nil {
		t.Errorf("nccl on 2.26.5: %v", err)
	}
	err = CheckNCCLImpls([]string{implNCCLDevice}, old)
	var u *nccl.UnsupportedError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "NCCL 2.27.3 has no device API: it needs NCCL 2.28 or newer") || !strings.Contains(err.Error(), old) {
		t.Errorf("nccl-device on 2.27.3: %v", err)
	}
	// On 2.28.9 it needs its kernels built into the binary too.
	err = CheckNCCLImpls([]string{implNCCLDevice}, new)
	if built := slices.Contains(kernels.Default().Impls(), implNCCLDevice); built && err != nil || !built && (err == nil || !strings.Contains(err.Error(), "build-kernels.py --only nccl-device")) {
		t.Errorf("nccl-device on 2.28.9 (kernels built: %v): %v", built, err)
	}
	// A binary built without them: refused with how to build them, and no word of
	// the library, which is not at fault.
	l, err := nccl.Open(new)
	if err != nil {
		t.Fatal(err)
	}
	err = ncclDevice{built: &kernels.Catalog{}}.needs(l)
	if err == nil || !strings.Contains(err.Error(), "its kernels are not in this binary") || !strings.Contains(err.Error(), "build-kernels.py --only nccl-device") {
		t.Errorf("nccl-device without its kernels: %v", err)
	}
	if err := CheckNCCLImpls([]string{implNCCLSymm}, filepath.Join(dir, "none", nccl.LibName)); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("no library: %v", err)
	}
}
