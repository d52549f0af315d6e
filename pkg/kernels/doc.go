// Package kernels is the catalogue of GPU kernels symmem launches: prebuilt cubins and
// PTX, each described by a JSON sidecar (an Artifact: implementation, kernel name,
// entry point, parameters, target architecture, warp count, the NVSHMEM device library
// it was built against, and the SHA-256 of its bytes).
//
// # Where kernels come from
//
// Default is the catalogue embedded in the binary (built by scripts/build-kernels.sh
// for sm_80, sm_90a and sm_100a, with compute_80 PTX for the rest), or the one in the
// directory SYMMEM_KERNELS_DIR names. LoadDir reads a directory of a user's own
// kernels (what `symmem kernels build FILE.py --out DIR` writes) and checks each
// against its sidecar, the hash and symmem's parameter lists, without a GPU. Load
// reads any fs.FS of sidecars.
//
// # Choosing a kernel
//
// Select picks, for one implementation's kernel ("triton", "put_block"), the
// artifact for a GPU's compute capability: a cubin built for it, else PTX of an older
// target, and among Triton's builds the warp count asked for (Warps lists those
// built). Before a module is loaded, CheckHost says whether the NVSHMEM host library
// can serve the device library the kernel was built against, and LoadsOn says the same
// for a whole machine (Host). Args lays out a launch's arguments in the kernel's order,
// with the hidden scratch pointers Triton appends.
//
// Loading a module and launching it is the CUDA driver's work, outside this package:
// Artifact.Data gives the bytes cuModuleLoadData takes.
//
// # How kernels are stored
//
// A kernel's body may lie beside its sidecar plain (X.cubin, as a user's build writes
// it) or compressed (X.cubin.zst, zstd): symmem's own are stored compressed, in
// kernels/build and so in the binary, and Pack makes a directory so. Sidecars stay
// plain JSON: listing and choosing kernels decompresses none, and Data decompresses a
// kernel when it is loaded.
package kernels
