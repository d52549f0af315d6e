// Package cli is symmem's command line: a thin layer of cobra commands over the
// packages under internal/. Main is the one place that turns errors into exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/symmem/symmem/pkg/kernels"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/kernelbuild"
	"github.com/symmem/symmem/internal/report"
	"github.com/symmem/symmem/internal/setting"
)

// IO is where a command writes, and the command line it was given (for results that
// record how they were made); tests swap it.
type IO struct {
	Out, Err io.Writer
	Args     []string
	// Backends are the backends this binary runs (cmd/symmem gives them; nil: the
	// CPU backend alone).
	Backends []symmem.Backend
	// Screen is what Out is: a terminal or not, and its width (help wraps to it,
	// tables fit it); the zero value is a file of unknown width.
	Screen report.Screen
}

// Main runs symmem with args on the given backends and returns the process exit code.
func Main(args []string, backends ...symmem.Backend) int {
	// Every signal that ends a job from outside stops it the same way: the ranks are
	// stopped and the files of the job removed. Left to Go's defaults, SIGHUP (a closed
	// terminal) killed the launcher at once, leaving a heap or token file behind, and
	// SIGQUIT (Ctrl-\) did the same after printing every goroutine's stack, with exit 2,
	// which says bad input. A SIGHUP the caller ignores stays ignored (Notify would undo
	// it): `nohup symmem` runs on when its terminal closes. SIGINT and SIGQUIT are
	// handled even when ignored: a script's background job inherits them so, and
	// `kill -INT` must still stop it.
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signalContext(sigs...)
	defer stop()
	out := &failedWrites{w: os.Stdout}
	streams := IO{Out: out, Err: os.Stderr, Args: args, Backends: backends, Screen: report.ScreenOf(os.Stdout, os.Getenv)}
	var cmd *cobra.Command
	var err error
	if len(args) == 1 && args[0] == symmem.WorkerArg {
		// A rank its launcher started needs no command tree: every rank of a job of
		// hundreds would build all the commands' flags and help for nothing.
		err = runWorker(ctx, streams)
	} else {
		// Once, here, not by every rank: SYMMEM_KERNELS_DIR that names no kernels.
		if note := kernels.DefaultNote(); note != "" {
			fmt.Fprintln(streams.Err, "symmem: "+note)
		}
		root := NewCmdRoot(streams)
		root.SetArgs(args)
		cmd, err = root.ExecuteContextC(ctx)
	}
	err = setBy(cmd, flagWords.Error(err))
	werr := out.first()
	if err == nil {
		err = werr
	} else if werr != nil {
		// The command failed and said why in what it printed ("see the failures
		// above", a table of wrong bytes), which the failed write lost.
		fmt.Fprintln(streams.Err, "symmem: the output was lost: "+werr.Error())
	}
	if err == nil {
		return symmem.ExitOK
	}
	code := symmem.ExitCode(err)
	if !errors.Is(err, errSilent) && !symmem.Said(err) {
		fmt.Fprintln(streams.Err, "symmem: "+message(err))
	}
	return code
}

// message is err's text as symmem prints it. An error may repeat what a file or a
// variable held, quoted or not (a 900 KB --store-addr's host name): each value is
// cut to its start and its length, the whole to maxErrorBytes, and nothing in it may
// drive the terminal.
func message(err error) string {
	return input.Printable(input.Clip(input.ClipWords(input.ClipQuoted(err.Error())), maxErrorBytes))
}

// maxErrorBytes bounds the message Main prints: the longest real one, a rank's last
// lines of stderr, is a few kilobytes.
const maxErrorBytes = 16 << 10

