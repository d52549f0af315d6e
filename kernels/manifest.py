#!/usr/bin/env python3
"""The manifests of symmem's own kernels, and the facts of them every sidecar carries.

Each kernel source has its manifest beside it, SOURCE.manifest.json (kernels/triton/
symmem_collectives.manifest.json for symmem_collectives.py, kernels/cuda/
symmem_nvshmem.manifest.json for symmem_nvshmem.cu): the one place that says, for each
kernel, which operations it serves (ops) and whose receiver waits with it (receives),
the element type (dtype) and the reduction operators (redops, by internal/ops/redop.go's
names) it combines with, the warp counts it is built for (warps; [1]: it runs as one
warp whatever a launch asks) and, for a CUDA kernel, its entry point and parameters. A
Triton module's KERNELS holds each kernel's function, signature and constexprs, which the
compile needs; its manifest the rest. The file level says the implementation (impl), the
files a build's source hash covers (sources), the device library the kernels link
(library: nvshmem, nccl) and how NVSHMEM's collectives are launched (launch). "note" is
for people. A manifest is not a kernel source: editing one changes no source hash and
needs no rebuild, only its facts carried into the sidecars again.

kernels/build-kernels.py reads the manifests to build, and writes FACTS into every
sidecar; Go reads them there (pkg/kernels: Artifact.Manifest), and the registry says what
an implementation serves from them. This script checks the manifests and carries their
facts into sidecars already built, leaving every compiled body as it is:

    kernels/manifest.py check             the manifests, and KERNELS of each Triton module
    kernels/manifest.py sidecars [DIR]    write the facts into DIR's sidecars (kernels/build)

It needs Python 3.9 or later only (no Triton: a module's KERNELS is read from its syntax
tree). Errors are one line on stderr each, starting "manifest: ", exit status 2.
"""

import ast
import glob
import json
import os
import sys

KERNELS_DIR = os.path.dirname(os.path.abspath(__file__))
SUFFIX = ".manifest.json"
# What a manifest may say, at the file level and of a kernel.
FILE_KEYS = {"note", "impl", "sources", "library", "launch", "kernels"}
KERNEL_KEYS = {"note", "entry", "params", "ops", "receives", "dtype", "redops", "warps", "from"}
# The sidecar fields a manifest's facts fill, all of them, written afresh each time.
FACTS = ("ops", "receives", "dtype", "redops", "warps", "manifest")
PARAM_TYPES = ("ptr", "u64", "i64", "i32")
DTYPES = ("bf16", "float16", "float32")


class Bad(Exception):
    """A manifest, or a sidecar against one, that is wrong; the message says where."""


class Manifest:
    """One source's manifest: path (relative to kernels/), source (the file it
    describes), impl, sources, library, launch, and kernels {name: entry}, an entry
    with its "from" resolved."""

    def __init__(self, path, doc):
        self.path = os.path.relpath(path, KERNELS_DIR)
        self.source = os.path.basename(path)[:-len(SUFFIX)] + (".py" if self.path.startswith("triton") else ".cu")
        self.triton = self.path.startswith("triton")
        self.module = self.source[:-3]
        if not isinstance(doc, dict):
            raise Bad("%s: want an object" % self.path)
        extra = sorted(set(doc) - FILE_KEYS)
        if extra:
            raise Bad("%s: unknown field %r: a manifest has %s" % (self.path, extra[0], ", ".join(sorted(FILE_KEYS))))
        self.impl = doc.get("impl")
        self.sources = doc.get("sources")
        self.library = doc.get("library")
        self.launch = doc.get("launch", {})
        self.kernels = doc.get("kernels")
        if not isinstance(self.impl, str) or not self.impl:
            raise Bad("%s: no impl: name the implementation its kernels are (triton, cuda, ...)" % self.path)
        if not isinstance(self.sources, list) or self.source not in self.sources:
            raise Bad("%s: sources must list the files its build's hash covers, %s among them" % (self.path, self.source))
        if self.library not in (None, "nvshmem", "nccl"):
            raise Bad("%s: library %r: use nvshmem or nccl, or leave it out" % (self.path, self.library))
        if not isinstance(self.kernels, dict) or not self.kernels:
            raise Bad("%s: no kernels" % self.path)
        if not isinstance(self.launch, dict) or set(self.launch) - {"grid", "cooperative"}:
            raise Bad("%s: launch takes grid and cooperative" % self.path)


