package check

import (
	"github.com/symmem/symmem/internal/reference"
	"github.com/symmem/symmem/internal/result"
)

// Perf is check-nvshmem --perf's key sweep set beside the reference figures for this
// machine.
type Perf struct {
	reference.Judgement
	WallS float64 `json:"wall_s"`
	// Result is the sweep as bench --json writes it.
	Result *result.Result `json:"result,omitempty"`
}
