#!/usr/bin/env bash
# The GPU machine's check of a binary: the GPU unit tests, every op and implementation
# with every byte checked, faults at the point of delivery (each must fail with exit 3
# and name the row), waits given up on the GPU, the launcher's failure paths, external
# launchers, check-nvshmem, and no process left on a GPU. It times nothing:
# scripts/gpu-bench.sh makes docs/benchmarks.md's figures.
# With one GPU the ranks of each job share it: they are started by hand with torchrun's
# variables and SYMMEM_TEST_MPG=1 (NVSHMEM's multiple-processes-per-GPU mode; the GPU is
# time-sliced between them, so each operation takes milliseconds). The cases that need
# symmem's own launcher on several GPUs say "skipped" there.
# Every case runs even when one before it failed; the script exits 1 at the end, listing
# the cases that did not end with the status they must (internal/exitcode: 2 bad input,
# 3 wrong data or data never delivered, 4 a rank failed, 5 timeout, 7 no GPU backend).
# usage: scripts/gpu-check.sh [bin/symmem]   (bin/gpu.test beside it, built with
#        go test -c -tags gpu -o bin/gpu.test ./internal/backend/gpu; log in ${OUT:-/tmp})
#        SECTIONS=torch,faults scripts/gpu-check.sh runs those sections alone (unit, ops,
#        nvshmem, ptx, torch, torchfile, buildtime, faults, launcher, external, fused; all
#        of them by default). torchfile's build tables and buildtime's timings of kernels
#        build go to $OUT/torchfile-*.{txt,json}, fused's bench table to $OUT/fused-bench.txt.
#        BUILDTIME_POOLS="process thread" times buildtime's edited rebuilds with threads too.
set -uo pipefail
bin=${1:-bin/symmem}
out=${OUT:-/tmp}
tmp=$(mktemp -d) || exit 1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ngpu=$(nvidia-smi -L | grep -c '^GPU')
failed=()

# section NAME: whether SECTIONS (unset: every section) asks for NAME.
section() { [[ -z ${SECTIONS:-} || ,$SECTIONS, == *,$1,* ]]; }

# el START: seconds since START (an $EPOCHREALTIME), one decimal.
el() { awk -v s="$1" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }'; }

# job N [VAR=VALUE...] ARGS...: `symmem ARGS` as a job of N ranks with VAR set in each,
# every rank's output in $tmp/out<r>.txt. With N GPUs or more symmem's own launcher
# starts them (--nproc N); with fewer, N ranks started by hand share the GPUs
# (SYMMEM_TEST_MPG=1), and the job's status is its ranks' lowest non-zero one: the rank
# that found the fault (3) is its cause, one that saw its peer leave (4) the consequence.
# Each job started by hand takes the next two ports.
port=29600
job() {
  local n=$1 vars=() r rc=0 s pids=()
  shift
  while [[ $1 == [A-Z]*=* ]]; do vars+=("$1"); shift; done
  if ((ngpu >= n)); then
    env "${vars[@]}" timeout 300 "$bin" "$@" --nproc "$n" > "$tmp/out0.txt" 2>&1
    return
  fi
  port=$((port + 2))
  for ((r = 0; r < n; r++)); do
    env "${vars[@]}" RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port TORCHELASTIC_RUN_ID=check$port CUDA_VISIBLE_DEVICES=$((r % ngpu)) SYMMEM_TEST_MPG=1 \
      timeout 300 "$bin" "$@" --launcher torchrun --backend nvshmem > "$tmp/out$r.txt" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do
    wait "$r"; s=$?
    if ((s != 0 && (rc == 0 || s < rc))); then rc=$s; fi
  done
  return $rc
}

# verdict WANT RC NAME START: the case's line; a status other than WANT fails it.
verdict() {
  if (($2 != $1)); then
    echo "FAILED: $3: rc=$2, want $1 ($(el "$4") s)"
    failed+=("$3 (rc=$2, want $1)")
  else
    echo "ok:     $3: rc=$2 ($(el "$4") s)"
  fi
}

# shown: the lines of the last case's output that name a result or a failure.
shown() {
  grep -ahE 'PASS|FAIL|received|wrong (bytes|elements)|never delivered|gave up|ready|symmem:' "$tmp"/out*.txt |
    sort -u | head -6 | cut -c1-200 | sed 's/^/    /'
  rm -f "$tmp"/out*.txt
}

# expect WANT NAME N [VAR=VALUE...] ARGS...: job N ... must end with status WANT.
expect() {
  local want=$1 name=$2 n=$3 s=$EPOCHREALTIME rc
  shift 3
  job "$n" "$@"; rc=$?
  shown
  verdict "$want" $rc "$name" "$s"
}

# expect_cmd WANT NAME CMD...: CMD itself (a launcher, a one-rank command) must end with
# status WANT.
expect_cmd() {
  local want=$1 name=$2 s=$EPOCHREALTIME rc
  shift 2
  timeout 300 "$@" > "$tmp/out0.txt" 2>&1; rc=$?
  shown
  verdict "$want" $rc "$name" "$s"
}

# skip NAME: a case that needs symmem's own launcher on two GPUs.
skip() { echo "skipped: $1 (needs 2 GPUs, this machine has $ngpu)"; }

# noleft: no process of this symmem binary is left on a GPU.
noleft() {
  local apps
  apps=$(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader) || return 1
  echo "    ${apps:-(no process on any GPU)}"
  ! grep -qF -- "$(basename "$bin")" <<< "$apps"
}
check_noleft() {
  if noleft; then echo "ok:     no process left on a GPU"; else failed+=("processes left on a GPU"); fi
}

