package engine

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/pkg/kernels"
)

// A user's kernel that takes its size as a tl.constexpr was built for some sizes only:
// any other is refused before a rank starts (bad input), naming the sizes it has.
// Without the check such a run moved nothing and failed as wrong data (exit 3).
func TestUserSizesCheckedBeforeRanks(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{{Impl: "seed-put", Kernel: "put_block", Entry: "put_block", Sizes: []int64{8, 1 << 20}}}}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkUserSizes(reg, []string{"seed-put"}, []string{"put"}, []int64{8, 1 << 20}); err != nil {
		t.Errorf("sizes it was built for: %v", err)
	}
	err = checkUserSizes(reg, []string{"triton", "seed-put"}, []string{"put"}, []int64{4096})
	var bad *exitcode.Err
	if err == nil || !strings.Contains(err.Error(), "built for 8,1048576 bytes only, not 4096") {
		t.Fatalf("a size it was not built for: %v", err)
	}
	if !errors.As(err, &bad) || bad.Code != exitcode.Usage {
		t.Errorf("a size it was not built for: %v is not bad input (exit %d)", err, exitcode.Usage)
	}
}

// A user's get-add kernel written for one block of a tl.constexpr size adds that many
// elements at most: a run of more is refused before a rank starts (bad input), naming
// the kernel, its limit and the --const to rebuild with, as is a type it has no
// kernel of; its kernel of another type does not limit the run's.
func TestUserGetAddCheckedBeforeRanks(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{
		{Impl: "st", Kernel: "get_add_f32", Entry: "get_add_f32", MaxElems: 1024, MaxElemsConst: "block_size", Wraps: "my_fused_get_add_kernel: ..."},
		{Impl: "st", Kernel: "get_add_bf16", Entry: "get_add_bf16", MaxElems: 256, MaxElemsConst: "block_size", Wraps: "my_fused_get_add_kernel: ..."},
	}}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{factory: noGPU{}, reg: reg, opts: Options{KernelsDir: "mk", HeapSize: 1 << 30}, backend: backend.NVSHMEM, nproc: 2, Stderr: io.Discard}
	run := func(count int64, dtype string) error {
		_, err := e.PlanRun(runtest.Spec{Op: ops.GetAdd, Count: count, DType: dtype, Peer: 1, Launch: backend.Launch{Impl: "st"}})
		return err
	}
	for _, tc := range []struct {
		count int64
		dtype string
		want  string
	}{
		{1024, "", ""},
		{256, "bf16", ""},
		{1025, "", "st's get_add_f32 adds at most 1024 elements, one block of my_fused_get_add_kernel's tl.constexpr block_size, not 1025: rebuild with symmem kernels build FILE.py --const block_size=2048"},
		{257, "bf16", "st's get_add_bf16 adds at most 256 elements"},
		{8, "int64", `get-add {impl} st has kernels of [float32 bf16], not of int64: give {dtype} float32 or bf16, or build its kernel of int64 (SYMMEM_KERNELS key "get-add:int64")`},
	} {
		err := run(tc.count, tc.dtype)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d %q: %v, want %q", tc.count, tc.dtype, err, tc.want)
		}
		var bad *exitcode.Err
		if err != nil && (!errors.As(err, &bad) || bad.Code != exitcode.Usage) {
			t.Errorf("%d %q: %v is not bad input (exit %d)", tc.count, tc.dtype, err, exitcode.Usage)
		}
	}
}
