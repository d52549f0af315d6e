// Command symmem launches and benchmarks GPU-initiated communication with NVSHMEM.
package main

import (
	"os"

	"github.com/symmem/symmem/internal/backends"
	"github.com/symmem/symmem/internal/cli"
)

func main() {
	// The backends this binary runs: the commands and the engine know them by these
	// factories only.
	os.Exit(cli.Main(os.Args[1:], backends.All()...))
}
