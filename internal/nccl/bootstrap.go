package nccl

import (
	"context"
	"fmt"
	"os"
	"sort"
)

// EnvDefaults are set before NCCL initialises, each only where the user has not set it.
// NCCL_NVLS_ENABLE=0: NVLink SHARP multicast can take a shared host's GPUs down.
var EnvDefaults = map[string]string{"NCCL_NVLS_ENABLE": "0"}

// ApplyEnvDefaults sets every EnvDefaults variable that is unset (an empty value counts
// as set: it is the user's choice) and returns the ones it set, as NAME=VALUE. NCCL reads
// them with getenv, which os.Setenv reaches (see the package documentation).
func ApplyEnvDefaults() []string {
	var set []string
	for k, v := range EnvDefaults {
		if _, ok := os.LookupEnv(k); !ok {
			os.Setenv(k, v)
			set = append(set, k+"="+v)
		}
	}
	sort.Strings(set)
	return set
}

// KV is how ranks exchange the unique ID: rank 0 sets it, the others get it, blocking
// until it is set. The rendezvous store's client (store.Client) satisfies it.
type KV interface {
	Set(ctx context.Context, key string, v []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// IDKey is the store key under which rank 0 leaves a communicator's unique ID; name
// tells a job's communicators apart ("" for the only one).
func IDKey(name string) string {
	if name == "" {
		return "nccl/uid"
	}
	return "nccl/uid/" + name
}

// ShareID returns the job's unique ID: rank 0 makes it with newID and sets it under key,
// every other rank waits for it there.
func ShareID(ctx context.Context, kv KV, key string, rank int, newID func() (UniqueID, error)) (UniqueID, error) {
	if rank == 0 {
		id, err := newID()
		if err != nil {
			return id, err
		}
		if err := kv.Set(ctx, key, id[:]); err != nil {
			return id, fmt.Errorf("publishing the NCCL unique ID (key %s): %w", key, err)
		}
		return id, nil
	}
	var id UniqueID
	v, err := kv.Get(ctx, key)
	if err != nil {
		return id, fmt.Errorf("waiting for rank 0's NCCL unique ID (key %s): %w", key, err)
	}
	if len(v) != len(id) {
		return id, fmt.Errorf("rank 0's NCCL unique ID (key %s) is %d bytes, want %d", key, len(v), len(id))
	}
	copy(id[:], v)
	return id, nil
}

// Bootstrap makes rank's communicator of nranks: the unique ID goes from rank 0 to the
// others through kv under IDKey(name), then every rank joins (ncclCommInitRank). Every
// rank of the job calls it, each with its GPU's CUDA context current.
func (l *Lib) Bootstrap(ctx context.Context, kv KV, name string, rank, nranks int) (*Comm, error) {
	id, err := ShareID(ctx, kv, IDKey(name), rank, l.UniqueID)
	if err != nil {
		return nil, err
	}
	return l.InitRank(nranks, id, rank)
}
