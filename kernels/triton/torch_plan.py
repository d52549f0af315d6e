"""How symmem serves a kernel written against PyTorch's NVSHMEM-for-Triton module
(torch.distributed._symmetric_memory._nvshmem_triton), read from the file's syntax alone:
no torch, no Triton (kernels/build-kernels.py --check runs it anywhere).

Such a kernel takes the parameters its author chose (put_kernel(dst_ptr, src_ptr, numel:
tl.constexpr, peer: tl.constexpr), my_put_kernel(dest, src, nelems, pe)) and runs on the
grid its author launched (the torch tests launch one block). symmem launches its own
signatures (put_block(dst, src, nbytes, chunk, peer) on ceil(nbytes / chunk) blocks), so
the build compiles, for each kernel, an entry of symmem's signature that calls the
user's function, unchanged, with each parameter given what it means:
- parameters are matched by name (KNOWN), or by the declaration file beside the source
  (FILE.symmem.json: {"put_kernel": {"op": "put", "params": {"n": "nbytes", "BLOCK": 1024},
  "dtype": "int64", "blocks": "one"}});
- a tl.constexpr size or rank is specialised at build time: the entry branches on the
  size (for each size built) and on the peer (each rank up to MAX_PEERS) to a copy of
  the kernel with those values;
- a kernel that never reads its program id was written for one block: only block 0
  runs it (other blocks would repeat the whole message); a put-signal's other blocks
  send its signal alone, so that the receiver's count of one signal per block is met
  once block 0's data and signal have landed;
- addresses go to torch 2.8's calls (putmem_block, getmem_block) as int64, as torch's
  tests pass them; typed pointers (of "dtype", int8 by default) to torch 2.11's.
Functions that test NVSHMEM itself (barriers, ordering, team collectives) are listed as
not servable, with the reason.
"""

import ast
import json
import os

# The module's name as kernels import it.
TORCH_MODULE = "torch.distributed._symmetric_memory._nvshmem_triton"

# The names symmem's module (nvshmem_torch.py) provides; a test keeps them equal.
API = ("putmem_block", "getmem_block", "getmem_nbi_block", "putmem_signal_block", "alltoallmem_block",
       "broadcastmem_block", "put", "get", "get_nbi", "alltoall", "broadcast", "reduce", "wait_until",
       "signal_wait_until", "signal_op", "fence", "quiet", "my_pe", "n_pes", "barrier_all", "sync_all",
       "enable_triton", "requires_nvshmem", "NvshmemLibFinder", "CMP_EQ", "CMP_NE", "CMP_GT", "CMP_LE", "CMP_LT",
       "CMP_GE", "SIGNAL_SET", "SIGNAL_ADD")
ADDRESS_CALLS = ("putmem_block", "getmem_block", "getmem_nbi_block", "alltoallmem_block", "broadcastmem_block")

# What each parameter name means to symmem.
KNOWN = {
    "dst": ("dst", "dst_ptr", "dest", "dest_ptr", "destination", "out", "out_ptr"),
    "src": ("src", "src_ptr", "source", "source_ptr", "inp", "inp_ptr"),
    "nbytes": ("nbytes", "size_bytes", "msg_size_bytes", "num_bytes"),
    "nelems": ("numel", "nelems", "nelem", "n_elements"),
    "chunk": ("chunk", "chunk_bytes"),
    "peer": ("peer", "pe", "target_pe", "remote_pe", "peer_pe"),
    "sig": ("sig", "sig_ptr", "sig_addr", "signal", "signal_ptr", "flag", "flag_ptr"),
    "signal_val": ("signal_val", "sig_val", "signal_value"),
    "sig_op": ("sig_op", "signal_op"),
    "cmp_op": ("cmp_op", "cmp"),
    "cmp_val": ("cmp_val", "value"),
}
MEANING = {n: role for role, names in KNOWN.items() for n in names}
# The meanings each operation's entry can give.
ROLES = {
    "put": ("dst", "src", "nbytes", "nelems", "chunk", "peer"),
    "get": ("dst", "src", "nbytes", "nelems", "chunk", "peer"),
    "put-signal": ("dst", "src", "nbytes", "nelems", "chunk", "peer", "sig", "signal_val", "sig_op"),
    "wait-signal": ("sig", "cmp_op", "cmp_val"),
}
# The entries' signatures (USER_SIGNATURES in build-kernels.py: a test keeps them equal).
ENTRIES = {
    "put": ("put_block", ("dst", "src", "nbytes", "chunk", "peer")),
    "get": ("get_block", ("dst", "src", "nbytes", "chunk", "peer")),
    "put-signal": ("put_signal_block", ("dst", "src", "nbytes", "chunk", "sig", "peer")),
    "wait-signal": ("wait_signal", ("sig", "value")),
}
MAX_PEERS = 8  # ranks a tl.constexpr peer is specialised for
DEFAULT_SIZES = (8,)  # run's default message (8 int8 elements)
DTYPES = {"int8": 1, "uint8": 1, "int16": 2, "fp16": 2, "bf16": 2, "int32": 4, "fp32": 4, "int64": 8, "fp64": 8}
SIGNAL_ADD, CMP_GE = 10, 5  # NVSHMEM 3.x's values

