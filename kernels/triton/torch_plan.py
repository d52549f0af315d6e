"""How symmem serves a kernel written against PyTorch's SHMEM modules for Triton, read
from the file's syntax alone: no torch, no Triton (kernels/build-kernels.py --check runs
it anywhere).

The modules are known by what the file's names resolve to (Module), whatever their
aliases: torch.distributed._symmetric_memory._nvshmem_triton (torch 2.8's and 2.11's
API), and the backend-generic _shmem_triton of newer torch, whose
get_shmem_backend_module() is the NVSHMEM module on CUDA and whose requires_shmem is
requires_nvshmem there (shmem_backend = shmem_triton.get_shmem_backend_module(), then
shmem_backend.put(...)); what only rocSHMEM's module has is refused, saying so.

Such a kernel takes the parameters its author chose (put_kernel(dst_ptr, src_ptr, numel:
tl.constexpr, peer: tl.constexpr, BLOCK_SIZE: tl.constexpr), my_put_kernel(dest, src,
nelems, pe)) and runs on the grid its author launched (the torch tests launch one block).
symmem launches its own signatures (put_block(dst, src, nbytes, chunk, peer) on
ceil(nbytes / chunk) blocks), so the build compiles, for each kernel, an entry of
symmem's signature that calls the user's function, unchanged, with each parameter given
what it means:
- a kernel's operation is what it calls (nvshmem.put: put, also followed by a quiet;
  get, or get_nbi then quiet: get; putmem_signal_block: put-signal; signal_op alone:
  signal; puts, a fence or quiet, then a flag's put: put-flag of that variant,
  wait_until alone its receiver; barrier_all alone: barrier-all; alltoall, broadcast,
  reduce: symmem's all-to-all, broadcast and all-reduce on team world, a reduce once per
  operator; a get, then a tl.store of what it computes with what it got: get-add, once
  per element type), never its name; where several functions serve one operation, the
  first is the implementation's and each other one a variant of its own,
  NAME[fn=FUNCTION];
- a parameter means what the kernel passes it as (the third argument of nvshmem.put is
  an element count, the last a rank), else what its name says (KNOWN), else what the
  declaration file beside the source says (FILE.symmem.json: {"put_kernel": {"op":
  "put", "params": {"n": "nbytes", "BLOCK": 1024}, "dtype": "int64", "blocks": "one"}});
- a put in place (put(P + start, P + start, count, peer): a program id times a
  tl.constexpr chunk, the count capped by it, the all-gather's puts) is a put whose
  entry first puts this rank's src into its own dst, then runs the kernel over each
  block's chunk of the message, a chunk_per_wg (DEFAULT_CHUNK, or --const) a call, its
  pointer and count rebased so that the program id times the chunk lands there; one
  whose peers the kernel computes, every rank but its own (a loop over a tl.constexpr
  world_size skipping rank, or the program id striped over the peers), reaches every
  peer from one launch (the sidecar's peers: run put --pattern one-to-all): rank is
  this rank, world_size the job's size (the entry branches on n_pes over WORLD_SIZES,
  or --const's), and a striped kernel runs on a block per chunk and peer (per_peer),
  the chunk its program id over the peers;
- a parameter the body never reads is given 0 (any value would do), and says so;
- a tl.constexpr the body reads and symmem gives no meaning is set with --const
  NAME=V[,V...]: the kernel is built once per value, each a variant of its own
  implementation, NAME[nbi=1];
- a get-add kernel's parameters are bound by use (Function.get_add_plan), its block (the
  tl.constexpr its tl.arange spans) is DEFAULT_BLOCK elements or --const's, recorded in
  the sidecar (max_elems), and block 0 alone runs it;
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
(fence alone), those that carry a test's own logic around a barrier, fused matmuls that
are not all-gather-matmul's, and those that need a package not installed.

The build compiles the kernels from a module of their own (kernels_module): the file's
kernels and what they read, its other code (its torch imports, its gates, its tests)
left out, against torch's SHMEM modules where torch has every module and name the file
uses, else symmem's copy (nvshmem_torch.py), chosen from torch's files without importing
torch (choose_api).
"""

import ast
import builtins
import copy
import importlib.util
import itertools
import json
import os
import re
import textwrap

# PyTorch's SHMEM modules for Triton, as names in a file resolve to them (an import under
# any alias, a from-import, an assignment): the NVSHMEM module (torch 2.8's and 2.11's
# API); the backend-generic one of newer torch, whose get_shmem_backend_module() is the
# NVSHMEM module on CUDA and whose requires_shmem is requires_nvshmem there; rocSHMEM's,
# which symmem does not run.
NV_MODULE = "torch.distributed._symmetric_memory._nvshmem_triton"
SHMEM_MODULE = "torch.distributed._symmetric_memory._shmem_triton"
ROC_MODULE = "torch.distributed._symmetric_memory._rocshmem_triton"
BACKEND_CALL = SHMEM_MODULE + ".get_shmem_backend_module"
# The decorators that only ask torch to link the device library at launch: the build
# links it, and drops them.
LIBRARY_DECORATORS = (SHMEM_MODULE + ".requires_shmem", NV_MODULE + ".requires_nvshmem")
# What PyTorch's Triton shim re-exports is Triton itself.
TRITON_ALIASES = {"torch._inductor.runtime.triton_compat.triton": "triton",
                  "torch._inductor.runtime.triton_compat.tl": "triton.language",
                  "torch._inductor.runtime.triton_compat.language": "triton.language"}
# Names of rocSHMEM's module that the NVSHMEM one has not (its decorator and library
# finder, its work-group bindings): a kernel that reaches one runs on AMD GPUs only.
ROC_ONLY = re.compile(r"requires_rocshmem|Rocshmem\w*|rocshmem_\w+|_\w+_wg|_int_wait_until|_uint64_wait_until")

# The names of the backend-generic module; symmem's module has them too, and is its own
# backend module.
GENERIC_API = ("get_shmem_backend_module", "requires_shmem")
# The names symmem's module (nvshmem_torch.py) provides; a test keeps them equal.
API = ("putmem_block", "getmem_block", "getmem_nbi_block", "putmem_signal_block", "alltoallmem_block",
       "broadcastmem_block", "put", "get", "get_nbi", "alltoall", "broadcast", "reduce", "wait_until",
       "signal_wait_until", "signal_op", "fence", "quiet", "my_pe", "n_pes", "barrier_all", "sync_all",
       "enable_triton", "requires_nvshmem", "NvshmemLibFinder", "CMP_EQ", "CMP_NE", "CMP_GT", "CMP_LE", "CMP_LT",
       "CMP_GE", "SIGNAL_SET", "SIGNAL_ADD") + GENERIC_API
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
    # inplace and chunk_elems: a kernel that puts a buffer into the same place on the
    # peer, a tl.constexpr chunk at a time (Function.inplace_plan); me and world_size:
    # this rank and the job's size, where it computes its peers (every rank but its own).
    "put": ("dst", "src", "nbytes", "nelems", "chunk", "peer", "inplace", "chunk_elems", "me", "world_size"),
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
# A fused all-gather-matmul kernel (torch's my_fused_matmul_allgather_put_kernel and its
# persistent form) takes symmem's all-gather-matmul signature by name (pkg/kernels:
# agMatmulParams), then its tile as tl.constexprs (the table's TileConsts, values its
# tile); a persistent one also the column blocks and the tiles it loops over. The key
# of each element type it is built for, as its output is cast (acc.to(tl.float16)).
MATMUL_KEYS = {"all-gather-matmul": "bf16", "all-gather-matmul:float16": "fp16"}
MATMUL_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "m_local", "n", "k", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                 "stride_cm", "stride_cn", "rank", "peer")
MATMUL_TILE = {"tile_m": ("block_m", "BLOCK_M", "BLOCK_SIZE_M"), "tile_n": ("block_n", "BLOCK_N", "BLOCK_SIZE_N"),
               "tile_k": ("block_k", "BLOCK_K", "BLOCK_SIZE_K")}
