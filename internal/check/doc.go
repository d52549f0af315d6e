// Package check answers, before anything fails, whether this machine can run symmem's
// GPU backend: driver, GPUs, links between them, the NVSHMEM host library, the embedded
// kernels, the environment and the memory a run needs; and NCCL, which the nccl
// implementation of the collectives needs. Every check says ok, warning or
// failure, with a remedy where it is not ok. It reaches the machine only through the
// small interfaces in Machine, so that tests can play any machine.
package check
