// Package cli is symmem's command line: a thin layer of cobra commands over the
// packages under pkg/. Main is the one place that turns errors into exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/config"
	"github.com/symmem/symmem/internal/exitcode"
)

// IO is where a command writes, and the command line it was given (for results that
// record how they were made); tests swap it.
type IO struct {
	Out, Err io.Writer
	Args     []string
}

// Main runs symmem with args and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := IO{Out: os.Stdout, Err: os.Stderr, Args: args}
	root := NewCmdRoot(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitcode.OK
	}
	code := codeOf(err)
	if !errors.Is(err, errSilent) {
		fmt.Fprintln(streams.Err, "symmem: "+err.Error())
	}
	return code
}

// errSilent marks an error whose message was already printed (e.g. wrong results, shown
// in the table).
var errSilent = errors.New("")

// codeOf picks the exit status: the engine and the commands mark their errors with
// one (internal/exitcode); cobra's own flag errors are bad input.
func codeOf(err error) int {
	var ce *exitcode.Err
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case isUsage(err):
		return exitcode.Usage
	case errors.Is(err, context.Canceled):
		return exitcode.Interrupted
	}
	return exitcode.Error
}

// usageErr marks bad input.
type usageErr struct{ error }

func (u usageErr) Unwrap() error { return u.error }

func usage(format string, a ...any) error { return usageErr{fmt.Errorf(format, a...)} }

func isUsage(err error) bool {
	var u usageErr
	return errors.As(err, &u)
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(streams IO) *cobra.Command {
	var configFile string
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
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Name() == "__complete" || cmd.Name() == "help" {
				return nil
			}
			file := configFile
			if !cmd.Flags().Changed("config") {
				if env := os.Getenv(config.EnvName("config")); env != "" {
					file = env
				}
			}
			if err := config.Apply(cmd, file); err != nil {
				return usageErr{err}
			}
			return nil
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.PersistentFlags().StringVar(&configFile, "config", "", "read settings from this YAML file (or SYMMEM_CONFIG)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usage("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(NewCmdRun(streams, nil), NewCmdBench(streams, nil), NewCmdCheck(streams), NewCmdWorker(streams), NewCmdVersion(streams))
	return root
}
