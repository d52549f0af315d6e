#!/usr/bin/env bash
# The MoE combine and dispatch at the default layer by warps per block and blocks (one call on nvidia-h200-x2, the committed binary). usage: bash scripts/gpu-moe-shape.sh
source "$(dirname "$0")/gpu-lib.sh"
for w in 4 8 16 32; do for bl in 64 128; do
  printf "warps %2d blocks %3d: " $w $bl
  timeout 60 "$bin" bench --op combine --impl triton --reps 3 --warps $w --blocks $bl 2>&1 | grep -a "│  56M" | awk -F'│' '{print $5, $7, $11}'
done; done
for w in 8 16 32; do printf "default blocks, warps %2d: " $w; timeout 60 "$bin" bench --op combine,dispatch --impl triton --reps 3 --warps $w 2>&1 | grep -a "│  56M" | awk -F'│' '{printf "%s %s %s | ", $5, $7, $11}'; echo; done
