#!/bin/bash
# Soak on the CPU backend (issue 12; numbers in docs/soak.md).
#
#   scripts/soak.sh [BIN] [RUNS] [BENCH_SECONDS] [OUTDIR]
#   defaults:        bin/symmem 500   600           soak-out
#
# Part 1: RUNS consecutive `run put --nproc 4 --backend cpu`. Per job: exit status, wall
# ms, the launcher's peak RSS (VmHWM) and most open fds (sampled every 10 ms), then this
# job's heaps left in /dev/shm, its live workers, /dev/shm usage and the machine's
# allocated file handles.
# Part 2: one bench that runs for about BENCH_SECONDS (its repetitions are calibrated
# from a short bench first), every window verified (bench checks each repetition's
# buffers; wrong bytes exit 3). Every 5 s: RSS, open fds and threads of the launcher and
# of each rank (from /proc), and /dev/shm usage. A long-lived launcher and ranks are
# where a leak per measurement would show.
#
# The machine may be shared: every count is per job (the launcher's pid starts its job
# ID and names its heap), not machine-wide. Run it niced: nice -n 19 scripts/soak.sh
set -u
bin=${1:-bin/symmem}; n=${2:-500}; d=${3:-600}; out=${4:-soak-out}
mkdir -p "$out"
runs=$out/runs.tsv; samples=$out/bench.tsv; errs=$out/stderr.log
: > "$errs"
shm_kb() { df -k --output=used /dev/shm | tail -1 | tr -d ' '; }
echo -e "i\trc\twall_ms\thwm_kb\tmax_fds\tshm_heaps\tworkers\tshm_used_kb\tfile_nr" > "$runs"
for i in $(seq 1 "$n"); do # RUNS=0 skips part 1
  t0=$(date +%s%N); hwm=0; fds=0
  "$bin" run put --nproc 4 --backend cpu >/dev/null 2>>"$errs" & p=$!
  while kill -0 $p 2>/dev/null; do
    h=$(awk '/VmHWM/{print $2}' /proc/$p/status 2>/dev/null); [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    f=$(ls /proc/$p/fd 2>/dev/null | wc -l); [ "$f" -gt "$fds" ] && fds=$f
    sleep 0.01
  done
  wait $p; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  heaps=$(ls /dev/shm | grep -c "^symmem-$p-.*\.heap$")
  workers=$(grep -l "SYMMEM_JOB_ID=$p-" /proc/[0-9]*/environ 2>/dev/null | wc -l)
  echo -e "$i\t$rc\t$ms\t$hwm\t$fds\t$heaps\t$workers\t$(shm_kb)\t$(cut -f1 /proc/sys/fs/file-nr)" >> "$runs"
done

if [ "$d" -gt 0 ]; then  # BENCH_SECONDS=0 skips part 2
# Calibrate: how long do 10 repetitions of the sweep take?
bargs=(bench --backend cpu --nproc 4 --max-size 1M --timeout 0)
t0=$(date +%s%N)
"$bin" "${bargs[@]}" --reps 10 >/dev/null 2>>"$errs" || echo "calibration bench failed: $?" >> "$errs"
cal=$(( ($(date +%s%N) - t0) / 1000000 ))
reps=$(( d * 1000 * 10 / (cal > 1 ? cal : 1) ))
[ "$reps" -lt 10 ] && reps=10
echo "calibration: 10 reps in ${cal} ms; long bench: $reps reps" | tee "$out/bench.info"

echo -e "t_s\twho\tpid\trss_kb\tfds\tthreads\tshm_used_kb\trss_anon_kb\trss_shmem_kb" > "$samples"
t0=$(date +%s%N)
"$bin" "${bargs[@]}" --reps "$reps" --json > "$out/bench.json" 2>>"$errs" & p=$!
sample() {
  local t=$(( ($(date +%s%N) - t0) / 1000000000 )) shm; shm=$(shm_kb)
  for q in $p $(grep -l "SYMMEM_JOB_ID=$p-" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    local who=launcher
    [ "$q" != "$p" ] && who=rank$(tr '\0' '\n' < /proc/$q/environ 2>/dev/null | sed -n 's/^SYMMEM_RANK=//p')
    local rss thr fd anon shmem
    rss=$(awk '/VmRSS/{print $2}' /proc/$q/status 2>/dev/null); thr=$(awk '/Threads/{print $2}' /proc/$q/status 2>/dev/null)
    # RssShmem is the shared heap's pages this process touched (it grows with the
    # message size being measured); RssAnon is its private memory (the Go heap).
    anon=$(awk '/RssAnon/{print $2}' /proc/$q/status 2>/dev/null); shmem=$(awk '/RssShmem/{print $2}' /proc/$q/status 2>/dev/null)
    fd=$(ls /proc/$q/fd 2>/dev/null | wc -l)
    [ -n "$rss" ] && echo -e "$t\t$who\t$q\t$rss\t$fd\t$thr\t$shm\t$anon\t$shmem" >> "$samples"
  done
}
while kill -0 $p 2>/dev/null; do sample; sleep 5; done
wait $p; rc=$?
wall=$(( ($(date +%s%N) - t0) / 1000000 ))
left=$(ls /dev/shm | grep -c "^symmem-$p-.*\.heap$")
echo "long bench: rc=$rc wall_ms=$wall reps=$reps heaps_left=$left" | tee -a "$out/bench.info"
fi

# Summary.
awk -F'\t' 'NR>1{n++; if($2!=0)f++; if($6!=0)h++; if($7!=0)w++}
  END{printf "runs: %d, failed %d, jobs leaving heaps %d, jobs leaving workers %d\n", n, f+0, h+0, w+0}' "$runs"
for col in 3 4 5 8; do
  awk -F'\t' -v c=$col 'NR==1{name=$c; next} {v[NR-1]=$c; n=NR-1}
    END{k=int(n/10); if(k<1)k=1; a=0; b=0; for(i=1;i<=k;i++){a+=v[i]; b+=v[n-k+i]}
        m=v[1]; M=v[1]; for(i=1;i<=n;i++){if(v[i]<m)m=v[i]; if(v[i]>M)M=v[i]}
        printf "  %s: min %s max %s, mean of first 10%% %.0f, of last 10%% %.0f\n", name, m, M, a/k, b/k}' "$runs"
done
[ "$d" -gt 0 ] && awk -F'\t' 'NR>1{v=$4" kB (anon "$8", shmem "$9") "$5" fds "$6" thr"; if(!($2 in first))first[$2]=v; last[$2]=v;
  if($4>max[$2])max[$2]=$4; if($8>maxa[$2])maxa[$2]=$8}
  END{for(w in first) printf "  %s: first %s; last %s; max rss %s kB, max anon %s kB\n", w, first[w], last[w], max[w], maxa[w]}' "$samples" | sort
[ "$d" -gt 0 ] && awk -F'\t' 'NR>1{if(min==""||$7<min)min=$7; if($7>max)max=$7} END{printf "  /dev/shm used (machine-wide) during the bench: %s..%s kB\n", min, max}' "$samples"
echo "stderr lines: $(wc -l < "$errs")"
