"""How symmem serves a kernel written against PyTorch's NVSHMEM-for-Triton module
(torch.distributed._symmetric_memory._nvshmem_triton), read from the file's syntax alone:
no torch, no Triton (kernels/build-kernels.py --check runs it anywhere).

Such a kernel takes the parameters its author chose (put_kernel(dst_ptr, src_ptr, numel:
tl.constexpr, peer: tl.constexpr, BLOCK_SIZE: tl.constexpr), my_put_kernel(dest, src,
nelems, pe)) and runs on the grid its author launched (the torch tests launch one block).
symmem launches its own signatures (put_block(dst, src, nbytes, chunk, peer) on
ceil(nbytes / chunk) blocks), so the build compiles, for each kernel, an entry of
symmem's signature that calls the user's function, unchanged, with each parameter given
what it means:
- a kernel's operation is what it calls (nvshmem.put: put; get, or get_nbi then quiet:
  get; putmem_signal_block: put-signal; signal_op alone: signal; puts, a fence or quiet,
  then a flag's put: put-flag of that variant, wait_until alone its receiver;
  barrier_all alone: barrier-all; alltoall, broadcast, reduce: symmem's all-to-all,
  broadcast and all-reduce on team world, a reduce once per operator), never its name;
- a parameter means what the kernel passes it as (the third argument of nvshmem.put is
  an element count, the last a rank), else what its name says (KNOWN), else what the
  declaration file beside the source says (FILE.symmem.json: {"put_kernel": {"op":
  "put", "params": {"n": "nbytes", "BLOCK": 1024}, "dtype": "int64", "blocks": "one"}});
- a parameter the body never reads is given 0 (any value would do), and says so;
- a tl.constexpr the body reads and symmem gives no meaning is set with --const
  NAME=V[,V...]: the kernel is built once per value, each a variant of its own
  implementation, NAME[nbi=1];
- a tl.constexpr size or rank is specialised at build time: the entry branches on the
  size (for each size built) and on the peer (each rank up to MAX_PEERS) to a copy of
  the kernel with those values;
- a kernel that never reads its program id was written for one block: only block 0
  runs it (other blocks would repeat the whole message); a put-signal's other blocks
  send its signal alone, so that the receiver's count of one signal per block is met
  once block 0's data and signal have landed; a signal op's kernel runs on thread 0
  alone (each NVSHMEM call of a Triton kernel is every thread's); NVSHMEM's collectives
  and barriers are launched one block, cooperatively, as torch launches them;
- addresses go to torch 2.8's calls (putmem_block, getmem_block) as int64, as torch's
  tests pass them; typed pointers (of "dtype", int8 by default) to torch 2.11's.
Kernels symmem does not serve are listed with the reason: those whose variant symmem's
user kernels do not have yet (PENDING: sync_all alone), those with no data to check
(fence alone), and those that carry a test's own logic around a barrier.
"""

import ast
import itertools
import json
import os
import re

# The module's name as kernels import it.
TORCH_MODULE = "torch.distributed._symmetric_memory._nvshmem_triton"

# The names symmem's module (nvshmem_torch.py) provides; a test keeps them equal.
API = ("putmem_block", "getmem_block", "getmem_nbi_block", "putmem_signal_block", "alltoallmem_block",
       "broadcastmem_block", "put", "get", "get_nbi", "alltoall", "broadcast", "reduce", "wait_until",
       "signal_wait_until", "signal_op", "fence", "quiet", "my_pe", "n_pes", "barrier_all", "sync_all",
       "enable_triton", "requires_nvshmem", "NvshmemLibFinder", "CMP_EQ", "CMP_NE", "CMP_GT", "CMP_LE", "CMP_LT",
       "CMP_GE", "SIGNAL_SET", "SIGNAL_ADD")
ADDRESS_CALLS = ("putmem_block", "getmem_block", "getmem_nbi_block", "alltoallmem_block", "broadcastmem_block")

# The module's calls that reach a one-thread NVSHMEM collective (reduce is
# nvshmem_TYPE_OP_reduce in torch's module and in symmem's): called by every thread of
# a block, they would be as many collectives racing on one team's scratch. The entry
# calls the user's kernel from thread 0 alone, in a one-warp block.
THREAD_CALLS = ("reduce",)

# What each argument of the module's device functions means: a kernel's parameter passed
# there straight means the same.
CALL_ROLES = {
    "put": ("dst", "src", "nelems", "peer"), "get": ("dst", "src", "nelems", "peer"),
    "get_nbi": ("dst", "src", "nelems", "peer"),
    "putmem_block": ("dst", "src", "nbytes", "peer"), "getmem_block": ("dst", "src", "nbytes", "peer"),
    "getmem_nbi_block": ("dst", "src", "nbytes", "peer"),
    "putmem_signal_block": ("dst", "src", "nbytes", "sig", "signal_val", "sig_op", "peer"),
    "signal_wait_until": ("sig", "cmp_op", "cmp_val"),
    "signal_op": ("sig", "signal_val", "sig_op", "peer"),
    "wait_until": ("sig", "cmp_op", "cmp_val"),
    "alltoall": ("team", "dst", "src", "nelems"), "alltoallmem_block": ("team", "dst", "src", "nbytes"),
    "broadcast": ("team", "dst", "src", "nelems", "root"),
    "broadcastmem_block": ("team", "dst", "src", "nbytes", "root"),
    "reduce": ("team", "dst", "src", "nelems", "redop"),
}

