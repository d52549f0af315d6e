"""The nccl-device kernels' build step of kernels/build-kernels.py (--only nccl-device):
kernels/cuda/nccl_device.cu against NCCL's device API, for every --arch, with a sidecar
per kernel. Kept apart from the NVSHMEM and Triton builds: it needs NCCL's headers
(NCCL_HOME or the nvidia-nccl wheel) and no NVSHMEM."""

import os
import re
import shutil
import tempfile

NCCL_DEVICE_SINCE = 22800  # NCCL_VERSION_CODE of 2.28.0, the first with nccl_device.h


def nccl_include():
    """The NCCL headers the nccl-device kernels build against: $NCCL_HOME/include, else
    the nvidia-nccl wheel's (site-packages/nvidia/nccl/include, where the library symmem
    loads lives too), with the version nccl.h declares."""
    dirs = [os.path.join(os.environ["NCCL_HOME"], "include")] if os.environ.get("NCCL_HOME") else []
    try:
        import nvidia.nccl as m
        dirs += [os.path.join(p, "include") for p in m.__path__]
    except ImportError:
        pass
    for d in dirs:
        hdr = os.path.join(d, "nccl.h")
        if os.path.exists(hdr) and os.path.exists(os.path.join(d, "nccl_device.h")):
            with open(hdr, errors="replace") as f:
                m = re.search(r"#define\s+NCCL_VERSION_CODE\s+(\d+)", f.read())
            code = int(m.group(1)) if m else 0
            return d, [code // 10000, code % 10000 // 100, code % 100], code
    return None, [], 0


def build_nccl_device(out, arches, failures, logfile, cuda_dir, run, write_artifact, sources_hash, manifest, facts):
    """Builds nccl_device.cu for every arch into nccl-device.nccl_device.smA.cubin and a
    sidecar per kernel its manifest declares (cuda/nccl_device.manifest.json: entry points,
    parameters, what each serves, whose facts facts(manifest, kernel) gives); a machine
    without NCCL 2.28's headers is a failure that says so. run, write_artifact and
    sources_hash are build-kernels.py's."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    include, version, code = nccl_include()
    if not os.path.exists(nvcc):
        failures.append("nccl-device: nvcc not found")
        return
    if include is None or code < NCCL_DEVICE_SINCE:
        failures.append("nccl-device: NCCL 2.28 or newer headers with nccl_device.h not found (%s): pip install "
                        "nvidia-nccl-cu13 (or -cu12) >= 2.28, or set NCCL_HOME" % (
                            "found %s at %s" % (".".join(map(str, version)), include) if include else "none"))
        return
    src = os.path.join(cuda_dir, manifest.source)
    tmp = tempfile.mkdtemp()
    for arch in arches:
        code_name = "sm_%d%s" % (arch, "a" if arch >= 90 else "")
        cubin = os.path.join(tmp, "nccl_device.%s.cubin" % code_name)
        log = []
        ok = run([nvcc, "-O3", "-std=c++17", "-cubin", "-arch=" + code_name, "-I" + include, "-o", cubin, src], log)
        logfile.write("".join(log))
        if not ok or not os.path.exists(cubin):
            failures.append("nccl-device %s: build failed (see build.log)" % code_name)
            continue
        with open(cubin, "rb") as f:
            blob = f.read()
        for name, k in manifest.kernels.items():
            meta = {
                "impl": manifest.impl, "kernel": name, "entry": k["entry"],
                "params": [{"name": p.split(":")[0], "type": p.split(":")[1]} for p in k["params"]],
                "num_warps": 0, "block_threads": 0, "shared": 0, "global_scratch_size": 0, "profile_scratch_size": 0,
                "target": code_name, "arch": arch, "format": "cubin", "uses_nvshmem": False, "triton_version": "",
                "nvshmem_device_version": [], "nccl_version": version,
                "source_sha256": sources_hash([os.path.join(cuda_dir, f) for f in manifest.sources]),
                "sources": sorted(manifest.sources),
            }
            meta.update(facts(manifest, name))
            write_artifact(out, "%s.%s.sm%d" % (manifest.impl, name, arch), blob, meta, "cubin",
                           module="%s.nccl_device.sm%d" % (manifest.impl, arch))
