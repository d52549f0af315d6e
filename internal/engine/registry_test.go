package engine

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/backend/gpu"
)

// backends are the ones cmd/symmem runs, in its order; own their implementations.
var (
	backends = []backend.Factory{gpu.Factory{}, cpu.Factory{}}
	own      = backend.Builtin(backends...)
)
