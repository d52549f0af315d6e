"""PyTorch's NVSHMEM-for-Triton API (torch.distributed._symmetric_memory._nvshmem_triton),
and its backend-generic front (_shmem_triton: get_shmem_backend_module(), requires_shmem),
as symmem supplies them where torch is not installed, or where the installed torch lacks a
module or a name a kernel uses (torch 2.11 has no putmem_block, the name of torch 2.8's
first API, and no _shmem_triton). This one module is both: its backend module is itself
(NVSHMEM, as on CUDA).

Both generations are served, with torch's names, argument order and semantics:
- torch 2.8: putmem_block(dst, src, size_bytes, pe), getmem_block, putmem_signal_block(dst,
  src, size_bytes, sig_addr, signal, sig_op, pe), alltoallmem_block, broadcastmem_block,
  on addresses (integers or pointers) and byte counts; enable_triton();
- torch 2.11: put(dest, source, nelems, pe), get, get_nbi on typed pointers with element
  counts (bytes = nelems x the element's size), alltoall, broadcast, reduce over a team;
  @requires_nvshmem;
- both: wait_until, signal_wait_until, signal_op, fence, quiet, my_pe, n_pes, barrier_all,
  sync_all.
Every argument is converted to the C type of the NVSHMEM device function it reaches
(addresses int64, sizes int64, ranks and operators int32, signal values uint64), so a
rank that is an int32 and a size that is a tl.constexpr both fit; the device library
given to triton.compile through extern_libs resolves each call, as with symmem's own
bindings (nvshmem_device). Comparison and signal operators are passed through as the
kernel gives them (NVSHMEM 3.x: SIGNAL_SET 9, SIGNAL_ADD 10; any other value adds).
"""

import os
import sys
import sysconfig

from triton.language import core

# The NVSHMEM 3.x values (torch's docstrings give others; the device library is what counts).
CMP_EQ = 0
CMP_NE = 1
CMP_GT = 2
CMP_LE = 3
CMP_LT = 4
CMP_GE = 5
SIGNAL_SET = 9
SIGNAL_ADD = 10


def _device_library():
    """libnvshmem_device.bc of the NVSHMEM wheel, or NVSHMEM_LIB_DIR's (as torch looks)."""
    d = os.environ.get("NVSHMEM_LIB_DIR")
    if d is None:
        try:
            import nvidia.nvshmem as m
            d = os.path.join(list(m.__path__)[0], "lib")
        except ImportError:
            d = os.path.join(sysconfig.get_path("purelib"), "nvidia", "nvshmem", "lib")
    path = os.path.join(d, "libnvshmem_device.bc")
    if not os.path.exists(path):
        raise RuntimeError("NVSHMEM device library not found at %s: pip install nvidia-nvshmem-cu13 or set NVSHMEM_LIB_DIR" % path)
    return path


def enable_triton(lib_dir=None):
    """torch 2.8's: the extern_libs to launch with. Loading the module into NVSHMEM
    (nvshmemx_cumodule_init) is symmem's to do when it loads the kernel."""
    if lib_dir is not None:
        os.environ["NVSHMEM_LIB_DIR"] = lib_dir
    return {"libnvshmem_device": _device_library()}


class NvshmemLibFinder:
    """torch 2.11's finder of the device library."""

    @classmethod
    def find_device_library(cls):
        return _device_library()


def requires_nvshmem(jit_func):
    """torch 2.11's decorator. symmem builds the kernel ahead of time with the device
    library and loads it into NVSHMEM itself, so the kernel is returned as it is."""
    return jit_func


def get_shmem_backend_module():
    """The generic module's: the SHMEM backend's module, NVSHMEM's, which this one is."""
    return sys.modules[__name__]


def requires_shmem(jit_func):
    """The generic module's decorator: requires_nvshmem, as on CUDA."""
    return requires_nvshmem(jit_func)


def _cast(x, ty, _semantic):
    # core.cast takes what a kernel may pass: a tensor, a pointer, a Python int or a
    # tl.constexpr.
    return core.cast(x, ty, _semantic=_semantic)