# What a parameter's name means to symmem, where the kernel's calls do not say.
KNOWN = {
    "dst": ("dst", "dst_ptr", "dest", "dest_ptr", "destination", "out", "out_ptr"),
    "src": ("src", "src_ptr", "source", "source_ptr", "inp", "inp_ptr"),
    "nbytes": ("nbytes", "size_bytes", "msg_size_bytes", "num_bytes"),
    "nelems": ("numel", "nelems", "nelem", "n_elements", "nreduce", "nelems_per_pe"),
    "chunk": ("chunk", "chunk_bytes"),
    "peer": ("peer", "pe", "target_pe", "remote_pe", "peer_pe"),
    "sig": ("sig", "sig_ptr", "sig_addr", "signal", "signal_ptr", "flag", "flag_ptr"),
    "signal_val": ("signal_val", "sig_val", "signal_value"),
    "sig_op": ("sig_op", "signal_op"),
    "cmp_op": ("cmp_op", "cmp"),
    "cmp_val": ("cmp_val", "value"),
    "team": ("team", "team_handle"),
    "root": ("root", "pe_root"),
    "redop": ("operation", "op", "redop"),
}
MEANING = {n: role for role, names in KNOWN.items() for n in names}
_COLL = ("team", "dst", "src", "nelems", "nbytes")
# The meanings each operation's entry can give.
ROLES = {
    "put": ("dst", "src", "nbytes", "nelems", "chunk", "peer"),
    "get": ("dst", "src", "nbytes", "nelems", "chunk", "peer"),
    "put-signal": ("dst", "src", "nbytes", "nelems", "chunk", "peer", "sig", "signal_val", "sig_op"),
    "wait-signal": ("sig", "cmp_op", "cmp_val"),
    "signal": ("sig", "signal_val", "sig_op", "peer"),
    "put-flag": ("dst", "src", "nbytes", "nelems", "peer", "flag", "flag_src"),
    "put-flag:quiet": ("dst", "src", "nbytes", "nelems", "peer", "flag", "flag_src"),
    "wait-flag": ("sig", "cmp_op", "cmp_val"),
    "barrier": (),
    "all-to-all": _COLL,
    "broadcast": _COLL + ("root",),
}
# NVSHMEM's reduce operators that are symmem's too (--redop), and the keys of the
# all-reduce kernels of each, per element type (symmem's table: pkg/kernels): a reduce
# with a tl.constexpr operator is built once per operator, a kernel each, and run
# picks the one --redop asks for.
REDOPS = ("sum", "max", "min", "prod")


def reduce_key(red, float32=False):
    return "all-reduce" + (":float32" if float32 else "") + ("" if red == "sum" else ":" + red)


REDUCE_KEYS = {reduce_key(red, f): red for red in REDOPS for f in (False, True)}
ROLES.update({key: _COLL + ("redop",) for key in REDUCE_KEYS})
# The entries' kernels and signatures, by the key of the operation each serves: symmem's
# table (pkg/kernels), as the build hands it over (use_signatures), for the keys ROLES has.
ENTRIES = {}


def use_signatures(kernels):
    """Takes the entries' signatures from symmem's table: {key: (kernel, {param: type})}."""
    ENTRIES.clear()
    ENTRIES.update({key: (k, tuple(params)) for key, (k, params) in kernels.items() if key in ROLES})
    missing = sorted(set(ROLES) - set(ENTRIES))
    if missing:
        raise Refused("symmem's table of kernels has no %s: this build script is not the one its symmem carries" % (
            ", ".join(missing)))
COLLECTIVES = ("all-to-all", "broadcast") + tuple(REDUCE_KEYS)
# The element type a collective's entry hands the kernel (the user's collective
# signatures: the reducing ones one per type, the others bytes).
COLL_DTYPE = dict({"all-to-all": "int8", "broadcast": "int8"},
                  **{key: "fp32" if ":float32" in key else "bf16" for key in REDUCE_KEYS})
