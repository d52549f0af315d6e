package cublas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestOpenReadsVersion(t *testing.T) {
	if v := openFake(t, "").Version(); v != (Version{13, 1, 0}) {
		t.Errorf("Version() = %v, want 13.1.0 (the fake's 130100)", v)
	}
	if v := openFake(t, "v12").Version(); v.String() != "12.9.1" {
		t.Errorf("Version() = %v, want 12.9.1", v)
	}
}

func TestOpenNamesTheMissingSymbol(t *testing.T) {
	if noFake != "" {
		t.Skip(noFake)
	}
	_, err := Open(fakes["nomatmul"])
	if err == nil || !strings.Contains(err.Error(), "does not export cublasLtMatmul") {
		t.Errorf("a library without cublasLtMatmul: %v", err)
	}
	if _, err := Open("/nonexistent/libcublasLt.so.13"); err == nil || !strings.Contains(err.Error(), "dlopen /nonexistent/libcublasLt.so.13") {
		t.Errorf("a missing file: %v", err)
	}
}

// The descriptors of a 3 x 5 x 4 product: float32 compute and scale, no transposes, and
// the column-major view of the row-major matrices (the package documentation): A' is
// B as 5 x 4 (ld 5), B' is A as 4 x 3 (ld 4), C' and D' are C as 5 x 3 (ld 5).
func TestPlanArguments(t *testing.T) {
	f := openFake(t, "")
	h, err := f.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Plan(R16BF, Shape{M: 3, N: 5, K: 4}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cublasLtCreate",
		"cublasLtMatmulDescCreate(compute=68, scale=0)",
		"cublasLtMatmulDescSetAttribute(attr=3, value=0, size=4)",
		"cublasLtMatmulDescSetAttribute(attr=4, value=0, size=4)",
		"cublasLtMatrixLayoutCreate(type=14, rows=5, cols=4, ld=5)",
		"cublasLtMatrixLayoutCreate(type=14, rows=4, cols=3, ld=4)",
		"cublasLtMatrixLayoutCreate(type=14, rows=5, cols=3, ld=5)",
		"cublasLtMatmulPreferenceSetAttribute(attr=1, value=1048576, size=8)",
		"cublasLtMatmulAlgoGetHeuristic(requested=1, workspace=1048576)",
	}
	if got := f.calls(); !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The result's fields where cublasLt.h puts them: the algorithm's 8 words, then the
	// workspace.
	if p.Workspace != 4096 || p.c.res.Algo[7] != 0xA1600007 || p.c.res.WavesCount != 0.5 || p.c.res.Reserved[3] != 7 {
		t.Errorf("heuristic result read as %+v", p.c.res)
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := h.Destroy(); err != nil {
		t.Fatal(err)
	}
	if n := f.live(); n != 0 {
		t.Errorf("%d handles or descriptors left after Destroy", n)
	}
}

// bf16 rounds a float32 to bfloat16's bits, to nearest even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7FFF + (u>>16)&1
	return uint16(u >> 16)
}