def read_all(kernels_dir=KERNELS_DIR):
    """Every manifest under kernels_dir's triton/ and cuda/, by source file name, each
    kernel's "from" resolved and every entry checked."""
    out = {}
    for path in sorted(glob.glob(os.path.join(kernels_dir, "triton", "*" + SUFFIX)) +
                       glob.glob(os.path.join(kernels_dir, "cuda", "*" + SUFFIX))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise Bad("%s: %s" % (os.path.relpath(path, kernels_dir), e))
        m = Manifest(path, doc)
        out[m.source] = m
    for m in out.values():
        for name, entry in list(m.kernels.items()):
            if not isinstance(entry, dict):
                raise Bad("%s: kernel %s: want an object" % (m.path, name))
            if "from" in entry:
                other = out.get(entry["from"])
                if other is None or name not in other.kernels or "from" in other.kernels[name] or set(entry) != {"from"}:
                    raise Bad("%s: kernel %s: from %r must name another manifest's source that has %s, and say nothing else"
                              % (m.path, name, entry["from"], name))
                if entry["from"] not in m.sources:
                    raise Bad("%s: kernel %s comes from %s, which its sources do not list" % (m.path, name, entry["from"]))
                m.kernels[name] = dict(other.kernels[name])
            check_entry(m, name, m.kernels[name])
    seen = {}
    for m in out.values():
        for name in m.kernels:
            key = (m.impl, name)
            if key in seen:
                raise Bad("%s and %s both declare %s/%s" % (seen[key].path, m.path, m.impl, name))
            seen[key] = m
    return out


def check_entry(m, name, e):
    where = "%s: kernel %s" % (m.path, name)
    extra = sorted(set(e) - KERNEL_KEYS)
    if extra:
        raise Bad("%s: unknown field %r: a kernel has %s" % (where, extra[0], ", ".join(sorted(KERNEL_KEYS))))
    if not isinstance(e.get("ops"), list) and not e.get("receives"):
        raise Bad("%s: no ops: list the operations it serves ([] for none, with a note saying why)" % where)
    for key in ("ops", "receives", "redops"):
        v = e.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v) or len(set(v)) != len(v):
            raise Bad("%s: %s must be a list of distinct names" % (where, key))
    if e.get("dtype") is not None and e["dtype"] not in DTYPES:
        raise Bad("%s: dtype %r: use %s" % (where, e["dtype"], ", ".join(DTYPES)))
    if e.get("redops") and not e.get("dtype"):
        raise Bad("%s: redops without a dtype: say the element type it combines" % where)
    w = e.get("warps")
    if w is not None and (not isinstance(w, list) or not w or not all(isinstance(x, int) and x > 0 for x in w)
                          or w != sorted(set(w))):
        raise Bad("%s: warps must be warp counts in increasing order" % where)
    if m.triton:
        if "entry" in e or "params" in e:
            raise Bad("%s: a Triton kernel's entry and parameters are its function's (KERNELS in %s)" % (where, m.source))
        if not w:
            raise Bad("%s: no warps: list the warp counts it is built for ([1]: one warp)" % where)
    else:
        if not isinstance(e.get("entry"), str) or not e["entry"]:
            raise Bad("%s: no entry: name its extern \"C\" function" % where)
        ps = e.get("params")
        if not isinstance(ps, list) or not ps:
            raise Bad("%s: no params: list them as NAME:TYPE, TYPE one of %s" % (where, ", ".join(PARAM_TYPES)))
        for p in ps:
            n, _, t = p.partition(":") if isinstance(p, str) else ("", "", "")
            if not n or t not in PARAM_TYPES:
                raise Bad("%s: parameter %r: write NAME:TYPE, TYPE one of %s" % (where, p, ", ".join(PARAM_TYPES)))
        if w is not None and w != [1]:
            raise Bad("%s: warps %s: a CUDA kernel's block is chosen at launch; say [1] for one that runs as one warp" % (
                where, w))


def facts(m, name):
    """The sidecar fields of kernel name of manifest m: those of FACTS the manifest says
    (ops always, [] for none; the manifest's path always)."""
    e = m.kernels[name]
    out = {"ops": list(e.get("ops", [])), "receives": e.get("receives"), "dtype": e.get("dtype"),
           "redops": e.get("redops"), "warps": e.get("warps"), "manifest": m.path}
    return {k: v for k, v in out.items() if v is not None and v != [] or k == "ops"}


def with_facts(meta, m, name):
    """meta (a sidecar) with kernel name's facts from m in place of any it had."""
    out = {k: v for k, v in meta.items() if k not in FACTS}
    out.update(facts(m, name))
    return out


def params(m, name):
    """A CUDA kernel's parameters as its sidecar lists them."""
    return [{"name": p.split(":")[0], "type": p.split(":")[1]} for p in m.kernels[name]["params"]]