MATMUL_GRID = {"num_pid_n": ("num_pid_n", "grid_n", "num_tiles_n"), "total_tiles": ("total_tiles", "num_tiles")}
MATMUL_MEANING = dict({n: n for n in MATMUL_PARAMS}, **{n: role for d in (MATMUL_TILE, MATMUL_GRID)
                                                        for role, names in d.items() for n in names})
# The tile the entry gives a kernel whose --const does not say (the table's TileDefaults,
# as PyTorch's test launches its fused kernels).
MATMUL_TILE_DEFAULT = {"tile_m": 64, "tile_n": 64, "tile_k": 32}
ROLES.update({key: MATMUL_PARAMS + tuple(MATMUL_TILE) + tuple(MATMUL_GRID) for key in MATMUL_KEYS})
# The entries' kernels and signatures, by the key of the operation each serves: symmem's
# table (pkg/kernels), as the build hands it over (use_signatures), for the keys ROLES has.
ENTRIES = {}


# get-add's kernels, one per element type (symmem's table: get-add for float32,
# get-add:TYPE for the others), and the type of each one's pointers, as the table types
# them (use_signatures). A kernel that gets, then stores what it computes with what it
# got (Function.get_add_plan), is built once per key.
GET_ADD = "get-add"
GET_ADD_ROLES = ("dst", "local", "src", "tmp", "nelems", "peer", "max_elems")
GET_ADD_KEYS = {}
# The most elements one program of a get-add kernel adds (its tl.arange's size), where
# --const does not say: a power of two, as tl.arange takes; MAX_BLOCK is Triton's
# largest block (TRITON_MAX_TENSOR_NUMEL).
DEFAULT_BLOCK, MAX_BLOCK = 1024, 1 << 20
# The element types of Triton's signatures by the names this file gives them (DTYPES).
SIG_DTYPES = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64"}


def use_signatures(kernels):
    """Takes the entries' signatures from symmem's table: {key: (kernel, {param: type})}."""
    for key in GET_ADD_KEYS:
        ROLES.pop(key, None)
    GET_ADD_KEYS.clear()
    for key, (_, params) in kernels.items():
        if key.partition(":")[0] == GET_ADD:
            t = dict(params)["dst"].lstrip("*")
            GET_ADD_KEYS[key] = SIG_DTYPES.get(t, t)
            ROLES[key] = GET_ADD_ROLES
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
# The job sizes a tl.constexpr world size is specialised for where --const does not say
# (the sidecar's ranks: symmem refuses a job of another size), and the most ranks --const
# may give it (symmem's most ranks).
WORLD_SIZES = tuple(range(2, MAX_PEERS + 1))
MAX_RANKS = 1024
DEFAULT_SIZES = (8,)  # run's default message (8 int8 elements)
# The most a put in place sends per call of the kernel, in bytes, where --const does not
# say: the chunk symmem's grid gives a block for messages up to 16 MiB (gpu.ShapeFor).
DEFAULT_CHUNK = 128 << 10
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


BUILTIN_NAMES = frozenset(dir(builtins))


def _canon(path):
    for alias, real in TRITON_ALIASES.items():
        if path == alias or path.startswith(alias + "."):
            return real + path[len(alias):]
    return path


def _under(path, module):
    """The rest of path below module ("" for module itself), or None."""
    if path == module:
        return ""
    if path is not None and path.startswith(module + "."):
        return path[len(module) + 1:]
    return None


