package cublas

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/symmem/symmem/internal/dl"
)

// heuristicResult is cublasLtMatmulHeuristicResult_t: the algorithm, the workspace it
// needs, its state and its wave count, as cublasLt.h lays them out (96 bytes).
type heuristicResult struct {
	Algo          [8]uint64 // cublasLtMatmulAlgo_t
	WorkspaceSize uint64
	State         Status
	WavesCount    float32
	Reserved      [4]int32
}

// The struct is the header's size: an array of them is what the heuristic writes.
var (
	_ [96 - unsafe.Sizeof(heuristicResult{})]byte
	_ [unsafe.Sizeof(heuristicResult{}) - 96]byte
)

// Handle is a cuBLASLt context (cublasLtHandle_t). It uses the CUDA context current on
// the calling thread when it runs a product.
type Handle struct {
	lib *Lib
	h   uintptr
}

// NewHandle makes a cuBLASLt context (cublasLtCreate).
func (l *Lib) NewHandle() (*Handle, error) {
	var h uintptr
	if err := l.check("cublasLtCreate", l.create(&h)); err != nil {
		return nil, err
	}
	return &Handle{lib: l, h: h}, nil
}

// Destroy frees the context (cublasLtDestroy), after the products queued with it ran.
func (h *Handle) Destroy() error {
	if h.h == 0 {
		return nil
	}
	err := h.lib.check("cublasLtDestroy", h.lib.destroy(h.h))
	h.h = 0
	return err
}

// Shape is a row-major product C (M x N) = A (M x K) @ B (K x N).
type Shape struct{ M, N, K int }

// Plan is one shape and element type of product, set up once: the operation's
// descriptor, the three matrices' layouts (the column-major view of the package
// documentation), and the algorithm the heuristic chose.
type Plan struct {
	h     *Handle
	Shape Shape
	Type  DataType
	// Workspace is the workspace the chosen algorithm needs, at most what Plan was
	// offered.
	Workspace uint64

	desc, la, lb, lc uintptr
	// c holds what cublasLtMatmul reads through pointers during each call (the scalars
	// and the algorithm), pinned for the plan's life: dl.Call passes addresses.
	c      *callValues
	pinner runtime.Pinner
}

// callValues are the host values a product's call points at.
type callValues struct {
	alpha, beta float32
	res         heuristicResult
}

// ErrNoAlgorithm is what Plan returns where cuBLASLt's heuristic finds no algorithm for
// the shape, type and workspace.
var ErrNoAlgorithm = errors.New("cuBLASLt's heuristic found no algorithm")

// Plan sets up the product of shape s in element type t with at most workspace bytes
// of workspace. The CUDA context of the GPU it will run on must be current.
func (h *Handle) Plan(t DataType, s Shape, workspace uint64) (_ *Plan, err error) {
	if s.M < 1 || s.N < 1 || s.K < 1 {
		return nil, fmt.Errorf("cuBLASLt product of %d x %d x %d: M, N and K must be at least 1", s.M, s.N, s.K)
	}
	if t != R16BF && t != R16F {
		return nil, fmt.Errorf("cuBLASLt product of %s: symmem multiplies CUDA_R_16BF or CUDA_R_16F", t)
	}
	l := h.lib
	p := &Plan{h: h, Shape: s, Type: t, c: &callValues{alpha: 1}}
	defer func() {
		if err != nil {
			p.Destroy()
		}
	}()
	if err := l.check("cublasLtMatmulDescCreate", l.descCreate(&p.desc, computeType32F, R32F)); err != nil {
		return nil, err
	}
	for _, attr := range []int32{descTransA, descTransB} {
		op := int32(opN)
		if err := l.check("cublasLtMatmulDescSetAttribute", l.descSetAttribute(p.desc, attr, &op, 4)); err != nil {
			return nil, err
		}
	}
	// The column-major view: cuBLASLt's A is our B (N x K, ld N), its B our A (K x M,
	// ld K), its C and D our C (N x M, ld N).
	m, n, k := uint64(s.M), uint64(s.N), uint64(s.K)
	for _, lay := range []struct {
		out        *uintptr
		rows, cols uint64
	}{{&p.la, n, k}, {&p.lb, k, m}, {&p.lc, n, m}} {
		if err := l.check("cublasLtMatrixLayoutCreate", l.layoutCreate(lay.out, t, lay.rows, lay.cols, int64(lay.rows))); err != nil {
			return nil, err
		}
	}
	var pref uintptr
	if err := l.check("cublasLtMatmulPreferenceCreate", l.prefCreate(&pref)); err != nil {
		return nil, err
	}
	defer l.prefDestroy(pref)
	if err := l.check("cublasLtMatmulPreferenceSetAttribute", l.prefSetAttribute(pref, prefMaxWorkspace, &workspace, 8)); err != nil {
		return nil, err
	}
	var got int32
	if err := l.check("cublasLtMatmulAlgoGetHeuristic", l.heuristic(h.h, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1, &p.c.res, &got)); err != nil {
		return nil, err
	}
	if got < 1 || p.c.res.State != Success {
		return nil, fmt.Errorf("%w for %s %d x %d x %d with %d bytes of workspace (state %s)", ErrNoAlgorithm, t, s.M, s.N, s.K, workspace, p.c.res.State)
	}
	p.Workspace = p.c.res.WorkspaceSize
	p.pinner.Pin(p.c)
	return p, nil
}

// Run queues C = A @ B on stream (a CUstream; 0 is the legacy default stream): a, b
// and c are device addresses of the row-major matrices, workspace one of at least
// p.Workspace bytes (size bytes long).
func (p *Plan) Run(a, b, c, workspace uintptr, size uint64, stream uintptr) error {
	if p.desc == 0 {
		return fmt.Errorf("cublasLtMatmul: the plan was destroyed")
	}
	if size < p.Workspace {
		return fmt.Errorf("cublasLtMatmul: a %d-byte workspace, the algorithm needs %d", size, p.Workspace)
	}
	v := p.c
	// cuBLASLt's A and B are our B and A (the package documentation).
	r := dl.Call(p.h.lib.matmul, p.h.h, p.desc, uintptr(unsafe.Pointer(&v.alpha)), b, p.la, a, p.lb,
		uintptr(unsafe.Pointer(&v.beta)), c, p.lc, c, p.lc, uintptr(unsafe.Pointer(&v.res.Algo)), workspace, uintptr(size), stream)
	return p.h.lib.check("cublasLtMatmul", Status(r))
}

// Destroy frees the plan's descriptors.
func (p *Plan) Destroy() error {
	l := p.h.lib
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, lay := range []*uintptr{&p.la, &p.lb, &p.lc} {
		if *lay != 0 {
			keep(l.check("cublasLtMatrixLayoutDestroy", l.layoutDestroy(*lay)))
			*lay = 0
		}
	}
	if p.desc != 0 {
		keep(l.check("cublasLtMatmulDescDestroy", l.descDestroy(p.desc)))
		p.desc = 0
	}
	p.pinner.Unpin()
	return first
}
