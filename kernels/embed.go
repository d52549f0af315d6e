// Package kernels embeds the prebuilt kernels that scripts/build-kernels.py writes to
// build/: cubins, PTX and a JSON sidecar for each. pkg/kernels reads them.
package kernels

import "embed"

// FS holds build/*.cubin, build/*.ptx and build/*.json.
//
//go:embed build/*.cubin build/*.ptx build/*.json
var FS embed.FS

// NVSHMEMBindings is triton/nvshmem_device.py, the NVSHMEM device functions for Triton
// that users' kernels import (symmem kernels build puts it beside the build script).
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