class Module:
    """What a file's module-level names are bound to: imports (under any alias, in
    try, if and with blocks too; an except block's only where nothing else binds the
    name), assignments and definitions, resolved to dotted paths (a module, or a name
    in one) as far as the file says. Nothing is imported."""

    def __init__(self, tree, source=""):
        self.tree, self.source = tree, source
        self.bindings = {}  # name -> (kind, node, path): kind import, assign, def, class
        self._walk(tree.body, False)

    def _bind(self, name, binding, fallback):
        if not (fallback and name in self.bindings):
            self.bindings[name] = binding

    def _walk(self, body, fallback):
        for s in body:
            if isinstance(s, ast.Import):
                for a in s.names:
                    # import a.b.c binds a; import a.b.c as x binds x to a.b.c.
                    path = a.name if a.asname else a.name.split(".")[0]
                    self._bind(a.asname or path, ("import", s, _canon(path)), fallback)
            elif isinstance(s, ast.ImportFrom) and s.level == 0 and s.module:
                for a in s.names:
                    if a.name == "*":
                        for n in STAR_NAMES.get(_canon(s.module), ()):
                            self._bind(n, ("import", s, _canon(s.module) + "." + n), fallback)
                    else:
                        self._bind(a.asname or a.name, ("import", s, _canon(s.module + "." + a.name)), fallback)
            elif isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                    if isinstance(t, ast.Name):
                        self._bind(t.id, ("assign", s, None), fallback)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._bind(s.name, ("def", s, None), fallback)
            elif isinstance(s, ast.ClassDef):
                self._bind(s.name, ("class", s, None), fallback)
            elif isinstance(s, ast.If):
                self._walk(s.body, fallback)
                self._walk(s.orelse, fallback)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                self._walk(s.body, fallback)
            elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                self._walk(s.body, fallback)
                self._walk(s.orelse, fallback)
                for h in s.handlers:
                    self._walk(h.body, True)
                self._walk(s.finalbody, fallback)

    def resolve(self, node, local=(), depth=0):
        """The dotted path node stands for ("torch.distributed._symmetric_memory.
        _nvshmem_triton.put"), or None where the file does not say; a name in local (a
        function's parameter or variable) stands for nothing of the module's."""
        if depth > 32:
            return None
        if isinstance(node, ast.Name):
            if node.id in local:
                return None
            kind, n, path = self.bindings.get(node.id, (None, None, None))
            if kind == "import":
                return path
            if kind == "assign":
                return self.resolve(n.value, (), depth + 1)
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, local, depth + 1)
            return _canon(base + "." + node.attr) if base is not None else None
        if isinstance(node, ast.Call) and self.resolve(node.func, local, depth + 1) == BACKEND_CALL:
            return NV_MODULE  # get_shmem_backend_module() on CUDA
        return None

    def shmem(self):
        """Whether the file reaches any of PyTorch's SHMEM modules (a name bound to one,
        or an attribute that is one: symm_mem._nvshmem_triton)."""
        names = [ast.Name(n, ast.Load()) for n in self.bindings]
        for node in names + [n for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)]:
            p = self.resolve(node)
            if p is not None and any(_under(p, m) is not None for m in (NV_MODULE, SHMEM_MODULE, ROC_MODULE)):
                return True
        return False

    def reached(self, module):
        """The names of module the file reaches anywhere ("" for the module itself):
        get_shmem_backend_module and requires_shmem of the generic module, say, which the
        kernels themselves never name once their backend is resolved."""
        out = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                rest = _under(self.resolve(node), module)
                if rest is not None:
                    out.add(rest.split(".")[0])
        return out

    def decorators(self, fn):
        """fn's decorators as written, less those that only link the device library
        (requires_shmem, requires_nvshmem: the build links it)."""
        return [d for d in fn.decorator_list
                if self.resolve(d.func if isinstance(d, ast.Call) else d) not in LIBRARY_DECORATORS]

    def _free(self, fn):
        """The names fn reads that are not its own (parameters, variables), in the
        order it reads them: what the module must bind for it."""
        a = fn.args
        args = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        own, reads = set(x.arg for x in args), []
        parts = list(fn.body) + self.decorators(fn) + [x.annotation for x in args if x.annotation is not None] + \
            list(a.defaults) + [d for d in a.kw_defaults if d is not None]
        for part in parts:
            for x in ast.walk(part):
                if isinstance(x, ast.Name):
                    if isinstance(x.ctx, ast.Load):
                        reads.append(x.id)
                    else:
                        own.add(x.id)
                elif isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    own.add(x.name)
                elif isinstance(x, ast.arg):
                    own.add(x.arg)  # a lambda's
        return list(dict.fromkeys(n for n in reads if n not in own))

    def _source_of(self, fn):
        """fn as a module of its own has it: its decorators but the library's, then its
        text from the file (comments kept, for Triton's messages)."""
        head = ["@" + ast.unparse(d) for d in self.decorators(fn)]
        if self.source:
            lines = self.source.splitlines()[fn.lineno - 1:fn.end_lineno]
            return "\n".join(head) + "\n" + textwrap.dedent("\n".join(lines)) + "\n"
        bare = copy.copy(fn)
        bare.decorator_list = []
        return "\n".join(head + [ast.unparse(bare)]) + "\n"

    def _import(self, name, path, why):
        """The line that binds name to path in a module of its own: PyTorch's SHMEM
        modules through the build's (_shmem: the NVSHMEM one, torch's or symmem's;
        _generic: the backend-generic one), Triton and installed packages by import;
        rocSHMEM's and the rest of torch refused (why: what reads it)."""
        nv, gen = _under(path, NV_MODULE), _under(path, SHMEM_MODULE)
        if nv is not None:
            return "%s = _shmem%s" % (name, "." + nv if nv else "")
        if gen is not None:
            return "%s = _generic%s" % (name, "." + gen if gen else "")
        if _under(path, ROC_MODULE) is not None:
            raise Refused("%s reads %s (%s): rocSHMEM's, AMD GPUs'; symmem runs NVSHMEM" % (why, name, path))
        top = path.split(".")[0]
        if top == "torch":
            raise Refused("%s reads %s (%s), which is torch's own: symmem compiles a file's kernels with Triton and "
                          "PyTorch's SHMEM module alone" % (why, name, path))
        if top != "triton" and importlib.util.find_spec(top) is None:
            raise Refused("%s needs %s (%s from %s), which is not installed for this Python (pip install %s)" % (
                why, top, name, path.rsplit(".", 1)[0] if "." in path else path, top))
        if "." not in path:
            return "import %s" % path if name == path else "import %s as %s" % (path, name)
        mod, attr = path.rsplit(".", 1)
        return "from %s import %s as %s" % (mod, attr, name)

    def bring(self, roots):
        """What a module of its own holding the module-level functions roots needs, as
        source: (binding lines, function definitions); the names of PyTorch's SHMEM
        modules it binds (shmem: the NVSHMEM module's, generic: the generic one's).
        Raises Refused, saying what cannot come (a package not installed, a name of
        torch's, one the file does not bind)."""
        lines, defs, done, shmem = [], [], set(), {"nv": set(), "generic": set()}

        def need(name, why):
            if name in done:
                return
            done.add(name)
            kind, node, _ = self.bindings.get(name, (None, None, None))
            if kind is None:
                if name in BUILTIN_NAMES:
                    return
                raise Refused("%s reads %s, which the file does not bind at module level" % (why, name))
            if kind == "def":
                for d in node.decorator_list:
                    p = self.resolve(d.func if isinstance(d, ast.Call) else d)
                    rest = _under(p, NV_MODULE)
                    if _under(p, ROC_MODULE) is not None or rest and ROC_ONLY.fullmatch(rest):
                        raise Refused("%s is decorated with %s, rocSHMEM's (AMD GPUs'): symmem runs NVSHMEM; decorate "
                                      "it with %s's requires_shmem or %s's requires_nvshmem" % (
                                          "it" if name in roots else "its helper " + name, ast.unparse(d),
                                          short(SHMEM_MODULE),
                                          short(NV_MODULE)))
                for n in self._free(node):
                    need(n, why)
                defs.append(self._source_of(node))
                return
            if kind == "class":
                raise Refused("%s reads %s, a class of the file's: symmem builds a file's functions, imports and "
                              "constants, not its classes" % (why, name))
            path = self.resolve(ast.Name(name, ast.Load()))
            if path is None:
                # An assignment of something else (a tl.constexpr, a number): copied, with
                # what it reads.
                for x in ast.walk(node.value):
                    if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load):
                        need(x.id, why)
                lines.append("%s = %s" % (name, ast.unparse(node.value)))
                return
            for key, module in (("nv", NV_MODULE), ("generic", SHMEM_MODULE)):
                rest = _under(path, module)
                if rest is not None:
                    shmem[key].add(rest)
            lines.append(self._import(name, path, why))

        for r in roots:
            need(r, "it")
        return lines, defs, shmem

    def cannot_bring(self, name):
        """Why the function name cannot be built in a module of its own, or None."""
        try:
            self.bring([name])
        except Refused as e:
            return str(e)
        return None


# What "from MODULE import *" binds, of the modules whose names symmem knows.
STAR_NAMES = {NV_MODULE: [n for n in API if n not in GENERIC_API], SHMEM_MODULE: list(GENERIC_API)}


def literal(node):
    """The value of a default that is a literal; None for no default or another
    expression (a tl.int32, a call), which the declaration file must then give."""
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


