package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/internal/report"
)

// JobOptions are the flags every launching command shares: the library's job options
// themselves, bound to flags (one struct from the command line to the library's front
// door).
type JobOptions = symmem.JobOptions

// addJobFlags adds the job's flags to cmd. -n is --nproc in every command, as in
// mpirun and torchrun: bench once took nccl-tests' -n (iterations) and -g (GPUs), and
// `bench -n 4` ran 2 ranks of 4 iterations without a word.
func addJobFlags(o *JobOptions, cmd *cobra.Command) {
	f, d := cmd.Flags(), symmem.DefaultJobOptions()
	f.IntVarP(&o.NProc, "nproc", "n", d.NProc, "number of ranks (one process per GPU) to start")
	f.StringVar(&o.Backend, "backend", d.Backend, "auto, nvshmem (GPUs) or cpu (shared memory)")
	f.DurationVar(&o.Timeout, "timeout", d.Timeout, "stop the whole job after this long (0 = never)")
	f.DurationVar(&o.WaitLimit, "wait-limit", d.WaitLimit, "longest a rank waits for a peer's signal before it calls the data undelivered (exit 3)")
	f.DurationVar(&o.StallLimit, "stall-limit", d.StallLimit, "longest a rank may go without a sign of life (stopped or frozen) before the job is stopped naming it (exit 4; 0 = never)")
	o.HeapSize, o.StoreFlag = d.HeapSize, flagWords.Word("store-addr")
	f.Var(&o.HeapSize, "heap-size", "largest symmetric heap a rank may allocate (e.g. 1G)")
	f.StringVar(&o.StoreAddr, "store-addr", "", "rendezvous store address HOST:PORT (default 127.0.0.1 on a free port; under srun/mpirun/torchrun, rank 0's address)")
	f.StringVar(&o.Launcher, "launcher", d.Launcher, "who starts the ranks: auto (detect), local (symmem), torchrun, mpi or slurm")
	f.StringVar(&o.StoreIface, "store-iface", "", "network interface rank 0 listens on when the ranks span several hosts (default: every interface)")
	f.BoolVar(&o.TagOutput, "tag-output", d.TagOutput, "prefix every worker line with [rank]")
	f.StringVar(&o.NVSHMEMLib, "nvshmem-lib", "", "path to libnvshmem_host.so.3 (or SYMMEM_NVSHMEM_LIB; default: search)")
	f.StringVar(&o.NCCLLib, "nccl-lib", "", "path to libnccl.so.2 for the nccl implementation (or SYMMEM_NCCL_LIB; default: search)")
	f.StringVar(&o.KernelsDir, "kernels", "", "directory of your own kernels (symmem kernels build --out DIR): each implementation in it can be given to --impl")
}

// newJob decides where a job of the options runs, through the library's front door,
// with the ranks' own lines on streams' Out where rankOut says so (else on Err); what
// it says names the flags.
func newJob(o *JobOptions, streams IO, rankOut bool) (*symmem.Job, error) {
	jo := *o
	jo.Backends, jo.Stdout, jo.Stderr = streams.backends(), streams.Err, streams.Err
	jo.Words = libraryWords
	if rankOut {
		jo.Stdout = streams.Out
	}
	return symmem.NewJob(jo)
}

// say writes a line for people on stderr, wrapped to the width tables fit (120
// columns, or COLUMNS where it says less), its continuation lines indented: the
// backend's note carries the driver's or the loader's whole message.
func say(streams IO, format string, a ...any) {
	fmt.Fprintln(streams.Err, report.Wrap(fmt.Sprintf(format, a...), streams.Screen.TableColumns(), "  "))
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// warnOversubscribed says, before a job on the CPU backend starts, that it has more
// ranks than the host has cores: they take turns on the cores, and their times measure
// the scheduler as much as the copies. hint ends the line ("" for none).
func warnOversubscribed(job *symmem.Job, streams IO, hint string) {
	name, _ := job.Backend()
	if cores := runtime.NumCPU(); name == symmem.CPU && job.Reports() && job.NProc() > cores {
		say(streams, "warning: %d ranks on %d CPU cores take turns: times include the scheduler%s", job.NProc(), cores, hint)
	}
}