func fromBF16(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// Run gives the row-major product: the fake multiplies in host memory as cuBLASLt
// multiplies column-major matrices, so a transposition that is wrong (A and B not
// swapped, a wrong leading dimension) gives wrong elements here. Small integers keep
// every product exact.
func TestRunGivesTheRowMajorProduct(t *testing.T) {
	f := openFake(t, "")
	h, err := f.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	for _, s := range []Shape{{3, 5, 4}, {1, 1, 1}, {7, 2, 9}, {16, 24, 8}} {
		rng := rand.New(rand.NewPCG(uint64(s.M), uint64(s.N)))
		a, b := make([]uint16, s.M*s.K), make([]uint16, s.K*s.N)
		for i := range a {
			a[i] = bf16(float32(rng.IntN(7) - 3))
		}
		for i := range b {
			b[i] = bf16(float32(rng.IntN(7) - 3))
		}
		c := make([]uint16, s.M*s.N)
		ws := make([]byte, 8192)
		p, err := h.Plan(R16BF, s, uint64(len(ws)))
		if err != nil {
			t.Fatal(err)
		}
		var pin runtime.Pinner
		for _, x := range []any{&a[0], &b[0], &c[0], &ws[0]} {
			pin.Pin(x)
		}
		f.reset()
		addr := func(x *uint16) uintptr { return uintptr(unsafe.Pointer(x)) }
		err = p.Run(addr(&a[0]), addr(&b[0]), addr(&c[0]), uintptr(unsafe.Pointer(&ws[0])), uint64(len(ws)), 0x5eed)
		pin.Unpin()
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		for i := range s.M {
			for j := range s.N {
				var want float32
				for k := range s.K {
					want += fromBF16(a[i*s.K+k]) * fromBF16(b[k*s.N+j])
				}
				if got := fromBF16(c[i*s.N+j]); got != want {
					t.Fatalf("%v: C[%d][%d] = %g, want %g", s, i, j, got, want)
				}
			}
		}
		// cuBLASLt's A is our B and its B our A; alpha 1, beta 0; the heuristic's
		// algorithm by pointer; the workspace and stream as given.
		want := fmt.Sprintf("cublasLtMatmul(compute=68, scale=0, trans=00, alpha=1, beta=0, A=%#x, B=%#x, C=%#x, D=%#x, algo=a1600000..a1600007, workspace=%#x/8192, stream=0x5eed)",
			addr(&b[0]), addr(&a[0]), addr(&c[0]), addr(&c[0]), uintptr(unsafe.Pointer(&ws[0])))
		if got := f.calls(); len(got) != 1 || got[0] != want {
			t.Errorf("%v: logged %q\nwant %q", s, got, want)
		}
		p.Destroy()
	}
}

func TestPlanErrors(t *testing.T) {
	f := openFake(t, "")
	h, err := f.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	// Too little workspace for the fake's only algorithm: cuBLAS's status, its text,
	// and nothing left behind.
	_, err = h.Plan(R16F, Shape{8, 8, 8}, 1024)
	var e *Error
	if !errors.Is(err, NotSupported) || !errors.As(err, &e) || e.Call != "cublasLtMatmulAlgoGetHeuristic" ||
		!strings.Contains(err.Error(), "CUBLAS_STATUS_NOT_SUPPORTED (15): the functionality requested is not supported") {
		t.Errorf("too little workspace: %v", err)
	}
	if n := f.live(); n != 1 { // the handle
		t.Errorf("%d objects live after a failed plan, want the handle alone", n)
	}
	if _, err := h.Plan(R16BF, Shape{0, 8, 8}, 1<<20); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("M = 0: %v", err)
	}
	if _, err := h.Plan(R32F, Shape{8, 8, 8}, 1<<20); err == nil || !strings.Contains(err.Error(), "CUDA_R_32F") {
		t.Errorf("float32: %v", err)
	}
	p, err := h.Plan(R16BF, Shape{8, 8, 8}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(1, 2, 3, 4, 100, 0); err == nil || !strings.Contains(err.Error(), "needs 4096") {
		t.Errorf("a small workspace: %v", err)
	}
	p.Destroy()
	if err := p.Run(1, 2, 3, 4, 1<<20, 0); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("a destroyed plan: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{{Success.String(), "CUBLAS_STATUS_SUCCESS"}, {NotSupported.Error(), "CUBLAS_STATUS_NOT_SUPPORTED"},
		{Status(99).String(), "cublasStatus(99)"}, {R16BF.String(), "CUDA_R_16BF"}, {DataType(9).String(), "cudaDataType(9)"},
		{(&Error{Call: "cublasLtCreate", Code: NotInitialized}).Error(), "cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED (1)"}} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
	for dt, want := range map[string]DataType{"bf16": R16BF, "float16": R16F} {
		if got, err := DataTypeOf(dt); err != nil || got != want {
			t.Errorf("DataTypeOf(%s) = %v, %v", dt, got, err)
		}
	}
	if _, err := DataTypeOf("float32"); err == nil {
		t.Error("float32 products are not symmem's")
	}
}