// signalContext is cancelled by the first of sigs to come, its cause naming that
// signal ("interrupted by SIGINT"), which a partial result records.
func signalContext(sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			cancel(interruptedBy(signalName(sig)))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// interruptedBy is the cause of a context a signal cancelled: it is context.Canceled
// to errors.Is, and names the signal.
type interruptedBy string

func (i interruptedBy) Error() string        { return "interrupted by " + string(i) }
func (i interruptedBy) Is(target error) bool { return target == context.Canceled }

// signalName is sig as kill(1) names it.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}

// setBy adds to an error that opens with a setting, named as its flag (checks deeper
// down name it by value: "--timeout -5s: must not be negative"), where the value came
// from when the user did not type it: a SYMMEM_* variable or the config file.
func setBy(cmd *cobra.Command, err error) error {
	if err == nil || cmd == nil {
		return err
	}
	n, ok := setting.Lead(err)
	if !ok || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "unknown "), flagWords.Word(n)) {
		return err
	}
	if by := config.SetBy(cmd.Flags().Lookup(string(n))); by != "" {
		return fmt.Errorf("%w (set by %s)", err, by)
	}
	return err
}

// failedWrites remembers the first write to w that failed: tables lost to a full disk
// must not end in exit 0 (--json and --csv check their own writes).
type failedWrites struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (f *failedWrites) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
	}
	return n, err
}

func (f *failedWrites) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// errSilent marks an error whose message was already printed (e.g. wrong results, shown
// in the table).
var errSilent = errors.New("")

// usage is bad input (exit status 2): the commands' own, and cobra's flag errors. The
// settings among its operands, and in the errors among them, are named by value and
// worded as flags here (setBy reads which one the message opens with). The exit status
// of every error is the library's mapping, symmem.ExitCode, as for the library's own
// callers.
func usage(format string, a ...any) error { return usageIn(flagWords, format, a...) }

// usageIn is usage with the settings worded by words.
func usageIn(words setting.Words, format string, a ...any) error {
	return symmem.WithExitCode(symmem.ExitUsage, words.Error(setting.Errorf(format, a...)))
}

func isUsage(err error) bool { return symmem.ExitCode(err) == symmem.ExitUsage }

// tableWriter is the output every command prints on: tables fitted to the screen,
// flags named as the command line spells them; its style is set before a command runs.
func tableWriter(streams IO) *report.Writer {
	return &report.Writer{Writer: streams.Out, Width: streams.Screen.TableColumns(), Words: flagWords}
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(streams IO) *cobra.Command {
	var configFile, format string
	// Every command prints its tables onto out, in the style --format and the
	// terminal ask for.
	out := tableWriter(streams)
	streams.Out = out
	root := &cobra.Command{
		Use:   "symmem",
		Short: "Launch and benchmark GPU-initiated communication with NVSHMEM",
		Long: `symmem runs one process per GPU, joins them into an NVSHMEM team and runs prebuilt
Triton and CUDA kernels that move data with NVSHMEM device calls (put, get,
put-with-signal). It checks every byte that arrives and prints tables of what each
rank received, of bandwidth and of latency.

Without a GPU or an NVSHMEM library it runs the same operations on a CPU backend over
shared memory, so every command works on any machine.

Settings come from flags, then SYMMEM_* environment variables (SYMMEM_NPROC,
SYMMEM_HEAP_SIZE, ...), then the file given with --config, then built-in defaults
(configs/default.yaml lists and explains them all).`,
		Example: `  symmem run put --nproc 2
  symmem bench --max-size 64M
  symmem check-nvshmem`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that an unknown command is an error here (exit 2) instead of
		// cobra's help page and exit 0.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if !takesSettings(cmd) {
				return setStyle(out, format, streams.Screen)
			}
			file := configFile
			if !cmd.Flags().Changed("config") {
				file = os.Getenv(config.EnvName("config"))
			}
			src := config.Sources{File: file, Env: os.Environ(), Other: otherEnv(), Checks: map[string]func(string) error{"store-addr": checkAddr}}
			if err := config.Apply(cmd, src); errors.Is(err, input.ErrStopped) {
				return err // interrupted while reading the file, not bad input
			} else if err != nil && cmd.Name() == "version" && cmd.Parent() == cmd.Root() {
				// A version is what a bug report starts with: it answers whatever
				// SYMMEM_CONFIG names, and says what is wrong with the settings.
				fmt.Fprintln(streams.Err, "symmem: warning: "+message(err))
			} else if err != nil {
				return symmem.WithExitCode(symmem.ExitUsage, err)
			}
			// After the settings: SYMMEM_FORMAT and the file's format: count.
			return setStyle(out, format, streams.Screen)
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	// --version, as most tools take it: the same as `symmem version`.
	root.Version = symmem.Build().Version
	cobra.AddTemplateFunc("symmemVersion", func() string { return versionText(streams.Screen.TableColumns()) })
	root.SetVersionTemplate("{{symmemVersion}}")
	root.PersistentFlags().StringVar(&configFile, "config", "", "read settings from this YAML file (or SYMMEM_CONFIG)")
	root.PersistentFlags().StringVar(&format, "format", "auto", "tables: box, plain (columns aligned with spaces), or auto (plain where the output is no terminal, under TERM=dumb or a locale without UTF-8)")
	root.PersistentFlags().BoolVar(&out.Wide, "wide", false, "print every column of a table, however wide (default: fit 120 columns, or COLUMNS where it says less)")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(NewCmdRun(streams, nil), NewCmdBench(streams, nil), NewCmdCheck(streams), NewCmdKernels(streams), NewCmdWorker(streams), NewCmdVersion(streams))
	root.SetHelpCommand(newCmdHelp(root))
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			strictCompletion(c)
		}
	}
	usageArgs(root)
	wrapHelp(root, streams.Screen.HelpColumns())
	return root
}