# What symmem's entries pass where the kernel's parameters have a meaning only they give.
TEAM_WORLD = 0  # NVSHMEM_TEAM_WORLD
# Operations a kernel's calls ask for that symmem's user kernels do not serve yet: what
# a kernel of each would be run as.
PENDING = {
    "barrier:sync-all": "symmem's barrier op, variant sync-all (every rank's stamp stored in its own slots before "
                        "sync_all and fetched from each rank after it)",
}
# What the entry of an operation passes, at run time, where the kernel's parameter has a
# meaning that other operations fix: the signal op's value and operator are symmem's
# (each round sets or adds), put-signal's are 1 and SIGNAL_ADD.
RUNTIME = {"signal": {"signal_val": "value", "sig_op": "op"}}
# The barrier entry around the user's barrier_all (symmem's own barrier_all kernel's
# contract, kernels/triton/symmem_sync.py): bit 0 of meet stores this rank's stamp
# (ops.MeetStamp) in its word (ops.MeetSlot) and puts it into every other rank's
# slots; bit 1 runs the kernel (whose barrier_all completes the puts and meets every
# rank); then the stamps of this round not in this rank's slots are counted into wrong.
BARRIER_ENTRY = ([
    "    base = ((rnd % 2) * n).to(tl.int64)",
    "    mine = slots + base + me",
    "    if (meet & 1) != 0:",
    "        tl.store(mine, (rnd << 16) | (me + 1).to(tl.uint64))",
    "        tl.debug_barrier()",
    "        for p in range(n):",
    "            if p != me:",
    "                _sym.putmem_block(mine.to(tl.int64), mine.to(tl.int64), 8, p)",
    "    if (meet & 2) != 0:",
], [
    "    bad = tl.full([], 0, tl.uint64)",
    "    for p in range(n):",
    "        got = tl.load(slots + base + p, volatile=True)",
    "        bad += (got != ((rnd << 16) | (p + 1).to(tl.uint64))).to(tl.uint64)",
    "    tl.atomic_add(wrong, bad)",
])
# put-flag's variants by the ordering before the flag, and the element type of a flag
# on typed pointers (torch 2.11's tests wait on int32 flags; symmem's flag word is a
# u64, which a 4-byte flag fills the low half of).
FLAG_KEYS = {"fence": "put-flag", "quiet": "put-flag:quiet"}
FLAG_DTYPE = "int32"
MAX_PEERS = 8  # ranks a tl.constexpr peer is specialised for
DEFAULT_SIZES = (8,)  # run's default message (8 int8 elements)
DTYPES = {"int8": 1, "uint8": 1, "int16": 2, "fp16": 2, "bf16": 2, "int32": 4, "fp32": 4, "int64": 8, "fp64": 8}
SIGNAL_ADD, CMP_GE = 10, 5  # NVSHMEM 3.x's values

PUTS = ("put", "putmem_block")
GETS = ("get", "get_nbi", "getmem_block", "getmem_nbi_block")
COLL_CALLS = {"alltoall": "all-to-all", "alltoallmem_block": "all-to-all", "broadcast": "broadcast",
              "broadcastmem_block": "broadcast", "reduce": "all-reduce"}
BARRIERS = ("barrier_all", "sync_all")
# What a value given with --const may be: it names the variant (NAME[nbi=1]).
CONST_VALUE = re.compile(r"[A-Za-z0-9_.+-]{1,32}")


class Refused(Exception):
    """A kernel that cannot be served as asked; the message names what and what to do."""


