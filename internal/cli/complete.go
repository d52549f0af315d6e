package cli

// Shell completion of flag values and files (`symmem __complete run --backend ''`),
// from the lists the code keeps: the library's operations, operators and element
// types, the backends the binary runs and their implementations, pkg/launch's
// launchers. None is written here a second time.

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/pkg/launch"
)

// completeOne offers the values of a flag that takes one; words gives them ("name" or
// "name\tdescription") for the command line typed so far.
func completeOne(words func(cmd *cobra.Command, args []string) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return words(cmd, args), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeList offers the next value of a flag that takes a comma-separated list
// (bench --op put,ge): what is typed up to the last comma stays in front of each
// value, and the values already there are not offered again.
func completeList(words func(cmd *cobra.Command, args []string) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		head := ""
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			head = toComplete[:i+1]
		}
		given := strings.Split(head, ",")
		var out []string
		for _, w := range words(cmd, args) {
			if name, _, _ := strings.Cut(w, "\t"); !slices.Contains(given, name) {
				out = append(out, head+w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFiles offers files that end in one of exts (json, svg), and directories.
func completeFiles(exts ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

// completeJobFlags completes the flags every launching command shares (addJobFlags).
func completeJobFlags(cmd *cobra.Command, streams IO) {
	cmd.RegisterFlagCompletionFunc("backend", completeOne(func(*cobra.Command, []string) []string {
		words := []string{symmem.DefaultJobOptions().Backend}
		for _, f := range streams.backends() {
			words = append(words, f.Name())
		}
		return words
	}))
	cmd.RegisterFlagCompletionFunc("launcher", cobra.FixedCompletions(launch.Launchers, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("kernels", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
}

// implWords are the implementations --impl takes: reg's, with those of the --kernels
// directory already on the command line where it loads (one that does not is the
// job's to refuse, not completion's); of them, those that serve one of of (all: nil).
func implWords(cmd *cobra.Command, reg registry, backends []symmem.Backend, of []string) []string {
	if f := cmd.Flags().Lookup("kernels"); f != nil && f.Value.String() != "" {
		if withUser, err := symmem.ImplementationsWith(f.Value.String(), backends); err == nil {
			reg = withUser
		}
	}
	var out []string
	for _, im := range reg {
		if len(of) == 0 || slices.ContainsFunc(of, func(op string) bool { return slices.Contains(im.Ops, op) }) {
			out = append(out, im.Name+"\t"+im.Summary+" ("+im.Backend+")")
		}
	}
	return out
}

// redOpWords are the reduction operators, with --redop all where the flag takes it.
func redOpWords(all bool) []string {
	out := symmem.RedOps()
	if all {
		out = append(out, "all\tevery operator, a row each")
	}
	return out
}

// patternWords are the values run's --pattern takes, each with who sends to whom: those
// of the op typed where it is one (none where every rank takes part).
func patternWords(args []string) []string {
	about := map[string]string{"pair": "rank 0 to --peer", "ring": "rank r to r+1", "one-to-all": "rank 0 to every other rank"}
	var of []string
	if op, ok := runOp(args); ok {
		of = op.Patterns
	} else {
		for _, o := range operations() {
			for _, p := range o.Patterns {
				if !slices.Contains(of, p) {
					of = append(of, p)
				}
			}
		}
	}
	var out []string
	for _, p := range of {
		out = append(out, p+"\t"+about[p])
	}
	return out
}

// algoWords are the values --algo takes, each with the ops that read it; of the ops in
// of where it names some.
func algoWords(of []string) []string {
	if len(of) == 0 {
		of = allOps()
	}
	var out, seen []string
	for _, o := range operations() {
		if !slices.Contains(of, o.Name) {
			continue
		}
		for _, a := range o.Algos {
			if !slices.Contains(seen, a) {
				seen = append(seen, a)
				out = append(out, a+"\t"+opNames(opsForAlgo(a)))
			}
		}
	}
	return out
}

// benchOps are the known ops bench's --op names on the command line so far
// (collectives and all spelled out); none where it was not given.
func benchOps(cmd *cobra.Command) []string {
	f := cmd.Flags().Lookup("op")
	if f == nil || !f.Changed {
		return nil
	}
	names, _ := cmd.Flags().GetStringSlice("op")
	var out []string
	for _, n := range names {
		switch {
		case n == "collectives":
			out = append(out, collectiveOps()...)
		case n == "all":
			out = append(out, allOps()...)
		case slices.Contains(allOps(), n):
			out = append(out, n)
		}
	}
	return out
}

// runOp is the operation `symmem run OP` names, if it is one.
func runOp(args []string) (symmem.Operation, bool) {
	if len(args) > 0 {
		for _, o := range operations() {
			if o.Name == args[0] {
				return o, true
			}
		}
	}
	return symmem.Operation{}, false
}

// completeResults offers `bench --json` files (*.json) for the first n arguments.
func completeResults(n int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeFiles("json")(cmd, args, toComplete)
	}
}
