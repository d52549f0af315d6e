#!/usr/bin/env python3
"""Read NVLink data and raw byte counters (nvidia-smi nvlink -gt dr) around one engine
moving data from GPU 0 to GPU 1, to see how many bytes cross the wire per payload byte.
usage: counters.py ./combo [plan ...]"""
import re
import subprocess
import sys


def counters():
    out = subprocess.run(["nvidia-smi", "nvlink", "-gt", "dr"], capture_output=True, text=True).stdout
    tot, gpu = {}, None
    for line in out.splitlines():
        m = re.match(r"GPU (\d+):", line)
        if m:
            gpu = int(m.group(1))
            continue
        m = re.search(r"(Data|Raw) (Tx|Rx): (\d+) KiB", line)
        if m and gpu is not None:
            k = (gpu, m.group(1), m.group(2))
            tot[k] = tot.get(k, 0) + int(m.group(3)) * 1024
    return tot, out


binary = sys.argv[1]
plans = sys.argv[2:] or ["ce-push", "sm-push stride 528x512", "ce-pull", "sm-pull stride 264x1024"]
before, raw = counters()
if not before:
    print("no NVLink counters from nvidia-smi:\n" + raw[:2000])
    sys.exit(0)
for plan in plans:
    size_mib, iters = 256, 100
    before, _ = counters()
    run = subprocess.run([binary, "only", plan, str(size_mib), str(iters)], capture_output=True, text=True)
    after, _ = counters()
    print(run.stdout.strip() or run.stderr.strip())
    for k in sorted(after):
        d = after[k] - before.get(k, 0)
        if d:
            print(f"   GPU{k[0]} {k[1]:4} {k[2]}: {d / 1e9:9.3f} GB  ({d / (size_mib * (1 << 20) * (iters + 3)):.4f} per payload byte)")
