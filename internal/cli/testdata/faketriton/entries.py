"""Runs the entries the build generates for a user's torch-style file, block by block,
against the stand-in Triton beside this file, and prints what each launch called.

usage: PYTHONPATH=faketriton python3 entries.py ROOT SIGNATURES.json FILE.py SIZES [CONST...] < launches.json
launches.json: [[kernel, program_id, {param: [value, type]}, thread, returns], ...]
(thread: the thread of the block, 0 when left out; returns: what device functions
return, by name, {"nvshmem_n_pes": 3}, 0 for those left out); prints one JSON line per
launch: [[function, [values], [C types]], ...].
"""

import ast
import importlib
import json
import os
import sys
import tempfile

root, sigs, user, sizes = sys.argv[1], sys.argv[2], sys.argv[3], [int(s) for s in sys.argv[4].split(",")]
sys.path.insert(0, os.path.join(root, "kernels", "triton"))
import torch_plan  # noqa: E402
from triton.language import core  # noqa: E402

with open(sigs) as f:
    torch_plan.use_signatures({k["key"]: (k["kernel"], dict(k["params"])) for k in json.load(f)["kernels"]})
with open(user) as f:
    source = f.read()
module = torch_plan.Module(ast.parse(source), source)
kernels, _ = torch_plan.plan(module, user, {}, [], sizes, sys.argv[5:])
# The build's two modules (the file's kernels, symmem's entries), against symmem's copy
# of PyTorch's module, as a build without torch writes them.
out = tempfile.mkdtemp()
sys.path.insert(0, out)
entries = importlib.import_module(torch_plan.write_modules(out, module, kernels, "symmem", "t"))
# A loop of a jit function counts in Triton's int32 values, which take .to().
entries.range = lambda *a: (core.V(i, core.int32) for i in range(*[getattr(x, "value", x) for x in a]))
types = {"*i8": core.pointer_type(core.int8), "*u64": core.pointer_type(core.uint64), "*bf16": core.pointer_type(core.bf16),
         "*fp32": core.pointer_type(core.fp32), "*fp16": core.pointer_type(core.fp16), "*fp64": core.pointer_type(core.fp64),
         "*i32": core.pointer_type(core.int32), "*i64": core.pointer_type(core.int64), "i64": core.int64,
         "i32": core.int32, "u64": core.uint64}
for launch in json.load(sys.stdin):
    kernel, pid, args = launch[:3]
    del core.CALLS[:]
    core.MEMORY.clear()
    core.PROGRAM_ID[0] = pid
    core.THREAD_ID[0] = launch[3] if len(launch) > 3 else 0
    core.RETURNS.clear()
    core.RETURNS.update(launch[4] if len(launch) > 4 else {})
    getattr(entries, kernel)(**{k: core.V(v, types[t]) for k, (v, t) in args.items()})
    print(json.dumps([c[1:] for c in core.CALLS]))
