#!/usr/bin/env bash
# compare-check: does bench compare hold its verdicts to the evidence on this machine?
#  1. PAIRS pairs of identical default CPU benches (one run each), compared: exit codes.
#  2. PAIRS_RUNS pairs of identical benches of RUNS runs each: exit codes (the false
#     alarms of a comparison that can call regressions).
#  3. SLOW_PAIRS pairs of RUNS runs against RUNS runs with rank 0 slowed by PCT%
#     (SYMMEM_TEST_FAULT=0:slow:PCT): the share of rows called a regression.
#  4. INTERLEAVED pairs of each kind again with the two sides' runs taken in turn (one
#     bench per run, a1 b1 a2 b2 ..., compared as several files a side): on a machine
#     whose load drifts, a side measured after the other also measures the drift, which
#     no statistic can tell from the code; taking turns puts it on both sides.
# BENCH_ARGS go to every bench (default: the default sweep). Needs only the symmem
# binary (SYMMEM_BIN, or built here) and a POSIX shell.
set -uo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-20} PAIRS_RUNS=${PAIRS_RUNS:-10} SLOW_PAIRS=${SLOW_PAIRS:-5} RUNS=${RUNS:-8} PCT=${PCT:-30}
INTERLEAVED=${INTERLEAVED:-10}
BENCH_ARGS=${BENCH_ARGS:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=${SYMMEM_BIN:-$dir/symmem}
[ -n "${SYMMEM_BIN:-}" ] || go build -o "$bin" ./cmd/symmem || exit 1

bench() { # bench OUT [args...]
	local out=$1; shift
	"$bin" bench --backend cpu $BENCH_ARGS "$@" --json >"$out" 2>"$out.err" || { echo "bench failed:"; tail -3 "$out.err"; exit 1; }
}
verdicts() { # the count of each verdict in a compare --json
	grep -o '"verdict": "[^"]*"' "$1" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $3 " " $4; sep=", "}' | tr -d '"'
}
pairs() { # pairs N LABEL [bench args...]: N pairs of identical benches, compared
	local n=$1 label=$2; shift 2
	[ "$n" -gt 0 ] || return 0
	local codes=() i
	for i in $(seq "$n"); do
		bench "$dir/a.json" "$@"; bench "$dir/b.json" "$@"
		"$bin" bench compare "$dir/a.json" "$dir/b.json" --json >"$dir/c.json" 2>/dev/null
		local rc=$?
		codes+=("$rc")
		echo "  $label pair $i: exit $rc ($(verdicts "$dir/c.json"))"
	done
	echo "$label: exit codes ${codes[*]}; $(printf '%s\n' "${codes[@]}" | grep -vc '^0$') of $n not 0"
}

echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); bench args: ${BENCH_ARGS:-(default sweep)}"
echo "## $PAIRS pairs of identical benches, one run each"
pairs "$PAIRS" "1 run"
echo "## $PAIRS_RUNS pairs of identical benches, --runs $RUNS each"
pairs "$PAIRS_RUNS" "$RUNS runs" --runs "$RUNS"
echo "## $SLOW_PAIRS pairs: --runs $RUNS against --runs $RUNS with SYMMEM_TEST_FAULT=0:slow:$PCT"
called=0 rows=0 bigc=0 bign=0
for i in $(seq "$SLOW_PAIRS"); do
	bench "$dir/a.json" --runs "$RUNS"
	SYMMEM_TEST_FAULT=0:slow:$PCT bench "$dir/s.json" --runs "$RUNS"
	"$bin" bench compare "$dir/a.json" "$dir/s.json" --json >"$dir/c.json" 2>/dev/null
	rc=$?
	r=$(grep -c '"verdict": "REGRESSION"' "$dir/c.json") n=$(grep -c '"verdict":' "$dir/c.json")
	# the change each row showed, smallest to largest: what the fault really did
	ch=$(grep -o '"change_pct": [-0-9.]*' "$dir/c.json" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {printf "min %s%%, median %s%%, max %s%%", a[1], a[int((NR+1)/2)], a[NR]}')
	# rows of 64K and more: operations of microseconds, which the fault slows by about
	# PCT (tiny ones it slows by more: its clock reads cost some 40 ns)
	big=$(awk '/"size":/ {s=$2+0} /"verdict":/ {if (s >= 65536) {n++; if ($2 ~ /REGRESSION/) r++}} END {print r+0, n+0}' "$dir/c.json")
	echo "  slow pair $i: exit $rc, $r of $n rows called a regression (change $ch); 64K and up: ${big% *} of ${big#* }"
	called=$((called + r)) rows=$((rows + n)) bigc=$((bigc + ${big% *})) bign=$((bign + ${big#* }))
done
[ "$rows" -eq 0 ] || echo "slowdown $PCT%: $called of $rows rows called a regression ($(awk -v c=$called -v n=$rows 'BEGIN {printf "%.1f", 100*c/n}')%); rows of 64K and up: $bigc of $bign"

echo "## $INTERLEAVED pairs of $RUNS runs a side taken in turn: identical, then rank 0 slowed by $PCT%"
for fault in "" "0:slow:$PCT"; do
	[ "$INTERLEAVED" -gt 0 ] || break
	codes=() called=0 rows=0
	for i in $(seq "$INTERLEAVED"); do
		as=() bs=()
		for r in $(seq "$RUNS"); do
			bench "$dir/a$r.json"
			SYMMEM_TEST_FAULT=$fault bench "$dir/b$r.json"
			as+=("$dir/a$r.json") bs+=("$dir/b$r.json")
		done
		"$bin" bench compare "$(IFS=,; echo "${as[*]}")" "$(IFS=,; echo "${bs[*]}")" --json >"$dir/c.json" 2>/dev/null
		rc=$?
		codes+=("$rc")
		echo "  ${fault:-identical} pair $i: exit $rc ($(verdicts "$dir/c.json"))"
		called=$((called + $(grep -c '"verdict": "REGRESSION"' "$dir/c.json"))) rows=$((rows + $(grep -c '"verdict":' "$dir/c.json")))
	done
	echo "${fault:-identical}, in turn: exit codes ${codes[*]}; $called of $rows rows called a regression"
done
