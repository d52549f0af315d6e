// Command quiet runs symmem's put test through the library and prints nothing: a
// program that uses the library gets no output it did not ask for (the ranks' lines,
// the job's notes). Its exit status is the test's (symmem.ExitCode); a test of the
// outside module runs it and checks that it says nothing.
package main

import (
	"context"
	"os"

	"github.com/symmem/symmem"
)

func main() {
	if code, rank := symmem.Init(); rank {
		os.Exit(code)
	}
	// Four ranks: on a machine of fewer cores the job notes that they take turns, a
	// note this program did not ask to see.
	_, err := symmem.Run(context.Background(), symmem.Options{NProc: 4, Backend: symmem.CPU}, symmem.Test{Op: "put", Count: 8, Value: 5})
	os.Exit(symmem.ExitCode(err))
}