class Function:
    """A module-level @triton.jit function as the file has it, its calls resolved
    through the file's module-level names (module)."""

    def __init__(self, node, module):
        self.name, self.node = node.name, node
        a = node.args
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        self.params = []
        for p, d in zip(a.args, defaults):
            ann = ast.unparse(p.annotation) if p.annotation is not None else ""
            self.params.append((p.arg, "constexpr" in ann, literal(d)))
        self.odd = bool(a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs)
        self.calls, self.callees, self.reads_program_id, self.persistent = [], set(), False, False
        # What the body reads (a parameter it never reads may be given anything), and
        # what its calls say each parameter is: {param: {role}}; helpers' calls count
        # through the arguments the kernel passes them (inherit).
        self.reads, self.used_as, self.helper_args = set(), {}, []
        # The operators its reduce calls pass as literals ("max"): none, any it is given.
        self.redops = set()
        # Its own calls of the module in the order the source has them: (name, args).
        self.sequence = []
        # What else it calls: rocSHMEM's names (rocm), Triton's language (tl: dot,
        # store, ...).
        self.rocm, self.tl = set(), set()
        # Its own calls of Triton's language, in the order the source has them: (name,
        # args).
        self.tl_calls = []
        params = set(n for n, _, _ in self.params)
        # Its variables and what each is assigned (a loop's from its range): {name:
        # [expr]}, for where a value comes from (sources).
        self.defs = {}
        for n in ast.walk(node):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name):
                            self.defs.setdefault(x.id, []).append(n.value)
            elif isinstance(n, ast.For):
                for x in ast.walk(n.target):
                    if isinstance(x, ast.Name):
                        self.defs.setdefault(x.id, []).append(n.iter)
        self.local = params | set(self.defs) | set(
            x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store))
        for stmt in node.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    self.reads.add(n.id)
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f, call = n.func, None
                path = module.resolve(f, self.local)
                if _under(path, NV_MODULE):
                    call = _under(path, NV_MODULE)
                elif _under(path, ROC_MODULE) is not None:
                    self.rocm.add(_under(path, ROC_MODULE))
                elif _under(path, "triton.language"):
                    self.tl.add(_under(path, "triton.language"))
                    self.tl_calls.append((n.lineno, n.col_offset, _under(path, "triton.language"), n.args))
                elif isinstance(f, ast.Name) and f.id not in self.local:
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
            if isinstance(n, ast.Attribute) and n.attr == "num_programs":
                # A persistent kernel: its programs loop over the work by their number.
                self.persistent = True
        self.sequence = [c[2:] for c in sorted(self.sequence, key=lambda c: c[:2])]
        # The names of PyTorch's NVSHMEM module and of its generic one it reaches ("" for
        # a module itself).
        self.api, self.generic = set(), set()
        # The names of Triton's language it reads (tl.float16: the type a matmul's output
        # is cast to).
        self.tl_names = set()
        for n in (x for part in node.body + [node.args] for x in ast.walk(part)):
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
                path = module.resolve(n, self.local)
                rest = _under(path, "triton.language")
                if rest:
                    self.tl_names.add(rest)
                for names, m in ((self.api, NV_MODULE), (self.generic, SHMEM_MODULE)):
                    rest = _under(path, m)
                    if rest is not None:
                        names.add(rest.split(".")[0])
        self.tl_calls = [c[2:] for c in sorted(self.tl_calls, key=lambda c: c[:2])]
        self.flag = self.flag_plan()
        self.get_add = self.get_add_plan()
        self.inplace = self.inplace_plan()

    def sources(self, expr, seen=None):
        """The parameters a value comes from (through the function's variables), and
        "#pid" where the program id is one."""
        seen = set() if seen is None else seen
        out = set()
        params = set(n for n, _, _ in self.params)
        for x in ast.walk(expr):
            if isinstance(x, ast.Attribute) and x.attr == "program_id":
                out.add("#pid")
            if not isinstance(x, ast.Name) or x.id in seen:
                continue
            if x.id in params:
                out.add(x.id)
            elif x.id in self.defs:
                seen.add(x.id)
                for v in self.defs[x.id]:
                    out |= self.sources(v, seen)
        return out

    def _root(self, expr, seen=()):
        """The parameter a pointer expression (P, P + offset) starts from, or None."""
        while isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            expr = expr.left
        if isinstance(expr, ast.Name):
            if expr.id in set(n for n, _, _ in self.params):
                return expr.id
            vals = self.defs.get(expr.id, [])
            if len(vals) == 1 and expr.id not in seen:
                return self._root(vals[0], tuple(seen) + (expr.id,))
        return None

    def inplace_plan(self):
        """What a kernel whose puts send a buffer into the same place on the peer
        (put(P + start, P + start, count, peer): the all-gather's puts) makes of its
        parameters, {"base", "count", "chunk", "peer"}: P, the runtime parameter the
        count comes from (the message's elements), the tl.constexpr one that the
        program id strides by and caps the count (the chunk a program puts), and the
        peer parameter; where the kernel computes its peers instead, every rank but its
        own (peer None), also "peers" (every_peer: "all" or "striped"), "rank" and
        "world"; or {"why": ...}, or None for a kernel without such puts."""
        puts = [args for c, args in self.sequence if c in PUTS]
        same = [args for args in puts if len(args) == 4 and ast.dump(args[0]) == ast.dump(args[1])]
        if not same:
            return None
        if len(same) != len(puts):
            return {"why": "it puts both in place and between buffers"}
        bases = set(self._root(args[0]) for args in same)
        if len(bases) != 1 or None in bases:
            return {"why": "its puts in place do not start from one pointer parameter"}
        params = set(n for n, _, _ in self.params)
        constexpr = set(n for n, c, _ in self.params if c)
        counts, chunks, peers = set(), set(), set()
        for args in same:
            offset = self.sources(args[0]) - bases
            count = self.sources(args[2])
            counts |= (count - constexpr) - {"#pid"}
            if "#pid" in offset:
                chunks |= (offset & count) & constexpr
            peers.add(args[3].id if isinstance(args[3], ast.Name) and args[3].id in params else None)
        if len(peers) != 1:
            return {"why": "some of its puts in place go to a peer parameter, others to peers it computes"}
        out = {"base": bases.pop(), "peer": peers.pop()}
        if out["peer"] is None:
            every = self.every_peer(same)
            if "why" in every:
                return every
            out.update(every)
            chunks.discard(every["world"])  # the world size strides a striped program id too
        if len(counts) != 1 or len(chunks) != 1:
            out["why"] = ("its count does not come from one runtime parameter (the message's elements) capped by one "
                          "tl.constexpr the program id strides by (the chunk a program puts)")
            return out
        out.update(count=counts.pop(), chunk=chunks.pop())
        return out

    def get_add_plan(self):
        """What a kernel that gets, then stores what it computes with what it got makes of
        its parameters, as get-add (PyTorch's fused get-add: get(tmp, src, nelems, pe);
        tl.load of tmp and of an operand of its own; tl.store of the sum): {"roles":
        {param: role}} with the get's destination tmp, its source src, its count nelems,
        its rank peer, the tl.store pointer's parameter dst, the other tl.load's local,
        and the tl.constexpr its tl.arange spans max_elems (the most elements one
        program adds); or {"why": ...}; None for a kernel that does not get and store."""
        gets = [(c, args) for c, args in self.sequence if c in GETS]
        stores = [args for name, args in self.tl_calls if name == "store"]
        if not gets or not stores:
            return None
        params = set(n for n, _, _ in self.params)
        constexpr = set(n for n, c, _ in self.params if c)
        if len(gets) > 1:
            return {"why": "it gets %d times: get-add gets the peer's operand once" % len(gets)}
        call, args = gets[0]
        if call not in ("get", "get_nbi"):
            return {"why": "it gets with nvshmem.%s, on addresses and bytes: get-add's entry passes typed pointers "
                           "and an element count (nvshmem.get)" % call}
        if call == "get_nbi" and "quiet" not in [c for c, _ in self.sequence]:
            return {"why": "it gets with nvshmem.get_nbi and never waits for it (nvshmem.quiet) before it adds"}
        names = [a.id if isinstance(a, ast.Name) and a.id in params else None for a in args]
        if len(names) != 4 or None in names[:3]:
            return {"why": "its get must pass parameters, as get(tmp, src, nelems, pe)"}
        if names[3] is None:
            return {"why": "its get's peer (%s) is not a parameter of its own: symmem passes the rank get-add gets "
                           "from" % ast.unparse(args[3])}
        tmp, src, count, peer = names
        if len(stores) != 1:
            return {"why": "it stores %d times (tl.store): get-add stores its sum once, into dst" % len(stores)}
        dst = self._root(stores[0][0]) if stores[0] else None
        loads = set(self._root(a[0]) if a else None for name, a in self.tl_calls if name == "load")
        others = loads - {tmp}
        blocks = set()
        for name, a in self.tl_calls:
            if name == "arange" and a and isinstance(a[-1], ast.Name):
                blocks.add(a[-1].id)
        why = None
        if dst is None:
            why = "its tl.store's pointer does not start from a parameter (dst)"
        elif tmp not in loads:
            why = "it never loads what it got (tl.load of %s)" % tmp
        elif None in others or len(others) != 1:
            why = ("it loads %s besides what it got: get-add adds one operand of its own (local), each pointer a "
                   "parameter" % (", ".join(sorted(str(o) for o in others)) or "nothing"))
        elif dst in (tmp, src) or dst in others:
            why = "it stores into %s, which it also gets or loads: get-add stores into an output of its own" % dst
        elif len(blocks & constexpr) != 1:
            why = ("its block (the size of its tl.arange) is not one tl.constexpr parameter: symmem gives the most "
                   "elements one program adds at build time")
        if why:
            return {"why": why}
        local, block = others.pop(), (blocks & constexpr).pop()
        return {"roles": {tmp: "tmp", src: "src", count: "nelems", peer: "peer", dst: "dst", local: "local",
                          block: "max_elems"}}
    def every_peer(self, same):
        """How a kernel's puts in place (same: their arguments) reach the peers it
        computes, read as every rank but its own, of a job of world_size ranks: {"peers":
        "all" (each program puts its chunk to every peer: a loop over the world size that
        skips the rank), or "striped" (the program id picks the peer as well as the
        chunk), "rank" (the parameter its peers are compared with: this rank, which
        symmem passes at run time), "world" (the parameter they come from: the job's
        size)}; or {"why": ...}."""
        params = dict((n, c) for n, c, _ in self.params)
        worlds, ranks, pid = set(), set(), False
        for args in same:
            src = self.sources(args[3])
            pid |= "#pid" in src
            worlds |= set(n for n in src if n in params)
            # The rank: a parameter a comparison sets against the peer (or a variable
            # the peer comes from): if p != rank, if peer >= rank.
            chain = self._chain(args[3])
            for n in ast.walk(self.node):
                if isinstance(n, ast.Compare):
                    sides = [n.left] + list(n.comparators)
                    names = set(x.id for x in sides if isinstance(x, ast.Name))
                    if names & chain:
                        ranks |= set(x for x in names - chain if x in params)
        if len(worlds) != 1:
            return {"why": "the peers it computes do not come from one tl.constexpr (the job's size, as world_size)"}
        if len(ranks) != 1:
            return {"why": "the peers it computes are not compared with one parameter (this rank, as rank)"}
        return {"peers": "striped" if pid else "all", "rank": ranks.pop(), "world": worlds.pop()}

    def _chain(self, expr, seen=None):
        """The variables a peer expression is, or comes from, through the function's
        assignments and loops."""
        seen = set() if seen is None else seen
        for x in ast.walk(expr):
            if isinstance(x, ast.Name) and x.id not in seen and x.id in self.defs:
                seen.add(x.id)
                for v in self.defs[x.id]:
                    self._chain(v, seen)
        return seen

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
            self.rocm |= h.rocm
            self.tl |= h.tl
            self.tl_names |= h.tl_names
            self.persistent |= h.persistent
            self.api |= h.api
            self.generic |= h.generic
        for name, args in self.helper_args:
            if name not in funcs or name in seen or name == self.name:
                continue
            h = funcs[name]
            for arg, (param, _, _) in zip(args, h.params):
                if isinstance(arg, ast.Name):
                    for role in h.used_as.get(param, ()):
                        self.used_as.setdefault(arg.id, set()).add(role)

    def rocm_why(self):
        """Why not, where the function calls what only rocSHMEM's module has; else None."""
        roc = sorted(self.rocm) + sorted(c for c in self.calls if ROC_ONLY.fullmatch(c))
        if not roc:
            return None
        return ("it calls %s, which only rocSHMEM's module (%s, AMD GPUs') has: symmem runs NVSHMEM; reach the "
                "device functions through %s's get_shmem_backend_module() or %s" % (
                    roc[0], short(ROC_MODULE), short(SHMEM_MODULE), short(NV_MODULE)))

    def signature(self):
        return "%s(%s)" % (self.name, ", ".join(n + (": tl.constexpr" if c else "") for n, c, _ in self.params))

    def matmul_plan(self):
        """(keys, None) for a kernel that computes a matmul (tl.dot) and puts its output
        to a peer as it goes, with all-gather-matmul's parameters (MATMUL_PARAMS, by
        name) and its tile as tl.constexprs: the keys of the element types its output is
        cast to; else (None, why)."""
        calls = set(self.calls)
        what = ("it computes a matmul (tl.dot) and sends its output with %s as it goes" %
                ", ".join("nvshmem." + c for c in sorted(calls)))
        if not calls & set(PUTS) or calls - set(PUTS) - {"quiet", "fence", "my_pe", "n_pes"}:
            return None, what + ": symmem serves a fused matmul that puts its output (all-gather-matmul), nothing else"
        names = [n for n, _, _ in self.params]
        roles = {n: MATMUL_MEANING.get(n) for n in names}
        missing = [p for p in MATMUL_PARAMS + tuple(MATMUL_TILE) if p not in roles.values()]
        unknown = [n for n, r in roles.items() if r is None and n in self.reads]
        if missing or unknown:
            return None, ("%s, but its parameters are not all-gather-matmul's (%s, then its tile as block_m, block_n, "
                          "block_k: tl.constexpr%s): %s" % (
                              what, ", ".join(MATMUL_PARAMS), "; a persistent kernel's num_pid_n and total_tiles too",
                              "it lacks %s" % ", ".join(missing) if missing else "%s means nothing symmem knows" %
                              ", ".join(unknown)))
        keys = [k for k, t in MATMUL_KEYS.items() if {"fp16": "float16", "bf16": "bfloat16"}[t] in self.tl_names]
        return keys or list(MATMUL_KEYS), None

    def classify(self):
        """(ops, None) for a kernel symmem serves or would serve (ops: the operations, most
        one; a reduce serves all-reduce of both element types, with each operator it may
        be given, REDUCE_KEYS), (None, why) for one it
        does not, and (None, None) for a function that calls no NVSHMEM data movement,
        signal, wait or barrier (a helper)."""
        calls = set(self.calls)
        puts = [c for c in self.calls if c in PUTS]
        if self.rocm_why():
            return None, self.rocm_why()
        if "dot" in self.tl and calls:
            return self.matmul_plan()
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
        gets = calls & set(GETS)
        if gets and "store" in self.tl:
            what = ("it gets (%s) and computes with what it got, storing the result (tl.store): get-add (out = local "
                    "+ remote)" % ", ".join("nvshmem." + c for c in sorted(gets)))
            why = (self.get_add or {"why": "its get or its tl.store is in a helper it calls: symmem reads get-add's "
                                           "parameters from the kernel's own calls"}).get("why")
            if why is None and self.reads_program_id:
                why = "it reads its program id: symmem launches get-add's kernel on one block"
            if why is None and not GET_ADD_KEYS:
                why = "symmem's table of kernels has no get-add: this build script is not the one its symmem carries"
            if why:
                return None, "%s, but %s" % (what, why)
            return list(GET_ADD_KEYS), None
        if self.inplace is not None and "why" in self.inplace:
            return None, "it puts in place, but %s" % self.inplace["why"]
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
    return ", ".join("%s (%s)" % (role, "/".join(KNOWN[role])) for role in ROLES[op] if role in KNOWN)


