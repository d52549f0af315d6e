#!/usr/bin/env python3
"""torch's own fused operations beside the unfused pair, as an anchor for symmem's
fused rows (docs/benchmarks.md): fused_all_gather_matmul and
fused_matmul_reduce_scatter over symmetric memory (torch.distributed._symmetric_memory,
async tensor parallelism) against torch.mm with NCCL's all-gather or reduce-scatter,
each element of the fused result checked against the unfused one. Needs torch, a GPU
per rank (two or more) and a launcher that sets torchrun's variables:

    torchrun --nproc-per-node 2 scripts/torch-fused-bench.py [--m 8192 --n 8192 --k 8192 --dtype bf16]

It prints a table on rank 0: M, N, K, the operation, torch's fused time, the unfused
time, the GEMM alone and the speed-up, with every shape of the sweep (M down from --m by
2, four shapes, as symmem bench sweeps them). symmem does not depend on it.
"""
import argparse
import os
import sys

os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--m", type=int, default=8192, help="rows of C, the largest of the sweep")
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--dtype", choices=["bf16", "float16"], default="bf16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()

    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    if "LOCAL_RANK" not in os.environ:
        sys.exit("torch-fused-bench: start it with torchrun --nproc-per-node N (N >= 2, a GPU each)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    if torch.cuda.device_count() < world:
        sys.exit("torch-fused-bench: %d ranks need a GPU each; this machine has %d" % (world, torch.cuda.device_count()))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    group = dist.group.WORLD
    symm_mem.enable_symm_mem_for_group(group.group_name)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16

    def timed(fn):
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        t = torch.tensor([start.elapsed_time(end) * 1000 / a.iters], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.AVG)  # the mean over ranks, as symmem's rows
        return t.item()

    rows = []
    m = a.m
    shapes = []
    while len(shapes) < 4 and m >= world and m % world == 0:
        shapes.append(m)
        m //= 2
    for m in reversed(shapes):
        torch.manual_seed(rank)
        # all-gather-matmul: A sharded by rows, B the same everywhere.
        a_shard = torch.randn(m // world, a.k, device="cuda", dtype=dt)
        b = torch.randn(a.k, a.n, device="cuda", dtype=dt)
        dist.broadcast(b, 0)
        gathered = torch.empty(m, a.k, device="cuda", dtype=dt)

        def unfused_ag():
            dist.all_gather_into_tensor(gathered, a_shard)
            return gathered @ b

        def fused_ag():
            return symm_mem.fused_all_gather_matmul(a_shard, [b], gather_dim=0, group_name=group.group_name)[1][0]

        want, got = unfused_ag(), fused_ag()
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
        rows.append(("all-gather-matmul", m, timed(fused_ag), timed(unfused_ag), timed(lambda: gathered @ b)))

        # matmul-reduce-scatter: every rank's own A and B, scattered by rows.
        a_full = torch.randn(m, a.k, device="cuda", dtype=dt)
        out = torch.empty(m // world, a.n, device="cuda", dtype=dt)

        def unfused_rs():
            dist.reduce_scatter_tensor(out, a_full @ b)
            return out

        def fused_rs():
            return symm_mem.fused_matmul_reduce_scatter(a_full, b, "sum", scatter_dim=0, group_name=group.group_name)

        want, got = unfused_rs().clone(), fused_rs()
        torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-1)
        rows.append(("matmul-reduce-scatter", m, timed(fused_rs), timed(unfused_rs), timed(lambda: a_full @ b)))

    if rank == 0:
        print("torch %s, %d ranks, %s, N %d, K %d (times: us, the mean over ranks of %d operations)" % (
            torch.__version__, world, a.dtype, a.n, a.k, a.iters))
        print("%-22s %7s %12s %12s %10s %9s %9s" % ("op", "M", "fused us", "unfused us", "GEMM us", "speed-up", "TFLOP/s"))
        for op, m, fused, unfused, gemm in rows:
            flops = 2.0 * m * a.n * a.k * (world if op == "matmul-reduce-scatter" else 1)
            print("%-22s %7d %12.1f %12.1f %10.1f %8.2fx %9.1f" % (op, m, fused, unfused, gemm, unfused / fused, flops / (fused * 1e6)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
