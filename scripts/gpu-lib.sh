# What the scripts/gpu-*.sh that run on the GPU machine share; each sources it first:
#   source "$(dirname "$0")/gpu-lib.sh"
# It sets bin (the script's first argument, default bin/symmem), out (${OUT:-/tmp}, where
# what comes back is written) and res (a fresh directory for JSON results), and keeps
# the multicast switches off in every process the script starts.
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
res=$(mktemp -d)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

# el START: seconds since START (an $EPOCHREALTIME), one decimal.
el() { awk -v s="$1" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }'; }

# left: how many processes still hold a GPU.
left() { echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"; }

# rebuild [build-kernels.py ARGS...]: unless BUILD=0, rebuild the kernels into
# kernels/build, bring them back as kernels-build.tar.gz (to unpack into kernels/ and
# commit) and run from them (SYMMEM_KERNELS_DIR), so a binary built elsewhere tries
# kernels before they are committed.
rebuild() {
  [[ ${BUILD:-1} == 1 ]] || return 0
  local s=$EPOCHREALTIME
  python3 scripts/build-kernels.py "$@" > "$out/build.log" 2>&1
  echo "-> build $*: rc=$? in $(el "$s") s, $(ls kernels/build | wc -l) files"
  grep -v "^wrote" "$out/build.log" | grep -v "^\s*$" | tail -30
  tar -C kernels -czf "$out/kernels-build.tar.gz" build
  export SYMMEM_KERNELS_DIR=$PWD/kernels/build
}

# b NAME ARGS...: one bench, its JSON kept as $res/NAME.json, its last lines shown.
b() {
  local name=$1; shift
  timeout 300 "$bin" bench "$@" --timeout 5m --json > "$res/$name.json" 2> "$res/$name.err"
  echo "-> bench $name: rc=$?"; grep -av "^#\|^$\|^[├┌└]" "$res/$name.err" | tail -2
}

# show NAME...: the kept results as tables, cut to a terminal's width.
show() {
  local f
  for f in "$@"; do
    echo "== $f"; "$bin" bench show "$res/$f.json" 2>&1 | grep -av "^#\|^[├┌└]" | cut -c1-140
  done
}

# ranks N ARGS...: N ranks of one job started by hand with torchrun's variables on this
# host (on one GPU they share it: SYMMEM_TEST_MPG=1 lets them, gpu-mpg10*.sh), each
# `$bin ARGS` on ${BACKEND:-nvshmem}; then rank 0's last ${TAILN:-12} lines through
# rank0lines (a script may redefine it), the others' last lines, every rank's exit
# status and the wall time. Each call takes the next two ports from ${port:-29600}.
rank0lines() { grep -av "^\s*$\|^[├┌└]\|^#" | cut -c1-150; }
ranks() {
  local n=$1; shift
  port=$((${port:-29600} + 2))
  local s=$EPOCHREALTIME pids=() rc=() r
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=mpg \
      timeout 200 "$bin" "$@" --launcher torchrun --backend "${BACKEND:-nvshmem}" > "$res/out$r.txt" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r"; rc+=($?); done
  rank0lines < "$res/out0.txt" | tail -"${TAILN:-12}"
  for ((r = 1; r < n; r++)); do
    echo "-- rank $r: $(grep -av '^\s*$' "$res/out$r.txt" | tail -2 | tr '\n' ' ' | cut -c1-300)"
  done
  echo "-> $n ranks: $*: rc=${rc[*]} in $(el "$s") s"
}
two() { ranks 2 "$@"; }
