package kernels_test

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/pkg/kernels"
)

// The embedded catalogue holds a cubin of Triton's put for an H100/H200 (sm_90) and,
// for a GPU it has no cubin for (compute capability 8.6), the PTX the driver compiles.
func ExampleCatalog_Select() {
	cat := kernels.Default()
	for _, cc := range []int{90, 86} {
		a, err := cat.Select("triton", "put_block", 4, cc)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("sm_%d: %s (%s, %d warps)\n", cc, a.Target, a.Format, a.NumWarps)
	}
	// Output:
	// sm_90: sm_90a (cubin, 4 warps)
	// sm_86: sm_80 (cubin, 4 warps)
}

// A warp count no build has is a *WarpsError that lists the ones built; a program
// names its own flag for the remedy.
func ExampleWarpsError() {
	cat, _ := kernels.LoadDir("testdata/user")
	_, err := cat.Select("myput", "put_block", 4, 90)
	fmt.Println(err)
	var we *kernels.WarpsError
	if errors.As(err, &we) {
		we.Setting = "--warps"
	}
	fmt.Println(err)
	// Output:
	// myput/put_block was built for [8] warps, not 4: pick one of those
	// myput/put_block was built for [8] warps, not 4: pick one of those with --warps
}

// A user's directory of kernels, checked without a GPU: what it holds, and which
// artifact serves an sm_90 GPU and an sm_86 one.
func ExampleLoadDir() {
	cat, err := kernels.LoadDir("testdata/user")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cat.Impls(), cat.Kernels("myput"), cat.Warps("myput", "put_block"))
	for _, cc := range []int{90, 86} {
		a, _ := cat.Select("myput", "put_block", 0, cc)
		fmt.Printf("sm_%d: %s %s\n", cc, a.Format, a.Target)
	}
	// Output:
	// [myput] [get_block put_block] [8]
	// sm_90: cubin sm_90a
	// sm_86: ptx compute_80
}

// A kernel built against NVSHMEM device library 3.4 cannot be served by host library
// 3.3: the error says what to install or rebuild.
func ExampleArtifact_CheckHost() {
	a := &kernels.Artifact{Impl: "cuda", Kernel: "put_block", Target: "sm_90a", UsesNVSHMEM: true, DeviceVersion: []int{3, 4, 5}}
	fmt.Println(a.CheckHost([3]int{3, 4, 0}))
	fmt.Println(a.CheckHost([3]int{3, 3, 0}) != nil)
	// Output:
	// <nil>
	// true
}

// Args takes the kernel's visible parameters in order and appends Triton's hidden
// scratch pointers as nulls.
func ExampleArtifact_Args() {
	a := &kernels.Artifact{Impl: "triton", Kernel: "put_block", Target: "sm_90a", Params: []kernels.Param{
		{Name: "dst", Type: "ptr"}, {Name: "src", Type: "ptr"}, {Name: "nbytes", Type: "i64"},
		{Name: "global_scratch", Type: "ptr", Hidden: true},
	}}
	args, err := a.Args(0x7f0000, 0x7f1000, 4096)
	fmt.Println(args, err)
	_, err = a.Args(1, 2)
	fmt.Println(err)
	// Output:
	// [8323072 8327168 4096 0] <nil>
	// kernel triton/put_block sm_90a takes 3 arguments, got 2
}
