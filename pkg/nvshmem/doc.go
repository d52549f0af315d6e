// Package nvshmem binds the NVSHMEM host library (libnvshmem_host.so.3) from Go
// without cgo: the library is opened at run time (dlopen, through purego), so a program
// that imports this package builds anywhere and runs where no GPU or NVSHMEM is
// installed, failing with an error that says what is missing only when it opens the
// library.
//
// # Finding and opening the library
//
// Find looks for the library: an explicit path if given (and then only there),
// NVSHMEM_HOME, NVSHMEM_LIB_DIR, the pip wheel (nvidia-nvshmem-cu12/-cu13) of the
// python3 on PATH and of common virtual environments, the system directories, and last
// the dynamic loader's own path. Search.Err says, when nothing was found, where it
// looked. Open loads the library and reads its version (Lib.Version).
//
// # A job
//
// Every process of a job (a PE, one per GPU) opens the library, makes the CUDA
// context of its GPU current on its thread and calls Init with its rank, the world
// size and one unique ID, which rank 0 makes with NewUID and hands to the others over
// any channel (symmem uses the rendezvous store of package launch/store):
//
//	lib, err := nvshmem.Open(nvshmem.Find("").Chosen)
//	uid, err := lib.NewUID()              // rank 0 only; share the 128 bytes
//	err = lib.Init(rank, size, uid)       // every rank, its GPU's context current
//	buf, err := lib.Malloc(1 << 20)       // symmetric: every rank calls it, in the same order
//	peer := lib.PeerPtr(buf, (rank+1)%size) // the peer's copy, mapped here (NVLink/P2P), or 0
//	lib.BarrierAll()
//	lib.Free(buf)
//	lib.Finalize()
//
// The symmetric heap is sized by NVSHMEM_SYMMETRIC_SIZE, read at Init; SymmetricSize
// says what to set for a job's buffers. Kernels that call NVSHMEM device functions are
// registered with ModuleInit after their module is loaded; a module built against a
// device library the host library cannot serve fails there, which Version.Serves
// tells beforehand.
//
// Init, Malloc and the calls after them need a GPU and the library; the examples here
// show the parts that run without either.
//
// nvshmem_init and nvshmem_finalize are inline functions in NVSHMEM's headers, not
// exports of the library; the exported nvshmemx_hostlib_init_attr and
// nvshmemx_hostlib_finalize do the same work.
package nvshmem
