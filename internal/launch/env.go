package launch

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// The environment a worker reads. The launcher sets all of these; under an external
// launcher Discover derives them from that launcher's own variables.
const (
	EnvRank           = "SYMMEM_RANK"
	EnvLocalRank      = "SYMMEM_LOCAL_RANK"
	EnvWorldSize      = "SYMMEM_WORLD_SIZE"
	EnvLocalWorldSize = "SYMMEM_LOCAL_WORLD_SIZE"
	EnvStoreAddr      = "SYMMEM_STORE_ADDR"
	EnvStoreToken     = "SYMMEM_STORE_TOKEN"
	EnvJobID          = "SYMMEM_JOB_ID"
	EnvLaunchT0       = "SYMMEM_LAUNCH_T0" // launcher start, unix nanoseconds, for the time breakdown
	EnvWorker         = "SYMMEM_WORKER"    // "1" in processes the launcher started
)

// DefaultStorePort is where rank 0 hosts the store under an external launcher when
// neither --store-addr nor MASTER_ADDR/MASTER_PORT say otherwise.
const DefaultStorePort = 29517

// RankInfo is where this process sits in the job.
type RankInfo struct {
	Rank, LocalRank, WorldSize, LocalWorldSize int
	StoreAddr, Token, JobID                    string
	// Source names who started the process: "symmem", "torchrun", "slurm", "openmpi",
	// "pmi" or "" when nothing did (a plain single process).
	Source string
}

// Hosted reports whether this rank must host the store itself (rank 0 under an
// external launcher); under symmem's own launcher the launcher hosts it.
func (r RankInfo) Hosted() bool { return r.Source != "symmem" && r.Rank == 0 }

func envInt(name string) (int, bool, error) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, true, fmt.Errorf("environment %s=%q is not a number", name, v)
	}
	return n, true, nil
}

type scheme struct {
	source                                string
	rank, size, localRank, localSize, job string
}

var schemes = []scheme{
	{"symmem", EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvJobID},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID"},
	{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", ""},
}

// Discover reads the rank layout from the environment: symmem's own launcher first,
// then torchrun, Open MPI, Slurm and PMI. storeAddr, when not empty, overrides where
// the store is (host:port of rank 0). ok is false when no launcher started this process.
func Discover(storeAddr string) (info RankInfo, ok bool, err error) {
	for _, s := range schemes {
		rank, has, err := envInt(s.rank)
		if err != nil {
			return info, false, err
		}
		if !has {
			continue
		}
		size, hasSize, err := envInt(s.size)
		if err != nil {
			return info, false, err
		}
		if !hasSize || size < 1 || rank < 0 || rank >= size {
			return info, false, fmt.Errorf("%s environment: rank %d of world size %d (%s) is not valid", s.source, rank, size, s.size)
		}
		info = RankInfo{Rank: rank, WorldSize: size, Source: s.source}
		info.LocalRank, has, _ = envInt(s.localRank)
		if !has {
			info.LocalRank = rank
		}
		// Slurm writes SLURM_NTASKS_PER_NODE as "2" or "2(x3)"; only a plain number is used.
		info.LocalWorldSize, has, _ = envInt(s.localSize)
		if !has {
			info.LocalWorldSize = size
		}
		if s.job != "" {
			info.JobID = os.Getenv(s.job)
		}
		info.StoreAddr, info.Token = os.Getenv(EnvStoreAddr), os.Getenv(EnvStoreToken)
		if storeAddr != "" {
			info.StoreAddr = storeAddr
		}
		if info.StoreAddr == "" {
			host, port := os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")
			if host == "" {
				host = "127.0.0.1"
				if size > info.LocalWorldSize {
					return info, false, fmt.Errorf("%s job spans several nodes: give rank 0's address with --store-addr HOST:PORT (or MASTER_ADDR)", s.source)
				}
			}
			p, _ := strconv.Atoi(port)
			if p == 0 {
				// torchrun's MASTER_PORT is its own store's; use the next port.
				p = DefaultStorePort
			} else {
				p++
			}
			info.StoreAddr = net.JoinHostPort(host, strconv.Itoa(p))
		}
		if info.Token == "" {
			// Every rank of an external job must derive the same token; the job ID is
			// the one secret-ish value they share.
			info.Token = "job-" + info.JobID
		}
		if info.JobID == "" {
			info.JobID = strings.ReplaceAll(info.StoreAddr, ":", "-")
		}
		return info, true, nil
	}
	return info, false, nil
}

// WorkerEnv is the environment symmem's launcher gives rank `rank`: the parent's
// environment (never scrubbed: NVSHMEM_* and NCCL_* settings must reach the workers)
// plus the job's variables.
func WorkerEnv(base []string, rank, n int, addr, token, job string, t0 int64) []string {
	env := make([]string, 0, len(base)+9)
	for _, kv := range base {
		// Drop stale job variables (a symmem started from inside another job).
		if strings.HasPrefix(kv, "SYMMEM_RANK=") || strings.HasPrefix(kv, "SYMMEM_WORLD_SIZE=") ||
			strings.HasPrefix(kv, "SYMMEM_LOCAL_") || strings.HasPrefix(kv, "SYMMEM_STORE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		EnvRank+"="+strconv.Itoa(rank),
		EnvLocalRank+"="+strconv.Itoa(rank),
		EnvWorldSize+"="+strconv.Itoa(n),
		EnvLocalWorldSize+"="+strconv.Itoa(n),
		EnvStoreAddr+"="+addr,
		EnvStoreToken+"="+token,
		EnvJobID+"="+job,
		EnvLaunchT0+"="+strconv.FormatInt(t0, 10),
		EnvWorker+"=1",
	)
}
