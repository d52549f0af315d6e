package engine

import (
	"os"

	"github.com/symmem/symmem/internal/proc"
	"github.com/symmem/symmem/pkg/launch"
)

// parent is this process's parent when it started: while it is still the parent, the
// processes it started beside this one are the launcher's other ranks on this host.
var parent = os.Getppid()

// sameLauncher says whether process pid was started by the launcher that started this
// rank: both have the parent this rank started with, and this rank still has it.
func sameLauncher(pid int) bool {
	st, ok, _ := proc.Read(pid)
	return ok && st.PPid == parent && os.Getppid() == parent
}

// stoppedSiblings finds the ranks of info's job that are stopped (state T: SIGSTOP,
// Ctrl-Z) among the processes that the launcher which started this rank started beside
// it (the same parent: torchrun's agent, mpirun's daemon, slurmstepd, a container's
// entrypoint as pid 1): rank -> pid. A sibling is a rank of the job when it runs this
// program and its environment and command line make it one (launch.RankOf). A rank
// stopped before it told anyone its pid (before its first heartbeat, or rank 0 before
// its token file) is found only so. Under symmem's own launcher, which knows its
// ranks, and once this process's parent has gone (its "siblings" would then be
// whatever the reaper adopted), it finds none.
func stoppedSiblings(info launch.RankInfo) map[int]int {
	self := os.Getpid()
	if info.Source == "symmem" || os.Getppid() != parent {
		return nil
	}
	out := map[int]int{}
	for _, pid := range proc.Pids() {
		if pid == self || !sameLauncher(pid) {
			continue
		}
		if st, ok, _ := proc.Read(pid); !ok || st.State != "T" || !proc.SameProgram(pid) {
			continue
		}
		env, err := proc.Environ(pid)
		if err != nil {
			continue
		}
		args, err := proc.Args(pid)
		if err != nil {
			continue
		}
		if rank, ok := launch.RankOf(info, env, args); ok && rank != info.Rank {
			out[rank] = pid
		}
	}
	return out
}
