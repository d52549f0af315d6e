#!/usr/bin/env bash
# Build the prebuilt kernels (kernels/build/) on a machine with Triton, the NVSHMEM wheel and nvcc;
# the build's last step compresses them with symmem kernels pack (bin/symmem, or $SYMMEM_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
exec python3 kernels/build-kernels.py "$@"
