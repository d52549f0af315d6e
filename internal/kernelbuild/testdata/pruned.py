"""Drives build-kernels.py's link_pruned (argv[1]: the script, argv[2]: a Triton cache
dir) with stand-ins for Triton's LLVM module and its link_extern_libs, and prints one
JSON line a compile: which library it linked, the functions that came in, and what the
kept pruned libraries define."""
import importlib.util
import json
import os
import re
import sys

spec = importlib.util.spec_from_file_location("bk", sys.argv[1])
bk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bk)
os.environ["TRITON_CACHE_DIR"] = sys.argv[2]
FN = re.compile(r'^define (internal )?[^@\n]*@([-\w$.]+)\([^\n]*\{\n(.*?)^\}\n', re.M | re.S)
FTZ = '!{i32 4, !"nvvm-reflect-ftz", i32 %d}'


class Fn:
    def __init__(self, name, decl):
        self.name, self.decl = name, decl

    def is_declaration(self):
        return self.decl


class Mod:
    """A kernel's module: the kernel, the functions it declares, those linked in."""

    def __init__(self, kernel, calls, ftz):
        self.kernel, self.calls, self.flags, self.linked = kernel, calls, FTZ % ftz, {}

    def get_functions(self):
        return [Fn(self.kernel, False)] + [Fn(c, c not in self.linked) for c in self.calls]

    def __str__(self):
        t = "define ptx_kernel void @%s(ptr %%0) {\n%s  ret void\n}\n" % (
            self.kernel, "".join("  call void @%s()\n" % c for c in self.calls))
        t += "".join("declare void @%s()\n" % c for c in self.calls if c not in self.linked)
        t += "".join("define internal void @%s() {\n%s}\n" % (n, b) for n, b in self.linked.items())
        return t + "!llvm.module.flags = !{!0}\n!0 = %s\n" % self.flags


def link(mod, paths):
    """LLVM's LinkOnlyNeeded as Triton links: each library's external definitions of what
    the module declares, with every function they call, made internal."""
    for p in paths:
        link_one(mod, p)


def link_one(mod, path):
    with open(path) as f:
        text = f.read()
    if not text.startswith(("define", ";")):
        raise ValueError("Failed to parse library at " + path)
    link.paths.append(path)
    defs = {m.group(2): (bool(m.group(1)), m.group(3)) for m in FN.finditer(text)}

    def pull(n):
        if n not in mod.linked:
            mod.linked[n] = defs[n][1]
            for c in re.findall(r'@([-\w$.]+)\(', defs[n][1]):
                pull(c)
    for c in mod.calls:
        if c in defs and not defs[c][0]:
            pull(c)


whole = os.path.join(sys.argv[2], "libnvshmem_device.ll")
libdevice = os.path.join(sys.argv[2], "libdevice.10.ll")
os.makedirs(sys.argv[2], exist_ok=True)
with open(libdevice, "w") as f:
    f.write("; libdevice\ndefine float @__nv_expf(float %0) {\n  ret float %0\n}\ndefine float @__nv_sinf(float %0) {\n  ret float %0\n}\n")
with open(whole, "w") as f:
    f.write("; the whole library\n"
            "define void @nvshmem_putmem(ptr %0) {\n  call void @nvshmemi_transfer()\n  ret void\n}\n"
            "define linkonce_odr void @nvshmemi_transfer() {\n  ret void\n}\n"
            "define void @nvshmem_quiet() {\n  ret void\n}\n"
            "define void @nvshmem_unused() {\n  ret void\n}\n")
run = bk.link_pruned(link)
for step in json.loads(sys.argv[3]):
    if step.get("break"):  # every kept library cut short
        for d, _, files in os.walk(sys.argv[2]):
            for n in files:
                if n.endswith(".ll") and "symmem-pruned" in d:
                    with open(os.path.join(d, n), "w") as f:
                        f.write("!broken")
        continue
    os.environ[bk.PRUNE_ENV] = step.get("env", "")
    m = Mod(step["kernel"], step["calls"], step.get("ftz", 1))
    bk._STAGES.linked = linked = {}
    link.paths = []
    run(m, [whole, libdevice])  # Triton's order: the extern_libs given, then libdevice
    kept = {}
    for d, _, files in os.walk(sys.argv[2]):
        for n in files:
            if n.endswith(".ll") and "symmem-pruned" in d:
                with open(os.path.join(d, n)) as f:
                    fns = {m.group(2): m.group(3) for m in FN.finditer(f.read())}
                kept[os.path.join(os.path.basename(d), n)] = {
                    name: body if name.startswith("symmem.") else "" for name, body in fns.items()}
    print(json.dumps({"linked": linked.get("libnvshmem_device.ll"), "libdevice": linked.get("libdevice.10.ll"),
                      "from": [os.path.basename(p) for p in link.paths], "functions": sorted(m.linked), "kept": kept}))
