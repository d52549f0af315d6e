#!/usr/bin/env python3
"""Compile symmem's kernels ahead of time into kernels/build/.

Runs on a machine with Triton, the NVSHMEM pip wheel (nvidia-nvshmem-cu13) and, for the
CUDA kernels, nvcc. What it builds is what the manifests beside the sources declare
(kernels/manifest.py: SOURCE.manifest.json, each kernel's operations, element type,
reduction operators and warp counts, and a CUDA kernel's entry and parameters). For each
artifact it writes the binary (cubin, or PTX for the fallback) and a JSON sidecar: entry
name, parameters, warps, shared memory, target, Triton version, NVSHMEM device-library
version, the hashes of the binary and of the sources, and the manifest's facts. Last, symmem kernels pack compresses each binary (X.cubin -> X.cubin.zst):
symmem's binary ($SYMMEM_BIN, else bin/symmem of this checkout, else symmem on the
PATH), as Python's standard library has no zstd before 3.14. The Go package pkg/kernels
embeds the directory and checks it against these sidecars.

usage: kernels/build-kernels.py [--out kernels/build] [--arch 80,90,100] [--warps 4,8,16,32] [--jobs N]

A user's Triton file (what `symmem kernels build FILE.py` runs) is built the same way:

    kernels/build-kernels.py --user FILE.py --signatures SIGS.json --name IMPL [--kernel put=my_put ...] --out DIR

The file says which function serves which operation (SYMMEM_KERNELS = {"put": "my_put"})
or --kernel does (as in symmem kernels build; --op is the same); every function must take
the parameters symmem passes to that kernel, by name and in order: the table of them is
symmem's (pkg/kernels), which it hands over in a file, --signatures FILE (symmem kernels
build writes it). The file is checked before Triton is imported, so a kernel that does
not fit is refused on any machine; errors are one line on stderr,
starting "build-kernels: ", with exit status 2. Only the IMPL.* files in DIR are replaced.

A file written for PyTorch's SHMEM modules (torch.distributed._symmetric_memory.
_nvshmem_triton, torch 2.8's or 2.11's API, or the generic _shmem_triton) is served as
kernels/triton/torch_plan.py says: its kernels are found by the NVSHMEM calls they make,
their parameters matched by use and name (or FILE.symmem.json), each compiled behind an
entry of symmem's signature from a module that holds the kernels and what they read
(nothing else of the file runs), against torch's modules where torch has every module and
name the file uses, else symmem's copy (nvshmem_torch.py); --sizes gives the sizes a
tl.constexpr size is built for.

A user's build is not done again where --out holds the same build (the same file,
options, symmem and toolchain: NAME.build.json keeps its key and the sha256 of every file
it wrote); it says so instead. Its compiles run in worker processes forked from one that
imported Triton (and torch, where its module is the one used) once; BUILD_KERNELS_POOL=
thread runs them in threads of this process instead. Each build ends with a line that
says where its time went (Python's start, the file's analysis, the workers' imports,
each compile and Triton's stages), which NAME.build.json keeps.

A compile that calls NVSHMEM links its device library (31 MB of bitcode, which Triton
parses whole each time) once, and keeps the part it took in Triton's cache; a later
compile needing no more links that part, the same functions (SYMMEM_NVSHMEM_PRUNED=0:
the whole library in every compile).
"""

import sys

if sys.version_info < (3, 9):  # before any import an older Python lacks (importlib.metadata, ast.unparse)
    sys.stderr.write("build-kernels: Python %d.%d is too old: the build needs Python 3.9 or later\n" % sys.version_info[:2])
    sys.exit(2)

import argparse  # noqa: E402
import ast
import glob
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import tokenize
import traceback