class ConstRefused(Refused):
    """A --const the kernel cannot take: refused even for a kernel found by its calls."""


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
        # What the body reads (a parameter it never reads may be given anything), and
        # what its calls say each parameter is: {param: {role}}; helpers' calls count
        # through the arguments the kernel passes them (inherit).
        self.reads, self.used_as, self.helper_args = set(), {}, []
        # The operators its reduce calls pass as literals ("max"): none, any it is given.
        self.redops = set()
        # Its own calls of the module in the order the source has them: (name, args).
        self.sequence = []
        for stmt in node.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    self.reads.add(n.id)
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f, call = n.func, None
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases:
                    call = f.attr
                elif isinstance(f, ast.Name) and f.id in names:
                    call = f.id
                elif isinstance(f, ast.Name):
                    self.callees.add(f.id)
                    self.helper_args.append((f.id, n.args))
                if call is not None:
                    self.calls.append(call)
                    self.sequence.append((n.lineno, n.col_offset, call, n.args))
                    if call == "reduce" and len(n.args) >= 5 and isinstance(n.args[4], ast.Constant):
                        self.redops.add(n.args[4].value)
                    for arg, role in zip(n.args, CALL_ROLES.get(call, ())):
                        if isinstance(arg, ast.Name):
                            self.used_as.setdefault(arg.id, set()).add(role)
            if isinstance(n, ast.Attribute) and n.attr in ("program_id", "num_programs"):
                self.reads_program_id = True
        self.sequence = [c[2:] for c in sorted(self.sequence, key=lambda c: c[:2])]
        self.flag = self.flag_plan()

    def flag_plan(self):
        """What a put-flag kernel's calls make of its parameters: puts of data, an
        ordering (fence or quiet: the last one is the variant's), then one put of the
        flag. A dict: "variant", "parts" (the data puts' (dst, src) parameters, a part of
        the message each), "roles" ({param: role}), "flag_count" (the flag put's literal
        count), "address"; or {"why": ...} where the calls do not say that."""
        seq = [(c, args) for c, args in self.sequence if c in PUTS + ("fence", "quiet")]
        orders = [i for i, (c, _) in enumerate(seq) if c in ("fence", "quiet")]
        if not orders:
            return {"why": "it calls no nvshmem.fence or nvshmem.quiet"}
        last = orders[-1]
        data = [args for c, args in seq[:last] if c in PUTS]
        after = [args for c, args in seq[last + 1:]]
        if not data or len(after) != 1:
            return {"why": "it does not put data, order it by a fence or a quiet, then put one flag"}
        names = lambda args: [a.id if isinstance(a, ast.Name) else None for a in args]  # noqa: E731
        parts, roles = [], {}
        count = "nbytes" if any(c == "putmem_block" for c, _ in seq) else "nelems"
        for args in data:
            d, src, n, pe = (names(args) + [None] * 4)[:4]
            if None in (d, src, n, pe):
                return {"why": "its data puts must pass parameters, not expressions, as (dst, src, count, pe)"}
            if (d, src) not in parts:
                parts.append((d, src))
            roles.update({d: "dst", src: "src", n: count, pe: "peer"})
        fargs = after[0]
        fd, fs, _, fpe = (names(fargs) + [None] * 4)[:4]
        lit = fargs[2] if len(fargs) > 2 and isinstance(fargs[2], ast.Constant) else None
        if None in (fd, fs, fpe) or lit is None or not isinstance(lit.value, int):
            return {"why": "its flag put must pass parameters and a literal count, as put(flag_dst, flag_src, 1, pe)"}
        roles.update({fd: "flag", fs: "flag_src", fpe: "peer"})
        return {"variant": seq[last][0], "parts": parts, "roles": roles, "flag_count": lit.value,
                "address": count == "nbytes"}

    def inherit(self, funcs, seen=()):
        """Adds to this function's calls those of the file's jit functions it calls
        (helpers), their reading of the program id, and what their calls make of the
        arguments this function passes them."""
        for name in sorted(self.callees & set(funcs) - set(seen) - {self.name}):
            h = funcs[name]
            h.inherit(funcs, tuple(seen) + (self.name,))
            self.calls += h.calls
            self.reads_program_id |= h.reads_program_id
            self.redops |= h.redops
        for name, args in self.helper_args:
            if name not in funcs or name in seen or name == self.name:
                continue
            h = funcs[name]
            for arg, (param, _, _) in zip(args, h.params):
                if isinstance(arg, ast.Name):
                    for role in h.used_as.get(param, ()):
                        self.used_as.setdefault(arg.id, set()).add(role)

    def signature(self):
        return "%s(%s)" % (self.name, ", ".join(n + (": tl.constexpr" if c else "") for n, c, _ in self.params))

    def classify(self):
        """(ops, None) for a kernel symmem serves or would serve (ops: the operations, most
        one; a reduce serves all-reduce of both element types, with each operator it may
        be given, REDUCE_KEYS), (None, why) for one it
        does not, and (None, None) for a function that calls no NVSHMEM data movement,
        signal, wait or barrier (a helper)."""
        calls = set(self.calls)
        puts = [c for c in self.calls if c in PUTS]
        bars = sorted(calls & set(BARRIERS))
        if bars:
            if calls <= set(BARRIERS):
                return ["barrier" if "barrier_all" in calls else "barrier:sync-all"], None
            return None, ("it carries a test's own logic around nvshmem.%s (it also calls %s): no operation of "
                          "symmem's runs it, and its data is the test's to check" % (
                              bars[0], ", ".join("nvshmem." + c for c in sorted(calls - set(BARRIERS)))))
        coll = sorted(set(COLL_CALLS[c] for c in calls if c in COLL_CALLS))
        if coll:
            if len(coll) > 1 or calls - set(COLL_CALLS):
                return None, "it calls %s: symmem serves one collective of NVSHMEM's per kernel, alone" % (
                    ", ".join("nvshmem." + c for c in sorted(calls)))
            if coll[0] != "all-reduce":
                return coll, None
            bad = sorted(self.redops - set(REDOPS))
            if bad:
                return None, "it reduces with %r, which is no operator of NVSHMEM's reduce that symmem has (%s)" % (
                    bad[0], ", ".join(REDOPS))
            return [key for key, red in REDUCE_KEYS.items() if not self.redops or red in self.redops], None
        if calls & {"fence", "quiet"}:
            if len(puts) >= 2 and calls <= set(PUTS) | {"fence", "quiet"}:
                if "why" in self.flag:
                    return None, "it would serve put-flag, but %s" % self.flag["why"]
                flag_bytes = self.flag["flag_count"] * (1 if self.flag["address"] else DTYPES[FLAG_DTYPE])
                if flag_bytes not in (4, 8):
                    return None, ("it would serve put-flag, but its flag put moves %d bytes: symmem's flags count past "
                                  "255, in a 4- or 8-byte word" % flag_bytes)
                return [FLAG_KEYS[self.flag["variant"]]], None
            if not calls - {"fence", "quiet"}:
                return None, ("it calls nvshmem.%s alone: it orders nothing whose data symmem could check "
                              "(put-flag measures puts ordered by it)" % sorted(calls)[0])
        if calls == {"signal_op"}:
            return ["signal"], None
        if calls == {"wait_until"}:
            return ["wait-flag"], None  # the receiver's wait on put-flag's flag
        ops = []
        for op, members in (("put", PUTS), ("get", GETS), ("put-signal", ("putmem_signal_block",)),
                            ("wait-signal", ("signal_wait_until",))):
            if calls & set(members):
                ops.append(op)
        if "put-signal" in ops and "wait-signal" not in ops:
            ops = ["put-signal"]
        if len(ops) > 1:
            return None, "it calls %s: both a %s and a %s; symmem serves one operation per kernel" % (
                ", ".join("nvshmem." + c for c in sorted(calls)), ops[0], ops[1])
        if not ops:
            if calls - {"my_pe", "n_pes", "quiet", "fence"}:
                return None, "it calls %s, which no operation of symmem's runs alone" % (
                    ", ".join("nvshmem." + c for c in sorted(calls)))
            return None, None
        return ops, None


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


