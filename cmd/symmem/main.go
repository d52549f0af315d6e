// Command symmem launches and benchmarks GPU-initiated communication with NVSHMEM.
package main

import (
	"os"

	"github.com/symmem/symmem/internal/backend/cpu"
	"github.com/symmem/symmem/internal/backend/gpu"
	"github.com/symmem/symmem/internal/cli"
)

func main() {
	// The backends this binary runs, in the order help lists their implementations:
	// the commands and the engine know them by these factories only.
	os.Exit(cli.Main(os.Args[1:], gpu.Factory{}, cpu.Factory{}))
}
