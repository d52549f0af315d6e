#!/usr/bin/env python3
"""Compile symmem's kernels ahead of time into kernels/build/.

Runs on a machine with Triton, the NVSHMEM pip wheel (nvidia-nvshmem-cu13) and, for the
CUDA kernels, nvcc. For each artifact it writes the binary (cubin, or PTX for the
fallback) and a JSON sidecar: entry name, parameters, warps, shared memory, target,
Triton version, NVSHMEM device-library version and the hash of the sources. The Go
package internal/kernels embeds the directory and checks it against these sidecars.

usage: scripts/build-kernels.py [--out kernels/build] [--arch 80,90,100] [--warps 4,8,16,32]
"""

import argparse
import glob
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRITON_DIR = os.path.join(ROOT, "kernels", "triton")
CUDA_DIR = os.path.join(ROOT, "kernels", "cuda")
sys.path.insert(0, TRITON_DIR)

# Triton's signature strings as the Go side names them.
GO_TYPES = {"*i8": "ptr", "*u64": "ptr", "i64": "i64", "i32": "i32", "u64": "u64"}


def sources_hash(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(os.path.basename(p).encode())
        h.update(b"\0")
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def nvshmem_paths():
    import nvidia.nvshmem as m
    base = list(m.__path__)[0]
    return base, os.path.join(base, "lib"), os.path.join(base, "include")


def nvshmem_version(include):
    # The device library version is what nvshmemx_cumodule_init compares with the host's.
    found = {}
    for hdr in glob.glob(os.path.join(include, "**", "*.h"), recursive=True):
        with open(hdr, errors="replace") as f:
            text = f.read()
        for key in ("MAJOR", "MINOR", "PATCH"):
            m = re.search(r"#define\s+NVSHMEM_VENDOR_%s_VERSION\s+(\d+)" % key, text)
            if m:
                found[key] = int(m.group(1))
    if len(found) == 3:
        return [found["MAJOR"], found["MINOR"], found["PATCH"]]
    v = importlib.metadata.version("nvidia-nvshmem-cu13")
    return [int(x) for x in v.split(".")[:3]]


def write_artifact(out, stem, blob, meta, ext, module=None):
    # module names a binary shared by several kernels (a CUDA translation unit); it is
    # written once and each kernel gets its own sidecar pointing at it.
    path = os.path.join(out, (module or stem) + "." + ext)
    if not (module and os.path.exists(path)):
        mode = "wb" if isinstance(blob, bytes) else "w"
        with open(path, mode) as f:
            f.write(blob)
    meta["file"] = os.path.basename(path)
    meta["sha256"] = file_hash(path)
    with open(os.path.join(out, stem + "." + ext + ".json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote %s for %s (%d bytes)" % (meta["file"], stem, os.path.getsize(path)))


def build_triton(out, arches, warps_list, bc, nv_version, failures):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import symmem_kernels

    srcs = glob.glob(os.path.join(TRITON_DIR, "*.py"))
    src_hash = sources_hash(srcs)
    for name, (fn, signature) in symmem_kernels.KERNELS.items():
        # Data kernels come in several warp counts (block sizes); the signal kernels
        # run one warp.
        wl = warps_list if name in ("put_block", "get_block", "put_signal_block") else [1]
        for arch in arches:
            for w in wl:
                stem = "triton.%s.w%d.sm%d" % (name, w, arch)
                try:
                    k = triton.compile(
                        ASTSource(fn=fn, signature=signature, constexprs={}),
                        target=GPUTarget("cuda", arch, 32),
                        options={"num_warps": w, "extern_libs": {"libnvshmem_device": bc}})
                except Exception as e:  # keep going: one arch may be beyond this Triton
                    failures.append("%s: %s" % (stem, str(e).splitlines()[0] if str(e) else repr(e)))
                    traceback.print_exc()
                    continue
                md = k.metadata
                params = [{"name": n, "type": GO_TYPES[t]} for n, t in signature.items()]
                params += [{"name": "global_scratch", "type": "ptr", "hidden": True},
                           {"name": "profile_scratch", "type": "ptr", "hidden": True}]
                target = "sm_%d%s" % (arch, "a" if arch >= 90 else "")
                meta = {
                    "impl": "triton", "kernel": name, "entry": md.name, "params": params,
                    "num_warps": w, "block_threads": 32 * w, "shared": md.shared,
                    "global_scratch_size": getattr(md, "global_scratch_size", 0),
                    "profile_scratch_size": getattr(md, "profile_scratch_size", 0),
                    "target": target, "arch": arch, "format": "cubin", "uses_nvshmem": True,
                    "triton_version": triton.__version__, "nvshmem_device_version": nv_version,
                    "source_sha256": src_hash, "sources": sorted(os.path.basename(p) for p in srcs),
                }
                write_artifact(out, stem, k.asm["cubin"], meta, "cubin")
                if arch == min(arches):
                    # The oldest target's PTX is the fallback a newer GPU's driver can JIT.
                    meta = dict(meta, format="ptx", target="compute_%d" % arch)
                    write_artifact(out, stem, k.asm["ptx"], meta, "ptx")


CUDA_KERNELS = {
    "symmem_nvshmem.cu": [
        ("put_block", "cuda_put_block", ["dst:ptr", "src:ptr", "nbytes:i64", "chunk:i64", "peer:i32"]),
        ("get_block", "cuda_get_block", ["dst:ptr", "src:ptr", "nbytes:i64", "chunk:i64", "peer:i32"]),
        ("put_signal_block", "cuda_put_signal_block",
         ["dst:ptr", "src:ptr", "nbytes:i64", "chunk:i64", "sig:ptr", "peer:i32"]),
        ("wait_signal", "cuda_wait_signal", ["sig:ptr", "value:u64"]),
        ("pingpong", "cuda_pingpong", ["dst:ptr", "src:ptr", "sig:ptr", "nbytes:i64", "iters:i32", "peer:i32",
                                         "initiator:i32", "stamps:ptr"]),
    ],
    "sm_store.cu": [
        ("sm_store", "sm_store", ["dst:ptr", "src:ptr", "nbytes:i64", "chunk:i64"]),
    ],
}


def run(cmd, log):
    log.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.run(cmd, capture_output=True, text=True)
    log.write(p.stdout + p.stderr)
    return p.returncode == 0


def build_cuda(out, arches, lib, include, nv_version, failures, log):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        failures.append("cuda: nvcc not found")
        return
    nvlink = os.path.join(os.path.dirname(nvcc), "nvlink")
    devlib = os.path.join(lib, "libnvshmem_device.a")
    tmp = tempfile.mkdtemp()
    for src, kernels in CUDA_KERNELS.items():
        path = os.path.join(CUDA_DIR, src)
        src_hash = sources_hash([path])
        uses_nvshmem = "nvshmem" in src
        for arch in arches:
            code = "sm_%d%s" % (arch, "a" if arch >= 90 else "")
            cubin = os.path.join(tmp, "%s.%s.cubin" % (src, code))
            ok = False
            if not uses_nvshmem:
                ok = run([nvcc, "-O3", "-cubin", "-arch=" + code, "-o", cubin, path], log)
            else:
                obj = os.path.join(tmp, "%s.%s.o" % (src, code))
                if run([nvcc, "-O3", "-rdc=true", "-c", "-arch=" + code, "-I" + include, "-o", obj, path], log):
                    # Device-link the relocatable object with NVSHMEM's device archive into
                    # one cubin; try nvcc's driver first, then nvlink directly.
                    ok = (run([nvcc, "-dlink", "-cubin", "-arch=" + code, "-o", cubin, obj, devlib], log)
                          or run([nvlink, "-arch=" + code, "-o", cubin, obj, devlib], log)
                          or run([nvlink, "--arch=" + code, "--output-file", cubin, obj, "-L" + lib,
                                  "-lnvshmem_device"], log))
            if not ok or not os.path.exists(cubin):
                failures.append("cuda %s %s: build failed (see build.log)" % (src, code))
                continue
            with open(cubin, "rb") as f:
                blob = f.read()
            for name, entry, params in kernels:
                impl = "cuda" if uses_nvshmem else "sm-store"
                stem = "%s.%s.sm%d" % (impl, name, arch)
                meta = {
                    "impl": impl, "kernel": name, "entry": entry,
                    "params": [{"name": p.split(":")[0], "type": p.split(":")[1]} for p in params],
                    "num_warps": 0, "block_threads": 0, "shared": 0,
                    "global_scratch_size": 0, "profile_scratch_size": 0,
                    "target": code, "arch": arch, "format": "cubin", "uses_nvshmem": uses_nvshmem,
                    "triton_version": "", "nvshmem_device_version": nv_version if uses_nvshmem else [],
                    "source_sha256": src_hash, "sources": [src],
                }
                module = "%s.%s.sm%d" % (impl, src.split(".")[0], arch)
                write_artifact(out, stem, blob, meta, "cubin", module=module)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "kernels", "build"))
    ap.add_argument("--arch", default="80,90,100")
    ap.add_argument("--warps", default="4,8,16,32")
    ap.add_argument("--skip-cuda", action="store_true")
    args = ap.parse_args()
    arches = [int(a) for a in args.arch.split(",")]
    warps = [int(w) for w in args.warps.split(",")]

    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*")):
        if not old.endswith("README.md"):
            os.remove(old)
    base, lib, include = nvshmem_paths()
    bc = os.path.join(lib, "libnvshmem_device.bc")
    nv_version = nvshmem_version(include)
    print("NVSHMEM wheel at %s, device library %s" % (base, ".".join(map(str, nv_version))))
    failures = []
    with open(os.path.join(args.out, "build.log"), "w") as log:
        build_triton(args.out, arches, warps, bc, nv_version, failures)
        if not args.skip_cuda:
            build_cuda(args.out, arches, lib, include, nv_version, failures, log)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
