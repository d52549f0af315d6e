// Package engine runs symmem's jobs. A command describes what it wants (a run test, a
// bench sweep) as a typed Job; the engine validates it once, picks the backend, starts
// the ranks (its own launcher, or this process as one rank of a job that torchrun,
// Open MPI or Slurm started: the commands cannot tell), runs every rank's part through
// one lifecycle (connect, open the backend, work, report, close) and returns the
// results merged, for the commands to print.
//
// Layers go one way: commands -> engine -> backends (internal/backend/...) -> bindings
// (CUDA driver, NVSHMEM, NVML) and kernels.
package engine
