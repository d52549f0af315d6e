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
