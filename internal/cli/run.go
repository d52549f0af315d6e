package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/result"
	"github.com/symmem/symmem/internal/setting"
)

// RunOptions are `symmem run`'s settings.
type RunOptions struct {
	JobOptions
	Op      string
	Count   symmem.Count
	DType   string
	RedOp   string
	Value   float64
	Peer    int
	Root    int
	Pattern string
	Impl    string
	Blocks  int
	Warps   int
	JSON    bool
	MoE     symmem.MoE
	// Matmul is the fused operations' shape; Random fills their matrices with random
	// values, checked within a printed tolerance.
	Matmul symmem.Matmul
	Random bool
	// given lists the MoE layer's flags set on the command line: an op other than
	// dispatch and combine would ignore them; givenMatmul, the fused operations' (and
	// --random); givenData, what only the others read (--count, --value, --peer).
	given, givenMatmul, givenData []string
}

// NewCmdRun builds `symmem run OP`; runF, when not nil, replaces the run function (tests use it
// to check how flags land in the options).
func NewCmdRun(streams IO, runF func(*RunOptions) error) *cobra.Command {
	opts, reg := &RunOptions{}, streams.registry() // the help, --impl and its completion read it
	cmd := &cobra.Command{
		Use:   "run OP",
		Short: "Run a correctness test of one operation across ranks (put, get, put-signal, collectives)",
		Long: `Run starts --nproc ranks, joins them into one team and runs OP on symmetric memory:

` + opHelp(runOps()) + `
Point operations send --count elements of --value. The collectives take --count
elements per block (element k of block p of rank r holds --value + r, + N*p for the
operations that split their input, + k mod 4, so a misplaced block or element is
caught); each rank checks its whole output, and a rank an operation leaves nothing
(a non-root of a reduce or gather) checks that its output was not written. --root is
the root of ` + opNames(opsTaking("root")) + ` (0 by default). The reductions
combine with --redop (` + strings.Join(symmem.RedOps(), ", ") + `; sum by default), each on values it keeps
exact (prod: +-1 and +-2; avg: multiples of N), and need a float or int32/int64 --dtype
(bf16 by default, as bench's collectives). Dispatch and combine route --tokens tokens of
--hidden elements per rank to the ranks of their --topk experts (see symmem bench
--help).

With more than 2 ranks the pattern is a ring: every rank sends to (rank+1) mod N the
value --value + rank, so data delivered to the wrong rank is caught. --pattern
one-to-all has rank 0 put its message into every other rank, each checking it holds all
of it (the pattern of a user's put whose kernel reaches every peer itself, its default
on more than 2 ranks). Each receiving rank prints what it holds and the launcher prints
a correctness table. The exit status is 0
only when every element is right (3 when some are wrong or never arrive, 4 when a rank
failed).

Implementations (--impl):
` + implHelp(reg, runOps()),
		Example: `  symmem run put --nproc 2
  symmem run put --nproc 4 --dtype bf16 --value 1.5 --count 1M
  symmem run put-signal --backend cpu --json
  symmem run all-reduce --nproc 4 --dtype bf16 --count 1K
  symmem run all-reduce --nproc 3 --redop max
  srun -N2 --ntasks-per-node=4 symmem run put --store-addr node1:29517`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usage("run takes one operation: %s (e.g. symmem run put)", opNames(runOps()))
			case len(args) > 1:
				return usage("run takes one operation, got %q: give one of %s, and flags as --name value", strings.Join(args, " "), opNames(runOps()))
			case !slices.Contains(runOps(), args[0]):
				if n := config.Nearest(args[0], runOps()); n != "" {
					return usage("unknown op %s; did you mean %s? (symmem run %s)", input.Quote(args[0]), n, n)
				}
			}
			return nil
		},
		ValidArgs: runOps(),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Op = args[0]
			opts.given = config.Typed(cmd.Flags(), moeFlags...)
			opts.givenMatmul = config.Typed(cmd.Flags(), append(slices.Clone(matmulFlags), "random")...)
			opts.givenData = config.Typed(cmd.Flags(), "count", "value", "peer")
			if err := typedZeroTokens(cmd.Flags()); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runRun(cmd.Context(), opts, streams)
		},
	}
	addJobFlags(&opts.JobOptions, cmd)
	f, d := cmd.Flags(), symmem.DefaultRunSpec()
	opts.Count = symmem.Count(d.Count)
	f.Var(&opts.Count, "count", "elements per message (accepts K, M, G: 1M = 1048576)")
	f.StringVar(&opts.DType, "dtype", "", "element type: "+strings.Join(symmem.DTypes(), ", ")+" (default "+symmem.DefaultDType+"; "+symmem.DefaultCollectiveDType+" for collectives, as in bench)")
	f.StringVarP(&opts.RedOp, "redop", "o", "", "reduction operator of "+opNames(opsTaking("redop"))+": "+strings.Join(symmem.RedOps(), ", ")+" (default sum)")
	f.Float64Var(&opts.Value, "value", d.Value, "value rank 0 sends (ring: value + rank)")
	f.IntVar(&opts.Peer, "peer", d.Peer, "rank that rank 0 talks to (pair pattern)")
	f.IntVarP(&opts.Root, "root", "r", 0, "root rank of "+opNames(opsTaking("root")))
	f.StringVar(&opts.Pattern, "pattern", "", "pair, ring or one-to-all (put: rank 0 to every other rank) (default: pair for 2 ranks, ring for more)")
	f.BoolVar(&opts.JSON, "json", false, "print the results as JSON on stdout")
	f.StringVar(&opts.Impl, "impl", "", "implementation: "+strings.Join(reg.names(), ", ")+" (default: the backend's first)")
	f.IntVar(&opts.Blocks, "blocks", 0, "GPU blocks per operation (0 = automatic)")
	f.IntVar(&opts.Warps, "warps", 0, "GPU warps per block (0 = automatic)")
	addMoEFlags(f, &opts.MoE)
	addMatmulFlags(f, &opts.Matmul, symmem.DefaultMatmul())
	f.BoolVar(&opts.Random, "random", false, "fused operations: random A and B, checked within a tolerance it prints (default: small integers, checked exactly)")
	// Completion reads the registry, like validation and the help text, and offers
	// what the op already typed takes.
	completeJobFlags(cmd, streams)
	cmd.RegisterFlagCompletionFunc("impl", completeOne(func(c *cobra.Command, args []string) []string {
		var of []string
		if op, ok := runOp(args); ok {
			of = []string{op.Name}
		}
		return implWords(c, reg, streams.backends(), of)
	}))
	cmd.RegisterFlagCompletionFunc("dtype", completeOne(func(_ *cobra.Command, args []string) []string {
		if op, ok := runOp(args); ok {
			return op.DTypes
		}
		return symmem.DTypes()
	}))
	cmd.RegisterFlagCompletionFunc("redop", completeOne(func(*cobra.Command, []string) []string { return redOpWords(false) }))
	cmd.RegisterFlagCompletionFunc("pattern", completeOne(func(_ *cobra.Command, args []string) []string { return patternWords(args) }))
	return cmd
}