# The calls that make a function an operation symmem serves, and those of NVSHMEM tests.
OP_CALLS = {"put": ("put", "putmem_block"), "get": ("get", "get_nbi", "getmem_block", "getmem_nbi_block"),
            "put-signal": ("putmem_signal_block",), "wait-signal": ("signal_wait_until",)}
TESTS = (
    (("alltoall", "broadcast", "reduce", "alltoallmem_block", "broadcastmem_block"),
     "a team collective of NVSHMEM's own (nvshmem.%s): symmem serves collectives through its own contract "
     "(docs/kernels.md, \"Your own collectives\")"),
    (("barrier_all", "sync_all"), "a test of NVSHMEM's barrier (nvshmem.%s): no operation symmem measures"),
    (("fence", "quiet"), "a test of NVSHMEM's ordering (nvshmem.%s between puts): no operation symmem measures"),
    (("wait_until",), "a wait on an integer (nvshmem.%s): no operation symmem measures"),
    (("signal_op",), "a signal alone (nvshmem.%s): no operation symmem measures"),
)


class Refused(Exception):
    """A kernel that cannot be served as asked; the message names what and what to do."""


def torch_imports(tree):
    """The names under which the file reaches torch's module: (module aliases, names
    imported from it). Both empty: the file is not written for torch's module."""
    parent, leaf = TORCH_MODULE.rsplit(".", 1)
    aliases, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == TORCH_MODULE and a.asname:
                    aliases.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for a in node.names:
                if node.module == parent and a.name == leaf:
                    aliases.add(a.asname or leaf)
                elif node.module == TORCH_MODULE:
                    names.add(a.name)
    return aliases, names


def names_used(tree, aliases, names):
    """Every name of torch's module the file uses (MODULE.name or imported)."""
    used = set(n for n in names if n != "*")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.add(node.attr)
    return used


def literal(node):
    """The value of a default that is a literal; None for no default or another
    expression (a tl.int32, a call), which the declaration file must then give."""
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