// setStyle draws out's tables as --format asks, on screen.
func setStyle(out *report.Writer, format string, screen report.Screen) error {
	style, err := report.StyleOn(format, os.Getenv, screen.Terminal)
	if err != nil {
		return usage("%v", err)
	}
	out.Style = style
	return nil
}

// otherEnv are the SYMMEM_* variables that are not settings: the library's (its
// launcher's, which it sets for its ranks and an external launcher's job may set, the
// backends', the test switches), the config file, the binary the scripts/ run, and the
// kernel build's choice of PyTorch's module or symmem's and of whole libraries.
func otherEnv() []string {
	return append(symmem.Environment(), config.EnvName("config"), "SYMMEM_BIN", kernelbuild.EnvTorchAPI, kernelbuild.EnvPruned)
}

// takesSettings says whether cmd reads settings (and so checks every source of them):
// not help, completion, the root alone, or a worker (its launcher checked them).
func takesSettings(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "help", "__complete", "__completeNoDesc", "completion", symmem.WorkerArg:
			return false
		}
	}
	return cmd.HasParent()
}

// checkAddr refuses a --store-addr that is not HOST:PORT before anything starts,
// from any source (the flag, SYMMEM_STORE_ADDR or the config file).
func checkAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return errors.New("want HOST:PORT with a port from 0 to 65535, such as node1:29517 or 127.0.0.1:0")
	}
	// Digits and dots are meant as an IPv4 address; one that is none (256.1.1.1) would
	// be looked up as a host name and fail at listen time.
	if host != "" && strings.Trim(host, "0123456789.") == "" && net.ParseIP(host) == nil {
		return fmt.Errorf("%s is not an IPv4 address; give this host's name or one of its addresses, such as 127.0.0.1", host)
	}
	return nil
}

