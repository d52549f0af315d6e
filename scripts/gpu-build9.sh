#!/usr/bin/env bash
# Ninth session: rebuild the Triton collectives (and MoE, which shares their source)
# with reduce_ll128_*, bring them back as kernels-build.tar.gz, and show what the LL128
# kernel's loads and stores compiled to: each line must move as 16-byte vectors, 8
# threads a line, its flag in the same instruction as its data.
# usage: scripts/gpu-build9.sh   (any GPU machine; one GPU is enough)
set -uo pipefail
source "$(dirname "$0")/gpu-lib.sh"
rebuild --only symmem_collectives,symmem_moe
grep -ai "error\|Traceback" "$out/build.log" | head -20
for k in reduce_ll128_bf16 reduce_ll128_f32 reduce_ll_bf16; do
  f=kernels/build/triton.$k.w8.sm80.ptx
  echo "$k: $(grep -oE '(ld|st)(\.volatile)?\.global(\.nc)?(\.v[24])?\.[bu][0-9]+' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
done
grep -c "bar.sync\|barrier.sync" kernels/build/triton.reduce_ll128_bf16.w8.sm80.ptx
grep -E "\.(reg|shared)" kernels/build/triton.reduce_ll128_bf16.w8.sm80.ptx | head -12
cp kernels/build/triton.reduce_ll128_bf16.w8.sm80.ptx "$out/"