class Function:
    """A module-level @triton.jit function as the file has it."""

    def __init__(self, node, aliases, names):
        self.name, self.node = node.name, node
        a = node.args
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        self.params = []
        for p, d in zip(a.args, defaults):
            ann = ast.unparse(p.annotation) if p.annotation is not None else ""
            self.params.append((p.arg, "constexpr" in ann, literal(d)))
        self.odd = bool(a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs)
        self.calls, self.callees, self.reads_program_id = [], set(), False
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases:
                    self.calls.append(f.attr)
                elif isinstance(f, ast.Name) and f.id in names:
                    self.calls.append(f.id)
                elif isinstance(f, ast.Name):
                    self.callees.add(f.id)
            if isinstance(n, ast.Attribute) and n.attr in ("program_id", "num_programs"):
                self.reads_program_id = True

    def inherit(self, funcs, seen=()):
        """Adds to this function's calls those of the file's jit functions it calls
        (helpers), and their reading of the program id."""
        for name in sorted(self.callees & set(funcs) - set(seen) - {self.name}):
            h = funcs[name]
            h.inherit(funcs, tuple(seen) + (self.name,))
            self.calls += h.calls
            self.reads_program_id |= h.reads_program_id

    def signature(self):
        return "%s(%s)" % (self.name, ", ".join(n + (": tl.constexpr" if c else "") for n, c, _ in self.params))

    def classify(self):
        """(op, None) for a kernel symmem serves, (None, why) for one it does not, and
        (None, None) for a function that calls no NVSHMEM put, get or wait (a helper)."""
        for calls, why in TESTS:
            hit = [c for c in self.calls if c in calls]
            if hit and not (calls[0] == "fence" and len([c for c in self.calls if c in OP_CALLS["put"]]) < 2):
                return None, why % hit[0]
        ops = [op for op, calls in OP_CALLS.items() if any(c in calls for c in self.calls)]
        if "put-signal" in ops and "wait-signal" not in ops:
            ops = ["put-signal"]
        if len(ops) > 1:
            return None, "it calls %s: both a %s and a %s; symmem serves one operation per kernel" % (
                ", ".join("nvshmem." + c for c in sorted(set(self.calls))), ops[0], ops[1])
        if not ops:
            return None, None
        return ops[0], None


def declarations(path):
    """The declaration file beside path (FILE.symmem.json), or {}: function -> {"op",
    "params", "dtype", "blocks"}."""
    decl = os.path.splitext(path)[0] + ".symmem.json"
    if not os.path.exists(decl):
        return {}, decl
    try:
        with open(decl) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused("%s: %s" % (decl, e))
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise Refused("%s: want {\"FUNCTION\": {\"op\": \"put\", \"params\": {\"PARAM\": \"nbytes\" or a value}, "
                      "\"dtype\": \"int8\", \"blocks\": \"one\" or \"grid\"}}" % decl)
    for fn, spec in d.items():
        if not isinstance(spec.get("params", {}), dict):
            raise Refused("%s: %s: params must map a parameter to a meaning or a value, as {\"n\": \"nbytes\"}" % (decl, fn))
        bad = sorted(set(spec) - {"op", "params", "dtype", "blocks"})
        if bad:
            raise Refused("%s: %s: unknown key %r: use op, params, dtype, blocks" % (decl, fn, bad[0]))
        if spec.get("dtype", "int8") not in DTYPES:
            raise Refused("%s: %s: dtype %r: use one of %s" % (decl, fn, spec["dtype"], ", ".join(DTYPES)))
        if spec.get("blocks", "one") not in ("one", "grid"):
            raise Refused("%s: %s: blocks %r: use \"one\" (the kernel moves the whole message in one block) or "
                          "\"grid\" (its blocks share it by program id)" % (decl, fn, spec["blocks"]))
    return d, decl


def known_names(op):
    return ", ".join("%s (%s)" % (role, "/".join(KNOWN[role])) for role in ROLES[op])


