package engine

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/runtest"
	"github.com/symmem/symmem/pkg/kernels"
)

// A user's kernel that takes its size as a tl.constexpr was built for some sizes only,
// and one that takes the job's size as a tl.constexpr for some job sizes only: any
// other is refused before a rank starts (bad input), naming those it has. Without the
// check such a run moved nothing and failed as wrong data (exit 3).
func TestUserSizesCheckedBeforeRanks(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{{Impl: "seed-put", Kernel: "put_block", Entry: "put_block", Sizes: []int64{8, 1 << 20}},
		{Impl: "st", Kernel: "put_block", Entry: "put_block", Peers: kernels.PeersAll, Ranks: []int{2, 3}}}}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkUserSizes(reg, []string{"seed-put", "st"}, []string{"put"}, []int64{8, 1 << 20}, 3); err != nil {
		t.Errorf("sizes and a job size they were built for: %v", err)
	}
	for _, tc := range []struct {
		sizes []int64
		ranks int
		want  string
	}{
		{[]int64{4096}, 2, "built for 8,1048576 bytes only, not 4096"},
		{[]int64{8}, 4, "st's put_block takes the job's size as a tl.constexpr and was built for 2,3 ranks only, not 4"},
	} {
		err = checkUserSizes(reg, []string{"triton", "seed-put", "st"}, []string{"put"}, tc.sizes, tc.ranks)
		var bad *exitcode.Err
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v on %d ranks: %v, want %q", tc.sizes, tc.ranks, err, tc.want)
		}
		if !errors.As(err, &bad) || bad.Code != exitcode.Usage {
			t.Errorf("%v on %d ranks: %v is not bad input (exit %d)", tc.sizes, tc.ranks, err, exitcode.Usage)
		}
	}
}

// bench measures puts between pairs of ranks: an implementation whose put reaches every
// other rank from one launch is refused on more than 2 ranks where named, and left out,
// saying so, where bench took it itself; on 2 ranks it is measured as any put.
func TestBenchPutToEveryPeer(t *testing.T) {
	c := &kernels.Catalog{Dir: "mk", Artifacts: []*kernels.Artifact{{Impl: "st", Kernel: "put_block", Entry: "put_block", Peers: kernels.PeersAll},
		{Impl: "one", Kernel: "put_block", Entry: "put_block"}}}
	reg, _, err := own.WithUser(c)
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	e := &Engine{reg: reg, Stderr: &errb}
	impls, added, err := e.checkToAll([]string{"triton", "st", "one"}, nil, []string{"get", "put"}, 2)
	if err != nil || !slices.Equal(impls, []string{"triton", "st", "one"}) || len(added) != 0 {
		t.Errorf("2 ranks: %v %v %v", impls, added, err)
	}
	_, _, err = e.checkToAll([]string{"triton", "st", "one"}, nil, []string{"get", "put"}, 3)
	var bad *exitcode.Err
	if err == nil || !errors.As(err, &bad) || bad.Code != exitcode.Usage || !strings.Contains(err.Error(),
		"{impl} st: its put reaches every other rank from one launch, and bench measures put between pairs of ranks: bench it on 2 ranks (its one peer is every peer), or check it on 3 with symmem run put {pattern} one-to-all") {
		t.Errorf("named, 3 ranks: %v", err)
	}
	impls, added, err = e.checkToAll([]string{"triton", "st", "one"}, []string{"st", "one"}, []string{"put"}, 4)
	if err != nil || !slices.Equal(impls, []string{"triton", "one"}) || !slices.Equal(added, []string{"one"}) ||
		!strings.Contains(errb.String(), "st: its put reaches every other rank from one launch, and bench measures put between pairs of ranks") {
		t.Errorf("taken by bench, 4 ranks: %v %v %v\n%s", impls, added, err, errb.String())
	}
	if _, _, err = e.checkToAll([]string{"st"}, nil, []string{"get"}, 4); err != nil {
		t.Errorf("a sweep without put: %v", err)
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
