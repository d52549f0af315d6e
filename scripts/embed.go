// Package scripts embeds the kernel build script, so that `symmem kernels build` works
// from an installed binary as from a checkout: the binary runs the script it was built
// with, whose signatures are its own (pkg/kernels.Signatures).
package scripts

import _ "embed"

// BuildKernels is build-kernels.py.
//
//go:embed build-kernels.py
var BuildKernels []byte

// NCCLDeviceBuild is nccl_device_build.py, whose NCCL_DEVICE_KERNELS table pkg/kernels'
// tests hold the embedded nccl-device kernels to.
//
//go:embed nccl_device_build.py
var NCCLDeviceBuild []byte