def _call(name, args, types, ret, _semantic, pure=False):
    """Calls the NVSHMEM device function name with args converted to types."""
    args = [_cast(a, t, _semantic) for a, t in zip(args, types)]
    return core.extern_elementwise("", "", args, {tuple(types): (name, ret)}, is_pure=pure, _semantic=_semantic)


_I32, _I64, _U64 = core.int32, core.int64, core.uint64
_RMA = (_I64, _I64, _I64, _I32)  # (void *dst, const void *src, size_t nbytes, int pe)


# torch 2.8: addresses and byte counts.
@core.extern
def putmem_block(dst, src, size_bytes, pe, _semantic=None):
    return _call("nvshmemx_putmem_block", [dst, src, size_bytes, pe], _RMA, _I32, _semantic)


@core.extern
def getmem_block(dst, src, size_bytes, pe, _semantic=None):
    return _call("nvshmemx_getmem_block", [dst, src, size_bytes, pe], _RMA, _I32, _semantic)


@core.extern
def getmem_nbi_block(dst, src, size_bytes, pe, _semantic=None):
    return _call("nvshmemx_getmem_nbi_block", [dst, src, size_bytes, pe], _RMA, _I32, _semantic)


@core.extern
def putmem_signal_block(dst, src, size_bytes, signal, sig_val, sig_op, pe, _semantic=None):
    """nvshmemx_putmem_signal_block(dst, src, nbytes, uint64_t *sig_addr, uint64_t signal,
    int sig_op, int pe): the same order in both generations."""
    return _call("nvshmemx_putmem_signal_block", [dst, src, size_bytes, signal, sig_val, sig_op, pe],
                 (_I64, _I64, _I64, _I64, _U64, _I32, _I32), _I32, _semantic)


@core.extern
def alltoallmem_block(team, dest, source, size_bytes, _semantic=None):
    return _call("nvshmemx_alltoallmem_block", [team, dest, source, size_bytes], (_I32, _I64, _I64, _I64), _I32,
                 _semantic)


@core.extern
def broadcastmem_block(team, dest, source, size_bytes, pe_root, _semantic=None):
    return _call("nvshmemx_broadcastmem_block", [team, dest, source, size_bytes, pe_root],
                 (_I32, _I64, _I64, _I64, _I32), _I32, _semantic)


def _typed(dest, source, _semantic):
    """The element size of torch 2.11's typed pointers, which must have one type."""
    d, s = _semantic.to_tensor(dest), _semantic.to_tensor(source)
    if not d.type.scalar.is_ptr() or d.type != s.type:
        raise TypeError("nvshmem.put/get/get_nbi/alltoall/broadcast take two pointers of one element type "
                        "(got %s and %s); for addresses and byte counts use putmem_block/getmem_block" % (d.type, s.type))
    return d.type.scalar.element_ty.primitive_bitwidth // 8


def _nbytes(nelems, size, _semantic):
    n = _cast(nelems, _I64, _semantic)
    return n if size == 1 else n.__mul__(size, _semantic=_semantic)


# torch 2.11: typed pointers and element counts.
@core.extern
def put(dest, source, nelems, pe, _semantic=None):
    n = _nbytes(nelems, _typed(dest, source, _semantic), _semantic)
    return _call("nvshmemx_putmem_block", [dest, source, n, pe], _RMA, _I32, _semantic)


@core.extern
def get(dest, source, nelems, pe, _semantic=None):
    n = _nbytes(nelems, _typed(dest, source, _semantic), _semantic)
    return _call("nvshmemx_getmem_block", [dest, source, n, pe], _RMA, _I32, _semantic)


@core.extern
def get_nbi(dest, source, nelems, pe, _semantic=None):
    n = _nbytes(nelems, _typed(dest, source, _semantic), _semantic)
    return _call("nvshmemx_getmem_nbi_block", [dest, source, n, pe], _RMA, _I32, _semantic)