def bind(fn, op, spec, decl, sizes):
    """What the entry passes each of fn's parameters: [(param, role, value, constexpr)]
    with role one of ROLES[op] or None for a value (the declaration's or the default),
    refusing a parameter it cannot give anything."""
    out, given = [], spec.get("params", {})
    where = "%s (for %s)" % (fn.name, op)
    if fn.odd:
        raise Refused("%s takes *args, **kwargs or keyword-only parameters; symmem passes positional ones" % where)
    for name, constexpr, default in fn.params:
        g = given.get(name)
        if isinstance(g, str) and g not in ROLES[op]:
            raise Refused("%s: parameter %r is given %r in %s, which %s has not: give one of %s" % (
                where, name, g, os.path.basename(decl), op, ", ".join(ROLES[op])))
        role = g if isinstance(g, str) else None if name in given else MEANING.get(name)
        if role not in ROLES[op]:
            role = None
        if role is None:
            value = g if name in given else default
            if value is None:
                raise Refused("%s: parameter %r means nothing symmem knows: name it one of %s, or give it a meaning or "
                              "a value in %s ({\"%s\": {\"params\": {\"%s\": %s}}})" % (
                                  where, name, known_names(op), os.path.basename(decl), fn.name, name,
                                  "VALUE" if constexpr else "\"nbytes\""))
            if not constexpr and not isinstance(value, (bool, int, float)):
                raise Refused("%s: parameter %r: the value %r is not a number" % (where, name, value))
            out.append((name, None, value, constexpr))
            continue
        if constexpr and role not in ("nbytes", "nelems", "peer", "signal_val", "sig_op", "cmp_op"):
            raise Refused("%s: parameter %r is a tl.constexpr, but symmem passes %s at run time: drop tl.constexpr, "
                          "or give it a value in %s" % (where, name, role, os.path.basename(decl)))
        out.append((name, role, None, constexpr))
    dtype = spec.get("dtype", "int8")
    for name, role, _, constexpr in out:
        if constexpr and role in ("nbytes", "nelems"):
            bad = [s for s in sizes if s % DTYPES[dtype]]
            if bad:
                raise Refused("%s: --sizes %d is not a whole number of %s elements" % (where, bad[0], dtype))
    return out


def plan(tree, path, declared, ops, sizes):
    """{op: Kernel} for a file written for torch's module, and [(function, why)] for its
    kernels symmem does not serve. declared is SYMMEM_KERNELS, ops the --kernel OP=FN."""
    aliases, names = torch_imports(tree)
    funcs = {n.name: Function(n, aliases, names) for n in tree.body if isinstance(n, ast.FunctionDef)
             and any("jit" in ast.unparse(d) for d in n.decorator_list)}
    for fn in funcs.values():
        fn.inherit(funcs)
    helpers = set().union(*(fn.callees for fn in funcs.values())) & set(funcs)
    decl, decl_path = declarations(path)
    for fn in decl:
        if fn not in funcs:
            raise Refused("%s names %r, which is no module-level @triton.jit function of %s (those are: %s)" % (
                decl_path, fn, path, ", ".join(sorted(funcs)) or "none"))
    chosen = dict(declared)
    chosen.update({spec["op"]: fn for fn, spec in decl.items() if "op" in spec})
    for o in ops:
        op, _, fn = o.partition("=")
        chosen[op] = fn
    skipped, found = [], {}
    for fn in funcs.values():
        op, why = fn.classify()
        if fn.name in chosen.values() or fn.name in helpers:
            continue  # chosen, or called by the kernels: not a kernel of its own
        if why:
            skipped.append((fn.name, why))
        elif op:
            found.setdefault(op, []).append(fn.name)
    for op, fns in found.items():
        if op in chosen:
            continue
        if len(fns) > 1:
            raise Refused("%s: %s all serve %s: say which with --kernel %s=%s (or \"op\" in %s)" % (
                path, ", ".join(fns), op, op, fns[0], os.path.basename(decl_path)))
        chosen[op] = fns[0]
    if not chosen:
        raise Refused("%s: no kernel symmem serves (%s); symmem serves put, get, put-signal and wait-signal kernels "
                      "of torch's module" % (path, "; ".join("%s: %s" % s for s in skipped) or "no @triton.jit function "
                                             "calls nvshmem put, get, putmem_signal_block or signal_wait_until"))
    kernels = {}
    for op, name in sorted(chosen.items()):
        if op not in ENTRIES:
            raise Refused("%s: %s: a kernel of torch's module serves %s, not %s" % (path, name, ", ".join(ENTRIES), op))
        if name not in funcs:
            raise Refused("%s: no function %r for %s (module-level @triton.jit functions: %s)" % (
                path, name, op, ", ".join(sorted(funcs)) or "none"))
        fn, spec = funcs[name], decl.get(name, {})
        serves, why = fn.classify()
        if why:
            raise Refused("%s: %s cannot serve %s: it is %s" % (path, name, op, why))
        if serves and serves != op:
            raise Refused("%s: %s cannot serve %s: it calls %s, so it serves %s" % (
                path, name, op, ", ".join("nvshmem." + c for c in sorted(set(fn.calls))), serves))
        kernels[op] = Kernel(fn, op, spec, decl_path, sizes)
    return kernels, skipped