def role_of(fn, name, op):
    """What parameter name of fn means for op: what the kernel's calls pass it as (for
    put-flag, in their order: the data, then the flag), else what its name says; None
    where neither gives a meaning op has."""
    if op in FLAG_KEYS.values():
        return fn.flag.get("roles", {}).get(name)
    if op in MATMUL_KEYS:
        return MATMUL_MEANING.get(name)
    if op in GET_ADD_KEYS:
        return (fn.get_add or {}).get("roles", {}).get(name)
    ip = fn.inplace if op == "put" and fn.inplace and "count" in fn.inplace else None
    if ip is not None:
        return {ip["base"]: "inplace", ip["count"]: "nelems", ip["chunk"]: "chunk_elems", ip["peer"]: "peer",
                ip.get("rank"): "me", ip.get("world"): "world_size"}.get(name)
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
        if role == "chunk_elems":
            # The chunk a program puts: symmem's, or --const's.
            value, how = DEFAULT_CHUNK // DTYPES[dtype_of(op, spec)], "chunk"
            if name in consts:
                value, how = consts[name], "const"
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConstRefused("%s: --const %s=%r: parameter %r is the chunk a program puts: give a whole number "
                                       "of elements, 1 or more" % (where, name, value, name))
            if not constexpr:
                raise Refused("%s: parameter %r is the chunk a program puts, which symmem gives at build time: "
                              "annotate it %s: tl.constexpr" % (where, name, name))
            out.append((name, role, value, constexpr, how))
            continue
        if role in MATMUL_TILE:
            # The tile, a tl.constexpr: the table's, or --const's.
            value, how = MATMUL_TILE_DEFAULT[role], "tile"
            if name in consts:
                value, how = consts[name], "const"
                if isinstance(value, bool) or not isinstance(value, int) or value < 16 or value & (value - 1):
                    raise ConstRefused("%s: --const %s=%r: parameter %r is the tile's %s: give a power of two, 16 or "
                                       "more (tl.dot's least)" % (where, name, value, name, {
                                           "tile_m": "rows", "tile_n": "columns", "tile_k": "K step"}[role]))
            if not constexpr:
                raise Refused("%s: parameter %r is the tile's size, which Triton needs at build time: annotate it "
                              "%s: tl.constexpr" % (where, name, name))
            out.append((name, role, value, constexpr, how))
            continue
        if role == "max_elems":
            # The most elements one program adds (its tl.arange's size): symmem's, or
            # --const's; the sidecar records it (max_elems), and run refuses more.
            value, how = DEFAULT_BLOCK, "block"
            if name in consts:
                value, how = consts[name], "const"
                if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1) or \
                        value > MAX_BLOCK:
                    raise ConstRefused("%s: --const %s=%r: parameter %r is the most elements one program adds (the "
                                       "size of its tl.arange): give a power of two, 1 to %d" % (
                                           where, name, value, name, MAX_BLOCK))
            out.append((name, role, value, constexpr, how))
            continue
        if role is not None and constexpr and op in GET_ADD_KEYS:
            raise Refused("%s: parameter %r is a tl.constexpr, but symmem passes get-add's %s at run time: drop "
                          "tl.constexpr" % (where, name, role))
        if role in ("me", "world_size") and not (fn.inplace and fn.inplace.get("peers")):
            raise Refused("%s: parameter %r: symmem gives %s only to a put in place whose peers the kernel computes "
                          "(every rank but its own)" % (where, name, role))
        if role == "world_size" and constexpr:
            # The job's size: a copy of the kernel for each size symmem serves (the entry
            # branches on nvshmem n_pes), or --const's alone.
            value, how = list(WORLD_SIZES), "world"
            if name in consts:
                v = consts[name]
                if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= MAX_RANKS:
                    raise ConstRefused("%s: --const %s=%r: parameter %r is the job's size: give a number of ranks, 2 to "
                                       "%d" % (where, name, v, name, MAX_RANKS))
                value, how = [v], "const"
            out.append((name, role, value, constexpr, how))
            continue
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
                          "or give it a value in %s" % (where, name, "this rank (me)" if role == "me" else role,
                                                        os.path.basename(decl)))
        if op in MATMUL_KEYS and constexpr:
            raise Refused("%s: parameter %r is a tl.constexpr, but symmem passes %s at run time: drop tl.constexpr" % (
                where, name, role))
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
    return COLL_DTYPE.get(op) or MATMUL_KEYS.get(op) or GET_ADD_KEYS.get(op) or spec.get("dtype", "int8")


