// Command symmem launches and benchmarks GPU-initiated communication with NVSHMEM.
package main

import (
	"os"

	"github.com/symmem/symmem/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
