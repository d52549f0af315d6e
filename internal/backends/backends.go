// Package backends is the backends a symmem binary runs, in the order its help lists
// their implementations: cmd/symmem, the library (package symmem) and the tests that build a registry as
// the binary does take them from here.
package backends

import (
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/backend/gpu"
)

// All is the GPU backend, then the CPU backend.
func All() []backend.Factory { return []backend.Factory{gpu.Factory{}, cpu.Factory{}} }
