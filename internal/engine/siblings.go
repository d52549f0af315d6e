package engine

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/launch"
)

// stoppedSiblings finds the ranks of info's job that are stopped (SIGSTOP) among the
// processes that the launcher which started this rank started beside it (the same
// parent: torchrun's agent, mpirun's daemon, slurmstepd), told apart by their
// environment (launch.RankOf): rank -> pid. A rank stopped before it told anyone its
// pid (before its first heartbeat, or rank 0 before its token file) is found only so.
// Under symmem's own launcher, which knows its ranks, and for a process whose parent
// has gone (its siblings are then init's children) it finds none.
func stoppedSiblings(info launch.RankInfo) map[int]int {
	ppid, self := os.Getppid(), os.Getpid()
	if info.Source == "symmem" || ppid <= 1 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		state, parent, ok := procState(pid)
		if !ok || parent != ppid || state != "T" {
			continue
		}
		env, err := environ(pid)
		if err != nil {
			continue
		}
		if rank, ok := launch.RankOf(info, env); ok && rank != info.Rank {
			out[rank] = pid
		}
	}
	return out
}

// procState is process pid's state letter and parent pid (/proc/PID/stat).
func procState(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The command name (field 2) may hold spaces; the fields after it do not.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

// environ reads the environment process pid started with (readable for this user's
// own processes).
func environ(pid int) (func(string) string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	return func(k string) string { return vars[k] }, nil
}

// pidIn is the pid a procID names, or 0.
func pidIn(id string) int {
	f := strings.Fields(id)
	if len(f) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}
