"""Triton's link of an extern library done by LLVM's own linker (llvm-link --only-needed:
LinkOnlyNeeded, as Triton's link_extern_libs; then every function the library defines
made internal, as Triton does), with build-kernels.py's pruned libraries (argv[1]: the
script, argv[2]: a Triton cache dir, argv[3]: the directory of .ll files). collide.ll
and extkern.ll are linked whole, their parts not kept (the linker renamed a function of
collide's own; it bound the library's calls to extkern's kernel); my_put.ll
is linked whole and its part kept; then each other kernel is linked both ways, and a
line says whether the two modules' texts are the same, or where they differ."""
import difflib
import importlib.util
import os
import re
import subprocess
import sys

spec = importlib.util.spec_from_file_location("bk", sys.argv[1])
bk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bk)
os.environ["TRITON_CACHE_DIR"] = sys.argv[2]
d = sys.argv[3]
lib = os.path.join(d, "libnvshmem_device.ll")
DEFINE = re.compile(r'^define (?:internal |linkonce_odr )?[^@\n]*@([-\w$.]+)\(', re.M)


def tool(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("%s: %s" % (" ".join(args), out.stderr.strip()))
    return out.stdout


def verify(path):
    """LLVM's verifier on the module at path, debug info included: a module whose debug
    info is broken parses, its debug info dropped, with a warning llvm-as prints."""
    out = subprocess.run(["llvm-as", "-o", os.devnull, path], capture_output=True, text=True)
    if out.returncode != 0 or out.stderr.strip():
        sys.exit("llvm-as %s: %s" % (os.path.basename(path), out.stderr.strip()))


def triton_link(kernel, library):
    defs = set(DEFINE.findall(open(library).read()))
    text = tool("llvm-link", "--only-needed", kernel, library, "-S", "-o", "-")
    return re.sub(r'^define (?:linkonce_odr |internal )?(?=[^@\n]*@([-\w$.]+)\()',
                  lambda m: "define internal " if m.group(1) in defs else m.group(0), text, flags=re.M)


def compile_(name, prune):
    """The module of kernel name after Triton's link, through link_pruned."""
    kernel = os.path.join(d, name + ".ll")
    before = open(kernel).read()
    state = {"text": before}

    class Fn:
        def __init__(self, n, decl):
            self.name, self.decl = n, decl

        def is_declaration(self):
            return self.decl

    class Mod:
        def get_functions(self):
            t = state["text"]
            return [Fn(n, False) for n in DEFINE.findall(t)] + [
                Fn(n, True) for n in re.findall(r'^declare [^@\n]*@([-\w$.]+)\(', t, re.M)]

        def __str__(self):
            return state["text"]

    def link(mod, paths):
        path = os.path.join(sys.argv[2], "module.ll")
        with open(path, "w") as f:
            f.write(state["text"])
        state["text"] = triton_link(path, paths[0])
    os.environ[bk.PRUNE_ENV] = "" if prune else "0"
    bk._STAGES.linked = linked = {}
    bk.link_pruned(link)(Mod(), [lib])
    with open(os.path.join(sys.argv[2], "module.ll"), "w") as f:
        f.write(state["text"])
    verify(os.path.join(sys.argv[2], "module.ll"))
    return state["text"], linked.get("libnvshmem_device.ll")


def kept():
    return sorted(f for root, _, files in os.walk(sys.argv[2]) if "symmem-pruned" in root
                  for f in files if f.endswith(".ll"))


for name in ("collide", "extkern"):
    _, how = compile_(name, True)
    print("%s: linked %s, %d kept parts" % (name, how, len(kept())))
_, how = compile_("my_put", True)
print("my_put: linked %s" % how)
for name in ("my_put_edited", "other"):
    whole, _ = compile_(name, False)
    pruned, how = compile_(name, True)
    diff = list(difflib.unified_diff(whole.splitlines(), pruned.splitlines(), "whole", "pruned", lineterm="", n=0))
    print("%s: linked %s, %s" % (name, how, "the same module" if not diff else "modules differ:\n" + "\n".join(diff[:30])))
for root, _, files in os.walk(sys.argv[2]):
    for f in files:
        if f.endswith(".ll") and "symmem-pruned" in root:
            verify(os.path.join(root, f))
            print("kept part verified: " + f)
