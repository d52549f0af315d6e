package cli

import (
	"context"
	"errors"

	"github.com/symmem/symmem/pkg/job"
)

func runBenchRank(ctx context.Context, r *job.Rank, j job.Job, fault *job.Fault, streams IO) (any, error) {
	return nil, errors.New("bench: not built yet")
}
