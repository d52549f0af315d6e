package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/internal/engine"
	"github.com/symmem/symmem/internal/launch"
)

// NewCmdWorker is the hidden command the launcher re-executes once per rank.
func NewCmdWorker(streams IO) *cobra.Command {
	return &cobra.Command{
		Use:    "__worker",
		Short:  "Run one rank of a job (started by the launcher, not by people)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorker(cmd, streams)
		},
	}
}

func runWorker(cmd *cobra.Command, streams IO) error {
	began := time.Now()
	ctx := cmd.Context()
	if os.Getenv(launch.EnvWorker) != "1" {
		return usage("__worker is started by `symmem run` and `symmem bench`, not by hand")
	}
	info, ok, err := launch.Discover("")
	if err != nil || !ok {
		return fmt.Errorf("worker environment incomplete: %v", err)
	}
	var j engine.Job
	if err := json.Unmarshal([]byte(os.Getenv(engine.EnvSpec)), &j); err != nil {
		return fmt.Errorf("worker: bad %s: %w", engine.EnvSpec, err)
	}
	fault, err := engine.ParseFault(os.Getenv(engine.EnvFault))
	if err != nil {
		return err
	}
	fault.Trigger(info.Rank, "init")
	r, err := engine.Connect(ctx, info, j)
	if err != nil {
		return err
	}
	if t0, err := strconv.ParseInt(os.Getenv(launch.EnvLaunchT0), 10, 64); err == nil {
		r.Timings["spawn"] = float64(began.UnixNano()-t0) / 1e6
	}
	var res any
	switch j.Kind {
	case "run":
		res, err = engine.RunOps(ctx, r, j, fault, streams.Out)
	case "bench":
		res, err = runBenchRank(ctx, r, j, fault, streams)
	default:
		err = errors.New("worker: unknown job kind " + j.Kind)
	}
	if err == nil {
		err = r.Publish(ctx, res)
	}
	if err != nil {
		// No deferred teardown: on failure (or a panic) a rank must not block in a
		// collective NVSHMEM call while its peers wait elsewhere.
		r.Abort()
		return err
	}
	r.Close()
	return nil
}