def kernels_of_module(path):
    """The keys of a Triton module's KERNELS, read from its syntax tree (no Triton)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KERNELS" for t in node.targets):
            if not isinstance(node.value, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                               for k in node.value.keys):
                raise Bad("%s: KERNELS must be a dict literal with string keys" % path)
            return [k.value for k in node.value.keys]
    raise Bad("%s: no KERNELS" % path)


def check(kernels_dir=KERNELS_DIR):
    """Every manifest, and each Triton module's KERNELS against its manifest; returns
    the manifests."""
    ms = read_all(kernels_dir)
    for m in ms.values():
        if not m.triton:
            continue
        have = kernels_of_module(os.path.join(kernels_dir, "triton", m.source))
        missing = [k for k in have if k not in m.kernels]
        if missing:
            raise Bad("%s: KERNELS has %s, which %s does not declare" % (m.source, missing[0], m.path))
        unbuilt = [k for k in m.kernels if k not in have]
        if unbuilt:
            raise Bad("%s declares %s, which KERNELS in %s has not" % (m.path, unbuilt[0], m.source))
    return ms


def by_kernel(ms):
    """{(impl, kernel): manifest}."""
    return {(m.impl, k): m for m in ms.values() for k in m.kernels}


def update_sidecars(out, ms):
    """Writes the manifests' facts into every sidecar of symmem's own kernels in out,
    refusing one whose kernel no manifest declares or whose build contradicts its
    manifest (other sources, entry, parameters or launch). A compiled body is never
    opened: the sidecar's file and sha256 stay as they are. Returns (updated,
    unchanged, the manifests' kernels with no sidecar in out)."""
    index = by_kernel(ms)
    impls = set(m.impl for m in ms.values())
    updated, unchanged, seen = [], [], set()
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        base = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        try:
            meta = json.loads(text)
        except ValueError as e:
            raise Bad("%s: %s" % (base, e))
        if not isinstance(meta, dict) or "impl" not in meta or "kernel" not in meta:
            continue  # not a kernel's sidecar (a user's build record, say)
        if meta["impl"] not in impls:
            continue  # a user's kernel: its facts are symmem's table's (pkg/kernels)
        key = (meta["impl"], meta["kernel"])
        m = index.get(key)
        if m is None:
            raise Bad("%s: no manifest declares %s/%s: add it to its source's manifest, or remove the artifact" % (
                base, key[0], key[1]))
        if sorted(meta.get("sources", [])) != sorted(m.sources):
            raise Bad("%s was built from %s, and %s says %s: rebuild it" % (
                base, ", ".join(meta.get("sources", [])), m.path, ", ".join(m.sources)))
        if not m.triton:
            e = m.kernels[meta["kernel"]]
            if meta.get("entry") != e["entry"] or meta.get("params") != params(m, meta["kernel"]):
                raise Bad("%s: entry %s%s, and %s says %s%s: rebuild it, or correct the manifest" % (
                    base, meta.get("entry"), [p.get("name") for p in meta.get("params", [])], m.path, e["entry"],
                    [p.split(":")[0] for p in e["params"]]))
            for k, v in m.launch.items():
                if meta.get(k) != v:
                    raise Bad("%s: %s %r, and %s says %r: rebuild it" % (base, k, meta.get(k), m.path, v))
        w = m.kernels[meta["kernel"]].get("warps")
        if m.triton and meta.get("num_warps") not in w:
            raise Bad("%s is built for %s warps, which %s does not list (%s)" % (base, meta.get("num_warps"), m.path, w))
        seen.add(key)
        new = with_facts(meta, m, meta["kernel"])
        body = json.dumps(new, indent=2, sort_keys=True) + "\n"
        if body == text:
            unchanged.append(base)
            continue
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(body)
        os.replace(tmp, path)
        updated.append(base)
    missing = sorted("%s/%s (%s)" % (k[0], k[1], m.path) for k, m in index.items() if k not in seen)
    return updated, unchanged, missing


def main(argv):
    if not argv or argv[0] not in ("check", "sidecars") or len(argv) > 2 or argv[0] == "check" and len(argv) > 1:
        sys.stderr.write("usage: kernels/manifest.py check | sidecars [DIR]\n")
        return 2
    try:
        ms = check()
        if argv[0] == "check":
            print("%d manifests, %d kernels: ok" % (len(ms), sum(len(m.kernels) for m in ms.values())))
            return 0
        out = argv[1] if len(argv) > 1 else os.path.join(KERNELS_DIR, "build")
        updated, unchanged, missing = update_sidecars(out, ms)
    except Bad as e:
        sys.stderr.write("manifest: %s\n" % e)
        return 2
    print("%s: %d sidecars given their manifests' facts, %d already had them; no compiled kernel was read or written" % (
        os.path.relpath(out), len(updated), len(unchanged)))
    if missing:
        print("%d kernels declared have no sidecar there (not built into it): %s" % (len(missing), ", ".join(missing)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