def parse_consts(consts):
    """--const NAME=V[,V...] (repeatable) as {NAME: [(text, value)]}: each value as
    Python reads a literal (0, 1, True, 1.5), else the text itself (a string)."""
    out = {}
    for c in consts or ():
        name, eq, values = c.partition("=")
        if not eq or not name.isidentifier() or not values:
            raise Refused("--const %s: want NAME=VALUE[,VALUE...], as --const nbi=0,1" % c)
        parsed = []
        for v in values.split(","):
            if not CONST_VALUE.fullmatch(v):
                raise Refused("--const %s: value %r: use letters, digits and _.+- (32 at most): it names the "
                              "variant (IMPL[%s=VALUE])" % (c, v, name))
            try:
                parsed.append((v, ast.literal_eval(v)))
            except (ValueError, SyntaxError):
                parsed.append((v, v))
        out[name] = parsed
    return out


def known_names(op):
    return ", ".join("%s (%s)" % (role, "/".join(KNOWN[role])) for role in ROLES[op])


def role_of(fn, name, op):
    """What parameter name of fn means for op: what the kernel's calls pass it as (for
    put-flag, in their order: the data, then the flag), else what its name says; None
    where neither gives a meaning op has."""
    if op in FLAG_KEYS.values():
        return fn.flag.get("roles", {}).get(name)
    used = [r for r in sorted(fn.used_as.get(name, ())) if r in ROLES[op]]
    if len(used) == 1:
        return used[0]
    role = MEANING.get(name)
    return role if role in ROLES[op] else None


def bind(fn, op, spec, decl, sizes, consts):
    """What the entry passes each of fn's parameters: [(param, role, value, constexpr,
    how)] with role one of ROLES[op], or None for a value (the declaration's, the
    default, --const's, or 0 for a parameter the body never reads: how says which),
    refusing a parameter it cannot give anything."""
    out, given = [], spec.get("params", {})
    where = "%s (for %s)" % (fn.name, op)
    if fn.odd:
        raise Refused("%s takes *args, **kwargs or keyword-only parameters; symmem passes positional ones" % where)
    for name, constexpr, default in fn.params:
        g = given.get(name)
        if isinstance(g, str) and g in REDOPS and "redop" in fn.used_as.get(name, ()):
            out.append((name, None, g, constexpr, "declared"))  # the reduce's operator (plan took it)
            continue
        if isinstance(g, str) and g not in ROLES[op]:
            raise Refused("%s: parameter %r is given %r in %s, which %s has not: give one of %s" % (
                where, name, g, os.path.basename(decl), op, ", ".join(ROLES[op])))
        role = g if isinstance(g, str) else None if name in given else role_of(fn, name, op)
        if role is not None and name in consts:
            raise ConstRefused("%s: --const %s: symmem gives parameter %r its meaning (%s): drop --const %s" % (
                where, name, name, role, name))
        if role is None:
            how = "declared" if name in given else "default"
            value = g if name in given else default
            if name in consts:
                value, how = consts[name], "const"
            elif value is None and name not in fn.reads:
                value, how = 0, "unread"
            if value is None:
                hint = ("set it with --const %s=VALUE[,VALUE...] (a build each) or " % name) if constexpr else ""
                raise Refused("%s: parameter %r means nothing symmem knows: %sname it one of %s, or give it a meaning "
                              "or a value in %s ({\"%s\": {\"params\": {\"%s\": %s}}})" % (
                                  where, name, hint, known_names(op), os.path.basename(decl), fn.name, name,
                                  "VALUE" if constexpr else "\"nbytes\""))
            if not constexpr and not isinstance(value, (bool, int, float)):
                raise Refused("%s: parameter %r: the value %r is not a number" % (where, name, value))
            out.append((name, None, value, constexpr, how))
            continue
        if constexpr and (role not in ("nbytes", "nelems", "peer", "signal_val", "sig_op", "cmp_op", "team", "redop")
                          or role in RUNTIME.get(op, {})):
            raise Refused("%s: parameter %r is a tl.constexpr, but symmem passes %s at run time: drop tl.constexpr, "
                          "or give it a value in %s" % (where, name, role, os.path.basename(decl)))
        if op in COLLECTIVES and constexpr and role in ("nbytes", "nelems"):
            raise Refused("%s: parameter %r is a tl.constexpr, but symmem passes a collective's size at run time: "
                          "drop tl.constexpr" % (where, name))
        if role == "redop" and not constexpr:
            raise Refused("%s: parameter %r is the reduction's operator, which NVSHMEM's reduce takes as a "
                          "tl.constexpr: annotate it %s: tl.constexpr" % (where, name, name))
        out.append((name, role, None, constexpr, "role"))
    dtype = dtype_of(op, spec)
    for name, role, _, constexpr, _ in out:
        if constexpr and role in ("nbytes", "nelems"):
            bad = [s for s in sizes if s % DTYPES[dtype]]
            if bad:
                raise Refused("%s: --sizes %d is not a whole number of %s elements" % (where, bad[0], dtype))
    return out


