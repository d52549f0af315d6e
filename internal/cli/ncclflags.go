package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// ncclTestsLetters are nccl-tests' short flags (all_reduce_perf -b 8 -e 1M ...) and
// the long flag that is the same setting in symmem's bench ("" where symmem has none),
// with what to do instead. A letter bench takes is a flag of its own; one typed where
// it means nothing is answered with this.
var ncclTestsLetters = map[string]struct{ flag, why string }{
	"b": {"min-size", ""},
	"e": {"max-size", ""},
	"f": {"factor", ""},
	"i": {"", "nccl-tests' -i is a step in bytes; symmem steps by a factor: -f, --factor"},
	"n": {"iters", ""},
	"w": {"warmup", ""},
	"d": {"dtype", ""},
	"G": {"graph", ""},
	"r": {"root", ""},
	"g": {"nproc", ""},
	"o": {"redop", ""},
	"c": {"", "symmem checks every byte of every repetition: there is nothing to turn on"},
	"t": {"", "symmem runs one process per GPU: give the GPUs with --nproc"},
	"a": {"", "symmem reports the mean over ranks (nccl-tests' -a 1)"},
	"m": {"", "symmem has no aggregated iterations: --overlap N keeps N operations in flight"},
	"T": {"", "give --timeout a duration, such as --timeout 30s"},
	"p": {"", "symmem's ranks always start in parallel"},
	"z": {"", "symmem has no blocking mode"},
	"C": {"", "symmem reports GPU time (the wall clock on the CPU backend)"},
	"R": {"", "nccl-tests' -R is NCCL buffer registration: --impl nccl-symm runs on registered windows"},
	"N": {"", "run the command again (bench --runs where it has it)"},
}

// ncclTestsHint says what an unknown short flag -letter is in nccl-tests and what to
// type in symmem instead; "" where it is none of nccl-tests'.
func ncclTestsHint(c *cobra.Command, letter string) string {
	l, ok := ncclTestsLetters[letter]
	if !ok {
		return ""
	}
	if l.flag == "" {
		return fmt.Sprintf("; as in nccl-tests? %s", l.why)
	}
	if f := c.Flags().Lookup(l.flag); f != nil {
		if f.Shorthand != "" && f.Shorthand != letter {
			return fmt.Sprintf("; as in nccl-tests? here it is --%s (-%s)", l.flag, f.Shorthand)
		}
		return fmt.Sprintf("; as in nccl-tests? here it is --%s", l.flag)
	}
	return fmt.Sprintf("; as in nccl-tests? --%s is symmem bench's (symmem bench -%s)", l.flag, letter)
}
