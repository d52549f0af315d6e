#!/usr/bin/env bash
# Users' collective kernels next to symmem's own and NCCL on two H200s (nvidia-h200-x2):
# the figures the thirteenth session could not take (one GPU only). Builds
# examples/one_shot_all_reduce.py, push_collectives.py and moe_all_to_all.py, benches
# every collective with them, triton and nccl on the same buffers (dispatch and combine
# beside triton: NCCL has none), and brings back the JSON
# results (usercoll-x2.tar.gz) for docs/benchmarks.md.
# usage: scripts/gpu-usercoll-x2.sh   (ship/bins.tar.xz holds bin/symmem)
python3 -c "import tarfile; tarfile.open('ship/bins.tar.xz').extractall('bin')" || exit 1
source "$(dirname "$0")/gpu-lib.sh"
k=$(mktemp -d)
for f in one_shot_all_reduce push_collectives moe_all_to_all; do
  s=$EPOCHREALTIME; "$bin" kernels build examples/$f.py --arch 90 --out "$k" > "$res/build-$f.log" 2>&1
  echo "-> kernels build $f: rc=$? in $(el "$s") s"
done
b ar --kernels "$k" --op all-reduce --impl one-shot-all-reduce,triton,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
b rs --kernels "$k" --op reduce-scatter --impl push-collectives,triton,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
b ag --kernels "$k" --op all-gather,all-to-all,broadcast --impl push-collectives,triton,copy-engine,nccl --min-size 8K --max-size 256M --factor 4 --reps 5
b moe --kernels "$k" --op dispatch,combine --impl moe-all-to-all,triton --reps 5
b ar-graph --kernels "$k" --op all-reduce --impl one-shot-all-reduce,triton,nccl --min-size 4K --max-size 1M --factor 4 --reps 5 --graph
show ar rs ag moe ar-graph
tar -C "$res" -czf "$out/usercoll-x2.tar.gz" .
left
