// Package launch starts the ranks of a job on one machine and supervises them, and
// tells each rank where it sits in its job, whoever started it.
//
// # Starting a job
//
// Run starts Config.NProc copies of a command, one process per rank. Each gets its
// place in the environment (WorkerEnv: SYMMEM_RANK, SYMMEM_WORLD_SIZE,
// SYMMEM_STORE_ADDR, SYMMEM_STORE_TOKEN, ...), and Run hosts the rendezvous store the
// ranks meet at (package store: a small key-value server with counters and barriers,
// closed to anyone without the job's token). Each rank's output is relayed line by
// line, tagged "[rank] " if asked. Run returns once every rank has exited, with the
// first failure:
//
//   - *WorkerError: a rank exited non-zero or was killed; its last lines of stderr are kept;
//   - *StalledError: a rank stopped beating (Config.StallLimit; a rank beats by adding to
//     the store counter "beat/RANK") because it was stopped or froze;
//   - *TimeoutError (errors.Is ErrTimeout): Config.Timeout ran out;
//   - ErrInterrupted: the context was cancelled;
//   - *ListenError: the store could not listen at Config.StoreAddr.
//
// On any of them the other ranks are stopped at once (SIGTERM, then SIGKILL after
// Config.Grace). No rank outlives the launcher: each runs in a process group of its own,
// which is killed with it, and dies with its parent (PR_SET_PDEATHSIG).
//
// # Being a rank
//
// Discover reads, inside a rank, the environment its launcher gave it: Run's own
// (SYMMEM_*), torchrun's, Open MPI's, Slurm's or PMI's. The RankInfo it returns holds the
// rank, the local rank (which GPU to drive), the world size, where to dial the store
// and the token to present; rank 0 of an external launcher's job hosts the store itself
// (RankInfo.Hosted). ExpandNodeList and ExpandTasksPerNode read Slurm's compressed host
// and task lists.
//
// # Errors
//
// Errors are typed, so that a program can tell a crashed rank from a timeout and word
// the remedy in its own terms: the Setting fields of ListenError and TimeoutError name
// the program's own flag for the setting to change (symmem's CLI sets "--store-addr"
// and "--timeout"); left empty, the messages speak of "the timeout" and "a store
// address".
package launch
