package gpu

import (
	"context"
	"os"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/cublas"
	"github.com/symmem/symmem/internal/cuda"
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/topo"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/nvshmem"
)

// Factory makes the NVSHMEM backend's ranks: one process per GPU.
type Factory struct{}

var (
	_ backend.Planner = Factory{}
	_ backend.Linker  = Factory{}
)

// Name is backend.NVSHMEM.
func (Factory) Name() string { return backend.NVSHMEM }

// Probe says whether nproc ranks find their GPUs and NVSHMEM here (Probe).
func (Factory) Probe(nproc, local int, lib string) error { return Probe(nproc, local, lib) }

// Prepare returns NVSHMEM's settings for the ranks symmem spawns (Environment); the
// ranks of an external launcher apply them themselves (Open).
func (Factory) Prepare(jobID string, nproc int, heap int64, spawn bool) (backend.Prepared, error) {
	p := backend.Prepared{Cleanup: func() {}}
	if spawn {
		p.Env = Environment(heap, os.Getenv)
	}
	return p, nil
}

// Open opens one rank on its GPU (Open).
func (Factory) Open(ctx context.Context, p backend.Place, kv backend.KV, cfg backend.Config) (backend.Backend, error) {
	b, err := Open(ctx, Place{Rank: p.Rank, LocalRank: p.LocalRank, Size: p.Size}, kv,
		Config{Heap: cfg.Heap, Lib: cfg.Lib, WaitLimit: cfg.WaitLimit, NCCLLib: cfg.NCCLLib, Registry: cfg.Registry})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Settings lists what the GPU backend and its bindings read.
func (Factory) Settings() []string {
	return []string{cuda.EnvCtxFlags, nvshmem.EnvMPG, EnvLL, EnvLL128, EnvStagedSteps, EnvCopyOwn, EnvPTX, cublas.EnvLib}
}

// CheckCollective is CheckCollective.
func (Factory) CheckCollective(reg *backend.Registry, impl string, c backend.Collective, blocks int) error {
	return CheckCollective(reg, impl, c, blocks)
}

// Unbounded is UserUnbounded.
func (Factory) Unbounded(reg *backend.Registry, impl string, op ops.Op) []string {
	return UserUnbounded(reg, impl, op)
}

// CheckUserKernels is CheckUserKernels.
func (Factory) CheckUserKernels(reg *backend.Registry, impls []string, nproc int, lib string) error {
	return CheckUserKernels(reg, impls, nproc, lib)
}

// CheckLibraries is CheckNCCLImpls: an NCCL too old for nccl-symm or nccl-device.
func (Factory) CheckLibraries(impls []string, lib string) error { return CheckNCCLImpls(impls, lib) }

// Counters opens the NVLink counters of the GPU at busID through NVML.
func (Factory) Counters(busID string) (backend.LinkCounter, error) {
	c, err := topo.OpenCounters(topo.SystemNVML(), busID)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Peaks reads the machine's NVLink topology through NVML.
func (Factory) Peaks() (peak func(a, b int) float64, label func(a, b int) string, err error) {
	t, err := topo.Read(topo.SystemNVML())
	if err != nil {
		return nil, nil, err
	}
	return t.Peak, func(a, b int) string {
		if a < len(t.Links) && b < len(t.Links[a]) {
			return t.Links[a][b].Label()
		}
		return ""
	}, nil
}

// Host reads what decides whether a kernel loads here (HostHere).
func (Factory) Host(lib string) kernels.Host { return HostHere(lib) }
