package cli

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/internal/exitcode"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/launch"
	"github.com/symmem/symmem/internal/store"
)

func init() {
	engine.Openers["nvshmem"] = func(ctx context.Context, info launch.RankInfo, st *store.Client, j engine.Job) (backend.Backend, error) {
		b, err := gpu.Open(ctx, info, st, j.Heap, j.NVSHMEMLib)
		if err != nil {
			return nil, err
		}
		b.WaitLimit = j.WaitLimit
		return b, nil
	}
}

// resolveBackend turns --backend into the backend the job runs on, and a note that
// says why when the choice was automatic.
func resolveBackend(want string, nproc int, lib string) (name, note string, err error) {
	switch want {
	case "cpu":
		return "cpu", "", nil
	case "nvshmem":
		if err := gpu.Probe(nproc, lib); err != nil {
			return "", "", exitcode.With(exitcode.NoGPUBackend, fmt.Errorf("--backend nvshmem cannot run here: %v; install the NVIDIA driver and NVSHMEM (symmem check-nvshmem says what is missing), or use --backend cpu", err))
		}
		return "nvshmem", "", nil
	}
	if err := gpu.Probe(nproc, lib); err != nil {
		return "cpu", "no GPU backend here: " + err.Error(), nil
	}
	return "nvshmem", "", nil
}
