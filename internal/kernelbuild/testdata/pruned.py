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
    """LLVM's LinkOnlyNeeded as Triton links: the library's external definitions of what
    the module declares, with every function they call, made internal."""
    with open(paths[0]) as f:
        text = f.read()
    if not text.startswith(("define", ";")):
        raise ValueError("Failed to parse library at " + paths[0])
    link.last = paths[0]
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
os.makedirs(sys.argv[2], exist_ok=True)
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
                if n.endswith(".ll") and "symmem-nvshmem" in d:
                    with open(os.path.join(d, n), "w") as f:
                        f.write("!broken")
        continue
    os.environ[bk.PRUNE_ENV] = step.get("env", "")
    m = Mod(step["kernel"], step["calls"], step.get("ftz", 1))
    bk._STAGES.nvshmem = None
    run(m, [whole])
    kept = {}
    for d, _, files in os.walk(sys.argv[2]):
        for n in files:
            if n.endswith(".ll") and "symmem-nvshmem" in d:
                with open(os.path.join(d, n)) as f:
                    kept[n] = sorted(re.findall(r'^define (?:internal )?[^@\n]*@([-\w$.]+)\(', f.read(), re.M))
    print(json.dumps({"linked": bk._STAGES.nvshmem, "from": os.path.basename(link.last), "functions": sorted(m.linked),
                      "kept": kept}))
