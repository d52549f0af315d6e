package gpu

import (
	"fmt"
	"os"

	"github.com/symmem/symmem/internal/cublas"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/setting"
)

// gemmer runs row-major matrix products on the backend's streams: cuBLASLt (cublasGemm),
// or the tests' fake. a, b and c are device addresses; c = a @ b, mm.M x mm.K times
// mm.K x mm.N, in dtype (bf16 or float16) with float32 accumulation.
type gemmer interface {
	Gemm(dtype string, mm ops.Matmul, a, b, c uint64, st stream) error
	// Describe names the library for result headers: "13.1.0 (/path/libcublasLt.so.13)".
	Describe() string
	Destroy() error
}

// gemmWorkspace is the workspace the products may use: what cuBLAS recommends for
// Hopper and later (32 MiB; 4 MiB before it).
const gemmWorkspace = 32 << 20

// openCublas returns how a rank opens cuBLASLt when a job first runs a product: the
// library cublas.Find finds (SYMMEM_CUBLAS_LIB, else the search), a handle, and its
// workspace in dev's memory.
func openCublas(dev device) func() (gemmer, error) {
	return func() (gemmer, error) {
		s := cublas.Find(os.Getenv(cublas.EnvLib))
		if s.Chosen == "" {
			return nil, setting.Errorf("the GEMM of the fused operations' baselines: libcublasLt.so.13 not found; %s", cublas.InstallHint)
		}
		l, err := cublas.Open(s.Chosen)
		if err != nil {
			return nil, setting.Errorf("the GEMM of the fused operations' baselines: %v; %s", err, cublas.InstallHint)
		}
		h, err := l.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("cuBLASLt %s: %w", l.Path, err)
		}
		ws, err := dev.Alloc(gemmWorkspace)
		if err != nil {
			h.Destroy()
			return nil, fmt.Errorf("cuBLASLt's workspace of %d bytes: %w", gemmWorkspace, err)
		}
		return &cublasGemm{lib: l, h: h, dev: dev, ws: ws, plans: map[gemmKey]*cublas.Plan{}}, nil
	}
}

// cublasGemm runs products with cuBLASLt, a plan per shape and type kept for the job.
type cublasGemm struct {
	lib   *cublas.Lib
	h     *cublas.Handle
	dev   device
	ws    uint64
	plans map[gemmKey]*cublas.Plan
}

type gemmKey struct {
	dtype string
	mm    ops.Matmul
}

func (g *cublasGemm) Gemm(dtype string, mm ops.Matmul, a, b, c uint64, st stream) error {
	k := gemmKey{ops.Canonical(dtype), mm}
	p, ok := g.plans[k]
	if !ok {
		t, err := cublas.DataTypeOf(k.dtype)
		if err != nil {
			return setting.Errorf("%s %s: %v", setting.DType, dtype, err)
		}
		if p, err = g.h.Plan(t, cublas.Shape{M: mm.M, N: mm.N, K: mm.K}, gemmWorkspace); err != nil {
			return fmt.Errorf("cuBLASLt %s: %w", g.lib.Path, err)
		}
		g.plans[k] = p
	}
	return p.Run(uintptr(a), uintptr(b), uintptr(c), uintptr(g.ws), gemmWorkspace, handle(st))
}

func (g *cublasGemm) Describe() string { return g.lib.Version().String() + " (" + g.lib.Path + ")" }

func (g *cublasGemm) Destroy() error {
	for _, p := range g.plans {
		p.Destroy()
	}
	err := g.h.Destroy()
	g.dev.FreeMem(g.ws)
	return err
}

// blas returns the job's matrix products, opened on first use.
func (b *Backend) blas() (gemmer, error) {
	if b.gemm != nil || b.gemmErr != nil {
		return b.gemm, b.gemmErr
	}
	if b.openGemm == nil {
		b.gemmErr = fmt.Errorf("this rank was opened without a way to open cuBLASLt")
		return nil, b.gemmErr
	}
	b.gemm, b.gemmErr = b.openGemm()
	return b.gemm, b.gemmErr
}
