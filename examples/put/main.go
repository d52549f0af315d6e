// Command put runs symmem's put test through the library: rank 0 writes eight 5s into
// rank 1's symmetric buffer, and rank 1 checks that they arrived.
//
//	go run ./examples/put                    # the CPU backend: no GPU needed
//	go run ./examples/put -backend nvshmem   # two GPUs and NVSHMEM
//
// Under srun, mpirun or torchrun each process is one rank of their job.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/symmem/symmem"
)

func main() {
	if code, rank := symmem.Init(); rank {
		os.Exit(code) // this process was one of the job's ranks: it ran
	}
	backend := flag.String("backend", "cpu", "cpu, nvshmem or auto")
	flag.Parse()

	test := symmem.Test{Op: "put", Count: 8, Value: 5}
	rep, err := symmem.Run(context.Background(), symmem.Options{NProc: 2, Backend: *backend}, test)
	if err != nil {
		fmt.Fprintln(os.Stderr, "put:", err)
		os.Exit(symmem.ExitCode(err))
	}
	if rep == nil {
		return // a rank of srun's or torchrun's job other than 0: rank 0 reports
	}
	for _, r := range rep.Ranks {
		if r.From < 0 {
			continue // rank 0 only sent
		}
		fmt.Printf("rank %d received %s from rank %d (want %ss)\n", r.Rank, r.Received, r.From, r.Expected)
	}
	fmt.Printf("%s of %d bytes on the %s backend: passed\n", rep.Op, rep.Bytes, rep.Backend)
}
