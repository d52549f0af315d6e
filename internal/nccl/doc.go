// Package nccl binds NCCL (libnccl.so.2), opened at run time with dlopen like the CUDA
// driver and NVSHMEM: finding the library, its version, the unique-ID bootstrap of a
// communicator, and the collectives symmem measures next to its own kernels
// (all-reduce, all-gather, reduce-scatter, broadcast, reduce, send/recv, and an
// all-to-all, a gather and a scatter made of grouped send/recv, as nccl-tests does).
// Nothing of NCCL is needed to build.
//
// # Finding the library
//
// Find looks, in order, at an explicit path (--nccl-lib or SYMMEM_NCCL_LIB, a file or a
// directory), NCCL_HOME/lib and lib64, the nvidia-nccl-cu13/-cu12 wheel beside PyTorch
// (site-packages/nvidia/nccl/lib of the active virtual environment, conda environment
// or python3 on PATH, and of common environment locations), the usual system
// directories, and last the bare soname, which leaves the search to the dynamic
// loader (LD_LIBRARY_PATH, ld.so.cache). Search says which source found it.
//
// # The ABI
//
// ncclUniqueId is struct { char internal[128]; }, and ncclCommInitRank takes it by
// value. purego (v0.11) passes struct arguments on amd64 and arm64 Linux: on amd64 a
// struct over two eightbytes is class MEMORY and is copied onto the stack, on arm64 a
// composite over 16 bytes goes as a pointer to a caller-made copy, each as the C
// compiler would. The binding therefore declares the argument as a Go struct holding a
// [128]byte (a bare array is no struct to purego). The tests check this against a
// fake libnccl.so.2 compiled from testdata/fake_nccl.c with the real prototypes.
//
// Enums are C ints (int32), size_t is uint64, ncclComm_t, cudaStream_t and device
// pointers are uintptr (a CUstream or CUdeviceptr from package cuda as it is).
//
// # Bootstrapping a communicator
//
// Every rank of a job calls Bootstrap with the job's store: rank 0 makes the unique ID
// (ncclGetUniqueId) and sets it under a key, the others wait for that key, and then
// every rank calls ncclCommInitRank, which returns once all nranks have joined. The
// rendezvous store's client (store.Client) satisfies KV. The CUDA context of the
// rank's GPU must be current on the calling OS thread (runtime.LockOSThread), as for
// every CUDA call.
//
// # Symmetric windows
//
// From NCCL 2.27 a buffer from ncclMemAlloc that every rank registers with
// ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC) lets the collectives on it use
// NCCL's symmetric-memory kernels (nccl-tests' -R 2). MemAlloc, Comm.RegisterWindow and
// Window.Deregister wrap those calls; Symmetric says, before any of them, whether the
// library can serve them, as an *UnsupportedError naming the release needed. The fake
// library of the tests tracks its allocations and fails a collective on ncclMemAlloc
// memory that no live window covers.
//
// # Device communicators
//
// From NCCL 2.28 the device API (nccl_device.h) lets kernels load from and store to the
// peers' windows (ncclGetLsaPointer) and meet at LSA barriers of a device communicator
// that ncclDevCommCreate makes from a communicator and its requirements. The binding
// lays DevCommRequirements out as nccl_device/core.h does (56 bytes; NCCL 2.28 has no
// initializer macro, its examples zero the struct, as Go's zero value is) and keeps
// ncclDevComm as its 200 bytes for the kernels; Lib.Device says whether the library
// has the API. The fake library checks the layout against the C compiler's offsetof
// and refuses a device communicator destroyed twice or changed.
//
// # Environment
//
// NCCL reads its settings from the C environment when it initialises. Before the first
// call that initialises NCCL (UniqueID, InitRank) the package sets the variables in
// EnvDefaults that the user has not set: NCCL_NVLS_ENABLE=0 keeps NCCL off NVLink SHARP
// multicast, which can take a shared host's GPUs down. os.Setenv reaches the C
// environment (getenv) with cgo and with purego's fake cgo alike; the tests check
// that NCCL's side sees it.
package nccl