def plan(tree, path, declared, ops, sizes, consts=(), source=""):
    """([Kernel], [(function, why, line)]) for a file written for PyTorch's SHMEM modules
    (tree: its syntax tree, or its Module): the kernels symmem builds (one per operation,
    function and --const variant) and the functions it does not serve, with the reason.
    declared is SYMMEM_KERNELS, ops the --kernel OP=FN, consts --const NAME=V[,V...].
    Where several functions serve one operation (and none was chosen), the first in the
    file is the implementation's and each other one a variant of its own,
    IMPL[fn=FUNCTION]."""
    module = tree if isinstance(tree, Module) else Module(tree, source)
    consts = parse_consts(consts)
    funcs = {name: Function(node, module) for name, (kind, node, _) in module.bindings.items()
             if kind == "def" and any("jit" in ast.unparse(d) for d in node.decorator_list)}
    line = {name: fn.node.lineno for name, fn in funcs.items()}
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

    def skip(name, why):
        if not any(x[:2] == (name, why) for x in skipped):
            skipped.append((name, why, line.get(name, 0)))

    for name in sorted(funcs, key=line.get):
        fn = funcs[name]
        if name in chosen.values() or name in helpers:
            continue  # chosen, or called by the kernels: not a kernel of its own
        why = fn.rocm_why() or module.cannot_bring(name)
        serves = None
        if why is None:
            serves, why = fn.classify()
        if why:
            skip(name, why)
        elif serves and serves[0] in PENDING:
            skip(name, "it would serve %s: %s, which symmem's user kernels do not serve yet" % (
                serves[0], PENDING[serves[0]]))
        elif serves:
            for op in serves:
                found.setdefault(op, []).append(name)
        else:
            skip(name, "it calls no SHMEM function that moves or awaits data (put, get, a signal, a wait, a barrier, "
                       "a collective): no operation of symmem's runs it")
    builds = [(op, name, None) for op, name in chosen.items()]
    for op, fns in found.items():
        if op in chosen:
            for name in fns:
                if name != chosen[op]:
                    skip(name, "it serves %s too, for which %s was chosen (--kernel %s=%s, SYMMEM_KERNELS or \"op\" in "
                               "%s)" % (op, chosen[op], op, chosen[op], os.path.basename(decl_path)))
            continue
        builds += [(op, name, None if i == 0 else name) for i, name in enumerate(fns)]
    kernels, first_refusal = [], None
    for op, name, variant in sorted(builds, key=lambda b: (line.get(b[1], 0), b[0])):
        if op not in ENTRIES:
            raise Refused("%s: %s: a kernel of torch's module serves %s, not %s" % (path, name, ", ".join(ENTRIES), op))
        if name not in funcs:
            raise Refused("%s: no function %r for %s (module-level @triton.jit functions: %s)" % (
                path, name, op, ", ".join(sorted(funcs)) or "none"))
        fn, spec = funcs[name], decl.get(name, {})
        asked = chosen.get(op) == name
        why = fn.rocm_why() or module.cannot_bring(name)
        if why:
            raise Refused("%s: %s cannot serve %s: %s" % (path, name, op, why))
        serves, why = fn.classify()
        if why:
            raise Refused("%s: %s cannot serve %s: %s" % (path, name, op, why))
        if serves and op not in serves:
            raise Refused("%s: %s cannot serve %s: it calls %s, so it serves %s" % (
                path, name, op, ", ".join("nvshmem." + c for c in sorted(set(fn.calls))), serves[0]))
        mine = {n: consts[n] for n, _, _ in fn.params if n in consts}
        try:
            for combo in itertools.product(*mine.values()):
                kernels.append(Kernel(fn, op, spec, decl_path, sizes, dict(zip(mine, combo)), variant))
        except Refused as e:
            if asked or isinstance(e, ConstRefused):
                raise
            # Found by its calls, not asked for: listed with the reason, the rest built.
            skip(name, str(e))
            first_refusal = first_refusal or e
    used = set(n for k in kernels for n in k.consts)
    for c in consts:
        if c not in used:
            raise Refused("%s: --const %s: no kernel symmem builds from it reads a parameter %s" % (path, c, c))
    if not kernels:
        if first_refusal is not None and len(skipped) == 1:
            raise Refused(str(first_refusal))
        raise Refused("%s: no kernel symmem serves (%s); symmem serves put, get, put-signal, wait-signal, signal, "
                      "put-flag, wait-flag, barrier, all-to-all, broadcast, all-reduce and get-add kernels of "
                      "PyTorch's SHMEM modules" % (path, "; ".join("%s: %s" % x[:2] for x in skipped) or
                                                   "no @triton.jit function calls nvshmem put, get, "
                                                   "putmem_signal_block, signal_wait_until, signal_op, wait_until, "
                                                   "barrier_all, alltoall, broadcast or reduce"))
    return kernels, sorted(skipped, key=lambda x: x[2])


