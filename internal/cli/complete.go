package cli

// Shell completion of flag values and files (`symmem __complete run --backend ''`),
// from the lists the code keeps: the operations and operators of internal/ops, the
// backends the binary runs and their registry, pkg/launch's launchers. None is written
// here a second time.

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/ops"
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
func implWords(cmd *cobra.Command, reg *backend.Registry, backends []backend.Factory, of []ops.Op) []string {
	if f := cmd.Flags().Lookup("kernels"); f != nil && f.Value.String() != "" {
		if withUser, err := engine.Registry(f.Value.String(), backends); err == nil {
			reg = withUser
		}
	}
	var out []string
	for _, im := range reg.All() {
		if len(of) == 0 || slices.ContainsFunc(of, im.Supports) {
			out = append(out, im.Name+"\t"+im.Summary+" ("+im.Backend+")")
		}
	}
	return out
}

// redOpWords are the reduction operators, with --redop all where the flag takes it.
func redOpWords(all bool) []string {
	var out []string
	for _, r := range ops.RedOps() {
		out = append(out, r.Name)
	}
	if all {
		out = append(out, ops.AllRedOps+"\tevery operator, a row each")
	}
	return out
}

// algoWords are the values --algo takes, each with the ops that read it; of the ops in
// of where it names some.
func algoWords(of []ops.Op) []string {
	if len(of) == 0 {
		of = ops.All()
	}
	var out, seen []string
	for _, o := range of {
		for _, a := range o.Algos() {
			if !slices.Contains(seen, a) {
				seen = append(seen, a)
				out = append(out, a+"\t"+ops.Names(ops.ForAlgo(a)))
			}
		}
	}
	return out
}

// benchOps are the known ops bench's --op names on the command line so far
// (collectives and all spelled out); none where it was not given.
func benchOps(cmd *cobra.Command) []ops.Op {
	f := cmd.Flags().Lookup("op")
	if f == nil || !f.Changed {
		return nil
	}
	names, _ := cmd.Flags().GetStringSlice("op")
	o := BenchOptions{Ops: names}
	var out []ops.Op
	for _, n := range o.spec("").Ops {
		if ops.Op(n).Known() {
			out = append(out, ops.Op(n))
		}
	}
	return out
}

// runOp is the op `symmem run OP` names, if it is one.
func runOp(args []string) []ops.Op {
	if len(args) > 0 && ops.Op(args[0]).Known() {
		return []ops.Op{ops.Op(args[0])}
	}
	return nil
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