def dtype_of(op, spec):
    return COLL_DTYPE.get(op) or spec.get("dtype", "int8")


def plan(tree, path, declared, ops, sizes, consts=()):
    """([Kernel], [(function, why)]) for a file written for torch's module: the kernels
    symmem builds (one per operation and --const variant) and those it does not serve.
    declared is SYMMEM_KERNELS, ops the --kernel OP=FN, consts --const NAME=V[,V...]."""
    aliases, names = torch_imports(tree)
    consts = parse_consts(consts)
    funcs = {n.name: Function(n, aliases, names) for n in tree.body if isinstance(n, ast.FunctionDef)
             and any("jit" in ast.unparse(d) for d in n.decorator_list)}
    for fn in funcs.values():
        fn.inherit(funcs)
    helpers = set().union(*(fn.callees for fn in funcs.values())) & set(funcs)
    decl, decl_path = declarations(path)
    for name, spec in decl.items():
        # A reduce's operator given a value in the declaration file: that one alone.
        for param, value in spec.get("params", {}).items():
            if name in funcs and isinstance(value, str) and "redop" in funcs[name].used_as.get(param, ()):
                funcs[name].redops.add(value)
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
        serves, why = fn.classify()
        if fn.name in chosen.values() or fn.name in helpers:
            continue  # chosen, or called by the kernels: not a kernel of its own
        if why:
            skipped.append((fn.name, why))
        elif serves and serves[0] in PENDING:
            skipped.append((fn.name, "it would serve %s: %s, which symmem's user kernels do not serve yet" % (
                serves[0], PENDING[serves[0]])))
        elif serves:
            for op in serves:
                found.setdefault(op, []).append(fn.name)
    auto = set()
    for op, fns in found.items():
        if op in chosen:
            continue
        if len(fns) > 1:
            raise Refused("%s: %s all serve %s: say which with --kernel %s=%s (or \"op\" in %s)" % (
                path, ", ".join(fns), op, op, fns[0], os.path.basename(decl_path)))
        chosen[op] = fns[0]
        auto.add(op)
    kernels, first_refusal = [], None
    for op, name in sorted(chosen.items()):
        if op not in ENTRIES:
            raise Refused("%s: %s: a kernel of torch's module serves %s, not %s" % (path, name, ", ".join(ENTRIES), op))
        if name not in funcs:
            raise Refused("%s: no function %r for %s (module-level @triton.jit functions: %s)" % (
                path, name, op, ", ".join(sorted(funcs)) or "none"))
        fn, spec = funcs[name], decl.get(name, {})
        serves, why = fn.classify()
        if why:
            raise Refused("%s: %s cannot serve %s: %s" % (path, name, op, why))
        if serves and op not in serves:
            raise Refused("%s: %s cannot serve %s: it calls %s, so it serves %s" % (
                path, name, op, ", ".join("nvshmem." + c for c in sorted(set(fn.calls))), serves[0]))
        mine = {n: consts[n] for n, _, _ in fn.params if n in consts}
        try:
            for combo in itertools.product(*mine.values()):
                kernels.append(Kernel(fn, op, spec, decl_path, sizes, dict(zip(mine, combo))))
        except Refused as e:
            if op not in auto or isinstance(e, ConstRefused):
                raise
            # Found by its calls, not asked for: listed with the reason, the rest built.
            if (name, str(e)) not in skipped:
                skipped.append((name, str(e)))
            first_refusal = first_refusal or e
    used = set(n for k in kernels for n in k.consts)
    for c in consts:
        if c not in used:
            raise Refused("%s: --const %s: no kernel symmem builds from it reads a parameter %s" % (path, c, c))
    if not kernels:
        if first_refusal is not None and len(skipped) == 1:
            raise Refused(str(first_refusal))
        raise Refused("%s: no kernel symmem serves (%s); symmem serves put, get, put-signal, wait-signal, signal, "
                      "put-flag, wait-flag, barrier, all-to-all, broadcast and all-reduce kernels of torch's module" % (
                          path, "; ".join("%s: %s" % s for s in skipped) or "no @triton.jit function calls nvshmem "
                          "put, get, putmem_signal_block, signal_wait_until, signal_op, wait_until, barrier_all, "
                          "alltoall, broadcast or reduce"))
    return kernels, skipped


