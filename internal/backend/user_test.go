package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/pkg/kernels"
)

const userDir = "../../pkg/kernels/testdata/user"

func TestWithUserAddsAnNVSHMEMImpl(t *testing.T) {
	c, err := kernels.LoadDir(userDir)
	if err != nil {
		t.Fatal(err)
	}
	reg, got, err := own().WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "myput" || got[0].Backend != NVSHMEM || got[0].Summary != "user kernels from "+userDir {
		t.Fatalf("registered %+v", got)
	}
	im, err := reg.Lookup(NVSHMEM, "myput")
	if err != nil || ops.Names(im.Ops()) != "put, get" || !reg.IsUser("myput") || reg.IsUser("triton") {
		t.Errorf("lookup: %+v %v", im, err)
	}
	if err := reg.CheckOp(im, ops.PutSignal); err == nil || !strings.Contains(err.Error(), "{impl} myput cannot run put-signal (it serves put, get)") {
		t.Errorf("put-signal: %v", err)
	}
	// On the CPU backend it is refused as the built-in GPU implementations are.
	_, err = reg.Lookup(CPU, "myput")
	_, errTriton := reg.Lookup(CPU, "triton")
	if err == nil || strings.ReplaceAll(err.Error(), "myput", "triton") != errTriton.Error() {
		t.Errorf("on cpu: %v, triton gets %v", err, errTriton)
	}
	if cat, user := reg.Catalog("myput"); !user || cat != c {
		t.Errorf("catalogue for myput: %v", user)
	}
	// The same directory added again is no duplicate; the registry it was added to
	// is as it was.
	again, _, err := reg.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if own().IsUser("myput") {
		t.Error("adding to a copy changed the built-in registry")
	}
	n := 0
	for _, i := range again.All() {
		if i.Name == "myput" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("myput registered %d times", n)
	}
}

func TestWithUserRefusesABuiltInName(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"myput.put_block.w8.sm80.ptx", "myput.put_block.w8.sm80.ptx.json"} {
		b, err := os.ReadFile(filepath.Join(userDir, f))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "myput", "cuda"))
		if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(f, "myput", "cuda")), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := kernels.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := own()
	before := len(reg.All())
	_, _, err = reg.WithUser(c)
	if err == nil || !strings.Contains(err.Error(), `implementation "cuda" is symmem's own`) {
		t.Fatalf("got %v", err)
	}
	if len(reg.All()) != before {
		t.Errorf("the registry grew to %d", len(reg.All()))
	}
	if _, user := reg.Catalog("cuda"); user {
		t.Error("the built-in cuda now loads the user's kernels")
	}
}

// A user's all-reduce kernels as symmem kernels build wrote them on the GPU machine
// (examples/one_shot_all_reduce.py, sm_90, 4 warps): the implementation serves
// all-reduce with both element types, and its scratch is the promised 2 x n x the
// output; symmem's own implementations keep the output's size.
func TestWithUserAllReduce(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/userar")
	if err != nil {
		t.Fatal(err)
	}
	reg, got, err := own().WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "one-shot-all-reduce" || ops.Names(got[0].Ops()) != "all-reduce" ||
		strings.Join(got[0].Kernels[ops.AllReduce], ",") != "all_reduce_bf16,all_reduce_f32" {
		t.Fatalf("registered %+v", got)
	}
	if err := reg.CheckOp(got[0], ops.AllGather); err == nil || !strings.Contains(err.Error(), "it serves all-reduce") {
		t.Errorf("all-gather: %v", err)
	}
	for _, tc := range []struct {
		op   ops.Op
		impl string
		want int64
	}{
		{ops.AllReduce, "one-shot-all-reduce", 2 * 3 * 1000}, {ops.AllReduce, "triton", 1000}, {ops.AllReduce, "nccl", 1000},
		{ops.AllGather, "one-shot-all-reduce", 1000}, {ops.Put, "one-shot-all-reduce", 1000}, {ops.Dispatch, "one-shot-all-reduce", 1000}, // ops it does not serve
	} {
		if got := reg.ScratchBytes(tc.op, tc.impl, 1000, 1000, 3); got != tc.want {
			t.Errorf("ScratchBytes(%s, %s) = %d, want %d", tc.op, tc.impl, got, tc.want)
		}
	}
}

// A user's dispatch and combine as symmem kernels build wrote them on the GPU machine
// (examples/moe_all_to_all.py, sm_90, 4 warps, combine in bf16 only): the
// implementation serves both ops, and its scratch is the promised 2 x n x the token
// buffer (or the output, where that is larger).
func TestWithUserMoE(t *testing.T) {
	c, err := kernels.LoadDir("../../pkg/kernels/testdata/usermoe")
	if err != nil {
		t.Fatal(err)
	}
	reg, got, err := own().WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "moe-all-to-all" || ops.Names(got[0].Ops()) != "dispatch, combine" ||
		strings.Join(got[0].Kernels[ops.Dispatch], ",") != "moe_dispatch" || strings.Join(got[0].Kernels[ops.Combine], ",") != "moe_combine_bf16" {
		t.Fatalf("registered %+v", got)
	}
	for _, tc := range []struct {
		op         ops.Op
		size, recv int64
		want       int64
	}{
		{ops.Dispatch, 1000, 1900, 2 * 3 * 1000}, {ops.Combine, 1000, 1000, 2 * 3 * 1000}, {ops.Combine, 1000, 7000, 7000}, {ops.AllReduce, 1000, 1000, 1000},
	} {
		if got := reg.ScratchBytes(tc.op, "moe-all-to-all", tc.size, tc.recv, 3); got != tc.want {
			t.Errorf("ScratchBytes(%s, %d, %d) = %d, want %d", tc.op, tc.size, tc.recv, got, tc.want)
		}
	}
}
