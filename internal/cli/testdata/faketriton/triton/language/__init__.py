from . import core
from .core import bf16, constexpr, fp16, fp32, fp64, int1, int8, int16, int32, int64, pointer_type, uint64  # noqa: F401


def program_id(axis):
    return core.V(core.PROGRAM_ID[0], core.int32)


def static_range(*a):
    # Unrolled at compile time by Triton: plain numbers here.
    return range(*[getattr(x, "value", x) for x in a])


def minimum(a, b):
    t = a.type if isinstance(a, core.V) else b.type
    return core.V(min(getattr(a, "value", a), getattr(b, "value", b)), t)


def full(shape, value, dtype):
    return core.V(value, dtype)


def static_assert(cond, msg=""):
    assert cond, msg


def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    # The one symmem's entries use: %tid.x, this thread's index in its block.
    assert asm == "mov.u32 $0, %tid.x;", asm
    return core.V(core.THREAD_ID[0], dtype)


def arange(start, end):
    # A block's offsets, as the first of them (the stand-in's values are scalars).
    core.CALLS.append((core.PROGRAM_ID[0], "tl.arange", [start, getattr(end, "value", end)], []))
    return core.V(start, core.int32)


def store(ptr, value, **kw):
    core.MEMORY[ptr.value] = getattr(value, "value", value)
    core.CALLS.append((core.PROGRAM_ID[0], "tl.store", [ptr.value, getattr(value, "value", value)], [str(ptr.type)]))


def load(ptr, **kw):
    return core.V(core.MEMORY.get(ptr.value, 0), ptr.type.element_ty)


def atomic_add(ptr, value, **kw):
    core.MEMORY[ptr.value] = core.MEMORY.get(ptr.value, 0) + getattr(value, "value", value)
    core.CALLS.append((core.PROGRAM_ID[0], "tl.atomic_add", [ptr.value, getattr(value, "value", value)], [str(ptr.type)]))


def debug_barrier():
    core.CALLS.append((core.PROGRAM_ID[0], "tl.debug_barrier", [], []))
