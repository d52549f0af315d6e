package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDiscover(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // token files of one-host jobs go there
	for _, tc := range []struct {
		name     string
		launcher string
		env      map[string]string
		want     RankInfo
		ok       bool
		err      string
	}{
		{"none", "", nil, RankInfo{}, false, ""},
		{"torchrun", "", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
			"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc", "SYMMEM_STORE_TOKEN": "s3cret"},
			RankInfo{Rank: 1, LocalRank: 1, WorldSize: 2, LocalWorldSize: 2, StoreAddr: "10.0.0.1:29501", ListenAddr: "10.0.0.1:29501",
				Token: "s3cret", JobID: "abc", Source: "torchrun"}, true, ""},
		{"slurm over two hosts", "", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "2(x2)",
			"SLURM_NODEID": "1", "SLURM_JOB_ID": "9", "SLURM_STEP_NODELIST": "gpu[07-08]", "SYMMEM_STORE_TOKEN": "t"},
			RankInfo{Rank: 3, LocalRank: 1, WorldSize: 4, LocalWorldSize: 2, StoreAddr: "gpu07:29517", ListenAddr: ":29517", Token: "t",
				JobID: "9", Source: "slurm", MultiHost: true}, true, ""},
		{"slurm, uneven tasks per node", "", map[string]string{"SLURM_PROCID": "6", "SLURM_NTASKS": "7", "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "2(x3),1",
			"SLURM_NODEID": "3", "SLURM_JOB_ID": "9", "SYMMEM_STORE_ADDR": "node1:29517", "SYMMEM_STORE_TOKEN": "t"},
			RankInfo{Rank: 6, LocalRank: 0, WorldSize: 7, LocalWorldSize: 1, StoreAddr: "node1:29517", ListenAddr: ":29517", Token: "t",
				JobID: "9", Source: "slurm", MultiHost: true}, true, ""},
		{"openmpi on one host, no token given", "", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_ess_base_jobid": "42"},
			RankInfo{Rank: 1, LocalRank: 1, WorldSize: 2, LocalWorldSize: 2, StoreAddr: "127.0.0.1:29517", ListenAddr: "127.0.0.1:29517",
				TokenFile: "TOKENDIR/job-42.token", JobID: "42", Source: "openmpi"}, true, ""},
		{"several hosts without a token", "", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "2",
			"SYMMEM_STORE_ADDR": "n1:1"}, RankInfo{}, false, "export SYMMEM_STORE_TOKEN="},
		{"several hosts without an address", "", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, RankInfo{}, false, "with store-addr HOST:PORT"},
		{"no local rank", "", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2"}, RankInfo{}, false, "MPI_LOCALRANKID is not"},
		{"local rank past the host's ranks", "", map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"},
			RankInfo{}, false, "do not fit together"},
		{"bad rank", "", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, RankInfo{}, false, "not a whole number"},
		{"MASTER_PORT not a number", "", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc"},
			RankInfo{}, false, `torchrun environment: MASTER_PORT="abc": want a port from 1 to 65534 (symmem's store takes the one after it; 0 or unset: the default)`},
		{"MASTER_PORT leaves no port after it", "", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "65535"},
			RankInfo{}, false, `MASTER_PORT="65535": want a port from 1 to 65534`},
		{"MASTER_PORT negative", "", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "-5"},
			RankInfo{}, false, `MASTER_PORT="-5": want a port from 1 to 65534`},
		{"MASTER_ADDR no host", "", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "[::1", "MASTER_PORT": "5000"},
			RankInfo{}, false, `torchrun environment: MASTER_ADDR="[::1": not a host name or IP address; give rank 0's host`},
		{"rank past size", "", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, RankInfo{}, false, "not valid"},
		{"--launcher local ignores torchrun", "local", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, RankInfo{}, false, ""},
		{"--launcher slurm needs slurm", "slurm", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, RankInfo{}, false, "not started by slurm"},
		{"--launcher bogus", "bogus", nil, RankInfo{}, false, "unknown launcher \"bogus\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := Discover(DiscoverOptions{Launcher: tc.launcher, Getenv: func(k string) string { return tc.env[k] }})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if got.TokenFile != "" {
				got.TokenFile = strings.Replace(got.TokenFile, filepath.Join(os.TempDir(), fmt.Sprintf("symmem-%d", os.Getuid())), "TOKENDIR", 1)
			}
			got.AddrFrom, got.TokenFrom = "", "" // for errors only (TestListenError, external.txtar)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("Discover = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// Discover's errors name a setting as the caller names it, where it says how.