class Kernel:
    """One user kernel as the entry of op calls it."""

    def __init__(self, fn, op, spec, decl, sizes):
        self.fn, self.op, self.dtype = fn, op, spec.get("dtype", "int8")
        self.args = bind(fn, op, spec, decl, sizes)
        self.blocks = spec.get("blocks", "grid" if fn.reads_program_id else "one")
        self.address = any(c in ADDRESS_CALLS for c in fn.calls)
        const = {role for _, role, _, c in self.args if c}
        self.sizes = sorted(sizes) if const & {"nbytes", "nelems"} else []
        self.peers = list(range(MAX_PEERS)) if "peer" in const else []

    def describe(self):
        """How the entry calls the kernel, for --check and the sidecar."""
        parts = []
        for name, role, value, constexpr in self.args:
            if role is None:
                parts.append("%s=%r" % (name, value))
                continue
            what = role
            if role in ("dst", "src", "sig") and self.address:
                what += " (address)"
            elif role in ("dst", "src"):
                what += " (*%s)" % self.dtype
            elif role == "nelems":
                what = "nbytes" if DTYPES[self.dtype] == 1 else "nbytes / %d" % DTYPES[self.dtype]
            elif role == "signal_val":
                what = "1"
            elif role == "sig_op":
                what = "SIGNAL_ADD"
            elif role == "cmp_op":
                what = "CMP_GE"
            elif role == "cmp_val":
                what = "value"
            if constexpr and role in ("nbytes", "nelems"):
                what += " (tl.constexpr: sizes %s)" % ",".join(map(str, self.sizes))
            elif constexpr and role == "peer":
                what += " (tl.constexpr: ranks 0..%d)" % (MAX_PEERS - 1)
            parts.append("%s=%s" % (name, what))
        blocks = "block 0 runs it (it reads no program id)" if self.blocks == "one" else "every block runs it"
        return "%s; %s" % (", ".join(parts), blocks)

    def entry(self, kfn):
        """The entry's source: symmem's signature calling kfn (the user's function)."""
        kernel, params = ENTRIES[self.op]
        lines = ["@triton.jit", "def %s(%s):" % (kernel, ", ".join(params))]
        body = self._branches(kfn, 0, {})
        if self.blocks == "one":
            lines.append("    if tl.program_id(0) == 0:")
            lines += ["    " + b for b in body]
            if self.op == "put-signal":
                lines += ["    else:", "        _sym.signal_op(sig, 1, %d, peer)" % SIGNAL_ADD]
        else:
            lines += body
        return "\n".join(lines) + "\n"

    def _branches(self, kfn, depth, fixed):
        ind = "    " * (depth + 1)
        if self.sizes and "size" not in fixed:
            out = []
            for i, s in enumerate(self.sizes):
                out.append("%s%s nbytes == %d:" % (ind, "if" if i == 0 else "elif", s))
                out += self._branches(kfn, depth + 1, dict(fixed, size=s))
            return out
        if self.peers and "peer" not in fixed:
            out = []
            for i, p in enumerate(self.peers):
                out.append("%s%s peer == %d:" % (ind, "if" if i == 0 else "elif", p))
                out += self._branches(kfn, depth + 1, dict(fixed, peer=p))
            return out
        return ["%s%s(%s)" % (ind, kfn, ", ".join(self._arg(a, fixed) for a in self.args))]

    def _arg(self, a, fixed):
        name, role, value, constexpr = a
        size = DTYPES[self.dtype]
        if role is None:
            return repr(value)
        if constexpr:
            return {"nbytes": str(fixed.get("size")), "nelems": str(fixed.get("size", 0) // size),
                    "peer": str(fixed.get("peer")), "signal_val": "1", "sig_op": str(SIGNAL_ADD),
                    "cmp_op": str(CMP_GE)}[role]
        if role in ("dst", "src"):
            if self.address:
                return role + ".to(tl.int64)"
            return role if self.dtype == "int8" else "%s.to(tl.pointer_type(tl.%s))" % (role, self.dtype)
        if role == "sig":
            return "sig.to(tl.int64)" if self.address else "sig"
        return {"nbytes": "nbytes", "nelems": "nbytes // %d" % size if size > 1 else "nbytes", "chunk": "chunk",
                "peer": "peer", "signal_val": "tl.full([], 1, tl.uint64)", "sig_op": "tl.full([], %d, tl.int32)" %
                SIGNAL_ADD, "cmp_op": "tl.full([], %d, tl.int32)" % CMP_GE, "cmp_val": "value"}[role]


def entries_module(kernels, user_module):
    """The source of the module of entries, importing the user's module as user_module."""
    out = ["import triton", "import triton.language as tl", "import nvshmem_torch as _sym",
           "import %s as _user" % user_module, ""]
    for op, k in sorted(kernels.items()):
        kfn = "_k_" + op.replace("-", "_")
        # torch 2.11's @requires_nvshmem wraps the JITFunction (jit_func); symmem's does not.
        out.append("%s = getattr(_user.%s, \"jit_func\", _user.%s)" % (kfn, k.fn.name, k.fn.name))
        out.append("")
        out.append(k.entry(kfn))
    return "\n".join(out)


# What the build does with a plan, on a machine with Triton (the rest of this file needs
# neither torch nor Triton).

def choose_api(used):
    """Whose module the kernels are built against: ("torch", what) where torch is
    installed and its module has every name the file uses, else ("symmem", why).
    SYMMEM_TORCH_API=symmem (or torch) decides instead."""
    import importlib

    force = os.environ.get("SYMMEM_TORCH_API", "")
    if force not in ("", "symmem", "torch"):
        raise Refused("SYMMEM_TORCH_API=%s: use symmem or torch" % force)
    if force == "symmem":
        return "symmem", "symmem's (SYMMEM_TORCH_API=symmem)"
    try:
        mod = importlib.import_module(TORCH_MODULE)
        import torch
    except Exception as e:  # torch absent or broken: its import may raise anything
        if force == "torch":
            raise Refused("SYMMEM_TORCH_API=torch, but %s does not import: %s" % (TORCH_MODULE, e))
        return "symmem", "symmem's (torch's does not import here: %s)" % str(e).splitlines()[0]
    missing = sorted(n for n in used if not hasattr(mod, n))
    if missing and force != "torch":
        return "symmem", "symmem's (torch %s's has no %s)" % (torch.__version__, ", ".join(missing))
    return "torch", "torch %s's" % torch.__version__


def install_api(api):
    """Makes TORCH_MODULE symmem's module (api "symmem"), with empty torch packages
    above it where torch is not installed."""
    import importlib
    import sys
    import types

    if api != "symmem" or getattr(sys.modules.get(TORCH_MODULE), "__name__", "") == "nvshmem_torch":
        return
    import nvshmem_torch

    parts = TORCH_MODULE.split(".")
    try:
        parent = importlib.import_module(".".join(parts[:-1]))
    except Exception:  # torch absent, or hidden behind a package that refuses to import
        parent = None
        for i in range(1, len(parts)):
            name = ".".join(parts[:i])
            m = types.ModuleType(name)
            m.__path__ = []
            sys.modules[name] = m
            if parent is not None:
                setattr(parent, parts[i - 1], m)
            parent = m
    sys.modules[TORCH_MODULE] = nvshmem_torch
    setattr(parent, parts[-1], nvshmem_torch)


def load_entries(user_path, user_module, entries_path, api):
    """The module of entries for a user's file (written by the build as entries_path),
    loaded once per process with the user's module under user_module."""
    import importlib.util
    import sys

    name = os.path.splitext(os.path.basename(entries_path))[0]
    if name in sys.modules:
        return sys.modules[name]
    install_api(api)
    for mod_name, path in ((user_module, user_path), (name, entries_path)):
        spec = importlib.util.spec_from_file_location(mod_name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
