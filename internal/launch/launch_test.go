package launch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDiscover(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want RankInfo
		ok   bool
		err  string
	}{
		{"none", nil, RankInfo{}, false, ""},
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
			"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc"},
			RankInfo{Rank: 1, LocalRank: 1, WorldSize: 2, LocalWorldSize: 2, StoreAddr: "10.0.0.1:29501", Token: "job-abc", JobID: "abc", Source: "torchrun"}, true, ""},
		{"slurm", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_ID": "9",
			"SYMMEM_STORE_ADDR": "node1:29517"},
			RankInfo{Rank: 3, LocalRank: 1, WorldSize: 4, LocalWorldSize: 2, StoreAddr: "node1:29517", Token: "job-9", JobID: "9", Source: "slurm"}, true, ""},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			RankInfo{Rank: 0, LocalRank: 0, WorldSize: 2, LocalWorldSize: 2, StoreAddr: "127.0.0.1:29517", Token: "job-", JobID: "127.0.0.1-29517", Source: "openmpi"}, true, ""},
		{"multi-node without address", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "2"}, RankInfo{}, false, "--store-addr"},
		{"bad rank", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, RankInfo{}, false, "not a number"},
		{"rank past size", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, RankInfo{}, false, "not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range schemes {
				for _, k := range []string{s.rank, s.size, s.localRank, s.localSize, s.job} {
					if k != "" {
						t.Setenv(k, "")
						os.Unsetenv(k)
					}
				}
			}
			for _, k := range []string{"MASTER_ADDR", "MASTER_PORT", EnvStoreAddr, EnvStoreToken} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, ok, err := Discover("")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("Discover = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func TestWorkerEnvKeepsTheParentsEnvironment(t *testing.T) {
	env := WorkerEnv([]string{"NVSHMEM_DISABLE_NVLS=1", "SYMMEM_RANK=7", "PATH=/bin"}, 1, 2, "127.0.0.1:1", "tok", "j", 5)
	joined := strings.Join(env, "\n")
	for _, want := range []string{"NVSHMEM_DISABLE_NVLS=1", "PATH=/bin", "SYMMEM_RANK=1", "SYMMEM_WORLD_SIZE=2", "SYMMEM_STORE_TOKEN=tok"} {
		if !strings.Contains(joined, want) {
			t.Errorf("worker env lacks %s", want)
		}
	}
	if strings.Contains(joined, "SYMMEM_RANK=7") {
		t.Error("a stale SYMMEM_RANK reached the worker")
	}
}

// Real processes: a failing rank ends the job quickly with its stderr; a hang is ended
// by the timeout.
func TestRunFailureAndTimeout(t *testing.T) {
	var out, errb bytes.Buffer
	start := time.Now()
	_, err := Run(context.Background(), Config{NProc: 3, Argv: []string{"sh", "-c", `echo "hello from $SYMMEM_RANK"; if [ "$SYMMEM_RANK" = 2 ]; then echo boom >&2; exit 9; fi; sleep 30`},
		Stdout: &out, Stderr: &errb, TagOutput: true, Grace: 100 * time.Millisecond})
	var we *WorkerError
	if !errors.As(err, &we) || we.Rank != 2 || we.How != "exit status 9" || len(we.Stderr) != 1 || we.Stderr[0] != "boom" {
		t.Fatalf("err = %#v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s to stop the job", took)
	}
	if !strings.Contains(out.String(), "[2] hello from 2") {
		t.Errorf("output not relayed with its prefix: %q", out.String())
	}

	_, err = Run(context.Background(), Config{NProc: 2, Argv: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || len(te.Running) != 2 {
		t.Fatalf("err = %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := Run(ctx, Config{NProc: 2, Argv: []string{"sleep", "30"}, Grace: 100 * time.Millisecond}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
}

func TestLastLineWithoutNewlineIsRelayed(t *testing.T) {
	var out bytes.Buffer
	if _, err := Run(context.Background(), Config{NProc: 1, Argv: []string{"printf", "no newline"}, Stdout: &out, TagOutput: true}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "[0] no newline\n" {
		t.Errorf("got %q", out.String())
	}
}
