package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem"
)

// JobOptions are the flags every launching command shares: the library's job options
// themselves, bound to flags (one struct from the command line to the library's front
// door).
type JobOptions = symmem.JobOptions

// addJobFlags adds the job's flags to cmd; nprocShort is --nproc's letter (run: -n;
// bench: -g, as nccl-tests' GPU count, since its -n is the iterations).
func addJobFlags(o *JobOptions, cmd *cobra.Command, nprocShort string) {
	f, d := cmd.Flags(), symmem.DefaultJobOptions()
	f.IntVarP(&o.NProc, "nproc", nprocShort, d.NProc, "number of ranks (one process per GPU) to start")
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

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// warnOversubscribed says, before a job on the CPU backend starts, that it has more
// ranks than the host has cores: they take turns on the cores, and their times measure
// the scheduler as much as the copies. (symmem bench -n 100 started 100 ranks where
// -n was --nproc; in bench it is now nccl-tests' iterations.)
func warnOversubscribed(job *symmem.Job, w io.Writer) {
	name, _ := job.Backend()
	if cores := runtime.NumCPU(); name == symmem.CPU && job.Reports() && job.NProc() > cores {
		fmt.Fprintf(w, "warning: %d ranks on %d CPU cores take turns: times include the scheduler\n", job.NProc(), cores)
	}
}