{
  echo "== $ngpu GPU(s); $("$bin" version 2>&1 | head -1)"
  if section unit; then
    if [[ -x bin/gpu.test ]]; then
      s=$EPOCHREALTIME
      bin/gpu.test -test.v > "$tmp/gpu-test.txt" 2>&1; rc=$?
      cp "$tmp/gpu-test.txt" "$out/gpu-test.txt"
      grep -aE '^(--- |FAIL|ok|PASS)' "$tmp/gpu-test.txt" | grep -v '^--- PASS' | tail -20
      echo "$(grep -c '^--- PASS' "$tmp/gpu-test.txt") tests passed"
      if ((rc != 0)); then failed+=("gpu.test (rc=$rc)"); echo "FAILED: gpu.test: rc=$rc"; else echo "ok:     gpu.test ($(el "$s") s)"; fi
    else
      echo "skipped: GPU unit tests (no bin/gpu.test)"
    fi
  fi

  if section ops; then
    echo "== every op and implementation, every byte checked"
    for op in put get put-signal; do for impl in triton cuda; do
      expect 0 "run $op --impl $impl" 2 run $op --impl $impl --count 3M --dtype float32 --value 2.5
    done; done
    for op in put get; do for impl in copy-engine sm-store; do
      expect 0 "run $op --impl $impl" 2 run $op --impl $impl --count 64M --dtype bf16 --value -1.5
    done; done
    expect 0 "run put --pattern ring, 3 ranks" 3 run put --pattern ring --dtype int32 --value 40 --count 1K
    # NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): its cases need two.
    for op in all-reduce reduce-scatter all-gather broadcast all-to-all; do
      if ((ngpu >= 2)); then
        expect 0 "run $op --impl nccl" 2 run $op --impl nccl --count 1M
      else
        skip "run $op --impl nccl"
      fi
    done
    all=all-reduce,all-gather,reduce-scatter,broadcast,all-to-all
    expect 0 "bench every collective, 2 ranks" 2 bench --op $all --impl triton,copy-engine --min-size 4K --max-size 16M --factor 16 --reps 2
    expect 0 "bench every collective, --graph" 2 bench --graph --op $all --impl triton,copy-engine --min-size 4K --max-size 4M --factor 32 --reps 2
    expect 0 "bench every collective, 3 ranks" 3 bench --op $all --impl triton,copy-engine --min-size 48K --max-size 12M --factor 16 --reps 2
    expect 0 "bench all-reduce, LL128 forced" 2 SYMMEM_LL128=1 bench --op all-reduce --impl triton --min-size 4K --max-size 16M --factor 16 --reps 2 --warmup 1 --iters 3
    expect 0 "bench all-reduce two-shot, float32" 2 bench --op all-reduce --impl triton --algo two-shot --min-size 64K --max-size 16M --factor 16 --reps 2 --dtype float32
    expect 0 "bench reduce-scatter --algo pull" 2 bench --op reduce-scatter --impl triton --algo pull --min-size 64K --max-size 16M --factor 16 --reps 2
    expect 0 "bench outputs ending mid-vector" 2 bench --op all-reduce,all-gather,broadcast,all-to-all --impl triton,copy-engine --min-size 8200 --max-size 8200 --reps 2
    expect 0 "bench dispatch, combine (pull, staged)" 2 bench --op dispatch,combine --impl triton --tokens 256 --reps 2
    expect 0 "bench combine --algo staged" 2 bench --op combine --impl triton --algo staged --tokens 256 --reps 2
    expect 0 "bench dispatch, combine, 3 ranks" 3 bench --op dispatch,combine --impl triton --tokens 128 --reps 2
    # Reduction operators: every one on 3 ranks, then each at every algorithm's sizes.
    for red in prod max min avg; do
      expect 0 "run all-reduce --redop $red, 3 ranks" 3 run all-reduce --impl triton --redop $red --count 1K
    done
    expect 0 "run reduce-scatter --redop max" 2 run reduce-scatter --impl triton --redop max --count 64K --dtype float32
    expect 0 "bench --redop all, every algorithm" 2 bench --op all-reduce,reduce-scatter --impl triton --redop all --min-size 8K --max-size 16M --factor 8 --reps 2 --warmup 1 --iters 3
    expect 0 "bench --redop all, float32" 2 bench --op all-reduce --impl triton --redop all --dtype float32 --min-size 4K --max-size 4M --factor 32 --reps 2 --warmup 1 --iters 3
    if ((ngpu >= 2)); then
      expect 0 "bench nccl --redop all" 2 bench --op all-reduce,reduce-scatter --impl nccl,nccl-symm --redop all --min-size 8K --max-size 16M --factor 8 --reps 2
    else
      skip "bench nccl --redop all"
    fi
    # Signals, put-flag and barrier rounds.
    for impl in triton cuda; do
      expect 0 "run barrier --impl $impl, 3 ranks" 3 run barrier --impl $impl
    done
    for impl in triton cuda; do
      expect 0 "run put-flag --impl $impl" 2 run put-flag --impl $impl
    done
    expect 0 "run signal --impl cuda" 2 run signal --impl cuda
    expect 0 "bench signal, put-flag, barrier" 2 bench --op signal,put-flag,barrier --impl triton,cuda,nvshmem --min-size 1K --max-size 1M --factor 1024 --reps 2 --iters 5
    # Left out, --impl takes every implementation, nccl-device too, which needs two GPUs.
    p2p=()
    ((ngpu >= 2)) || p2p=(--impl triton,cuda,copy-engine,sm-store)
    expect 0 "bench p2p, every implementation" 2 bench --op put,get,put-signal,latency --min-size 1M --max-size 1M --reps 2 "${p2p[@]}"
    expect 0 "bench --overlap 2" 2 bench --op put --min-size 1M --max-size 1M --reps 2 --overlap 2 "${p2p[@]}"
    expect 0 "bench --tune" 2 bench --tune --op put,put-signal --impl triton,cuda,sm-store --min-size 1M --max-size 16M --factor 16 --reps 2
    expect 0 "bench --matrix" 2 bench --op put --impl triton --min-size 16M --max-size 16M --matrix --reps 2
  fi

  if section nvshmem; then
    echo "== NVSHMEM's own collectives: every operator, every collective"
    all=all-reduce,all-gather,reduce-scatter,broadcast,all-to-all
    for red in sum prod max min avg; do
      expect 0 "run all-reduce --impl nvshmem --redop $red, 3 ranks" 3 run all-reduce --impl nvshmem --redop $red --count 1K
    done
    expect 0 "run all-reduce --impl nvshmem --redop avg, float32" 2 run all-reduce --impl nvshmem --redop avg --dtype float32 --count 4K
    expect 0 "run reduce-scatter --impl nvshmem --redop max, 3 ranks" 3 run reduce-scatter --impl nvshmem --redop max --dtype float32 --count 3K
    for op in all-gather all-to-all broadcast; do
      expect 0 "run $op --impl nvshmem, 3 ranks" 3 run $op --impl nvshmem --count 96K
    done
    expect 0 "bench every collective --impl nvshmem,triton,copy-engine" 2 bench --op $all --impl nvshmem,triton,copy-engine --min-size 8 --max-size 64M --factor 64 --reps 2
    expect 0 "bench --redop all --impl nvshmem" 2 bench --op all-reduce,reduce-scatter --impl nvshmem --redop all --min-size 8K --max-size 16M --factor 128 --reps 2
    # Its reduce-scatter works in half of NVSHMEM_REDUCE_SCRATCH_SIZE (all ranks' input).
    expect 2 "run reduce-scatter --impl nvshmem past its scratch" 2 run reduce-scatter --impl nvshmem --count 1M
    expect 0 "run reduce-scatter --impl nvshmem, scratch raised" 2 NVSHMEM_REDUCE_SCRATCH_SIZE=16M run reduce-scatter --impl nvshmem --count 1M
    # reduce to a root: an all-reduce into scratch, the root's copy out; the others'
    # outputs are checked untouched.
    for red in sum prod max min avg; do
      expect 0 "run reduce --impl nvshmem --redop $red --root 2, 3 ranks" 3 run reduce --impl nvshmem --redop $red --root 2 --count 1K
    done
    expect 0 "bench reduce --impl nvshmem --root 1" 2 bench --op reduce --impl nvshmem --root 1 --min-size 8K --max-size 16M --factor 128 --reps 2
    expect 3 "drop: run reduce --impl nvshmem on the root" 3 SYMMEM_TEST_FAULT=2:drop run reduce --impl nvshmem --root 2 --count 1K
    for op in reduce gather scatter; do
      if ((ngpu >= 2)); then
        expect 0 "run $op --impl nccl --root 1" 2 run $op --impl nccl --root 1 --count 1M
      else
        skip "run $op --impl nccl --root 1"
      fi
    done
    expect 0 "run barrier --impl nvshmem, 3 ranks" 3 run barrier --impl nvshmem
  fi

  if section ptx; then
    # Each kernel compiled by the driver from its PTX (SYMMEM_TEST_PTX=1 fails a kernel
    # that has none), as on a GPU newer than every cubin; PTX calling NVSHMEM is linked
    # with libnvshmem_device.a from beside the host library.
    echo "== the kernels from their PTX, as a GPU newer than their cubins loads them"
    for op in put get put-signal; do for impl in cuda triton; do
      expect 0 "ptx: run $op --impl $impl" 2 SYMMEM_TEST_PTX=1 run $op --impl $impl --count 3M --dtype float32 --value 2.5
    done; done
    expect 0 "ptx: run put --impl sm-store" 2 SYMMEM_TEST_PTX=1 run put --impl sm-store --count 1M
    expect 0 "ptx: run signal --impl cuda" 2 SYMMEM_TEST_PTX=1 run signal --impl cuda
    expect 0 "ptx: run put-flag --impl cuda" 2 SYMMEM_TEST_PTX=1 run put-flag --impl cuda
    expect 0 "ptx: run barrier --impl cuda, 3 ranks" 3 SYMMEM_TEST_PTX=1 run barrier --impl cuda
    expect 0 "ptx: run all-reduce --impl nvshmem --redop max, 3 ranks" 3 SYMMEM_TEST_PTX=1 run all-reduce --impl nvshmem --redop max --count 3K
    for op in reduce-scatter all-gather all-to-all broadcast barrier; do
      expect 0 "ptx: run $op --impl nvshmem" 2 SYMMEM_TEST_PTX=1 run $op --impl nvshmem --count 16K
    done
    expect 0 "ptx: bench signal, put-flag, barrier --impl cuda,nvshmem" 2 SYMMEM_TEST_PTX=1 bench --op signal,put-flag,barrier --impl cuda,nvshmem --min-size 1K --max-size 1M --factor 1024 --reps 2 --iters 5
  fi

  if section torch; then
    echo "== PyTorch's NVSHMEM Triton test file, built with torch's module and with symmem's"
    # Its 15 kernels, 12 served (not my_fence_kernel, my_barrier_test_kernel,
    # my_sync_test_kernel), each run with every byte checked; the drop fault fails them.
    pt=internal/cli/testdata/torch/test_nvshmem_triton.py
    if python3 -c 'import triton, nvidia.nvshmem' 2> /dev/null; then
      # The seed's kernel as the PR prints it, built with no other argument (into
      # ./user-kernels), then the put test: rank 0 writes 5 into rank 1.
      seed=$tmp/seed
      mkdir -p "$seed" && cp examples/seed_put.py "$seed/"
      expect_cmd 0 "kernels build seed_put.py, no other argument" bash -c 'cd "$1" && "$2" kernels build seed_put.py' _ "$seed" "$(realpath "$bin")"
      expect 0 "seed-put: run put" 2 run put --kernels "$seed/user-kernels" --impl seed-put
      for api in torch symmem; do
        k=$tmp/pt-$api
        expect_cmd 0 "kernels build the test file ($api's module)" env SYMMEM_TORCH_API=$api "$bin" kernels build $pt --const nbi=0,1 --name pt --warps 4,32 --out "$k"
        expect 0 "pt/$api: run put" 2 run put --kernels "$k" --impl pt
        for nbi in 0 1; do expect 0 "pt/$api: run get nbi=$nbi" 2 run get --kernels "$k" --impl "pt[nbi=$nbi]"; done
        for op in put-signal signal put-flag barrier; do expect 0 "pt/$api: run $op" 2 run $op --kernels "$k" --impl pt; done
        expect 0 "pt/$api: run barrier, 3 ranks" 3 run barrier --kernels "$k" --impl pt
        for op in all-to-all broadcast; do expect 0 "pt/$api: run $op" 2 run $op --kernels "$k" --impl pt --count 64K; done
        for red in sum max min prod; do for dt in bf16 float32; do
          expect 0 "pt/$api: run all-reduce --redop $red --dtype $dt" 2 run all-reduce --kernels "$k" --impl pt --redop $red --dtype $dt --count 64K
        done; done
        expect 2 "pt/$api: run all-reduce --redop avg (no kernel)" 2 run all-reduce --kernels "$k" --impl pt --redop avg
        expect 0 "pt/$api: bench every op" 2 bench --kernels "$k" --impl pt,triton --op put,put-signal,signal,put-flag,barrier,all-to-all,broadcast,all-reduce \
          --redop sum,max,min,prod --min-size 4K --max-size 64K --factor 16 --reps 2
        expect 0 "pt/$api: bench get" 2 bench --kernels "$k" --impl "pt[nbi=0],pt[nbi=1]" --op get --min-size 4K --max-size 64K --factor 16 --reps 2
        for op in signal put-flag barrier; do
          expect 3 "pt/$api: drop: run $op" 2 SYMMEM_TEST_FAULT=0:drop run $op --kernels "$k" --impl pt --wait-limit 2s
        done
        expect 3 "pt/$api: drop: run all-reduce --redop max" 2 SYMMEM_TEST_FAULT=1:drop run all-reduce --kernels "$k" --impl pt --redop max --count 64K
      done
    else
      echo "skipped: PyTorch's test file (no Triton or NVSHMEM wheel for python3)"
    fi
    check_noleft
  fi

  if section torchfile; then
    echo "== PyTorch's newest SHMEM test file (the generic _shmem_triton module), built whole"
    # Its 27 kernels: 20 served (my_get_kernel once per nbi, my_fused_get_add_kernel once
    # per element type, the two fused matmuls), each run with every byte checked on 2
    # and 3 ranks (the puts in place to every peer one-to-all); the drop fault fails the
    # puts in place and get-add, and get-add past its block is refused. Then the time
    # kernels build takes: cold, unchanged, and edited 5 times (processes and threads).
    st=internal/cli/testdata/torch/test_shmem_triton.py
    if python3 -c 'import triton, nvidia.nvshmem' 2> /dev/null; then
      # TORCHFILE_OUT keeps the builds where a later call on a warm machine finds them
      # (kernels build skips a build its --out holds); TORCHFILE_RANKS the job sizes the
      # runs take (2 3 by default), so that one call can take each.
      k=${TORCHFILE_OUT:-$tmp}/st k4=${TORCHFILE_OUT:-$tmp}/st4
      s=$EPOCHREALTIME
      "$bin" kernels build --check $st --name st --const nbi=0,1 > "$out/torchfile-table.txt" 2>&1
      verdict 0 $? "kernels build --check the test file" "$s"
      s=$EPOCHREALTIME
      "$bin" kernels build $st --name st --const nbi=0,1 --warps 4,32 --out "$k" > "$out/torchfile-build.txt" 2>&1
      verdict 0 $? "kernels build the test file, whole" "$s"
      grep -E 'built against|timing:|FAILED' "$out/torchfile-build.txt" | cut -c1-400 | sed 's/^/    /'
      cp "$k/st.build.json" "$out/torchfile-record.json" 2> /dev/null # each compile's time and Triton's stages
      # torch 2.11 has no _shmem_triton: asked for torch's modules, the build refuses.
      expect_cmd 2 "kernels build the test file, SYMMEM_TORCH_API=torch" env SYMMEM_TORCH_API=torch "$bin" kernels build $st --const nbi=0 --out "$tmp/st-torch"
      # The puts in place a call per 4096 elements: several calls a block; get-add's block
      # of 4096 elements.
      s=$EPOCHREALTIME
      "$bin" kernels build $st --name st4 --const nbi=0 --const chunk_per_wg=4096 --const chunk_per_wg_per_peer=4096 --const block_size=4096 --warps 4,32 --out "$k4" >> "$out/torchfile-build.txt" 2>&1
      verdict 0 $? "kernels build the test file, --const chunk_per_wg=4096, chunk_per_wg_per_peer=4096, block_size=4096" "$s"
      inplace=("st[fn=my_parallel_put_quiet_kernel]" "st[fn=my_parallel_put_no_quiet_kernel]")
      # The puts in place to every peer: one sender, rank 0, every other rank a receiver
      # that checks it holds the whole message (--pattern one-to-all); the striped one on
      # a block per chunk and peer.
      toall=("st[fn=my_parallel_put_allpeers_quiet_kernel]" "st[fn=my_parallel_put_striped_peers_quiet_kernel]")
      toall4=("st4[fn=my_parallel_put_allpeers_quiet_kernel][chunk_per_wg=4096]" "st4[fn=my_parallel_put_striped_peers_quiet_kernel][chunk_per_wg_per_peer=4096]")
      ranks=${TORCHFILE_RANKS:-2 3}
      for n in $ranks; do
        # A put in place has one sender, rank 0: --pattern pair, to the last rank.
        pair=(--pattern pair --peer $((n - 1)))
        for impl in st "st[fn=my_put_quiet_kernel]"; do
          expect 0 "st: run put --impl $impl, $n ranks" $n run put --kernels "$k" --impl "$impl" --count 1M --dtype float32 --value 2.5
        done
        for impl in "${inplace[@]}"; do
          expect 0 "st: run put --impl $impl, $n ranks, 3M" $n run put --kernels "$k" --impl "$impl" "${pair[@]}" --count 3M --dtype float32 --value 2.5
          expect 0 "st: run put --impl $impl, $n ranks, 1000003 bytes" $n run put --kernels "$k" --impl "$impl" "${pair[@]}" --count 1000003
          expect 0 "st4: run put --impl ${impl/st/st4}[chunk_per_wg=4096], $n ranks" $n run put --kernels "$k4" --impl "${impl/st/st4}[chunk_per_wg=4096]" "${pair[@]}" --count 3M
        done
        for impl in "${toall[@]}" triton; do
          expect 0 "st: run put --impl $impl --pattern one-to-all, $n ranks, 3M" $n run put --kernels "$k" --impl "$impl" --pattern one-to-all --count 3M --dtype float32 --value 2.5
          expect 0 "st: run put --impl $impl --pattern one-to-all, $n ranks, 1000003 bytes" $n run put --kernels "$k" --impl "$impl" --pattern one-to-all --count 1000003
        done
        for impl in "${toall4[@]}"; do
          expect 0 "st4: run put --impl $impl --pattern one-to-all, $n ranks" $n run put --kernels "$k4" --impl "$impl" --pattern one-to-all --count 3M
        done
        for nbi in 0 1; do expect 0 "st: run get --impl st[nbi=$nbi], $n ranks" $n run get --kernels "$k" --impl "st[nbi=$nbi]" --count 1M; done
        for op in put-signal signal put-flag barrier; do expect 0 "st: run $op, $n ranks" $n run $op --kernels "$k" --impl st; done
        for op in all-to-all broadcast; do expect 0 "st: run $op, $n ranks" $n run $op --kernels "$k" --impl st --count 64K; done
        for red in sum max min prod; do for dt in bf16 float32; do
          expect 0 "st: run all-reduce --redop $red --dtype $dt, $n ranks" $n run all-reduce --kernels "$k" --impl st --redop $red --dtype $dt --count 64K
        done; done
        # get-add: rank 0 gets from its peer (pair; ring: each rank from the next) within
        # the kernel's block of 1024 elements, and at exactly it (4096 with --const).
        for dt in float32 bf16; do for count in 1000 1024; do
          expect 0 "st: run get-add --dtype $dt --count $count, $n ranks" $n run get-add --kernels "$k" --impl st --dtype $dt --count $count --value 1.5
        done; done
        expect 0 "st4: run get-add --impl st4[block_size=4096] --count 4096, $n ranks" $n run get-add --kernels "$k4" --impl "st4[block_size=4096]" --count 4096
      done
      # Its kernels of the other element types get-add adds in.
      for dt in float16 float64 int32 int64; do
        expect 0 "st: run get-add --dtype $dt" 2 run get-add --kernels "$k" --impl st --dtype $dt --count 1000
      done
      # More elements than its block: refused before any rank starts, naming the --const.
      expect 2 "st: run get-add --count 1025 (past its block of 1024)" 2 run get-add --kernels "$k" --impl st --count 1025
      # Rank 0 gets (pair and ring): dropped, its dst keeps the complement it held.
      for n in $ranks; do
        expect 3 "st: drop: run get-add, $n ranks" $n SYMMEM_TEST_FAULT=0:drop run get-add --kernels "$k" --impl st --count 1000
      done
      for impl in "${inplace[@]}"; do
        expect 3 "st: drop: run put --impl $impl" 2 SYMMEM_TEST_FAULT=0:drop run put --kernels "$k" --impl "$impl" --count 3M
      done
      for impl in "${toall[@]}"; do
        expect 3 "st: drop: run put --impl $impl --pattern one-to-all, 3 ranks" 3 SYMMEM_TEST_FAULT=0:drop run put --kernels "$k" --impl "$impl" --pattern one-to-all --count 3M
        # On 3 ranks it reaches every peer: a ring, and bench's pairs, are refused.
        expect 2 "st: run put --impl $impl --pattern ring, 3 ranks (refused)" 3 run put --kernels "$k" --impl "$impl" --pattern ring
      done
      expect 2 "st: bench put --impl ${toall[0]}, 3 ranks (refused)" 3 bench --kernels "$k" --impl "${toall[0]}" --op put --min-size 1M --max-size 1M --reps 1
      # The file's two fused matmul kernels, fp16 as written: all-gather-matmul, every
      # element of C checked on every rank.
      for n in $ranks; do
        for impl in st "st[fn=my_fused_matmul_allgather_put_persistent_kernel]"; do
          for shape in "--m 192 --n 128 --k 128" "--m 384 --n 320 --k 200"; do
            expect 0 "st: run all-gather-matmul --impl $impl $shape, $n ranks" $n run all-gather-matmul --kernels "$k" --impl "$impl" --dtype float16 $shape
          done
          expect 0 "st: run all-gather-matmul --impl $impl --random, $n ranks" $n run all-gather-matmul --kernels "$k" --impl "$impl" --dtype float16 --random --m 384
        done
      done
      s=$EPOCHREALTIME
      job 2 bench --kernels "$k" --impl "st,st[fn=my_put_quiet_kernel],${inplace[0]},${inplace[1]},${toall[0]},${toall[1]},triton,copy-engine" --op put \
        --min-size 1M --max-size 64M --factor 8 --reps 3; rc=$?
      cat "$tmp"/out*.txt > "$out/torchfile-bench.txt"
      shown
      verdict 0 $rc "st: bench put beside triton and copy-engine" "$s"
    else
      echo "skipped: the test file (no Triton or NVSHMEM wheel for python3)"
    fi
    check_noleft
  fi

  if section buildtime; then
    if python3 -c 'import triton, nvidia.nvshmem' 2> /dev/null; then
      echo "== kernels build's time: the seed's file cold, unchanged, and edited 5 times"
      b=$tmp/buildtime
      mkdir -p "$b" && cp examples/seed_put.py "$b/seed_put.py" && cp "$b/seed_put.py" "$b/orig.py"
      times=$out/torchfile-times.txt
      : > "$times"
      # timed LABEL [VAR=VALUE...]: kernels build of the seed's file in $b, its output
      # kept; prints its wall seconds.
      exe=$(realpath "$bin")
      timed() {
        local label=$1 t0 rc
        shift
        t0=$EPOCHREALTIME
        (cd "$b" && env "$@" "$exe" kernels build seed_put.py --out built) > "$b/last.txt" 2>&1; rc=$?
        awk -v s="$t0" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.2f", e - s }'
        echo "## $label (rc=$rc)" >> "$times"
        cat "$b/last.txt" >> "$times"
        ((rc == 0))
      }
      # edit N: the kernel's body gains an unused statement of its own (Triton's cache
      # has no compile of it).
      edit() { sed "/nvshmem.putmem_block(dst_ptr, src_ptr, numel, peer)/a\    edited = numel + $1" "$b/orig.py" > "$b/seed_put.py"; }
      cache=$tmp/triton-cache
      rm -rf "$cache"
      cold=$(timed cold TRITON_CACHE_DIR="$cache") || failed+=("kernels build seed_put.py, cold")
      same=$(timed unchanged TRITON_CACHE_DIR="$cache") || failed+=("kernels build seed_put.py, unchanged")
      if grep -q "unchanged since" "$b/last.txt" && awk -v t="$same" 'BEGIN { exit !(t <= 1) }'; then
        echo "ok:     unchanged: ${same} s, not rebuilt"
      else
        echo "FAILED: unchanged: ${same} s"; failed+=("kernels build seed_put.py, unchanged: ${same} s")
      fi
      n=0
      for pool in ${BUILDTIME_POOLS:-process}; do
        walls=()
        for i in 1 2 3 4 5; do
          n=$((n + 1))
          edit $n
          walls+=("$(timed "edited $i, BUILD_KERNELS_POOL=$pool" TRITON_CACHE_DIR="$cache" BUILD_KERNELS_POOL=$pool)") ||
            failed+=("kernels build seed_put.py, edited ($pool)")
        done
        median=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n 3p)
        echo "    edited, $pool pool: ${walls[*]} s; median $median s"
        echo "## edited, $pool pool: ${walls[*]} s; median $median s" >> "$times"
        if [[ $pool == process ]] && ! awk -v t="$median" 'BEGIN { exit !(t <= 4) }'; then
          echo "FAILED: edited rebuild median $median s, want <= 4 s"; failed+=("edited rebuild median $median s > 4 s")
        fi
      done
      # The last edit built against a pruned NVSHMEM library and against the whole one:
      # the same kernel, which runs.
      grep -q "libnvshmem_device.bc pruned 4" "$b/last.txt" || failed+=("edited rebuild: no pruned NVSHMEM library")
      for f in "$cache"/symmem-pruned-*/*.ll; do
        echo "    kept: ${f#"$cache"/}: $(wc -c < "$f") bytes, $(grep -c '^define' "$f") functions"
      done | tee -a "$times"
      t0=$EPOCHREALTIME
      (cd "$b" && SYMMEM_NVSHMEM_PRUNED=0 TRITON_CACHE_DIR="$tmp/triton-whole" "$exe" kernels build seed_put.py --out whole) > "$b/last.txt" 2>&1
      verdict 0 $? "kernels build seed_put.py, the whole NVSHMEM library" "$t0"
      { echo "## edited, the whole NVSHMEM library ($(el "$t0") s)"; cat "$b/last.txt"; } >> "$times"
      compared=0
      for f in "$b"/built/*.cubin; do
        [[ -e $f ]] || continue
        compared=$((compared + 1))
        # Two builds' cubins differ in their debug info, which names the build's own
        # temporary directory: what must be the same is the machine code.
        if cmp -s "$f" "$b/whole/${f##*/}"; then
          echo "    same cubin: ${f##*/}"
        elif ! command -v cuobjdump > /dev/null; then
          echo "FAILED: no cuobjdump to compare the pruned and the whole build's ${f##*/}"; failed+=("no cuobjdump")
        elif cmp -s <(cuobjdump -sass "$f" 2>&1) <(cuobjdump -sass "$b/whole/${f##*/}" 2>&1) &&
          [[ $(cuobjdump -sass "$f" | grep -c '/\*[0-9a-f]*\*/') -gt 0 ]]; then
          echo "    same machine code (cuobjdump -sass, $(cuobjdump -sass "$f" | grep -c '/\*[0-9a-f]*\*/') instructions): ${f##*/}"
        else
          echo "FAILED: the pruned and the whole build differ: ${f##*/}"; failed+=("pruned and whole builds differ: ${f##*/}")
        fi
      done
      if ((compared == 0)); then
        echo "FAILED: no cubin in $b/built to compare"; failed+=("pruned and whole builds: no cubin compared")
      fi
      expect 0 "edited seed_put, pruned NVSHMEM library: run put" 2 run put --kernels "$b/built" --impl seed-put
      expect 0 "edited seed_put, pruned NVSHMEM library: bench put" 2 bench --op put --kernels "$b/built" --impl seed-put --min-size 8 --max-size 8 --reps 2
      # A file whose kernels torch 2.11's module serves: torch imported, once.
      cp examples/torch_kernels.py examples/torch_kernels.symmem.json "$b/"
      t0=$EPOCHREALTIME
      (cd "$b" && "$exe" kernels build torch_kernels.py --out built) > "$b/last.txt" 2>&1
      verdict 0 $? "kernels build torch_kernels.py, torch's module" "$t0"
      { echo "## torch_kernels.py, torch's module ($(el "$t0") s)"; cat "$b/last.txt"; } >> "$times"
      grep -q "torch imported once" "$b/last.txt" || failed+=("torch_kernels.py: torch not imported once")
      echo "    cold ${cold} s, unchanged ${same} s (each build's own timing line in $times)"
      grep -E '^## |^timing:|unchanged since' "$times" | cut -c1-300 | sed 's/^/    /'
    else
      echo "skipped: kernels build's time (no Triton or NVSHMEM wheel for python3)"
    fi
  fi

  if section faults; then
    echo "== faults at the point of delivery: each must fail (exit 3) and name the row"
    # 0:drop[:N]: rank 0's backend skips its transfers and signals from its N-th
    # measurement on; 1:corrupt: rank 1 reads back a wrong byte; 1:absent:N: rank 1
    # launches nothing for its collectives from measurement N on.
    impls=triton,cuda,copy-engine,sm-store
    expect 3 "drop: bench put, get" 2 SYMMEM_TEST_FAULT=0:drop:1 bench --op put,get --impl $impls --min-size 1M --max-size 16M --factor 16 --reps 2
    expect 3 "drop: bench put --overlap 2" 2 SYMMEM_TEST_FAULT=0:drop:1 bench --op put --impl $impls --min-size 1M --max-size 1M --reps 2 --overlap 2
    expect 3 "drop: bench put --graph" 2 SYMMEM_TEST_FAULT=0:drop:1 bench --op put --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2 --graph
    for impl in triton cuda; do
      expect 3 "drop: bench put-signal $impl" 2 SYMMEM_TEST_FAULT=0:drop:1 bench --op put-signal --impl $impl --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
      expect 3 "drop: bench latency $impl, the GPU gives up" 2 SYMMEM_TEST_FAULT=1:drop:1 bench --op latency --impl $impl --iters 2 --reps 3 --wait-limit 2s
      expect 3 "drop: run put-signal $impl, the GPU gives up" 2 SYMMEM_TEST_FAULT=0:drop run put-signal --impl $impl --wait-limit 2s
    done
    for op in put get; do for impl in triton cuda copy-engine sm-store; do
      expect 3 "drop: run $op $impl" 2 SYMMEM_TEST_FAULT=0:drop run $op --impl $impl --count 1M
    done; done
    expect 3 "drop: bench collectives" 2 SYMMEM_TEST_FAULT=1:drop:1 bench --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl triton,copy-engine --min-size 1M --max-size 1M --reps 2
    expect 3 "drop: bench collectives, 3 ranks" 3 SYMMEM_TEST_FAULT=2:drop:1 bench --op all-reduce --impl triton --min-size 1M --max-size 1M --reps 2
    if ((ngpu >= 2)); then
      expect 3 "drop: bench nccl" 2 SYMMEM_TEST_FAULT=1:drop:1 bench --op all-reduce,all-gather --impl nccl --min-size 1M --max-size 1M --reps 2
    else
      skip "drop: bench nccl"
    fi
    expect 3 "drop: bench dispatch, combine" 2 SYMMEM_TEST_FAULT=1:drop:1 bench --op dispatch,combine --impl triton --tokens 256 --reps 2
    expect 3 "corrupt: bench put" 2 SYMMEM_TEST_FAULT=1:corrupt bench --op put --impl triton --min-size 1M --max-size 1M --reps 2
    expect 3 "redop: a max that sums" 2 SYMMEM_TEST_FAULT=1:redop:sum run all-reduce --impl triton --redop max --count 1K
    expect 3 "redop: a prod that adds" 2 SYMMEM_TEST_FAULT=0:redop:sum bench --op all-reduce,reduce-scatter --impl triton --redop prod --min-size 1M --max-size 1M --reps 2
    expect 3 "redop: a min that takes the max" 2 SYMMEM_TEST_FAULT=1:redop:max bench --op all-reduce --impl triton --redop min --min-size 4K --max-size 4M --factor 32 --reps 2
    expect 3 "redop: nvshmem's max that keeps rank 0's value" 2 SYMMEM_TEST_FAULT=0:redop:first run all-reduce --impl nvshmem --redop max --count 1K
    expect 3 "redop: nvshmem's prod that adds" 2 SYMMEM_TEST_FAULT=1:redop:sum run reduce-scatter --impl nvshmem --redop prod --count 2K
    expect 3 "drop: bench nvshmem collectives" 2 SYMMEM_TEST_FAULT=1:drop:1 bench --op all-reduce,all-gather,reduce-scatter,broadcast,all-to-all --impl nvshmem --min-size 256K --max-size 256K --reps 2
    # 1:unordered: put-flag's flag before its data; a barrier round over before rank
    # 1's stamp lands.
    for impl in triton cuda nvshmem; do
      expect 3 "unordered: a barrier that returns before the stamps land, $impl" 3 SYMMEM_TEST_FAULT=1:unordered run barrier --impl $impl
    done
    for impl in triton cuda; do
      expect 3 "unordered: put-flag without its fence, $impl" 2 SYMMEM_TEST_FAULT=0:unordered run put-flag --impl $impl
    done
    for op in all-reduce all-gather reduce-scatter; do
      expect 3 "absent: bench $op, the GPU gives up" 2 SYMMEM_TEST_FAULT=1:absent:1 bench --op $op --impl triton --min-size 1M --max-size 1M --reps 2 --wait-limit 2s
    done
    check_noleft
  fi

  if section launcher; then
    echo "== the launcher's failure paths and bad input"
    if ((ngpu >= 2)); then
      expect 4 "fault 1:crash" 2 SYMMEM_TEST_FAULT=1:crash run put
      expect 4 "fault 0:exit" 2 SYMMEM_TEST_FAULT=0:exit run put-signal
      expect 4 "fault 1:kill" 2 SYMMEM_TEST_FAULT=1:kill run get
      expect 4 "fault 1:kill mid-bench" 2 SYMMEM_TEST_FAULT=1:kill bench --op all-reduce --impl triton --min-size 64M --max-size 64M --reps 5
      expect 4 "fault 1:stop during all-reduce" 2 SYMMEM_TEST_FAULT=1:stop:op run all-reduce --count 64M --stall-limit 3s --timeout 60s
      expect 5 "fault 1:hang" 2 SYMMEM_TEST_FAULT=1:hang run put --timeout 5s
    else
      for f in 1:crash 0:exit 1:kill "1:kill mid-bench" "1:stop during all-reduce" 1:hang; do skip "fault $f"; done
    fi
    expect 2 "put-signal --impl copy-engine" 2 run put-signal --impl copy-engine
    expect_cmd 7 "--nvshmem-lib missing" "$bin" run put --backend nvshmem --nvshmem-lib /nonexistent/libnvshmem_host.so.3
    expect_cmd 7 "--nproc $((ngpu + 1)) on $ngpu GPUs" "$bin" run put --nproc $((ngpu + 1)) --backend nvshmem
    check_noleft
  fi

  if section fused; then
    echo "== fused operations: triton's fused kernels, the cuBLAS baselines, a user's kernels"
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    user=$tmp/fused-user
    expect_cmd 0 "kernels build examples/tiled_all_gather_matmul.py" "$bin" kernels build examples/tiled_all_gather_matmul.py --arch "$arch" --warps 4 --out "$user"
    userrs=$tmp/fused-user-rs
    expect_cmd 0 "kernels build examples/tiled_matmul_reduce_scatter.py" "$bin" kernels build examples/tiled_matmul_reduce_scatter.py --arch "$arch" --warps 4 --out "$userrs"
    for n in 2 3; do
      for dt in float16 bf16; do
        expect 0 "run all-gather-matmul --impl tiled-all-gather-matmul --dtype $dt, $n ranks" $n run all-gather-matmul --kernels "$user" --impl tiled-all-gather-matmul --dtype $dt --m 384 --n 320 --k 200
        expect 0 "run matmul-reduce-scatter --impl tiled-matmul-reduce-scatter --dtype $dt, $n ranks" $n run matmul-reduce-scatter --kernels "$userrs" --impl tiled-matmul-reduce-scatter --dtype $dt --m 384 --n 320 --k 200
      done
    done
    for t in cublas-gpu gpu; do
      if [[ ! -x bin/$t.test ]]; then
        echo "skipped: bin/$t.test (go test -c -tags gpu)"
        continue
      fi
      s=$EPOCHREALTIME
      SYMMEM_FUSED_USER=$user:tiled-all-gather-matmul,$userrs:tiled-matmul-reduce-scatter \
        timeout 540 "bin/$t.test" -test.v -test.run '^(TestProductOnGPU|TestFusedRanks)$' > "$out/fused-$t.txt" 2>&1; rc=$?
      grep -aE 'fused: (FAIL|time|rank)|^(--- |FAIL|ok|PASS)|cuBLASLt .* from|Error|panic' "$out/fused-$t.txt" | cut -c1-220 | head -60
      # Here nothing may be skipped: a test that found no kernels or no library failed.
      if grep -q -- '--- SKIP' "$out/fused-$t.txt"; then rc=1; fi
      verdict 0 $rc "bin/$t.test: the fused operations and cuBLASLt" "$s"
    done
    # The command line's run and bench: every element of C checked on every rank, the
    # faults where a tile is delivered (exit 3), the table beside the unfused pair.
    for op in all-gather-matmul matmul-reduce-scatter; do
      for n in 2 3; do
        for shape in "--m 192 --n 128 --k 128" "--m 384 --n 320 --k 200"; do
          expect 0 "run $op --impl triton $shape, $n ranks" $n run $op --impl triton $shape
          expect 0 "run $op --impl cublas+triton $shape, $n ranks" $n run $op --impl cublas+triton $shape
        done
        expect 0 "run $op --impl triton --random --dtype float16, $n ranks" $n run $op --impl triton --random --dtype float16 --m 192
      done
      for fault in skip-tile early; do
        expect 3 "$fault: run $op --impl triton" 2 SYMMEM_TEST_FAULT=1:$fault run $op --impl triton
      done
      if ((ngpu >= 2)); then
        expect 0 "run $op --impl cublas+nccl" 2 run $op --impl cublas+nccl
      else
        skip "run $op --impl cublas+nccl"
      fi
    done
    s=$EPOCHREALTIME
    job 2 bench --op all-gather-matmul,matmul-reduce-scatter --impl triton,cublas+triton --m 2048 --n 1024 --k 1024 --reps 2 --iters 5; rc=$?
    cp "$tmp/out0.txt" "$out/fused-bench.txt" # rank 0's table, beside the unfused pair
    shown
    verdict 0 $rc "bench the fused operations beside the unfused pair" "$s"
    check_noleft
  fi

  if section external; then
    echo "== external launchers and check-nvshmem"
    if command -v torchrun > /dev/null && ((ngpu >= 2)); then
      expect_cmd 0 "torchrun run put" torchrun --nproc_per_node 2 --no-python "$bin" run put
    fi
    if command -v mpirun > /dev/null && ((ngpu >= 2)); then
      expect_cmd 0 "mpirun run put" mpirun --allow-run-as-root -np 2 "$bin" run put
    fi
    if ((ngpu >= 2)); then
      expect_cmd 0 "check-nvshmem --smoke" "$bin" check-nvshmem --smoke
    else
      expect_cmd 0 "check-nvshmem --nproc 1" "$bin" check-nvshmem --nproc 1
      expect_cmd 0 "check-nvshmem --perf --nproc 1 (nothing to measure)" "$bin" check-nvshmem --perf --nproc 1
    fi
    check_noleft
  fi

  echo "== summary"
  if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
  fi
  echo "every case passed"
} 2>&1 | tee "$out/gpu-check.log"
exit "${PIPESTATUS[0]}"