class Kernel:
    """One user kernel as the entry of op calls it, with the values of its --const
    parameters (consts: {name: (text, value)}; a variant of its own where there are any)."""

    def __init__(self, fn, op, spec, decl, sizes, consts, fn_variant=None):
        self.fn, self.op, self.dtype = fn, op, dtype_of(op, spec)
        self.consts = consts
        self.args = bind(fn, op, spec, decl, sizes, {n: v for n, (_, v) in consts.items()})
        # A put in place: every block runs it on its chunk of the message (in_place_body).
        self.inplace = any(role == "inplace" for _, role, _, _, _ in self.args)
        chunk = [(n, v) for n, role, v, _, _ in self.args if role == "chunk_elems"]
        self.chunk_name, self.chunk = chunk[0] if chunk else (None, 0)
        # get-add: the most elements one program adds, and its parameter.
        most = [(n, v) for n, role, v, _, _ in self.args if role == "max_elems"]
        self.most_name, self.most = most[0] if most else (None, 0)
        if self.inplace and not chunk:
            raise Refused("%s (for %s): it puts in place, but takes no tl.constexpr chunk" % (fn.name, op))
        # A put in place to the peers it computes (every rank but its own): whether each
        # program puts to every peer ("all") or the program id picks the peer too
        # ("striped": a block per chunk and peer), and the job sizes its tl.constexpr
        # world size is built for (none: it takes the size at run time).
        self.every = fn.inplace.get("peers") if self.inplace else None
        worlds = [v for _, role, v, c, _ in self.args if role == "world_size" and c]
        self.worlds = worlds[0] if worlds else []
        self.blocks = "one" if op in COLLECTIVES else spec.get("blocks", "grid" if fn.reads_program_id else "one")
        if self.inplace:
            self.blocks = "grid"
        if op in GET_ADD_KEYS:
            self.blocks = "one"  # as PyTorch's test launches it, whatever a declaration says
        self.address = any(c in ADDRESS_CALLS for c in fn.calls)
        self.one_thread = any(c in THREAD_CALLS for c in fn.calls)
        const = {role for _, role, _, c, _ in self.args if c}
        self.sizes = sorted(sizes) if const & {"nbytes", "nelems"} else []
        self.peers = list(range(MAX_PEERS)) if "peer" in const else []
        named = ([("fn", fn_variant)] if fn_variant else []) + [(n, t) for n, (t, _) in sorted(consts.items())]
        self.variant = "".join("[%s=%s]" % nt for nt in named)
        self.kernel = ENTRIES[op][0]
        self.entry_name = self.kernel + "".join("_%s_%s" % (n, re.sub(r"[^A-Za-z0-9_]", "_", t)) for n, t in named)
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
        # A fused matmul's tile ({role: value}; the sidecar's "tile", rows, columns, K
        # step, sizes its grid), and whether its programs loop over the tiles by their
        # number (then column 0's programs alone run it).
        self.tile = {role: v for _, role, v, _, _ in self.args if role in MATMUL_TILE}
        self.persistent = op in MATMUL_KEYS and fn.persistent
        if op in MATMUL_KEYS:
            self.blocks = "grid"

    def describe(self):
        """How the entry calls the kernel, for --check and the sidecar."""
        parts = []
        coll = self.op in COLLECTIVES
        for name, role, value, constexpr, how in self.args:
            if role is None:
                note = {"unread": " (the body never reads it: any value)", "const": " (--const)"}.get(how, "")
                parts.append("%s=%r%s" % (name, value, note))
                continue
            if self.op in GET_ADD_KEYS:
                what = {"nelems": "nelem", "peer": "peer"}.get(role, "%s (*%s)" % (role, self.dtype))
                if role == "max_elems":
                    what = "%d (the most elements one program adds; --const %s=N for another, a power of two)" % (
                        value, name)
                parts.append("%s=%s" % (name, what))
                continue
            what = role
            if role == "chunk_elems":
                parts.append("%s=%d (the most one call puts, elements; --const %s=N for another)" % (
                    name, value, name))
                continue
            if role == "inplace":
                parts.append("%s=dst (*%s), in place: this rank's src is put into its own dst first" % (
                    name, self.dtype))
                continue
            if self.op in MATMUL_KEYS:
                parts.append("%s=%s" % (name, self._matmul_meaning(role, value)))
                continue
            if role == "nelems" and self.inplace:
                parts.append("%s=the end of the block's part of the message, in elements" % name)
                continue
            if role == "me":
                parts.append("%s=this rank (nvshmem my_pe)" % name)
                continue
            if role == "world_size":
                sizes = "nvshmem n_pes"
                if how == "const":
                    sizes = "tl.constexpr: ranks %s" % ",".join(map(str, value))
                elif constexpr:
                    sizes = "tl.constexpr: %d to %d ranks; --const %s=N for a job of N" % (value[0], value[-1], name)
                parts.append("%s=the job's ranks (%s)" % (name, sizes))
                continue
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
        if self.op in MATMUL_KEYS:
            t = self.tile
            blocks = ("a grid of cdiv(m_local, %d) x cdiv(n, %d) programs, launched once per peer (its rows put there "
                      "as they are computed)" % (t["tile_m"], t["tile_n"]))
            if self.persistent:
                blocks = ("the cdiv(m_local, %d) programs of column 0 of symmem's grid run it, each looping over the "
                          "tiles by tl.num_programs(0); launched once per peer" % t["tile_m"])
        if self.inplace and not self.every:
            blocks = ("every block runs it on its chunk of the message (ceil(nbytes / chunk) blocks), a call per %d "
                      "elements, its pointer and count rebased so that its program id times %s lands there; one "
                      "sender: run put with --pattern pair" % (self.chunk, self.chunk_name))
        if self.every == "all":
            blocks = ("every block runs it on its chunk of the message (ceil(nbytes / chunk) blocks), a call per %d "
                      "elements, its pointer and count rebased so that its program id times %s lands there, each "
                      "call putting to every other rank; one sender: run put with --pattern one-to-all" % (
                          self.chunk, self.chunk_name))
        if self.every == "striped":
            blocks = ("a block per chunk of the message and peer (ceil(nbytes / chunk) x (ranks - 1) blocks: block b "
                      "takes chunk b // (ranks - 1), its program id picking the peer) runs it on its chunk, a call "
                      "per %d elements, its pointer and count rebased so that its program id // (ranks - 1) times "
                      "%s lands there; one sender: run put with --pattern one-to-all" % (self.chunk, self.chunk_name))
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

    def _matmul_meaning(self, role, value):
        """What the entry passes a fused matmul's parameter, in words."""
        t, ty = self.tile, self.dtype
        if role in MATMUL_TILE:
            return "%d (--const to change)" % value
        return {"a_ptr": "A (this rank's m_local rows, *%s)" % ty, "b_ptr": "B (*%s)" % ty,
                "c_ptr": "C (every rank's rows, *%s)" % ty, "m_local": "M / ranks", "n": "N", "k": "K",
                "rank": "this rank", "peer": "the rank its rows go to", "stride_am": "K", "stride_bk": "N",
                "stride_cm": "N", "stride_ak": "1", "stride_bn": "1", "stride_cn": "1",
                "num_pid_n": "cdiv(n, %d)" % t["tile_n"],
                "total_tiles": "cdiv(m_local, %d) x cdiv(n, %d)" % (t["tile_m"], t["tile_n"])}[role]

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
        if self.persistent:
            # symmem launches matrix kernels on row blocks x column blocks: the programs of
            # column 0 are the persistent kernel's, looping over every tile.
            body = ["    if tl.program_id(1) == 0:"] + ["    " + b for b in body]
        if self.inplace:
            head = [
                "    # A put in place sends a buffer into the same place on the peer: this rank's",
                "    # dst holds its src's part first (a put to itself). Then the kernel runs over",
                "    # the block's chunk, %d elements a call, its pointer and count rebased so" % self.chunk,
                "    # that its program id times its chunk lands there."]
            if self.every:
                head += ["    me = _sym.my_pe()", "    npes = _sym.n_pes()"]
            if self.every == "striped":
                # A block per chunk and peer: the chunk is the program id over the peers
                # (as the kernel's own start is), and every block of a chunk puts it into
                # place itself (the same bytes; no block waits for another's).
                head.append("    b = tl.program_id(0).to(tl.int64) // (npes - 1)")
            else:
                head.append("    b = tl.program_id(0).to(tl.int64)")
            body = head + [
                "    lo = b * chunk",
                "    n = tl.minimum(chunk, nbytes - lo)",
                "    _sym.putmem_block((dst + lo).to(tl.int64), (src + lo).to(tl.int64), n, _sym.my_pe())",
                "    tl.debug_barrier()",
                "    first = lo // %d" % DTYPES[self.dtype],
                "    count = n // %d" % DTYPES[self.dtype],
                "    for off in range(0, count, %d):" % self.chunk] + ["    " + b for b in body]
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
        if self.worlds and "world" not in fixed:
            out = []
            for i, w in enumerate(self.worlds):
                out.append("%s%s npes == %d:" % (ind, "if" if i == 0 else "elif", w))
                out += self._branches(kfn, depth + 1, dict(fixed, world=w))
            return out
        return ["%s%s(%s)" % (ind, kfn, ", ".join(self._arg(a, fixed) for a in self.args))]

    def _arg(self, a, fixed):
        name, role, value, constexpr, _ = a
        size = DTYPES[self.dtype]
        if role is None:
            return repr(value)
        if self.op in MATMUL_KEYS:
            t = self.tile
            return {"tile_m": str(value), "tile_n": str(value), "tile_k": str(value),
                    "num_pid_n": "tl.cdiv(n, %d)" % t["tile_n"],
                    "total_tiles": "tl.cdiv(m_local, %d) * tl.cdiv(n, %d)" % (t["tile_m"], t["tile_n"])}.get(role, role)
        if self.op in GET_ADD_KEYS:
            # The entry's pointers are of the kernel's type already.
            return {"nelems": "nelem", "max_elems": str(value)}.get(role, role)
        if role == "team":
            return str(TEAM_WORLD) if constexpr else "tl.full([], %d, tl.int32)" % TEAM_WORLD
        if role == "redop":
            return repr(REDUCE_KEYS[self.op])
        if role == "chunk_elems":
            return str(value)
        if role == "inplace":
            ptr = "dst" if self.dtype == "int8" else "dst.to(tl.pointer_type(tl.%s))" % self.dtype
            return "%s + (first + off - b * %d)" % (ptr, self.chunk)
        if role == "me":
            return "me"
        if role == "world_size":
            return str(fixed["world"]) if constexpr else "npes"
        if role == "nelems" and self.inplace:
            # int32, as PyTorch passes a count its kernel compares with program id x chunk.
            return "(b * %d + tl.minimum(count - off, %d)).to(tl.int32)" % (self.chunk, self.chunk)
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