// flagError turns pflag's parse errors into one line that says what to type, without
// the Go parser's words (strconv.ParseInt, "-n, --nproc" flag).
func flagError(c *cobra.Command, err error) error {
	help := fmt.Sprintf(" (see '%s --help')", c.CommandPath())
	var (
		inv *pflag.InvalidValueError
		ne  *pflag.NotExistError
		req *pflag.ValueRequiredError
	)
	switch {
	case errors.As(err, &inv) && inv.GetFlag().Name == "json" && c.Flags().Lookup("json-file") != nil:
		// --json=x.json: --json prints on stdout; the file is -J's.
		return usage("--json takes no file: it prints the result on stdout; to write it into %[1]s give -J %[1]s (--json-file %[1]s)", inv.GetValue())
	case errors.As(err, &inv):
		return usage("--%s %q: %s", inv.GetFlag().Name, inv.GetValue(), config.Want(inv.GetFlag(), inv.Unwrap()))
	case errors.As(err, &req):
		name := "--" + req.GetSpecifiedName()
		if req.GetSpecifiedShortnames() != "" {
			name = "-" + req.GetSpecifiedName()
		}
		return usage("%s needs a value%s", name, help)
	case errors.As(err, &ne) && ne.GetSpecifiedShortnames() != "":
		letter := ne.GetSpecifiedName()[:1]
		if moved := ncclTestsMoved(c, letter); moved != "" {
			return usage("%s%s", moved, help)
		}
		if in := ne.GetSpecifiedShortnames(); len(in) > 1 {
			return usage("unknown flag -%s in -%s%s%s", letter, in, ncclTestsHint(c, letter), help)
		}
		return usage("unknown flag -%s%s%s", ne.GetSpecifiedName(), ncclTestsHint(c, letter), help)
	case errors.As(err, &ne):
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if n := config.Nearest(ne.GetSpecifiedName(), names); n != "" {
			return usage("unknown flag --%s; did you mean --%s?%s", ne.GetSpecifiedName(), n, help)
		}
		return usage("unknown flag --%s%s", ne.GetSpecifiedName(), help)
	}
	return usage("%v%s", err, help)
}

// usageArgs makes every argument error of the tree a usage error (exit 2) that says what
// the command takes: cobra's own ("unknown command "x" for "symmem version"") would
// exit 1.
func usageArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
	if c.Args == nil {
		return
	}
	args := c.Args
	c.Args = func(cmd *cobra.Command, a []string) error {
		err := args(cmd, a)
		if err == nil || isUsage(err) {
			return err
		}
		if cmd.HasAvailableSubCommands() && len(a) > 0 {
			return unknownCommand(cmd, a[0])
		}
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		return usage("%s takes no arguments, got %q (see '%s --help')", name, strings.Join(a, " "), cmd.CommandPath())
	}
}

// unknownCommand names the nearest subcommand of c.
func unknownCommand(c *cobra.Command, name string) error {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if n := config.Nearest(name, names); n != "" {
		return usage("unknown command %q for %s; did you mean '%s %s'?", name, c.CommandPath(), c.CommandPath(), n)
	}
	return usage("unknown command %q for %s; it has: %s (see '%s --help')", name, c.CommandPath(), strings.Join(names, ", "), c.CommandPath())
}

// strictCompletion makes cobra's completion command refuse an unknown shell (exit 2)
// instead of printing its help and exiting 0.
func strictCompletion(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		var shells []string
		for _, sub := range cmd.Commands() {
			shells = append(shells, sub.Name())
		}
		if len(args) == 0 {
			return usage("completion needs a shell: %s (e.g. symmem completion bash)", strings.Join(shells, ", "))
		}
		if n := config.Nearest(args[0], shells); n != "" {
			return usage("completion: unknown shell %q; did you mean %s?", args[0], n)
		}
		return usage("completion: unknown shell %q; give one of %s", args[0], strings.Join(shells, ", "))
	}
}

// newCmdHelp is `symmem help [command]`, which, unlike cobra's, fails on an unknown
// topic.
func newCmdHelp(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil {
				return usage("%v", err)
			}
			if len(rest) > 0 {
				return unknownCommand(cmd, rest[0])
			}
			return cmd.Help()
		},
	}
}