@core.extern
def alltoall(team, dest, source, nelems_per_pe, _semantic=None):
    n = _nbytes(nelems_per_pe, _typed(dest, source, _semantic), _semantic)
    return _call("nvshmemx_alltoallmem_block", [team, dest, source, n], (_I32, _I64, _I64, _I64), _I32, _semantic)


@core.extern
def broadcast(team, dest, source, nelems, pe_root, _semantic=None):
    n = _nbytes(nelems, _typed(dest, source, _semantic), _semantic)
    return _call("nvshmemx_broadcastmem_block", [team, dest, source, n, pe_root], (_I32, _I64, _I64, _I64, _I32),
                 _I32, _semantic)


_REDUCE_TYPES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                 "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "fp16": "half", "bf16": "bfloat16",
                 "fp32": "float", "fp64": "double"}


@core.extern
def reduce(team, dest, source, nreduce, operation, _semantic=None):
    """nvshmem_TYPE_OP_reduce(team, dest, source, nreduce): TYPE from the pointers,
    operation one of "sum", "max", "min", "prod" (a tl.constexpr)."""
    _typed(dest, source, _semantic)
    ty = str(_semantic.to_tensor(dest).type.scalar.element_ty)
    op = getattr(operation, "value", operation)
    if ty not in _REDUCE_TYPES or op not in ("sum", "max", "min", "prod"):
        raise TypeError("nvshmem.reduce: %s of %s is not one NVSHMEM has (types %s; sum, max, min, prod)" % (
            op, ty, ", ".join(_REDUCE_TYPES)))
    return _call("nvshmem_%s_%s_reduce" % (_REDUCE_TYPES[ty], op), [team, dest, source, nreduce],
                 (_I32, _I64, _I64, _I64), _I32, _semantic)


@core.extern
def wait_until(ivar, cmp_op, cmp_val, _semantic=None):
    """Waits until the word at ivar compares to cmp_val: a 32-bit word where ivar points
    to 32-bit elements (torch 2.11's, nvshmem_int_wait_until), else 64-bit (torch 2.8's,
    on an address: nvshmem_longlong_wait_until)."""
    t = _semantic.to_tensor(ivar)
    if t.type.scalar.is_ptr() and t.type.scalar.element_ty.primitive_bitwidth == 32:
        return _call("nvshmem_int_wait_until", [ivar, cmp_op, cmp_val], (_I64, _I32, _I32), _I32, _semantic)
    return _call("nvshmem_longlong_wait_until", [ivar, cmp_op, cmp_val], (_I64, _I32, _I64), _I32, _semantic)


@core.extern
def signal_wait_until(sig_addr, cmp, cmp_val, _semantic=None):
    return _call("nvshmem_signal_wait_until", [sig_addr, cmp, cmp_val], (_I64, _I32, _U64), _U64, _semantic)


@core.extern
def signal_op(sig_addr, signal, sig_op, pe, _semantic=None):
    return _call("nvshmemx_signal_op", [sig_addr, signal, sig_op, pe], (_I64, _U64, _I32, _I32), _I32, _semantic)


@core.extern
def fence(_semantic=None):
    return _call("nvshmem_fence", [], (), _I32, _semantic)


@core.extern
def quiet(_semantic=None):
    return _call("nvshmem_quiet", [], (), _I32, _semantic)


@core.extern
def my_pe(_semantic=None):
    return _call("nvshmem_my_pe", [], (), _I32, _semantic, pure=True)


@core.extern
def n_pes(_semantic=None):
    return _call("nvshmem_n_pes", [], (), _I32, _semantic, pure=True)


@core.extern
def barrier_all(_semantic=None):
    """The block's barrier: every thread of a Triton kernel's block makes the call, which
    nvshmem_barrier_all, a thread's, would count once per thread."""
    return _call("nvshmemx_barrier_all_block", [], (), _I32, _semantic)


@core.extern
def sync_all(_semantic=None):
    """The block's, as barrier_all."""
    return _call("nvshmemx_sync_all_block", [], (), _I32, _semantic)