class Kernel:
    """One user kernel as the entry of op calls it, with the values of its --const
    parameters (consts: {name: (text, value)}; a variant of its own where there are any)."""

    def __init__(self, fn, op, spec, decl, sizes, consts):
        self.fn, self.op, self.dtype = fn, op, dtype_of(op, spec)
        self.consts = consts
        self.args = bind(fn, op, spec, decl, sizes, {n: v for n, (_, v) in consts.items()})
        self.blocks = "one" if op in COLLECTIVES else spec.get("blocks", "grid" if fn.reads_program_id else "one")
        self.address = any(c in ADDRESS_CALLS for c in fn.calls)
        self.one_thread = any(c in THREAD_CALLS for c in fn.calls)
        const = {role for _, role, _, c, _ in self.args if c}
        self.sizes = sorted(sizes) if const & {"nbytes", "nelems"} else []
        self.peers = list(range(MAX_PEERS)) if "peer" in const else []
        self.variant = "".join("[%s=%s]" % (n, t) for n, (t, _) in sorted(consts.items()))
        self.kernel = ENTRIES[op][0]
        suffix = "".join("_%s_%s" % (n, re.sub(r"[^A-Za-z0-9_]", "_", t)) for n, (t, _) in sorted(consts.items()))
        self.entry_name = self.kernel + suffix
        # put-flag: the data puts' parts of the message (a part each, one count), the
        # flag's type, and the unit every message is a whole number of.
        self.parts, self.unit, self.flag_type = {}, 0, None
        if op in FLAG_KEYS.values():
            for i, (d, src) in enumerate(fn.flag["parts"]):
                self.parts[d] = self.parts[src] = i
            self.nparts = len(fn.flag["parts"])
            self.unit = self.nparts * DTYPES[self.dtype]
            flag_bytes = fn.flag["flag_count"] * (1 if self.address else DTYPES[FLAG_DTYPE])
            self.flag_type = "int32" if flag_bytes == 4 else "int64"
        if op == "wait-flag":
            self.flag_type = "int64" if self.address else FLAG_DTYPE
        # NVSHMEM's collectives and barriers: one block, every block of a grid
        # co-resident, as torch's tests launch them (launch_cooperative_grid=True).
        self.cooperative = op in COLLECTIVES or op == "barrier"

    def describe(self):
        """How the entry calls the kernel, for --check and the sidecar."""
        parts = []
        coll = self.op in COLLECTIVES
        for name, role, value, constexpr, how in self.args:
            if role is None:
                note = {"unread": " (the body never reads it: any value)", "const": " (--const)"}.get(how, "")
                parts.append("%s=%r%s" % (name, value, note))
                continue
            what = role
            if coll and role in ("dst", "src"):
                what = "%s (*%s)" % ("recv" if role == "dst" else "send", self.dtype)
                if self.address:
                    what = "%s (address)" % ("recv" if role == "dst" else "send")
            elif role in ("flag", "flag_src") or role == "sig" and self.flag_type:
                what = "%s (%s)" % ("flag_src" if role == "flag_src" else "flag",
                                    "address" if self.address else "*" + self.flag_type)
            elif role in ("dst", "src", "sig") and self.address or role == "sig" and self.op == "signal":
                what += " (address)"
            elif role in ("dst", "src"):
                what += " (*%s)" % self.dtype
            if role in ("dst", "src") and self.parts and self.nparts > 1:
                what += ", part %d of %d" % (self.parts[name] + 1, self.nparts)
            elif coll and role in ("nelems", "nbytes"):
                what = "nelem"
            elif role == "nelems":
                per = DTYPES[self.dtype] * (self.nparts if self.parts else 1)
                what = "nbytes" if per == 1 else "nbytes / %d" % per
            elif role == "nbytes" and self.parts and self.nparts > 1:
                what = "nbytes / %d" % self.nparts
            elif role in RUNTIME.get(self.op, {}):
                what = RUNTIME[self.op][role]
            elif role == "signal_val":
                what = "1"
            elif role == "sig_op":
                what = "SIGNAL_ADD"
            elif role == "cmp_op":
                what = "CMP_GE"
            elif role == "cmp_val":
                what = "value" if not self.flag_type else "value (%s)" % self.flag_type
            elif role == "team":
                what = "team world (%d)" % TEAM_WORLD
            elif role == "redop":
                what = "%r (--redop %s)" % (REDUCE_KEYS[self.op], REDUCE_KEYS[self.op])
            if constexpr and role in ("nbytes", "nelems"):
                what += " (tl.constexpr: sizes %s)" % ",".join(map(str, self.sizes))
            elif constexpr and role == "peer":
                what += " (tl.constexpr: ranks 0..%d)" % (MAX_PEERS - 1)
            parts.append("%s=%s" % (name, what))
        blocks = "block 0 runs it (it reads no program id)" if self.blocks == "one" else "every block runs it"
        if self.parts:
            blocks = "block 0 runs it, value stored in flag_src first"
            if self.unit > 1:
                blocks += "; each message a whole number of %d bytes" % self.unit
        if self.op == "signal":
            blocks = "thread 0 of block 0 runs it (each signal op lands once), then a fence"
        if self.op == "barrier":
            blocks = ("one block runs it, launched cooperatively, between this rank's stamp put to every rank and the "
                      "count of the stamps it sees")
        if coll:
            blocks = "one block runs it on team world, launched cooperatively as PyTorch launches NVSHMEM's collectives"
        if coll and self.one_thread:
            blocks = ("thread 0 of one block runs it on team world (nvshmem.reduce is a one-thread collective), "
                      "launched cooperatively as PyTorch launches NVSHMEM's collectives")
        return "; ".join(x for x in (", ".join(parts), blocks) if x)

    def entry(self, kfn):
        """The entry's source: symmem's signature calling kfn (the user's function)."""
        _, params = ENTRIES[self.op]
        lines = ["@triton.jit", "def %s(%s):" % (self.entry_name, ", ".join(params))]
        body = self._branches(kfn, 0, {})
        if self.one_thread:
            # A Triton kernel's NVSHMEM call runs once per thread: a one-thread collective
            # must be called once per rank.
            body = ["    if _thread() == 0:"] + ["    " + b for b in body]
        if self.op == "signal":
            # A Triton kernel's NVSHMEM call runs once per thread: an add must land once.
            body = ["    if _thread() == 0:"] + ["    " + b for b in body] + ["    _sym.fence()"]
        if self.op == "barrier":
            body = BARRIER_ENTRY[0] + ["    " + b for b in body] + BARRIER_ENTRY[1]
        if self.parts:
            # The flag's source: value, stored before any thread puts it.
            body = ["    tl.store(flag_src.to(tl.pointer_type(tl.%s)), value.to(tl.%s))" % (self.flag_type, self.flag_type),
                    "    tl.debug_barrier()"] + body
        if self.blocks == "one":
            lines.append("    if tl.program_id(0) == 0:")
            lines += ["    " + b for b in body]
            if self.op == "put-signal":
                # The other blocks' signals, one each (thread 0's).
                lines += ["    elif _thread() == 0:", "        _sym.signal_op(sig, 1, %d, peer)" % SIGNAL_ADD]
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
        name, role, value, constexpr, _ = a
        size = DTYPES[self.dtype]
        if role is None:
            return repr(value)
        if role == "team":
            return str(TEAM_WORLD) if constexpr else "tl.full([], %d, tl.int32)" % TEAM_WORLD
        if role == "redop":
            return repr(REDUCE_KEYS[self.op])
        if self.op in COLLECTIVES:
            if role in ("dst", "src"):
                buf = "recv" if role == "dst" else "send"
                return buf + ".to(tl.int64)" if self.address else buf
            return {"nelems": "nelem", "nbytes": "nelem", "root": "root"}[role]
        per = self.nparts if self.parts else 1  # put-flag: the data puts share the message
        if constexpr:
            return {"nbytes": str(fixed.get("size", 0) // per), "nelems": str(fixed.get("size", 0) // (size * per)),
                    "peer": str(fixed.get("peer")), "signal_val": "1", "sig_op": str(SIGNAL_ADD),
                    "cmp_op": str(CMP_GE)}[role]
        if role in ("dst", "src"):
            if self.address:
                ptr = role + ".to(tl.int64)"
            else:
                ptr = role if self.dtype == "int8" else "%s.to(tl.pointer_type(tl.%s))" % (role, self.dtype)
            part = self.parts.get(name, 0)
            if part:
                ptr = "(%s + %d * (nbytes // %d)%s)" % (ptr, part, per, "" if self.address else " // %d" % size)
            return ptr
        if role in ("flag", "flag_src") or role == "sig" and self.flag_type:
            word = "flag_src" if role == "flag_src" else "flag"
            return word + (".to(tl.int64)" if self.address else ".to(tl.pointer_type(tl.%s))" % self.flag_type)
        if role == "cmp_val" and self.flag_type:
            return "value.to(tl.%s)" % self.flag_type
        if role == "sig":
            # torch's signal_op takes the word's address (int64) and an int64 value, its
            # types matched as they are (symmem's converts whatever it is given).
            return "sig.to(tl.int64)" if self.address or self.op == "signal" else "sig"
        if role == "signal_val" and self.op == "signal":
            return RUNTIME[self.op][role] + ".to(tl.int64)"
        if role in RUNTIME.get(self.op, {}):
            return RUNTIME[self.op][role]
        if role in ("nbytes", "nelems") and per > 1:
            return "nbytes // %d" % (per * (size if role == "nelems" else 1))
        return {"nbytes": "nbytes", "nelems": "nbytes // %d" % size if size > 1 else "nbytes", "chunk": "chunk",
                "peer": "peer", "signal_val": "tl.full([], 1, tl.uint64)", "sig_op": "tl.full([], %d, tl.int32)" %
                SIGNAL_ADD, "cmp_op": "tl.full([], %d, tl.int32)" % CMP_GE, "cmp_val": "value"}[role]


def entries_module(kernels, user_module):
    """The source of the module of entries, importing the user's module as user_module."""
    out = ["import triton", "import triton.language as tl", "import nvshmem_torch as _sym",
           "import %s as _user" % user_module, "", "",
           "@triton.jit", "def _thread():",
           "    # this thread's index in its block (a Triton kernel's scalar code runs on every thread)",
           "    return tl.inline_asm_elementwise(\"mov.u32 $0, %tid.x;\", \"=r\", [], dtype=tl.int32, is_pure=False, pack=1)",
           "", ""]
    aliased = set()
    for k in kernels:
        kfn = "_k_" + k.fn.name
        if kfn not in aliased:
            # torch 2.11's @requires_nvshmem wraps the JITFunction (jit_func); symmem's does not.
            out.append("%s = getattr(_user.%s, \"jit_func\", _user.%s)" % (kfn, k.fn.name, k.fn.name))
            out.append("")
            aliased.add(kfn)
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