def used_names(kernels, module=None):
    """The names of PyTorch's SHMEM modules the kernels (and their helpers) use, and
    those of the generic module that the file reaches (module: the file's Module): {"nv":
    names of the NVSHMEM module, "generic": of the generic one}. A file written for the
    generic module needs it, though its kernels' calls resolve to the NVSHMEM one."""
    out = {"nv": set(), "generic": module.reached(SHMEM_MODULE) if module is not None else set()}
    for k in kernels:
        out["nv"] |= k.fn.api
        out["generic"] |= k.fn.generic
    return out


def kernels_module(module, kernels, api):
    """The source of a module of its own holding the functions the kernels are (and
    what they read), against api's SHMEM module ("torch": torch's, imported; "symmem":
    symmem's copy): the file's other code (its tests, its torch imports, its gates)
    stays out, and nothing of it runs at build time."""
    roots = sorted(set(k.fn.name for k in kernels), key=lambda n: module.bindings[n][1].lineno)
    lines, defs, shmem = module.bring(roots)
    head = ['"""The kernels symmem builds from a PyTorch-style file, with what they read (generated)."""', ""]
    if api == "torch":
        head.append("import %s as _shmem" % NV_MODULE)
        if shmem["generic"]:
            head.append("import %s as _generic" % SHMEM_MODULE)
    else:
        head.append("import nvshmem_torch as _shmem")
        if shmem["generic"]:
            head.append("_generic = _shmem  # symmem's copy is the generic module and its CUDA backend at once")
    return "\n".join(head + lines + ["", ""] + ["\n\n".join(defs)])


def write_modules(directory, module, kernels, api, name):
    """Writes the kernels' module and the entries' into directory, and returns the
    entries' module name (import it with directory on sys.path)."""
    base = "symmem_%s_" % re.sub(r"[^A-Za-z0-9_]", "_", name)
    with open(os.path.join(directory, base + "kernels.py"), "w") as f:
        f.write(kernels_module(module, kernels, api))
    with open(os.path.join(directory, base + "entries.py"), "w") as f:
        f.write(entries_module(kernels, base + "kernels"))
    return base + "entries"


# What the build does with a plan (the rest of this file needs neither torch nor Triton,
# and imports neither).

def module_names(path):
    """The names a Python file binds at module level, read from its source; None where
    it is not there."""
    try:
        with open(path, "rb") as f:
            return set(Module(ast.parse(f.read(), path)).bindings)
    except (OSError, SyntaxError, ValueError):
        return None


def torch_here():
    """Torch as installed for this Python, found and read, not imported: {"version",
    "modules": {module: its names or None where torch has no such module}, "files"};
    None without torch."""
    import importlib.metadata

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    base = list(spec.submodule_search_locations)[0]
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = "(no version)"
    files = {m: os.path.join(base, *m.split(".")[1:]) + ".py" for m in (NV_MODULE, SHMEM_MODULE)}
    return {"version": version, "modules": {m: module_names(f) for m, f in files.items()}, "files": files}


COPY = "symmem's copy of PyTorch's SHMEM modules"


def short(module):
    return module.rsplit(".", 1)[1]


def choose_api(used, torch=None):
    """Whose module the kernels are built against: ("torch", what) where torch is
    installed and has every module and name the kernels use, else ("symmem", why).
    SYMMEM_TORCH_API=symmem (or torch) decides instead. torch is torch_here()'s answer
    (found when not given): torch is not imported to choose."""
    force = os.environ.get("SYMMEM_TORCH_API", "")
    if force not in ("", "symmem", "torch"):
        raise Refused("SYMMEM_TORCH_API=%s: use symmem or torch" % force)
    if force == "symmem":
        return "symmem", COPY + " (SYMMEM_TORCH_API=symmem)"
    torch = torch if torch is not None else torch_here()
    if torch is None:
        if force == "torch":
            raise Refused("SYMMEM_TORCH_API=torch, but torch is not installed for this Python")
        return "symmem", COPY + " (no torch here)"
    lacking = []
    for module, names in ((NV_MODULE, used["nv"]), (SHMEM_MODULE, used["generic"])):
        have = torch["modules"][module]
        if not names:
            continue
        if have is None:
            lacking.append("no %s" % short(module))
            continue
        missing = sorted(n for n in names if n and n not in have)
        if missing:
            lacking.append("no %s in %s" % (", ".join(missing), short(module)))
    if lacking and force == "torch":
        raise Refused("SYMMEM_TORCH_API=torch, but torch %s has %s" % (torch["version"], "; ".join(lacking)))
    if lacking:
        return "symmem", COPY + " (torch %s has %s)" % (torch["version"], "; ".join(lacking))
    return "torch", "torch %s's SHMEM modules" % torch["version"]


def lacking(kernels, api):
    """The kernels api's module cannot build, with why: [(kernel, why)] (symmem's copy
    has not every name torch's module has)."""
    if api != "symmem":
        return []
    out = []
    for k in kernels:
        missing = sorted(n for n in k.fn.api if n and n not in API)
        if missing:
            out.append((k, "it uses nvshmem.%s, which symmem's copy of the module lacks: build it where torch's "
                           "has it" % ", nvshmem.".join(missing)))
    return out