// spec is the test the options describe; the engine validates it (what only the
// command line knows, which flags were typed, is checked here).
func (o *RunOptions) spec() (symmem.RunSpec, error) {
	if len(o.given) > 0 && !routesMoE(o.Op) {
		return symmem.RunSpec{}, usage("%s is for dispatch and combine, not %s: leave it out", setting.Name(o.given[0]), o.Op)
	}
	if len(o.givenMatmul) > 0 && !multiplies(o.Op) {
		return symmem.RunSpec{}, usage("%s is for %s, not %s: leave it out", setting.Name(o.givenMatmul[0]), opNames(opsTaking(matmulFlags[0])), o.Op)
	}
	if len(o.givenData) > 0 && multiplies(o.Op) {
		return symmem.RunSpec{}, usage("%s is not for %s, whose matrices come from --m, --n and --k: leave it out", setting.Name(o.givenData[0]), o.Op)
	}
	s := symmem.RunSpec{Op: o.Op, Pattern: o.Pattern, DType: o.DType, RedOp: o.RedOp, Count: int64(o.Count), Value: o.Value, Peer: o.Peer, Root: o.Root,
		Launch: symmem.Launch{Impl: o.Impl, Blocks: o.Blocks, Warps: o.Warps}}
	if routesMoE(o.Op) {
		m := o.MoE // the engine fills in the token count if left at 0
		s.MoE = &m
	}
	if multiplies(o.Op) {
		mm := o.Matmul
		s.Matmul, s.Random = &mm, o.Random
	}
	return s, nil
}

func runRun(ctx context.Context, opts *RunOptions, streams IO) error {
	spec, err := opts.spec()
	if err != nil {
		return err
	}
	// With --json, stdout stays pure JSON: the ranks' lines go to stderr.
	job, err := newJob(&opts.JobOptions, streams, !opts.JSON)
	if err != nil {
		return err
	}
	plan, err := job.PlanRun(spec)
	if err != nil {
		return err
	}
	if name, note := job.Backend(); !opts.JSON && job.Reports() {
		say(streams, "backend: %s%s", name, noteSuffix(note))
	}
	warnOversubscribed(job, streams, "")
	start := time.Now()
	out, err := job.Launch(ctx, plan)
	if err != nil || out == nil {
		return err
	}
	rep := *out.Run
	rep.Command = strings.TrimSpace("symmem " + strings.Join(streams.Args, " "))
	if opts.JSON {
		// Only JSON carries it, and it reads the kernel catalogue: a CPU run's table
		// needs none of it.
		rep.Provenance = result.NewProvenance(start)
	}
	return printRun(streams, rep, opts.JSON)
}

func printRun(streams IO, rep result.RunReport, asJSON bool) error {
	if asJSON {
		if err := report.JSON(streams.Out, rep); err != nil {
			return err
		}
	} else {
		result.PrintRun(streams.Out, rep)
	}
	if !rep.OK {
		return symmem.WithExitCode(symmem.ExitWrongResults, errors.New(rep.Failure()))
	}
	return nil
}

// implHelp lists reg's implementations that serve any of ops, for help text.
func implHelp(reg registry, of []string) string {
	var b strings.Builder
	width := 12 // the names' column: the longest name and a space
	for _, im := range reg {
		width = max(width, len(im.Name))
	}
	for _, im := range reg {
		var serves []string
		for _, op := range of {
			if slices.Contains(im.Ops, op) {
				serves = append(serves, op)
			}
		}
		if len(serves) > 0 {
			fmt.Fprintf(&b, "  %-*s  %s (%s backend; %s)\n", width, im.Name, im.Summary, im.Backend, opNames(serves))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// opHelp lists ops with each one's help line (symmem.Operation's Help), one line each.
func opHelp(list []string) string {
	var b strings.Builder
	for _, o := range operations() {
		if slices.Contains(list, o.Name) {
			fmt.Fprintf(&b, "  %-*s%s\n", max(16, len(o.Name)+2), o.Name, o.Help)
		}
	}
	return b.String()
}
