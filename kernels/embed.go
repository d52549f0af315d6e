// Package kernels embeds the prebuilt kernels that build-kernels.py (beside this file)
// writes to build/: cubins and PTX, each compressed (X.cubin.zst), and a JSON sidecar
// for each; pkg/kernels reads them, decompressing a kernel when it is loaded. It
// embeds the build script too, with the Triton modules users' kernels import, so that
// `symmem kernels build` works from an installed binary as from a checkout: the binary
// runs the script it was built with, whose signatures are its own
// (pkg/kernels.Signatures).
package kernels

import "embed"

// FS holds build/*.zst, the compressed cubins and PTX, and build/*.json, their
// sidecars, which stay plain so that listing the kernels decompresses none.
//
//go:embed build/*.zst build/*.json
var FS embed.FS

// NVSHMEMBindings is triton/nvshmem_device.py, the NVSHMEM device functions for Triton
// that users' kernels import (symmem kernels build writes it beside the build script).
//
//go:embed triton/nvshmem_device.py
var NVSHMEMBindings []byte

// TorchAPI is triton/nvshmem_torch.py, PyTorch's NVSHMEM-for-Triton API as symmem
// supplies it, and TorchPlan triton/torch_plan.py, how the build serves a kernel written
// for it (symmem kernels build puts both beside the build script).
//
//go:embed triton/nvshmem_torch.py
var TorchAPI []byte

//go:embed triton/torch_plan.py
var TorchPlan []byte

// BuildScript is build-kernels.py, the build of symmem's kernels and of users' files.
//
//go:embed build-kernels.py
var BuildScript []byte

// NCCLDeviceBuild is nccl_device_build.py, whose NCCL_DEVICE_KERNELS table pkg/kernels'
// tests hold the embedded nccl-device kernels to.
//
//go:embed nccl_device_build.py
var NCCLDeviceBuild []byte
