package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
)

// NewCmdWorker is the hidden command the launcher re-executes once per rank.
func NewCmdWorker(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:    symmem.WorkerArg,
		Short:  "Run one rank of a job (started by the launcher, not by people)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return symmem.Worker(cmd.Context(), streams.Out)
		},
	}
}

// runWorker is the worker command without the command tree (Main's way for a rank):
// the output styled as the tree's PersistentPreRunE would style it.
func runWorker(ctx context.Context, streams IO) error {
	out := tableWriter(streams)
	if err := setStyle(out, "", streams.Screen); err != nil {
		return err
	}
	return symmem.Worker(ctx, out)
}
