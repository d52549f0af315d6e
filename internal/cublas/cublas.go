package cublas

import (
	"fmt"

	"github.com/symmem/symmem/internal/dl"
)

// Status is cublasStatus_t. Every value but Success is an error, so that errors.Is(err,
// cublas.NotSupported) asks what cuBLAS said.
type Status int32

// cublasStatus_t values (cublas_api.h).
const (
	Success         Status = 0
	NotInitialized  Status = 1
	AllocFailed     Status = 3
	InvalidValue    Status = 7
	ArchMismatch    Status = 8
	MappingError    Status = 11
	ExecutionFailed Status = 13
	InternalError   Status = 14
	NotSupported    Status = 15
	LicenseError    Status = 16
)

var statusNames = map[Status]string{
	Success: "CUBLAS_STATUS_SUCCESS", NotInitialized: "CUBLAS_STATUS_NOT_INITIALIZED",
	AllocFailed: "CUBLAS_STATUS_ALLOC_FAILED", InvalidValue: "CUBLAS_STATUS_INVALID_VALUE",
	ArchMismatch: "CUBLAS_STATUS_ARCH_MISMATCH", MappingError: "CUBLAS_STATUS_MAPPING_ERROR",
	ExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED", InternalError: "CUBLAS_STATUS_INTERNAL_ERROR",
	NotSupported: "CUBLAS_STATUS_NOT_SUPPORTED", LicenseError: "CUBLAS_STATUS_LICENSE_ERROR",
}

// String is the enumerator's name in cublas_api.h.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus(%d)", int32(s))
}

// Error makes a Status an error.
func (s Status) Error() string { return s.String() }

// Error is a failed cuBLASLt call: the call, its status and the library's text for it.
type Error struct {
	Call string
	Code Status
	Text string // cublasLtGetStatusString, where the library has it
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s (%d)", e.Call, e.Code, int32(e.Code))
	if e.Text != "" {
		msg += ": " + e.Text
	}
	return msg
}

// Unwrap lets errors.Is match the Status.
func (e *Error) Unwrap() error { return e.Code }

// DataType is cudaDataType_t (library_types.h).
type DataType int32

// The cudaDataType_t values symmem uses.
const (
	R32F  DataType = 0  // CUDA_R_32F: the scale type
	R16F  DataType = 2  // CUDA_R_16F
	R16BF DataType = 14 // CUDA_R_16BF
)

// DataTypeOf maps symmem's element types of a matrix product (ops.MatmulTypes, with
// their aliases canonical) to cuBLAS's.
func DataTypeOf(dtype string) (DataType, error) {
	switch dtype {
	case "bf16":
		return R16BF, nil
	case "float16":
		return R16F, nil
	}
	return 0, fmt.Errorf("cuBLASLt products here take bf16 or float16, not %q", dtype)
}

// String names the type as cuBLAS does.
func (t DataType) String() string {
	switch t {
	case R32F:
		return "CUDA_R_32F"
	case R16F:
		return "CUDA_R_16F"
	case R16BF:
		return "CUDA_R_16BF"
	}
	return fmt.Sprintf("cudaDataType(%d)", int32(t))
}

// Version is cuBLASLt's release.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// DecodeVersion reads cublasLtGetVersion's integer: major*10000 + minor*100 + patch
// (130100 for 13.1.0).
func DecodeVersion(code uint64) Version {
	return Version{int(code / 10000), int(code % 10000 / 100), int(code % 100)}
}

// Enumerators of cublasLt.h the binding passes.
const (
	computeType32F = 68 // CUBLAS_COMPUTE_32F
	opN            = 0  // CUBLAS_OP_N

	descTransA = 3 // CUBLASLT_MATMUL_DESC_TRANSA, int32_t
	descTransB = 4 // CUBLASLT_MATMUL_DESC_TRANSB, int32_t

	prefMaxWorkspace = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t
)

// Lib is an opened libcublasLt.
type Lib struct {
	Path    string // as opened; for a bare soname, the file the loader chose when it can tell
	version Version

	getVersion       func() uint64
	create           func(h *uintptr) Status
	destroy          func(h uintptr) Status
	descCreate       func(d *uintptr, compute int32, scale DataType) Status
	descDestroy      func(d uintptr) Status
	descSetAttribute func(d uintptr, attr int32, buf *int32, size uint64) Status
	layoutCreate     func(l *uintptr, t DataType, rows, cols uint64, ld int64) Status
	layoutDestroy    func(l uintptr) Status
	prefCreate       func(p *uintptr) Status
	prefDestroy      func(p uintptr) Status
	prefSetAttribute func(p uintptr, attr int32, buf *uint64, size uint64) Status
	heuristic        func(h, desc, a, b, c, d, pref uintptr, requested int32, results *heuristicResult, returned *int32) Status
	statusString     func(s Status) *byte // optional: nil where the library lacks it
	// matmul is cublasLtMatmul's address, called through dl.Call: it runs once per
	// product, and a bound function's reflection costs microseconds with 16 arguments.
	matmul uintptr
}

// Open loads the library at path (a file, or a bare soname for the dynamic loader)
// and reads its version. A symbol it lacks is an error naming the symbol.
func Open(path string) (*Lib, error) {
	lib, err := dl.Open(path)
	if err != nil {
		return nil, err
	}
	l := &Lib{Path: lib.Path}
	b := func(fn any, name string) dl.Binding { return dl.Binding{Fn: fn, Names: []string{name}} }
	if err := lib.BindAll([]dl.Binding{
		b(&l.getVersion, "cublasLtGetVersion"),
		b(&l.create, "cublasLtCreate"),
		b(&l.destroy, "cublasLtDestroy"),
		b(&l.descCreate, "cublasLtMatmulDescCreate"),
		b(&l.descDestroy, "cublasLtMatmulDescDestroy"),
		b(&l.descSetAttribute, "cublasLtMatmulDescSetAttribute"),
		b(&l.layoutCreate, "cublasLtMatrixLayoutCreate"),
		b(&l.layoutDestroy, "cublasLtMatrixLayoutDestroy"),
		b(&l.prefCreate, "cublasLtMatmulPreferenceCreate"),
		b(&l.prefDestroy, "cublasLtMatmulPreferenceDestroy"),
		b(&l.prefSetAttribute, "cublasLtMatmulPreferenceSetAttribute"),
		b(&l.heuristic, "cublasLtMatmulAlgoGetHeuristic"),
	}); err != nil {
		return nil, fmt.Errorf("%w (cuBLASLt 11.0 or newer has every function symmem calls)", err)
	}
	if l.matmul, err = lib.Sym("cublasLtMatmul"); err != nil {
		return nil, err
	}
	if lib.Bind(&l.statusString, "cublasLtGetStatusString") != nil {
		l.statusString = nil
	}
	l.version = DecodeVersion(l.getVersion())
	return l, nil
}

// Version is the library's release.
func (l *Lib) Version() Version { return l.version }

// check returns nil for Success, else an *Error with the library's text.
func (l *Lib) check(call string, s Status) error {
	if s == Success {
		return nil
	}
	e := &Error{Call: call, Code: s}
	if l.statusString != nil {
		e.Text = dl.GoString(l.statusString(s))
	}
	return e
}
