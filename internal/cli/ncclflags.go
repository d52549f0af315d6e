package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ncclTestsLetters are nccl-tests' short flags (all_reduce_perf -b 8 -e 1M ...) and
// the long flag that is the same setting in symmem's bench ("" where symmem has none),
// with what to do instead. A letter bench takes is a flag of its own; one typed where
// it means nothing is answered with this. -n and -g are the two whose setting symmem
// has under another letter: -n is the ranks in every symmem command.
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
	"g": {"nproc", "nccl-tests' GPU count: symmem starts one process per GPU, so give the ranks with"},
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
		return "; as in nccl-tests? here it is " + spelled(f)
	}
	// Named as bench spells it: its letter may not be nccl-tests' (-n is --nproc).
	if b, _, err := c.Root().Find([]string{"bench"}); err == nil && b.Name() == "bench" {
		if f := b.Flags().Lookup(l.flag); f != nil {
			return fmt.Sprintf("; as in nccl-tests? %s is symmem bench's", spelled(f))
		}
	}
	return fmt.Sprintf("; as in nccl-tests? --%s is symmem bench's", l.flag)
}

// ncclTestsMoved is the refusal of nccl-tests' -letter in a command that has its
// setting under another letter (bench -g: the ranks are -n): the user meant that
// setting, so the message says what to type, not that the flag is unknown. "" for
// any other letter.
func ncclTestsMoved(c *cobra.Command, letter string) string {
	l, ok := ncclTestsLetters[letter]
	if !ok || l.flag == "" {
		return ""
	}
	f := c.Flags().Lookup(l.flag)
	if f == nil || f.Shorthand == letter {
		return ""
	}
	if l.why == "" {
		return fmt.Sprintf("-%s is nccl-tests' letter for --%s; here it is %s", letter, f.Name, spelled(f))
	}
	return fmt.Sprintf("-%s is %s %s (%s -%s 4)", letter, l.why, spelled(f), c.CommandPath(), f.Shorthand)
}

// spelled names f with its letter where it has one: "-n, --nproc", "--iters".
func spelled(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + ", --" + f.Name
	}
	return "--" + f.Name
}

// typedLetter says whether fs's flag name took its value from its letter in args, a
// command line that fs parsed (-n 4, -n4, -bn4; of several, the last, as pflag keeps
// it): the letter may mean something else to the user (nccl-tests' -n).
func typedLetter(fs *pflag.FlagSet, args []string, name string) bool {
	f := fs.Lookup(name)
	if f == nil || f.Shorthand == "" {
		return false
	}
	last := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return last
		case strings.HasPrefix(a, "--"):
			n, _, inline := strings.Cut(a[2:], "=")
			if g := fs.Lookup(n); g != nil {
				last = last && g != f
				if !inline && g.NoOptDefVal == "" {
					i++ // its value
				}
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				g := fs.ShorthandLookup(a[j : j+1])
				if g == nil {
					break
				}
				last = g == f || last
				if g.NoOptDefVal == "" { // the rest, or the next argument, is its value
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		}
	}
	return last
}
