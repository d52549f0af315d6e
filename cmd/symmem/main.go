// Command symmem launches and benchmarks GPU-initiated communication with NVSHMEM.
package main

import (
	"os"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/cli"
)

func main() {
	// The backends this binary runs: every one the library has.
	os.Exit(cli.Main(os.Args[1:], symmem.Backends()...))
}
