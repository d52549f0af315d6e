package cpu

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnvPin set to 0 leaves CPU-backend ranks unbound (see Pin).
const EnvPin = "SYMMEM_CPU_PIN"

// Pin binds every thread of this process to one of the CPUs it may run on, the
// localRank-th, when each of the node's localRanks ranks can have a CPU of its own. A
// rank the scheduler moves between cores, or parks on a core beside a peer that spins
// in a barrier, measures the scheduler rather than its copies; bound, identical runs
// give the same figures (MPI launchers bind ranks for the same reason). It returns the
// CPU, or -1 when it left the process alone: more ranks than CPUs (binding would stack
// ranks on cores), or SYMMEM_CPU_PIN=0.
func Pin(localRank, localRanks int) int {
	if os.Getenv(EnvPin) == "0" {
		return -1
	}
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return -1
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if localRanks > len(cpus) || localRank < 0 || localRank >= len(cpus) {
		return -1
	}
	var one unix.CPUSet
	one.Set(cpus[localRank])
	// Affinity belongs to threads: bind every thread the runtime has started; the ones
	// it starts later inherit the mask of the thread that creates them.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			unix.SchedSetaffinity(tid, &one)
		}
	}
	return cpus[localRank]
}