func TestDiscoverNamesTheCallersSetting(t *testing.T) {
	flag := func(s string) string { return "--" + s }
	for _, tc := range []struct {
		launcher string
		env      map[string]string
		want     string
	}{
		{"bogus", nil, `unknown --launcher "bogus"`},
		{"", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			"give rank 0's address with --store-addr HOST:PORT"},
	} {
		_, _, err := Discover(DiscoverOptions{Launcher: tc.launcher, Name: flag, Getenv: func(k string) string { return tc.env[k] }})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

func TestExpandNodeList(t *testing.T) {
	for in, want := range map[string]string{
		"gpu01":                 "gpu01",
		"gpu[01-04,07]":         "gpu01 gpu02 gpu03 gpu04 gpu07",
		"a[8-10],login1,b[1,3]": "a8 a9 a10 login1 b1 b3",
		"rack[1-2]-node[01-02]": "rack1-node01 rack1-node02 rack2-node01 rack2-node02",
		"nid00[1-3]":            "nid001 nid002 nid003",
	} {
		got, err := ExpandNodeList(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("ExpandNodeList(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "gpu[01-", "gpu[3-1]", "gpu]", "a,,b", "gpu[x]"} {
		if _, err := ExpandNodeList(bad); err == nil {
			t.Errorf("ExpandNodeList(%q) accepted", bad)
		}
	}
	got, err := ExpandTasksPerNode("2(x3),1")
	if err != nil || fmt.Sprint(got) != "[2 2 2 1]" {
		t.Errorf("ExpandTasksPerNode = %v, %v", got, err)
	}
	for _, bad := range []string{"", "2(x0)", "x", "2(x3"} {
		if _, err := ExpandTasksPerNode(bad); err == nil {
			t.Errorf("ExpandTasksPerNode(%q) accepted", bad)
		}
	}
}

func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	if err := WriteTokenFile(p, "abc", "host 12 34"); err != nil {
		t.Fatal(err)
	}
	if tok, owner, err := ReadJobToken(p); err != nil || tok != "abc" || owner != "host 12 34" {
		t.Fatalf("ReadJobToken = %q, %q, %v", tok, owner, err)
	}
	os.Chmod(p, 0o644)
	if _, err := ReadTokenFile(p); err == nil || !strings.Contains(err.Error(), "can be read by others (mode 644): chmod go-rwx") {
		t.Errorf("a world-readable token file: %v", err)
	}
	// Rank 0 of a one-host job makes the token; the others read it from the file.
	t.Setenv("TMPDIR", dir)
	env := func(rank string) func(string) string {
		m := map[string]string{"RANK": rank, "WORLD_SIZE": "2", "LOCAL_RANK": rank, "TORCHELASTIC_RUN_ID": "x"}
		return func(k string) string { return m[k] }
	}
	r0, _, err := Discover(DiscoverOptions{Getenv: env("0")})
	if err != nil || len(r0.Token) != 32 || r0.TokenFile == "" {
		t.Fatalf("rank 0: %+v, %v", r0, err)
	}
	r1, _, err := Discover(DiscoverOptions{Getenv: env("1")})
	if err != nil || r1.Token != "" || r1.TokenFile != r0.TokenFile {
		t.Fatalf("rank 1: %+v, %v", r1, err)
	}
	if fi, err := os.Stat(filepath.Dir(r0.TokenFile)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("token directory: %v %v", fi.Mode(), err)
	}
}

// A token directory that cannot be made, or cannot take rank 0's file, says what to do.
func TestTokenDirectoryThatCannotBeWritten(t *testing.T) {
	const advice = "; set TMPDIR to a directory you can write, or give every rank the same SYMMEM_STORE_TOKEN"
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(dir, "missing"))
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "x"}
	_, _, err := Discover(DiscoverOptions{Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.HasSuffix(err.Error(), advice) {
		t.Errorf("TMPDIR missing: %v", err)
	}
	p := filepath.Join(dir, "tok")
	if err := os.Mkdir(p+".new", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(p, "abc", "host 12 34"); err == nil || !strings.HasSuffix(err.Error(), advice) {
		t.Errorf("a token file that cannot be written: %v", err)
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

func TestRankOf(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	job := func(rank, id, size string, more ...string) map[string]string {
		m := map[string]string{"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": size, "LOCAL_WORLD_SIZE": size,
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": id, EnvStoreToken: "t"}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	me, ok, err := Discover(DiscoverOptions{Getenv: env(job("0", "j1", "3"))})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	ompi := func(rank string) map[string]string {
		return map[string]string{"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_LOCAL_RANK": rank,
			"OMPI_COMM_WORLD_LOCAL_SIZE": "3", EnvStoreToken: "t"}
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		rank int
		ok   bool
	}{
		{"same job", job("2", "j1", "3"), 2, true},
		{"another job's id", job("2", "j2", "3"), 0, false},
		{"another world size", job("1", "j1", "2"), 0, false},
		{"another port", job("1", "j1", "3", "MASTER_PORT", "29600"), 0, false},
		{"another token", job("1", "j1", "3", EnvStoreToken, "u"), 0, false},
		{"no launcher", map[string]string{"PATH": "/bin"}, 0, false},
		{"another launcher", ompi("1"), 0, false},
	} {
		if rank, ok := RankOf(me, env(c.env), nil); rank != c.rank || ok != c.ok {
			t.Errorf("%s: RankOf = %d, %v; want %d, %v", c.name, rank, ok, c.rank, c.ok)
		}
	}
	// torchrun's default run id, "none": the job is told by its store address.
	me, _, _ = Discover(DiscoverOptions{Getenv: env(job("0", "none", "2"))})
	if rank, ok := RankOf(me, env(job("1", "none", "2")), nil); rank != 1 || !ok {
		t.Errorf("run id none: RankOf = %d, %v; want 1, true", rank, ok)
	}
	if _, ok := RankOf(me, env(job("1", "none", "2", "MASTER_PORT", "29600")), nil); ok {
		t.Error("run id none, another port: a rank of another job matched")
	}
	// Open MPI's variables against PMI's, both under --launcher mpi: the source tells.
	me, _, _ = Discover(DiscoverOptions{Getenv: env(ompi("0"))})
	if rank, ok := RankOf(me, env(ompi("2")), nil); rank != 2 || !ok {
		t.Errorf("open mpi: RankOf = %d, %v; want 2, true", rank, ok)
	}
	pmi := map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "3", EnvStoreToken: "t"}
	if _, ok := RankOf(me, env(pmi), nil); ok {
		t.Error("a PMI rank matched an Open MPI job")
	}
	// --store-addr is on the command line, not in the environment.
	me, _, _ = Discover(DiscoverOptions{StoreAddr: "127.0.0.1:31000", StoreFlag: "--store-addr", Getenv: env(job("0", "j1", "3"))})
	if rank, ok := RankOf(me, env(job("1", "j1", "3")), []string{"symmem", "run", "put", "--store-addr", "127.0.0.1:31000"}); rank != 1 || !ok {
		t.Errorf("--store-addr A: RankOf = %d, %v; want 1, true", rank, ok)
	}
	if rank, ok := RankOf(me, env(job("1", "j1", "3")), []string{"symmem", "--store-addr=127.0.0.1:31000"}); rank != 1 || !ok {
		t.Errorf("--store-addr=A: RankOf = %d, %v; want 1, true", rank, ok)
	}
	if _, ok := RankOf(me, env(job("1", "j1", "3")), []string{"symmem", "--store-addr", "127.0.0.1:32000"}); ok {
		t.Error("--store-addr B: a rank of another store matched")
	}
	if _, ok := RankOf(RankInfo{Source: "symmem"}, env(job("1", "j1", "3")), nil); ok {
		t.Error("a rank of symmem's own launcher matched: its launcher knows its ranks")
	}
}

// A job with no ranks or no command line is refused, not a panic on Argv[0].
func TestRunRefusesEmptyConfig(t *testing.T) {
	for _, cfg := range []Config{{NProc: 0, Argv: []string{"true"}}, {NProc: 1}} {
		if job, err := Run(context.Background(), cfg); err == nil || job != nil {
			t.Errorf("Run(%+v) = %v, %v", cfg, job, err)
		}
	}
}

// A job ID from the environment names files: TORCHELASTIC_RUN_ID=x/../../tmp/y put the
// CPU heap outside /dev/shm, and exp/ID named a directory that does not exist. Every
// ID Discover returns is one file name, the same on every rank, and two IDs stay two.
func TestDiscoverMakesJobIDsSafe(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	seen := map[string]string{}
	for _, id := range []string{"x/../../../tmp/evil", "exp/ID", "exp_ID", "..", ".", ".hidden", "a\x1b[2Jb", strings.Repeat("a", 300), "run-7.b_c", "none"} {
		env := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": id}
		info, ok, err := Discover(DiscoverOptions{Getenv: func(k string) string { return env[k] }})
		if err != nil || !ok {
			t.Fatalf("Discover with run ID %q: %v", id, err)
		}
		job := info.JobID
		if job == "" || job == "." || job == ".." || strings.ContainsAny(job, "/\x1b") || len(job) > maxJobID+20 || filepath.Base(job) != job {
			t.Errorf("run ID %q: job ID %q is no safe file name", id, job)
		}
		if other, dup := seen[job]; dup && other != id {
			t.Errorf("run IDs %q and %q both became %q", other, id, job)
		}
		seen[job] = id
		if filepath.Dir(info.TokenFile) != filepath.Join(os.TempDir(), fmt.Sprintf("symmem-%d", os.Getuid())) {
			t.Errorf("run ID %q: token file %s outside the token directory", id, info.TokenFile)
		}
		again, _, _ := Discover(DiscoverOptions{Getenv: func(k string) string { return env[k] }})
		if again.JobID != job {
			t.Errorf("run ID %q: %q then %q", id, job, again.JobID)
		}
	}
	if id := SafeJobID("run-7.b_c"); id != "run-7.b_c" {
		t.Errorf("a safe ID was changed to %q", id)
	}
}

// A worker starts with the timer slack asked for, and the thread that started it gets
// its own back.
func TestRunGivesWorkersTheirTimerSlack(t *testing.T) {
	runtime.LockOSThread() // Run's lock nests: it starts the workers from this thread
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 70000, 0, 0, 0); err != nil {
		t.Skipf("no timer slack to set here: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0)
	var out bytes.Buffer
	if _, err := Run(context.Background(), Config{NProc: 2, Argv: []string{"cat", "/proc/self/timerslack_ns"}, Stdout: &out, TimerSlack: 3 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "3000000\n3000000\n" {
		t.Errorf("the workers' timer slack: %q, want 3000000 each", got)
	}
	if after, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_TIMERSLACK, 0, 0); errno != 0 || after != 70000 {
		t.Errorf("the launcher's thread's timer slack is %d (%v) after Run, want its own 70000 back", after, errno)
	}
}