def process_age():
    """Seconds since this process started, from Linux's /proc (0 elsewhere): Python's
    own start counts in a build's time."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


# When this process started, on the wall clock the compile workers share.
STARTED = time.time() - process_age()

KERNELS_DIR = os.path.dirname(os.path.abspath(__file__))  # kernels/: this script, its sources and build/
TRITON_DIR = os.path.join(KERNELS_DIR, "triton")
CUDA_DIR = os.path.join(KERNELS_DIR, "cuda")
# Python puts the script's own directory first on sys.path; here that is kernels/, whose
# triton/ would pass for Triton itself (as a namespace package).
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != KERNELS_DIR]
sys.path.insert(0, TRITON_DIR)
import torch_plan  # noqa: E402  (kernels/triton: a file written for torch's NVSHMEM module)

# Triton's signature strings as the Go side names them.
GO_TYPES = {"*i8": "ptr", "*u64": "ptr", "*i64": "ptr", "*i32": "ptr", "*bf16": "ptr", "*fp16": "ptr", "*fp32": "ptr", "*fp64": "ptr",
            "i64": "i64", "i32": "i32", "u64": "u64"}


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


def find_packer():
    """The symmem binary that compresses the kernels when the build is over (symmem
    kernels pack): looked for before anything is compiled, so that a machine without
    one is refused in a line, not after the compiles."""
    checkout = os.path.join(os.path.dirname(KERNELS_DIR), "bin", "symmem")
    for exe in (os.environ.get("SYMMEM_BIN"), checkout if os.access(checkout, os.X_OK) else None, shutil.which("symmem")):
        if exe:
            return exe
    raise Refused("no symmem binary to compress the kernels with (symmem kernels pack): build one "
                  "(make build, or go build -o bin/symmem ./cmd/symmem where Go is), copy it to bin/symmem "
                  "or set SYMMEM_BIN")


def pack(out, symmem):
    """Compresses the binaries in out with symmem kernels pack (X.cubin -> X.cubin.zst,
    checked against its sidecar's sha256), as symmem embeds them; returns the failure,
    or None."""
    try:
        done = subprocess.run([symmem, "kernels", "pack", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
    except OSError as e:
        return "%s kernels pack %s: %s" % (symmem, out, e)
    print(done.stdout.strip())
    if done.returncode != 0:
        return "%s kernels pack %s failed (exit %d): the kernels in it are not compressed" % (symmem, out, done.returncode)
    return None


class Manifests:
    """The manifests of symmem's own kernels, read and checked by kernels/manifest.py
    beside this script: which kernels each source holds, what each serves with how many
    warps (and a CUDA kernel's entry and parameters), the files its hash covers. Only
    symmem's own build reads them: a user's build runs from a copy of this script alone,
    and its kernels' facts are symmem's table's (--signatures)."""

    def __init__(self):
        path = os.path.join(KERNELS_DIR, "manifest.py")
        if not os.path.exists(path):
            raise Refused("%s is not beside this script: symmem's own kernels are built from a checkout's kernels/ "
                          "(a user's file with --user FILE.py)" % path)
        spec = importlib.util.spec_from_file_location("manifest", path)
        self.mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.mod)
        try:
            self.all = self.mod.check()
        except self.mod.Bad as e:
            raise Refused(str(e))
        self.triton = {m.module: m for m in self.all.values() if m.triton}
        # The CUDA sources nvcc builds here with NVSHMEM's headers, or none; nccl-device's
        # have a step of their own (nccl_device_build.py).
        self.cuda = [m for m in self.all.values() if not m.triton and m.library != "nccl"]
        self.nccl = [m for m in self.all.values() if m.library == "nccl"]

    def facts(self, m, name):
        return self.mod.facts(m, name)

    def params(self, m, name):
        return self.mod.params(m, name)


# The calling thread's stage times of the compile it runs (time_stages).
_STAGES = threading.local()


def time_stages():
    """Has Triton's compiler time each stage it runs (ttir, ttgir, llir, ptx, cubin: a
    compile Triton's cache serves runs none) into the calling thread's _STAGES.times, by
    wrapping its backend's add_stages, once per process, and llir's two parts (linking
    the extern libraries, optimising); nothing where this Triton's compiler is shaped
    otherwise."""
    try:
        from triton.compiler import compiler
    except ImportError:
        return
    make_backend = getattr(compiler, "make_backend", None)
    if make_backend is None or getattr(make_backend, "symmem_timed", False):
        return

    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times = getattr(_STAGES, "times", None)
                if times is not None:
                    times[name] = times.get(name, 0.0) + time.perf_counter() - t
        return run

    def timed_backend(target):
        backend = make_backend(target)
        if getattr(backend, "symmem_timed", False):
            return backend
        add_stages = backend.add_stages

        def add(stages, *a, **k):
            add_stages(stages, *a, **k)
            for name, fn in list(stages.items()):
                stages[name] = timed(name, fn)
        try:
            backend.add_stages, backend.symmem_timed = add, True
        except AttributeError:
            pass
        return backend

    timed_backend.symmem_timed = True
    compiler.make_backend = timed_backend
    # Inside llir, where a compile that calls NVSHMEM spends most of its time: linking
    # the device library's bitcode in (its parse included) and optimising the result.
    try:
        from triton._C.libtriton import llvm
        for name, stage in (("link_extern_libs", "link (in llir)"), ("optimize_module", "optimise (in llir)")):
            if hasattr(llvm, name):
                setattr(llvm, name, timed(stage, getattr(llvm, name)))
    except (ImportError, AttributeError, TypeError):
        pass


# NVSHMEM's device library is 31 MB of bitcode, and Triton parses it whole for every
# compile that calls NVSHMEM (llvm.link_extern_libs), to keep the few functions the kernel
# needs. A compile that links it whole leaves those functions (with their callees and
# globals) as a pruned library in Triton's cache: a later compile whose every call the
# pruned one provides links that instead, with the same functions coming in.
PRUNE_ENV = "SYMMEM_NVSHMEM_PRUNED"  # "0": every compile links the whole library
_DEFINE = re.compile(r'^define (internal )?[^@\n]*@("(?:[^"\\]|\\.)*"|[-\w$.]+)\(', re.M)
_NODE = re.compile(r'^(![\w.]+) = (.*)$', re.M)
_NAMED = re.compile(r'^!([A-Za-z_.][\w.]*) = !\{([^\n]*)\}$', re.M)


class PrunedLibraries:
    """The kept parts of one library (Triton's cache dir/symmem-pruned-NAME-KEY, KEY from
    its path, size and time and Triton's version): each X.ll with X.json, the functions
    it provides, the calls its compile made that the library does not define (intrinsics,
    printf: what the library lacks holds for every part), and the module flags of the
    kernel it was cut from, which a kernel linking it must share (the linker refuses
    flags that conflict)."""

    def __init__(self, bc):
        try:
            import triton
            from triton import knobs
            cache, version = knobs.cache.dir, triton.__version__
        except (ImportError, AttributeError):
            cache = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
            version = None
        key = hashlib.sha256(json.dumps([stat_of(bc), version]).encode()).hexdigest()[:16]
        self.dir = os.path.join(cache, "symmem-pruned-%s-%s" % (os.path.basename(bc), key))

    def find(self, calls, flags):
        """The smallest kept part that provides every one of calls the library has, or
        None."""
        try:
            names = [n for n in os.listdir(self.dir) if n.endswith(".json")]
        except OSError:
            return None
        parts, absent = [], set()
        for n in names:
            try:
                with open(os.path.join(self.dir, n)) as f:
                    idx = json.load(f)
                absent.update(idx["absent"])
                parts.append((idx, os.path.join(self.dir, n[:-len(".json")] + ".ll")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        best = None
        for idx, lib in parts:
            try:
                if idx["flags"] != flags or not calls <= set(idx["provides"]) | absent:
                    continue
                size = os.path.getsize(lib)
            except (OSError, KeyError, TypeError):
                continue
            if best is None or size < best[0]:
                best = (size, lib)
        return best and best[1]

    def save(self, before, linked, own, calls, flags):
        """Writes the kept part of a kernel's module linked with the whole library:
        before and linked the module's text before and after, own the functions the
        kernel defined itself (emptied there and renamed, so that a later kernel of the
        same name is not taken for the library's), calls the ones it declared. The
        library's functions it called become external again (Triton made every linked
        function internal), and the module's own named metadata (its compile unit, its
        kernel's annotations: the first entries of each list, the linker appending a
        library's after the module's) goes."""
        provides, absent = set(), set()
        defined = {m.group(2): bool(m.group(1)) for m in _DEFINE.finditer(linked)}
        for c in calls:
            (provides if c in defined else absent).add(c)

        def define(m):
            name = m.group(2)
            if name in provides and m.group(1):
                return m.group(0).replace("define internal ", "define ", 1)
            return m.group(0)
        text = _DEFINE.sub(define, linked)
        mine = {name: len(re.findall(r'!\d+', ops)) for name, ops in _NAMED.findall(before)}

        def named(m):
            if m.group(1) == "llvm.module.flags":  # merged by key, not appended
                return m.group(0)
            return "!%s = !{%s}" % (m.group(1), ", ".join(re.findall(r'!\d+', m.group(2))[mine.get(m.group(1), 0):]))
        text = _NAMED.sub(named, text)
        for i, name in enumerate(sorted(own)):
            # Its body goes (what it called stays only where the library's functions
            # call it), with its debug info, and its name changes.
            text = re.sub(r'(^define [^\n]*@%s\([^\n]*\{\n).*?^\}$' % re.escape(name),
                          lambda m: re.sub(r' !dbg !\d+', "", m.group(1)) + "  unreachable\n}", text, count=1,
                          flags=re.M | re.S)
            text = re.sub(r'@%s(?![-\w$.])' % re.escape(name), "@symmem.pruned.kernel.%d" % i, text)
        stem = hashlib.sha256(json.dumps([sorted(provides), flags]).encode()).hexdigest()[:16]
        os.makedirs(self.dir, exist_ok=True)
        try:  # what the library lacks, as a part of the same functions found it before
            with open(os.path.join(self.dir, stem + ".json")) as f:
                absent.update(json.load(f)["absent"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        for ext, data in ((".ll", text), (".json", json.dumps({"provides": sorted(provides), "absent": sorted(absent),
                                                               "flags": flags}))):
            tmp = os.path.join(self.dir, "%s%s.%d.%d.tmp" % (stem, ext, os.getpid(), threading.get_ident()))
            try:
                with open(tmp, "w") as f:
                    f.write(data)
                os.replace(tmp, os.path.join(self.dir, stem + ext))  # the index last: a part is whole when found
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)


def module_flags(text):
    """A module's flags, each node's text, from its text (where the linker compares two
    modules' flags)."""
    nodes = dict(_NODE.findall(text))
    top = nodes.get("!llvm.module.flags", "")
    return [nodes.get(n, n) for n in re.findall(r'![\w.]+', top)]


# A name as LLVM prints it unquoted: a kept part is cut only from modules whose every
# function is named so (the cut's patterns read no quoted names).
_PLAIN = re.compile(r'[-A-Za-z$._][-\w$.]*')


def _internal(text):
    """The functions a module's text defines with internal linkage."""
    return {m.group(2) for m in _DEFINE.finditer(text) if m.group(1)}


def prune_links():
    """Has Triton's llvm.link_extern_libs link kept parts where they serve (link_pruned),
    once per process; before time_stages, which times the link it wraps."""
    try:
        from triton._C.libtriton import llvm
    except ImportError:
        return
    link = getattr(llvm, "link_extern_libs", None)
    if link is not None and not getattr(llvm, "symmem_pruned", False):
        llvm.link_extern_libs, llvm.symmem_pruned = link_pruned(link), True


def link_pruned(link):
    """Triton's llvm.link_extern_libs, linking its first library (NVSHMEM's, where the
    kernel calls it) as a kept part where one provides every call the module makes,
    else whole, after which the module's own part is kept for the next compile; the
    libraries after it (libdevice) whole, the module then holding the first one's
    functions, which no kept part may carry. Says which into _STAGES.linked, by
    library."""
    def run(mod, paths):
        if os.environ.get(PRUNE_ENV) == "0" or not paths:
            return link(mod, paths)
        hows = [link_one(link, mod, paths[0])]
        for path in paths[1:]:
            link(mod, [path])
            hows.append("whole")
        linked = getattr(_STAGES, "linked", None)
        if linked is not None:
            linked.update(zip([os.path.basename(p) for p in paths], hows))
    return run


def link_one(link, mod, path):
    """Links the library at path into mod, a kept part of it where one serves; returns
    "pruned" or "whole"."""
    fns = list(mod.get_functions())
    own = {f.name for f in fns if not f.is_declaration()}
    calls = {f.name for f in fns if f.is_declaration() and not f.name.startswith("llvm.")}
    if not all(_PLAIN.fullmatch(n) for n in own | calls):
        link(mod, [path])
        return "whole"
    before = str(mod)
    flags = module_flags(before)
    libs = PrunedLibraries(path)
    lib = libs.find(calls, flags)
    while lib is not None:
        try:
            link(mod, [lib])
            return "pruned"
        except ValueError as e:
            if not str(e).startswith("Failed to parse"):  # linking failed with the module half-linked
                raise
            try:  # a part cut short (a full disk) or otherwise unread: forgotten
                os.remove(lib[:-len(".ll")] + ".json")
            except OSError:
                break
        lib = libs.find(calls, flags)
    link(mod, [path])
    after = {f.name for f in mod.get_functions()}
    linked = str(mod)
    # A library function of the name of one of the module's own: the linker renames the
    # module's where it is internal (NAME4, NAME.4), else binds the library's calls to
    # it (Triton then makes it internal). The cut would empty what the library calls.
    renamed = any(re.fullmatch(r'%s\.?\d+' % re.escape(o), a) for a in after - own - calls for o in own)
    taken = own & _internal(linked) - _internal(before)
    if not renamed and not taken:
        try:
            libs.save(before, linked, own, calls, flags)
        except OSError:
            pass  # Triton's cache is not writable: the next compile links the whole library too
    return "whole"


def compile_one(job):
    """Compiles one Triton kernel (a worker runs this): job is (where, function name,
    signature, constexprs, arch, warps, bc), where names a module ("module", NAME[,
    USER FILE]: kernels/triton's, or a build's on sys.path) or a user's file ("file",
    PATH, MODULE NAME). Returns {"cubin", "ptx", "meta"} or {"error", "trace"}, and
    "timing" either way: when it ran, its load and compile, Triton's stages, and where
    Triton and torch were imported."""
    import importlib
    import importlib.util

    where, fn_name, signature, constexprs, arch, w, bc = job
    path = where[2] if where[0] == "module" and len(where) > 2 else where[1] if where[0] == "file" else None
    timing = {"pid": os.getpid(), "start": time.time(), "stages": {}, "linked": {}}
    try:
        t = time.perf_counter()
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        if where[0] == "module":
            mod = importlib.import_module(where[1])
        else:
            spec = importlib.util.spec_from_file_location(where[2], where[1])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        timing["load"] = time.perf_counter() - t
        prune_links()
        time_stages()
        _STAGES.times, _STAGES.linked = timing["stages"], timing["linked"]
        t = time.perf_counter()
        k = triton.compile(
            ASTSource(fn=getattr(mod, fn_name), signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", arch, 32),
            options={"num_warps": w, "extern_libs": {"libnvshmem_device": bc}})
        timing["compile"] = time.perf_counter() - t
        md = k.metadata
        out = {"cubin": k.asm["cubin"], "ptx": k.asm["ptx"], "meta": {
            "entry": md.name, "shared": md.shared, "global_scratch_size": getattr(md, "global_scratch_size", 0),
            "profile_scratch_size": getattr(md, "profile_scratch_size", 0), "triton_version": triton.__version__,
            "uses_nvshmem": uses_nvshmem(k.asm["cubin"])}}
    except Exception as e:
        out = {"error": reason_of(e, path), "trace": traceback.format_exc()}
    finally:
        _STAGES.times = None
        _STAGES.linked = None
    preload = sys.modules.get(PRELOAD)
    timing.update(end=time.time(), torch="torch" in sys.modules)
    if preload is not None:
        timing["preload"] = {"pid": preload.PID, "times": preload.TIMES, "torch": preload.TORCH}
    out["timing"] = timing
    return out


def reason_of(e, path=None):
    """One line on why a compile failed: where in the kernel's source (the innermost of
    Triton's CompilationErrors that knows, the call nearest the fault; for a name that is
    not there, the first line of the file at path that uses it) and the first cause
    (Triton wraps it several times), with a hint where the cause is a known one."""
    chain, x = [], e
    while x is not None and len(chain) < 64:
        chain.append(x)
        x = x.__cause__ or x.__context__
    root = chain[-1]
    # Triton's own errors (a failed tl.static_assert, a construct it does not take) put
    # "at L:C:" and the source first, their message last: error_message alone.
    msg = getattr(root, "error_message", None)
    text = str(msg if msg is not None else root).strip().splitlines()
    why = "%s: %s" % (type(root).__name__, text[0]) if text else type(root).__name__
    where = ""
    for c in reversed(chain):
        node, src = getattr(c, "node", None), getattr(c, "src", None)
        line = getattr(node, "lineno", None)
        if line and isinstance(src, str) and 0 < line <= len(src.splitlines()):
            where = "at `%s`: " % src.splitlines()[line - 1].strip()
            break
    name = getattr(root, "name", None)
    if not where and isinstance(root, AttributeError) and name and path:
        try:
            with tokenize.open(path) as f:
                for n, text in enumerate(f, 1):
                    if re.search(r"\.%s\b" % re.escape(name), text):
                        where = "at line %d `%s`: " % (n, text.strip())
                        break
        except (OSError, SyntaxError, ValueError):
            pass
    if isinstance(root, KeyError) and any("extern_elementwise" in str(getattr(f, "name", ""))
                                          for f in traceback.extract_tb(root.__traceback__)):
        why += (" (no binding takes these argument types: addresses and byte counts are int64, "
                "ranks int32, and a literal 0 is an int32: write tl.full([], 0, tl.int64))")
    return where + why


def uses_nvshmem(cubin):
    """Whether a kernel calls the NVSHMEM device library: its image then holds the
    library's device state, which nvshmemx_cumodule_init must fill in (and refuses to
    find in an image without it: a kernel that only spins on memory, say)."""
    return b"nvshmemi_device_state" in cubin


def die_with_parent():
    """Has the kernel send this worker SIGKILL when the build script dies, however it
    dies (symmem kills the build's process group when it is stopped; a SIGKILL to symmem
    reaches the script only through its own parent-death signal)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker outlives a killed build


# BUILD_KERNELS_POOL says where a user's build compiles: "process" (default), worker
# processes forked from a forkserver that imported what every compile needs once; or
# "thread", threads of this process (Triton holds the GIL in parts of a compile: kept to
# measure the two).
POOL_ENV = "BUILD_KERNELS_POOL"
# The module a user's build writes for its workers to import first (write_preload).
PRELOAD = "symmem_preload"


class Builder:
    """Compiles Triton kernels in parallel workers (a kernel's compile is mostly LLVM
    and ptxas on one core, and there are hundreds of them) and writes each artifact as its
    compile ends. With preload (a module every compile needs) the workers are forked from
    a forkserver that imported it, so that Triton (and torch, where its module is the one
    used) is imported once; without, each is a fresh process (spawn: symmem's own build)."""

    def __init__(self, jobs, preload=None):
        import concurrent.futures
        import multiprocessing

        self.kind = os.environ.get(POOL_ENV, "process") if preload else "process"
        if self.kind not in ("process", "thread"):
            raise Refused("%s=%s: use process or thread" % (POOL_ENV, self.kind))
        self.created = time.time()
        if self.kind == "thread":
            importlib.import_module(preload)
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        else:
            ctx = multiprocessing.get_context("spawn")
            if preload and "forkserver" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload([preload])
                # The forkserver imports preload where this process's sys.path has it;
                # Python before 3.12 does not hand it sys.path: its environment then.
                os.environ["PYTHONPATH"] = os.pathsep.join(
                    [p for p in sys.path if p] + [p for p in [os.environ.get("PYTHONPATH")] if p])
            self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx,
                                                              initializer=die_with_parent)
        self.pending, self.timings, self.writing = [], [], 0.0

    def add(self, out, impl, kernel, where, fn_name, signature, constexprs_for, arches, warps_list, bc, nv_version,
            srcs, extra=None, multi_warp=True, tile=None):
        """Queues one kernel for every arch and warp count of warps_list (one warp where
        multi_warp is false): IMPL.KERNEL.wW.smA cubins with their sidecars, and the
        oldest target's PTX below sm_90. extra goes into every sidecar (symmem's own
        kernels: their manifest's facts). tile names the constexprs whose values are a
        matrix kernel's tile (rows, columns, K step): the sidecar's "tile", from which the
        host sizes its grid."""
        src_hash = sources_hash(srcs)
        params = [{"name": n, "type": GO_TYPES[t]} for n, t in signature.items() if t != "constexpr"]
        params += [{"name": "global_scratch", "type": "ptr", "hidden": True},
                   {"name": "profile_scratch", "type": "ptr", "hidden": True}]
        for arch in arches:
            for w in (warps_list if multi_warp else [1]):
                stem = "%s.%s.w%d.sm%d" % (impl, kernel, w, arch)
                meta = {
                    "impl": impl, "kernel": kernel, "params": params, "num_warps": w, "block_threads": 32 * w,
                    "target": "sm_%d%s" % (arch, "a" if arch >= 90 else ""), "arch": arch, "format": "cubin",
                    "uses_nvshmem": True, "nvshmem_device_version": nv_version, "source_sha256": src_hash,
                    "sources": sorted(os.path.basename(p) for p in srcs),
                }
                meta.update(extra or {})
                if tile:
                    meta["tile"] = [constexprs_for(w)[c] for c in tile]
                job = (where, fn_name, signature, constexprs_for(w), arch, w, bc)
                self.pending.append((self.pool.submit(compile_one, job), out, stem, meta, arch == min(arches)))

    def finish(self, failures):
        self.total, told = len(self.pending), set()
        for fut, out, stem, meta, oldest in self.pending:
            got = fut.result()
            self.timings.append(dict(got["timing"], stem=stem))
            if "error" in got:
                failures.append("%s: %s" % (stem, got["error"]))
                if got["error"] not in told:  # the same fault at every arch and warp count: its stack once
                    told.add(got["error"])
                    print(got["trace"], file=sys.stderr)
                continue
            t = time.perf_counter()
            meta.update(got["meta"])
            if not meta["uses_nvshmem"]:
                meta["nvshmem_device_version"] = []
            write_artifact(out, stem, got["cubin"], dict(meta), "cubin")
            # The oldest target's PTX is the fallback a newer GPU's driver can compile;
            # only below sm_90: Triton emits .target sm_90a from 90 on, which the driver
            # refuses on any other GPU.
            if oldest and meta["arch"] < 90:
                write_artifact(out, stem, got["ptx"], dict(meta, format="ptx", target="compute_%d" % meta["arch"]),
                               "ptx")
            self.writing += time.perf_counter() - t
        self.pending = []
        self.pool.shutdown()


def build_triton(builder, out, manifests, modules, arches, warps_list, bc, nv_version):
    """Queues every kernel of modules (Triton manifests of manifests) for every
    arch and the warp counts its manifest lists of --warps (a one-warp kernel, [1], for
    one warp whatever --warps says), its manifest's facts in its sidecars. KERNELS in the
    module gives each one's function, signature, constexprs by warp count and build
    options (the tile's constexprs)."""
    import importlib

    for m in modules:
        srcs = [os.path.join(TRITON_DIR, f) for f in m.sources]
        mod = importlib.import_module(m.module)
        for name, spec in mod.KERNELS.items():
            constexprs_for = spec[2] if len(spec) > 2 else (lambda warps: {})
            opts = spec[3] if len(spec) > 3 else {}
            want = m.kernels[name]["warps"]
            ws = want if want == [1] else [w for w in warps_list if w in want]
            if not ws:
                raise SystemExit("build-kernels: --warps %s leaves %s none of its warp counts %s (%s)" % (
                    ",".join(map(str, warps_list)), name, want, m.path))
            builder.add(out, m.impl, name, ("module", m.module), spec[0].fn.__name__, spec[1], constexprs_for,
                        arches, ws, bc, nv_version, srcs, extra=manifests.facts(m, name), tile=opts.get("tile"))


def run(cmd, log):
    log.append("$ " + " ".join(cmd) + "\n")
    p = subprocess.run(cmd, capture_output=True, text=True)
    log.append(p.stdout + p.stderr)
    return p.returncode == 0


def build_cuda(out, manifests, arches, lib, include, nv_version, failures, logfile):
    """Builds every CUDA source of manifests (Manifests.cuda) for every
    arch, and the oldest arch's PTX, each (source, arch) in its own thread (nvcc and
    nvlink are processes), and writes the artifacts and the log in order: a sidecar per
    kernel its manifest declares, with the manifest's facts. A source whose library is
    NVSHMEM is compiled relocatable and device-linked with NVSHMEM's device archive."""
    cudas = {m.source: m for m in manifests.cuda}
    import concurrent.futures

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        failures.append("cuda: nvcc not found")
        return
    nvlink = os.path.join(os.path.dirname(nvcc), "nvlink")
    devlib = os.path.join(lib, "libnvshmem_device.a")
    tmp = tempfile.mkdtemp()

    def one(src, arch):
        path = os.path.join(CUDA_DIR, src)
        code = "sm_%d%s" % (arch, "a" if arch >= 90 else "")
        cubin = os.path.join(tmp, "%s.%s.cubin" % (src, code))
        log = []
        if cudas[src].library != "nvshmem":
            ok = run([nvcc, "-O3", "-cubin", "-arch=" + code, "-o", cubin, path], log)
        else:
            obj = os.path.join(tmp, "%s.%s.o" % (src, code))
            ok = False
            if run([nvcc, "-O3", "-rdc=true", "-c", "-arch=" + code, "-I" + include, "-o", obj, path], log):
                # Device-link the relocatable object with NVSHMEM's device archive into
                # one cubin; try nvcc's driver first, then nvlink directly.
                ok = (run([nvcc, "-dlink", "-cubin", "-arch=" + code, "-o", cubin, obj, devlib], log)
                      or run([nvlink, "-arch=" + code, "-o", cubin, obj, devlib], log)
                      or run([nvlink, "--arch=" + code, "--output-file", cubin, obj, "-L" + lib,
                              "-lnvshmem_device"], log))
        return ok and os.path.exists(cubin), cubin, code, log

    def ptx(src, arch):
        # The oldest target's PTX, the fallback a newer GPU's driver compiles, as for
        # the Triton kernels. Relocatable where the source calls NVSHMEM: the driver
        # links it with NVSHMEM's device archive at load (the sidecar's "link").
        path = os.path.join(CUDA_DIR, src)
        out_ptx = os.path.join(tmp, "%s.compute_%d.ptx" % (src, arch))
        log = []
        cmd = [nvcc, "-O3", "-ptx", "-arch=compute_%d" % arch, "-o", out_ptx, path]
        if cudas[src].library == "nvshmem":
            cmd[2:2] = ["-rdc=true", "-I" + include]
        ok = run(cmd, log)
        return ok and os.path.exists(out_ptx), out_ptx, "compute_%d" % arch, log

    oldest = min(arches)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cudas) * (len(arches) + 1)) as pool:
        jobs = [(src, arch, "cubin", pool.submit(one, src, arch)) for src in cudas for arch in arches]
        if oldest < 90:
            jobs += [(src, oldest, "ptx", pool.submit(ptx, src, oldest)) for src in cudas]
        for src, arch, ext, fut in jobs:
            ok, cubin, code, log = fut.result()
            logfile.write("".join(log))
            if not ok:
                failures.append("cuda %s %s: build failed (see build.log)" % (src, code))
                continue
            with open(cubin, "rb") as f:
                blob = f.read()
            m = cudas[src]
            uses_nvshmem = m.library == "nvshmem"
            srcs = m.sources
            src_hash = sources_hash([os.path.join(CUDA_DIR, f) for f in srcs])
            impl = m.impl
            for name in m.kernels:
                stem = "%s.%s.sm%d" % (impl, name, arch)
                meta = {
                    "impl": impl, "kernel": name, "entry": m.kernels[name]["entry"], "params": manifests.params(m, name),
                    "num_warps": 0, "block_threads": 0, "shared": 0,
                    "global_scratch_size": 0, "profile_scratch_size": 0,
                    "target": code, "arch": arch, "format": ext, "uses_nvshmem": uses_nvshmem,
                    "triton_version": "", "nvshmem_device_version": nv_version if uses_nvshmem else [],
                    "source_sha256": src_hash, "sources": sorted(srcs),
                }
                meta.update(m.launch)  # NVSHMEM's block collectives: one block, cooperative
                meta.update(manifests.facts(m, name))
                if ext == "ptx" and uses_nvshmem:
                    meta["link"] = ["libnvshmem_device.a"]
                module = "%s.%s.sm%d" % (impl, src.split(".")[0], arch)
                write_artifact(out, stem, blob, meta, ext, module=module)


class Signatures:
    """The kernels a user's file can provide, as symmem hands them over (pkg/kernels:
    SignaturesJSON, the one table of them): by the key a file declares each under, the
    catalogue's kernel and the parameters symmem passes, in order, with the Triton types
    the build compiles them as; which of them wait on a peer (and so may also take the
    wait limit and the mailbox, bounded) and which run as one warp."""

    def __init__(self, doc):
        self.kernels = {k["key"]: (k["kernel"], dict(k["params"])) for k in doc["kernels"]}
        self.ops = {k["key"]: k["op"] for k in doc["kernels"]}
        self.waits = set(k["key"] for k in doc["kernels"] if k["waits"])
        self.one_warp = set(k["kernel"] for k in doc["kernels"] if k["one_warp"])
        # A matrix kernel's tile: the constexprs after its parameters, with the values
        # the build gives them (recorded in the sidecar as "tile").
        self.tiles = {k["key"]: dict(k["tile"]) for k in doc["kernels"] if k.get("tile")}
        self.bounded = dict(doc["bounded"])

    @classmethod
    def read(cls, path):
        if not path:
            raise Refused("--user needs --signatures FILE, the table of the kernels symmem launches (pkg/kernels); "
                          "symmem kernels build FILE.py writes it and passes it")
        try:
            with open(path) as f:
                return cls(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise Refused("--signatures %s: %s: it is not the table symmem kernels build writes" % (path, e))


# Annotations that contradict the type symmem passes (tl.int32 on nbytes, say).
ANNOTATION_TYPES = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint32": "u32", "uint64": "u64"}


# A user's file that cannot be built as asked; the message says why and what to do.
Refused = torch_plan.Refused


def read_user(path):
    """The user's file's syntax tree, its SYMMEM_KERNELS and its text, read without
    importing it."""
    try:
        with tokenize.open(path) as f:  # as Python reads it: its coding line, if any
            source = f.read()
        tree = ast.parse(source, path)
    except (OSError, SyntaxError, ValueError) as e:
        raise Refused("%s: %s" % (path, e))
    declared = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SYMMEM_KERNELS" for t in node.targets):
            try:
                declared = ast.literal_eval(node.value)
            except ValueError:
                raise Refused("%s: SYMMEM_KERNELS must be a literal dict such as {\"put\": \"my_put\"}" % path)
            if not isinstance(declared, dict):
                raise Refused("%s: SYMMEM_KERNELS must be a dict of operation -> function name" % path)
    return tree, declared, source


def user_plan(path, ops, tree, declared, sigs):
    """Returns {op: (function name, signature)} for a file written for symmem's
    bindings, refusing a declaration or a function that does not fit symmem's
    signatures (sigs)."""
    funcs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    plan = dict(declared)
    for o in ops:
        op, _, fn = o.partition("=")
        plan[op] = fn
    if not plan:
        raise Refused("%s declares no kernels: add SYMMEM_KERNELS = {\"put\": \"my_put\"} to it or give --kernel put=my_put" % path)
    out = {}
    for op, fn in sorted(plan.items()):
        if op not in sigs.kernels:
            raise Refused("%s: unknown operation %r: use %s" % (path, op, ", ".join(sorted(sigs.kernels))))
        kernel, sig = sigs.kernels[op]
        node = funcs.get(fn)
        if op in sigs.waits and node is not None and [a.arg for a in node.args.args[len(sig):]] == list(sigs.bounded):
            sig = dict(sig, **sigs.bounded)
        want = list(sig)
        if node is None:
            raise Refused("%s: no function %r for %s (module-level @triton.jit functions: %s)" % (
                path, fn, op, ", ".join(sorted(funcs)) or "none"))
        if not any("jit" in ast.unparse(d) for d in node.decorator_list):
            raise Refused("%s: %s (for %s) is not decorated with @triton.jit" % (path, fn, op))
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise Refused("%s: %s (for %s) takes *args, **kwargs or keyword-only parameters; %s takes (%s)" % (
                path, fn, op, kernel, ", ".join(want)))
        got = a.args
        for i, name in enumerate(want):
            if i >= len(got):
                raise Refused("%s: %s (for %s) lacks parameter %r (%s): %s takes (%s)" % (
                    path, fn, op, name, sig[name], kernel, ", ".join(want)))
            p = got[i]
            if p.arg != name:
                raise Refused("%s: %s (for %s): parameter %d is %r, symmem passes %r (%s) there: %s takes (%s)" % (
                    path, fn, op, i + 1, p.arg, name, sig[name], kernel, ", ".join(want)))
            ann = ast.unparse(p.annotation) if p.annotation is not None else ""
            if "constexpr" in ann:
                raise Refused("%s: %s (for %s): parameter %r is a tl.constexpr, but symmem passes it at run time (%s)" % (
                    path, fn, op, name, sig[name]))
            t = ANNOTATION_TYPES.get(ann.split(".")[-1])
            if t and t != sig[name].lstrip("*"):
                raise Refused("%s: %s (for %s): parameter %r is annotated %s, symmem passes %s" % (
                    path, fn, op, name, ann, sig[name]))
        tile = list(sigs.tiles.get(op, {}))
        if tile and len(got) > len(want):
            # A matrix kernel's tile: exactly these constexprs, after the parameters.
            extra = [p.arg for p in got[len(want):]]
            if extra != tile or any("constexpr" not in ast.unparse(p.annotation or ast.Constant(""))
                                    for p in got[len(want):]):
                raise Refused("%s: %s (for %s): after its parameters it takes (%s); symmem's %s takes its tile as %s, "
                              "each a tl.constexpr" % (path, fn, op, ", ".join(extra), kernel,
                                                       ", ".join("%s: tl.constexpr" % c for c in tile)))
            got = got[:len(want)]
        elif tile:
            raise Refused("%s: %s (for %s) takes no tile: %s takes (%s) and then %s, each a tl.constexpr" % (
                path, fn, op, kernel, ", ".join(want), ", ".join(tile)))
        if len(got) > len(want):
            raise Refused("%s: %s (for %s): parameter %r is one symmem does not pass: %s takes (%s)" % (
                path, fn, op, got[len(want)].arg, kernel, ", ".join(want)))
        if a.defaults:
            raise Refused("%s: %s (for %s): parameters with default values; symmem passes every one" % (path, fn, op))
        out[op] = (fn, sig)
    return out


class Phases:
    """Where a user's build goes, in order (printed at its end, kept in its record):
    from this process's start, lap by lap."""

    def __init__(self):
        self.items, self.last = [], time.time()
        self.lap("Python's start", since=STARTED)

    def lap(self, name, since=None):
        now = time.time()
        self.items.append((name, now - (self.last if since is None else since)))
        self.last = now


def main_torch(args, arches, warps, module, declared, sigs, phases):
    """Builds (or, with --check, only plans) a file written for PyTorch's SHMEM modules:
    each kernel behind an entry of symmem's signature (kernels/triton/torch_plan.py), in
    a module of its own that holds the kernels and what they read, and nothing else of
    the file."""
    torch_plan.use_signatures(sigs.kernels)
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else list(torch_plan.DEFAULT_SIZES)
    kernels, skipped = torch_plan.plan(module, args.user, declared, args.op, sizes, args.const)
    # A line per kernel built, and per function not served, in the file's order.
    lines = [(k.fn.node.lineno, "%s: %s serves %s as %s%s.%s: %s" % (
        args.user, k.fn.signature(), k.op, args.name, k.variant, k.kernel, k.describe())) for k in kernels]
    lines += [(line, "%s: %s is not served: %s" % (args.user, fn, why)) for fn, why, line in skipped]
    lines = [text for _, text in sorted(lines, key=lambda x: x[0])]
    used = torch_plan.used_names(kernels, module)
    lacking = sorted(used["nv"] - set(torch_plan.API) - {""})
    if lacking:
        lines.append("%s: note: it uses %s, which symmem's copy of the module lacks: it builds only where torch's "
                     "has them" % (args.user, ", ".join("nvshmem." + n for n in lacking)))
    phases.lap("the file's analysis")
    if args.check:
        print("\n".join(lines))
        return 0
    srcs = user_sources(args.user)
    key = build_key(args, srcs)
    if unchanged(args, key, phases):
        return 0
    print("\n".join(lines))
    need_build_tools()
    api, what = torch_plan.choose_api(used)
    print("%s: built against %s" % (args.user, what))
    for k, why in torch_plan.lacking(kernels, api):
        print("%s: %s is not built: %s" % (args.user, k.fn.name, why))
        kernels.remove(k)
    if not kernels:
        raise Refused("%s: no kernel builds against %s" % (args.user, what))
    count = sum(len(arches) * (1 if sigs.kernels[k.op][0] in sigs.one_warp or k.one_thread else len(warps))
                for k in kernels)
    tmp = tempfile.mkdtemp(prefix="symmem-entries-", dir=args.tmp)
    sys.path.insert(0, tmp)
    try:
        entries = torch_plan.write_modules(tmp, module, kernels, api, args.name)
        write_preload(tmp, [("import torch and its SHMEM module" if api == "torch" else "import symmem's copy of "
                             "PyTorch's SHMEM module", torch_plan.NV_MODULE if api == "torch" else "nvshmem_torch"),
                            ("load the file's kernels", entries)])
        phases.lap("its kernels' module")

        def queue(builder, bc, nv_version):
            for src in srcs:  # beside the kernels, for the source hash symmem checks at load
                if os.path.abspath(os.path.join(args.out, os.path.basename(src))) != os.path.abspath(src):
                    shutil.copyfile(src, os.path.join(args.out, os.path.basename(src)))
            where = ("module", entries, os.path.abspath(args.user))
            for k in kernels:
                kernel, sig = sigs.kernels[k.op]
                extra = {"wraps": "%s: %s" % (k.fn.name, k.describe()), "nvshmem_triton": what}
                if k.sizes:
                    extra["sizes"] = k.sizes
                if k.unit > 1:
                    extra["unit"] = k.unit
                if k.most:
                    # One block of its tl.constexpr size: run refuses more elements.
                    extra.update(max_elems=k.most, max_elems_const=k.most_name)
                if k.cooperative:
                    extra.update(grid=1, cooperative=True)
                if k.tile:  # a fused matmul's tile, by which symmem sizes its grid
                    extra["tile"] = [k.tile["tile_m"], k.tile["tile_n"], k.tile["tile_k"]]
                if k.inplace:
                    # It sends its own dst, after putting its src there: no ring.
                    extra["in_place"] = True
                if k.every:
                    # Its puts reach every other rank: the sender launches it once (run put
                    # --pattern one-to-all); a striped one on a block per chunk and peer.
                    extra["peers"] = "all"
                    if k.every == "striped":
                        extra["per_peer"] = True
                if k.worlds:
                    extra["ranks"] = k.worlds
                builder.add(args.out, args.name + k.variant, kernel, where, k.entry_name, sig, lambda warps: {}, arches,
                            warps, bc, nv_version, srcs, extra,
                            multi_warp=kernel not in sigs.one_warp and not k.one_thread)
        return build_user_file(args, queue, count, phases, key)
    finally:
        sys.path.remove(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def user_sources(path):
    """The user's file and its declaration file, where there is one: what a build copies
    beside the kernels, and hashes."""
    return [path] + [d for d in [os.path.splitext(path)[0] + ".symmem.json"] if os.path.exists(d)]


def write_preload(directory, modules):
    """Writes PRELOAD into directory: it imports Triton, then each of modules ([(what,
    module name)]), timing each, as the forkserver of the compile workers (or, with
    threads, this process) imports it once."""
    with open(os.path.join(directory, PRELOAD + ".py"), "w") as f:
        f.write('''"""What every compile of this build needs, imported once (written by build-kernels.py)."""
import importlib
import os
import sys
import time

PID = os.getpid()
TIMES = []
for _what, _name in [("import triton", "triton.compiler")] + %r:
    _t = time.perf_counter()
    try:
        importlib.import_module(_name)
    except Exception:  # each compile imports it again, and says why it fails
        break
    TIMES.append((_what, time.perf_counter() - _t))
    if _name == "triton.compiler":
        # Triton's CUDA backend, and what it caches (ptxas's version), once for all.
        _t = time.perf_counter()
        try:
            from triton.backends.compiler import GPUTarget
            from triton.compiler import compiler

            compiler.make_backend(GPUTarget("cuda", 90, 32)).hash()
            TIMES.append(("Triton's CUDA backend", time.perf_counter() - _t))
        except Exception:
            pass
TORCH = "torch" in sys.modules
''' % (modules,))


def need_build_tools():
    """Refuses, in one line, a machine that cannot build (no Triton or NVSHMEM wheel);
    finds them without importing them (a compile worker does)."""
    missing = []
    for mod, pkg in (("triton", "triton"), ("nvidia.nvshmem", "nvidia-nvshmem-cu13")):
        try:
            found = importlib.util.find_spec(mod) is not None
            why = "No module named %r" % mod
        except ImportError as e:
            found, why = False, str(e)
        if not found:
            missing.append("%s (import %s: %s)" % (pkg, mod, why))
    if missing:
        raise Refused("this machine cannot build kernels: %s not installed for %s; build on a machine with a GPU "
                      "toolchain (pip install triton nvidia-nvshmem-cu13), e.g. the GPU machine, then copy the --out "
                      "directory" % (" and ".join(missing), sys.executable))


def build_user(builder, path, name, plan, out, arches, warps_list, bc, nv_version, sigs):
    # A copy of the source beside the kernels lets symmem check source_sha256 at load.
    src_copy = os.path.join(out, os.path.basename(path))
    if os.path.abspath(src_copy) != os.path.abspath(path):
        shutil.copyfile(path, src_copy)
    where = ("file", os.path.abspath(path), "symmem_user_" + name.replace("-", "_"))
    for op, (fn_name, signature) in sorted(plan.items()):
        kernel = sigs.kernels[op][0]
        tile = sigs.tiles.get(op, {})
        # A matrix kernel's tile constexprs, compiled with the table's values.
        signature = dict(signature, **{c: "constexpr" for c in tile})
        builder.add(out, name, kernel, where, fn_name, signature, lambda warps, tile=tile: dict(tile), arches, warps_list,
                    bc, nv_version, [path], multi_warp=kernel not in sigs.one_warp, tile=list(tile) or None)


def main_user(args, arches, warps):
    phases = Phases()
    try:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", args.name or ""):
            raise Refused("--name %r: use lower-case letters, digits and dashes" % args.name)
        sigs = Signatures.read(args.signatures)
        tree, declared, source = read_user(args.user)
        module = torch_plan.Module(tree, source)
        if module.shmem():
            return main_torch(args, arches, warps, module, declared, sigs, phases)
        if args.const:
            raise Refused("%s: --const sets a tl.constexpr of a kernel written for PyTorch's NVSHMEM module; this file "
                          "takes symmem's signatures, which have none" % args.user)
        plan = user_plan(args.user, args.op, tree, declared, sigs)
        phases.lap("the file's analysis")
        if args.check:
            # The file's declarations and signatures only: no Triton needed.
            for op, (fn, sig) in sorted(plan.items()):
                note = ""
                if op in sigs.waits and "limit_ns" not in sig:
                    note = "; it takes no limit_ns and mailbox: it cannot give up on a peer that never comes (docs/kernels.md)"
                print("%s: %s(%s) serves %s as %s.%s%s" % (args.user, fn, ", ".join(sig), op, args.name,
                                                             sigs.kernels[op][0], note))
            return 0
        key = build_key(args, [args.user])
        if unchanged(args, key, phases):
            return 0
        need_build_tools()
        count = sum(len(arches) * (1 if sigs.kernels[op][0] in sigs.one_warp else len(warps)) for op in plan)
        tmp = tempfile.mkdtemp(prefix="symmem-entries-", dir=args.tmp)
        sys.path.insert(0, tmp)
        try:
            write_preload(tmp, [])
            return build_user_file(args, lambda builder, bc, nv_version: build_user(
                builder, args.user, args.name, plan, args.out, arches, warps, bc, nv_version, sigs), count, phases, key)
        finally:
            sys.path.remove(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
    except Refused as e:
        print("build-kernels: %s" % e, file=sys.stderr)
        return 2


def build_user_file(args, queue, count, phases, key):
    """Replaces the earlier build of args.name in args.out with what queue(builder, bc,
    nv_version) adds (count compiles), says how it went and where the time went, and
    records what it built (RECORD) when every kernel compiled. Returns the exit status."""
    os.makedirs(args.out, exist_ok=True)
    # Only the artifacts of an earlier build of this name, its variants' (NAME[nbi=1],
    # NAME[fn=FUNCTION]) too: NAME.KERNEL.wW.smA.{cubin,ptx}, compressed (symmem kernels
    # pack) or not, and their sidecars, and its record; never the source, whatever
    # --out is.
    source = os.path.abspath(args.user)
    for base in os.listdir(args.out):
        old = os.path.join(args.out, base)
        if (artifact_re(args.name).fullmatch(base) or base == RECORD % args.name) and os.path.abspath(old) != source:
            os.remove(old)
    base, lib, include = nvshmem_paths()
    bc = os.path.join(lib, "libnvshmem_device.bc")
    nv_version = nvshmem_version(include)
    print("NVSHMEM wheel at %s, device library %s" % (base, ".".join(map(str, nv_version))))
    failures = []
    phases.lap("the toolchain")
    builder = Builder(max(min(args.jobs, count), 1), PRELOAD)
    queue(builder, bc, nv_version)
    builder.finish(failures)
    timing = compile_timing(builder, phases)
    for f in failures:
        print("FAILED: " + f)
    if failures:
        # The last line is what symmem kernels build says.
        print("build-kernels: %d of %d kernels did not compile; the first, %s" % (
            len(failures), builder.total, failures[0]), file=sys.stderr)
        return 1
    write_record(args, key, timing)
    print(timing["line"])
    return 0


def artifact_re(name):
    """The files of a user's build of name: NAME[VARIANT...].KERNEL.wW.smA.{cubin,ptx},
    compressed or not, and their sidecars."""
    return re.compile(re.escape(name) + r"(\[[^]/]*\])*\.[a-z0-9_]+\.w[0-9]+\.sm[0-9]+\.(cubin|ptx)(\.json|\.zst)?")


def compile_timing(builder, phases):
    """Where the build went, from its phases and its compiles' timings: {"line": a line
    to print, "phases", "compiles", "imports", "pool"}."""
    tt = builder.timings
    first = min((t["start"] for t in tt), default=builder.created)
    last = max((t["end"] for t in tt), default=first)
    now = time.time()
    phases.items += [("starting the compile workers", builder.created - phases.last),
                     ("until the first compile", first - builder.created), ("compiles", last - first),
                     ("the last artifacts", now - last)]
    phases.last = now
    total = now - STARTED
    # Where Triton and torch were imported: once in the forkserver (or this process),
    # or in a worker of its own where the preload did not serve it.
    imports, importers = {}, set()
    for t in tt:
        pre = t.get("preload")
        if pre is not None:
            importers.add(pre["pid"])
            imports.setdefault(pre["pid"], (pre["times"], pre["torch"]))
    torch_in = sorted(pid for pid, (_, torch) in imports.items() if torch)
    torch_in += sorted(set(t["pid"] for t in tt if t.get("torch") and t.get("preload") is None))
    stages = {}
    for t in tt:
        for name, d in t["stages"].items():
            stages[name] = stages.get(name, 0.0) + d
    each = sorted(t.get("compile", 0.0) for t in tt)
    where = "in threads of this process" if builder.kind == "thread" else (
        "in %d worker processes, forked from one that imported what they share" % len(set(t["pid"] for t in tt)))
    first_imports = next(iter(imports.values()), ([], False))[0]
    text = "timing: %.2f s in all: %s" % (total, ", ".join("%s %.2f s" % (n, d) for n, d in phases.items))
    text += "; %d compiles %s (each %s s%s)" % (
        len(tt), where, "%.2f-%.2f" % (each[0], each[-1]) if each else "-",
        "; Triton's stages summed: " + ", ".join("%s %.2f s" % (n, d) for n, d in stages.items()) if stages else
        "; every one from Triton's cache" if tt else "")
    linked = {}
    for t in tt:
        for lib, how in t.get("linked", {}).items():
            linked.setdefault(lib, []).append(how)
    if linked:
        text += "; linked " + ", ".join("%s %s" % (lib, ", ".join(
            "%s %d" % (how, hows.count(how)) for how in ("whole", "pruned") if how in hows))
            for lib, hows in sorted(linked.items()))
    if first_imports:
        text += "; imported once: %s" % ", ".join("%s %.2f s" % (n, d) for n, d in first_imports)
    text += "; torch %s" % ("not imported" if not torch_in else "imported once" if len(torch_in) == 1 else
                            "imported %d times" % len(torch_in))
    return {"line": text, "phases": phases.items, "imports": first_imports, "pool": builder.kind,
            "writing": builder.writing,
            "torch_imports": len(torch_in), "compiles": [
                {"kernel": t["stem"], "seconds": round(t.get("compile", 0.0), 3), "load": round(t.get("load", 0.0), 3),
                 "stages": {n: round(d, 3) for n, d in t["stages"].items()}} for t in tt]}


# A user's build of NAME leaves NAME.build.json beside its kernels: the key of what it was
# built from (the file, the options, symmem's scripts and table, the toolchain) and the
# sha256 of every file it wrote, so that an unchanged build is not done again.
RECORD = "%s.build.json"


def toolchain():
    """What a build's output depends on beyond the file and the options: the versions
    (or, where a package has none, the files) of Python, Triton, the NVSHMEM device
    library and torch's SHMEM modules, found without importing them."""
    def version(dist, mod):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
        try:
            spec = importlib.util.find_spec(mod)
        except ImportError:
            spec = None
        return stat_of(spec.origin) if spec is not None and spec.origin else None

    out = {"python": sys.version, "triton": version("triton", "triton"),
           "nvshmem": version("nvidia-nvshmem-cu13", "nvidia.nvshmem"), "SYMMEM_TORCH_API": os.environ.get(
               "SYMMEM_TORCH_API", "")}
    try:
        _, lib, _ = nvshmem_paths()
        out["libnvshmem_device.bc"] = stat_of(os.path.join(lib, "libnvshmem_device.bc"))
    except ImportError:
        out["libnvshmem_device.bc"] = None
    torch = torch_plan.torch_here()
    if torch is not None:
        out["torch"] = [torch["version"]] + [stat_of(f) for f in sorted(torch["files"].values())]
    return out


def stat_of(path):
    try:
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns]
    except OSError:
        return None


def build_key(args, srcs):
    """The sha256 of what a user's build makes its kernels from."""
    h = hashlib.sha256()

    def add(label, data):
        h.update(label.encode() + b"\0" + (data if isinstance(data, bytes) else data.encode()) + b"\0")

    for p in srcs:
        with open(p, "rb") as f:
            add(os.path.basename(p), f.read())
    add("options", json.dumps([args.name, args.arch, args.warps, args.sizes, sorted(args.const), sorted(args.op)]))
    with open(args.signatures, "rb") as f:
        add("signatures", f.read())
    here = os.path.abspath(__file__)
    for p in [here] + sorted(glob.glob(os.path.join(TRITON_DIR, "*.py"))):
        with open(p, "rb") as f:
            add(os.path.basename(p), f.read())
    add("toolchain", json.dumps(toolchain(), sort_keys=True))
    return h.hexdigest()


def earlier_build(args, key):
    """The record of args.name's build in args.out where it has the same key and every
    file it wrote is there as written, else None."""
    try:
        with open(os.path.join(args.out, RECORD % args.name)) as f:
            rec = json.load(f)
        if rec.get("key") != key or not rec.get("files"):
            return None
        for name, digest in rec["files"].items():
            if file_hash(os.path.join(args.out, name)) != digest:
                return None
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return rec


def unchanged(args, key, phases):
    """Says so and returns True where args.out holds args.name's build of the same key,
    every file it wrote there as written."""
    rec = earlier_build(args, key)
    phases.lap("the unchanged check")
    if rec is None:
        return False
    print("%s: unchanged since its build of %s (the same file, options, symmem and toolchain): nothing rebuilt, "
          "its %d files in %s as they were (%s)" % (args.user, rec.get("built", "?"), len(rec["files"]), args.out,
                                                    ", ".join("%s %.2f s" % (n, d) for n, d in phases.items)))
    return True


def write_record(args, key, timing):
    """Writes RECORD for args.name's build: its key, every file it wrote and where its
    time went."""
    files = {}
    source = os.path.abspath(args.user)
    for base in sorted(os.listdir(args.out)):
        if artifact_re(args.name).fullmatch(base) or base in [os.path.basename(p) for p in user_sources(source)]:
            files[base] = file_hash(os.path.join(args.out, base))
    rec = {"key": key, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "file": os.path.basename(args.user),
           "files": files, "timing": {k: v for k, v in timing.items() if k != "line"}}
    with open(os.path.join(args.out, RECORD % args.name), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")


def check_tools():
    """Says, as one JSON line, what a user's build would use here (symmem check-nvshmem
    asks), or refuses in one line as a build would (exit 2)."""
    try:
        need_build_tools()
        base, lib, include = nvshmem_paths()
        if not os.path.exists(os.path.join(lib, "libnvshmem_device.bc")):
            raise Refused("the NVSHMEM wheel at %s has no lib/libnvshmem_device.bc, which the kernels link: "
                          "reinstall it (pip install --force-reinstall nvidia-nvshmem-cu13)" % base)
        nv_version = nvshmem_version(include)
    except Refused as e:
        print("build-kernels: %s" % e, file=sys.stderr)
        return 2
    import triton
    print(json.dumps({"python": sys.executable, "triton": triton.__version__, "nvshmem_wheel": base,
                      "device_library": ".".join(map(str, nv_version))}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="where to write (default kernels/build; with --user, user-kernels)")
    ap.add_argument("--arch", default="80,90,100")
    ap.add_argument("--warps", default="4,8,16,32")
    ap.add_argument("--skip-cuda", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiles at once (default: every core)")
    ap.add_argument("--only", metavar="MODULE[,MODULE]",
                    help="rebuild only these (a Triton module of kernels/triton, as its manifest is named: symmem_collectives, "
                         "...; cuda; nccl-device) and keep the other artifacts")
    ap.add_argument("--user", metavar="FILE.py", help="build a user's Triton file instead of symmem's kernels")
    ap.add_argument("--signatures", metavar="FILE.json",
                    help="with --user: the kernels symmem launches and their parameters (symmem kernels build writes it)")
    ap.add_argument("--name", help="with --user: the implementation name (--impl NAME)")
    ap.add_argument("--kernel", "--op", dest="op", action="append", default=[], metavar="OP=FUNCTION",
                    help="with --user: the function serving an operation (beats SYMMEM_KERNELS)")
    ap.add_argument("--sizes", metavar="BYTES[,BYTES]",
                    help="with --user: the message sizes a kernel's tl.constexpr size is built for (default 8)")
    ap.add_argument("--const", action="append", default=[], metavar="NAME=V[,V...]",
                    help="with --user: the values a kernel's tl.constexpr NAME is built for, a variant each (IMPL[NAME=V])")
    ap.add_argument("--tmp", metavar="DIR", help="with --user: where to write what the build writes for itself")
    ap.add_argument("--check", action="store_true",
                    help="with --user: check the file's declarations and signatures, and compile nothing")
    ap.add_argument("--check-tools", action="store_true",
                    help="say what a user's build would use here (Python, Triton, the NVSHMEM wheel), and build nothing")
    args = ap.parse_args()
    if args.check_tools:
        return check_tools()
    arches = [int(a) for a in args.arch.split(",")]
    warps = [int(w) for w in args.warps.split(",")]
    if args.user:
        args.out = args.out or "user-kernels"
        return main_user(args, arches, warps)
    args.out = args.out or os.path.join(KERNELS_DIR, "build")

    try:
        symmem = find_packer()
        manifests = Manifests()
    except Refused as e:
        print("build-kernels: %s" % e, file=sys.stderr)
        return 2
    modules = sorted(manifests.triton)
    only = args.only.split(",") if args.only else modules + ([] if args.skip_cuda else ["cuda", "nccl-device"])
    for m in only:
        if m not in modules and m not in ("cuda", "nccl-device"):
            print("build-kernels: --only %s: use %s, cuda or nccl-device" % (m, ", ".join(modules)), file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)
    # Remove the artifacts of what is rebuilt (all of them without --only).
    kernels_of = {k: True for m in only if m in modules for k in manifests.triton[m].kernels}
    for old in glob.glob(os.path.join(args.out, "*")):
        base = os.path.basename(old)
        if base.endswith("README.md"):
            continue
        parts = base.split(".")
        if args.only and not ((parts[0] == "triton" and len(parts) > 1 and parts[1] in kernels_of)
                              or ("cuda" in only and parts[0] in set(m.impl for m in manifests.cuda))
                              or ("nccl-device" in only and parts[0] in set(m.impl for m in manifests.nccl))):
            continue
        os.remove(old)
    base, lib, include = nvshmem_paths()
    bc = os.path.join(lib, "libnvshmem_device.bc")
    nv_version = nvshmem_version(include)
    print("NVSHMEM wheel at %s, device library %s" % (base, ".".join(map(str, nv_version))))
    failures = []
    with open(os.path.join(args.out, "build.log"), "a" if args.only else "w") as log:
        builder = Builder(args.jobs)
        build_triton(builder, args.out, manifests, [manifests.triton[m] for m in only if m in modules], arches, warps, bc,
                     nv_version)
        if "cuda" in only:
            build_cuda(args.out, manifests, arches, lib, include, nv_version, failures, log)
        if "nccl-device" in only:
            import importlib.util  # nccl_device_build.py beside this script, whose directory is off sys.path
            spec = importlib.util.spec_from_file_location("nccl_device_build", os.path.join(KERNELS_DIR, "nccl_device_build.py"))
            nccl_device_build = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(nccl_device_build)
            build_nccl_device = nccl_device_build.build_nccl_device
            build_nccl_device(args.out, arches, failures, log, CUDA_DIR, run, write_artifact, sources_hash,
                              manifests.nccl[0], manifests.facts)
        builder.finish(failures)
    failed = pack(args.out, symmem)
    if failed:
        failures.append(failed)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
