#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench-serve: the SIMULATED serving table (issue 24). serve-like (a
# multi-turn workload with an LRU prefix cache over a paged KV pool) runs
# each alternative on the same HBM and the same arrival schedule: native
# (the pool that fits), offload (that pool + a pinned host pool of N-1 x,
# vLLM OffloadingConnector's mechanism), kvtier (an N x pool from plain
# cudaMalloc under `kvtier run`, shipped defaults), oracle (an N x managed
# pool placed per step), uvm (an N x managed pool, opt-in: it thrashes for
# minutes). Prints one table with the targets per row and writes
# $BUILD/bench-serve.json. Every figure is simulated.
#   BENCH_SERVE_PERSONAS ("vllm-v2 vllm-v1-fa vllm-v1-triton sglang llamacpp hybrid")
#                        the server personas (serve-like --persona): how the
#                        server talks to the GPU; one table block each
#   BENCH_SERVE_RATIOS ("4")   pool sizes N (the issue's set: "2 4 8", ~3x longer)
#   BENCH_SERVE_ALTS ("native offload kvtier oracle")  add uvm to run it too
#   BENCH_SERVE_MODE (vtime)  vtime: every row on the device in virtual time
#                        (FAKECUDA_VTIME=1: copy engines overlap compute, kvtier's
#                        migrator steps on the device's clock, address layout
#                        fixed with setarch -R), so every run prints the same
#                        figures; paced: the robustness check, the serial device
#                        with kvtier's migrator in real time beside it
#                        (FAKECUDA_PACE), whose figures move with the host's load
#   BENCH_SERVE_PACE (2)  paced mode: FAKECUDA_PACE of the kvtier rows
#   BENCH_SERVE_TIMEOUT (300)  seconds a row may run before it is reported
#                        as timed out
#   BENCH_SERVE_ARGS      extra serve-like flags (e.g. "--seed 7 --requests 200")
#   BENCH_SERVE_JOBS (2)  runs in parallel (figures are virtual-clock, except
#                        the paced mode's kvtier rows, which depend on load)
#   BENCH_SERVE_OUT ($BUILD/bench-serve)  where the runs go; the JSON is
#                        that path + .json (make demo: $BUILD/demo)
#   BENCH_SERVE_KEEP (0)  1: rows whose run in $OUT finished (rc 0) are not
#                        run again and their figures are kept (virtual time:
#                        a rerun prints the same unless the code changed;
#                        to rerun the kvtier rows alone after a change to
#                        the library, delete their files first)
#   BENCH_SERVE_TRACES, BENCH_SERVE_TRACE_DIR, BENCH_SERVE_TRACE_PERSONAS,
#   BENCH_SERVE_TRACE_MODES   the trace rows (tests/bench/serve_trace.sh);
#                        BENCH_SERVE_TRACES="" leaves them out
# Targets: at 4x kvtier >= 1.2x native throughput and <= 0.75x native TTFT
# p50; at every N kvtier >= 1.0x offload throughput; at no N below native's
# throughput.
set -u
BUILD=${BUILD:-build}
PERSONAS=${BENCH_SERVE_PERSONAS:-"vllm-v2 vllm-v1-fa vllm-v1-triton sglang llamacpp hybrid"}
RATIOS=${BENCH_SERVE_RATIOS:-"4"}
ALTS=${BENCH_SERVE_ALTS:-"native offload kvtier oracle"}
MODE=${BENCH_SERVE_MODE:-vtime}
PACE=${BENCH_SERVE_PACE:-2}
. "$(dirname "$0")/sim_mode.sh"
sim_mode bench-serve "$MODE"
TMO=${BENCH_SERVE_TIMEOUT:-300}
JOBS=${BENCH_SERVE_JOBS:-2}
ARGS=${BENCH_SERVE_ARGS:-}
OUT=${BENCH_SERVE_OUT:-$BUILD/bench-serve}
JSON=$OUT.json
export FAKECUDA_RECLAIM=0
# managed residency per 64 KiB page, as a real driver keeps it inside a
# 2 MiB VA block (faults and eviction still 2 MiB; docs/simulated-device.md)
export FAKECUDA_UM_PAGE=${FAKECUDA_UM_PAGE:-64K}
export LD_LIBRARY_PATH=$BUILD/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT"
KEEP=${BENCH_SERVE_KEEP:-0}
[ "$KEEP" = 1 ] || rm -f "$OUT"/*.out "$OUT"/*.err "$OUT"/*.rc "$OUT"/*.wall "$OUT"/*.trace
start=$(date +%s.%N)

# the server's own offload (serve-like's host pool of N-1 x; llamacpp: its
# --no-kv-offload, the N x cache in host memory, attention on the CPU);
# hybrid models have none (vLLM's OffloadingConnector does not take them)
has_offload() {
	case $1 in
	hybrid) return 1 ;;
	esac
}
export -f has_offload

# the trace rows: trace_jobs, trace_cmd, trace_table (issue 44)
. "$(dirname "$0")/serve_trace.sh"

# run_one PERSONA N ALT, or run_one T:SPEC PERSONA ALT LOOP (a trace row)
run_one() {
	local p=$1 x=$2 alt=$3 base="$OUT/$1-$2-$3" t0 cmd
	cmd="$BUILD/workloads/serve-like --quiet --persona $p --alt $alt --pool-over-hbm $x $ARGS"
	case $1 in
	T:*)
		base="$OUT/$(trace_base "${1#T:}" "$2" "$4" "$3")"
		alt=$3
		cmd=$(trace_cmd "${1#T:}" "$2" "$3" "$4") ;;
	esac
	if [ "$KEEP" = 1 ] && [ "$(cat "$base.rc" 2>/dev/null)" = 0 ]; then
		return 0                            # kept from the last run
	fi
	rm -f "$base".*.trace
	t0=$(date +%s.%N)
	case $alt in
	kvtier)
		local pace=""
		[ "$MODE" = paced ] && pace="FAKECUDA_PACE=$PACE"
		env $pace timeout "$TMO" $NORAND "$BUILD/kvtier" run --quiet \
			--trace "$base.%p.trace" -- $cmd >"$base.out" 2>"$base.err" ;;
	*)
		timeout "$TMO" $NORAND $cmd >"$base.out" 2>"$base.err" ;;
	esac
	echo $? >"$base.rc"
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$base.wall"
}
export -f run_one trace_base trace_cmd
export OUT BUILD ARGS PACE TMO MODE NORAND TRACE_DIR TRACE_X KEEP

# native does not depend on N: one run per persona, reported at every N
for p in $PERSONAS; do
	case " $ALTS " in *" native "*) echo "$p 1 native" ;; esac
	for x in $RATIOS; do
		for a in $ALTS; do
			[ "$a" = native ] && continue
			[ "$a" = offload ] && ! has_offload "$p" && continue
			echo "$p $x $a"
		done
	done
done >"$OUT/jobs"
trace_jobs >>"$OUT/jobs"
xargs -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1" "$2" "${3:-}"' <"$OUT/jobs"
wall_all=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')

val() { sed -n "s/^$2=//p" "$1" | head -1; }
# why_failed BASE RC: one line on a run that did not finish
why_failed() {
	case $2 in
	124) echo "timed out after ${TMO}s of real time" ;;
	3) echo "out of memory: $(grep 'out of memory' "$1.err" | tail -1)" ;;
	*) echo "FAILED rc=$2: $(tail -1 "$1.err" 2>/dev/null)" ;;
	esac
}

printf '\nkvtier bench-serve — SIMULATED GPU (fakecuda cost model; not a measurement of hardware)\n'
if [ "$MODE" = vtime ]; then
	how="device in virtual time (FAKECUDA_VTIME=1: reproducible)"
else
	how="ROBUSTNESS CHECK: serial device, kvtier's migrator in real time (FAKECUDA_PACE $PACE: figures move with load)"
fi
printf 'serve-like defaults%s; the same schedule for every row; kvtier rows: shipped KVTIER_* defaults; %s\n\n' \
	"${ARGS:+ + $ARGS}" "$how"
# The class of evidence kvtier settled on for its KV ranges, from the
# trace's end record (info evidence.classes=blocks=N/MiB extent=...
# allocation=... faults=... none=...): each class holding a range, strongest
# first, joined by "+"; "none" when no range settled on any. A trace from a
# library without classes gives "-".
evidence() { evidence_at "$OUT/$1-$2-kvtier"; }
# the same for the kvtier run whose files start with BASE
evidence_at() {
	local t out="" kv
	t=$(ls "$1."*.trace 2>/dev/null | head -1)
	[ -n "$t" ] || { echo "-"; return; }
	local line
	line=$("$BUILD/kvtier" dump "$t" 2>/dev/null | sed -n 's/^info evidence\.classes=//p' | tail -1)
	[ -n "$line" ] || { echo "-"; return; }
	for kv in $line; do
		local name=${kv%%=*} nr=${kv#*=}
		nr=${nr%%/*}
		[ "$name" != none ] && [ "$nr" -gt 0 ] 2>/dev/null && out="$out $name"
	done
	out=${out# }
	echo "${out:-none}" | tr ' ' '+'
}

echo "[" >"$JSON.tmp"
first=1
failed=0
for p in $PERSONAS; do
printf '%s\n' "persona $p"
printf '%5s %-8s %12s %8s %9s %9s %9s %9s %6s %10s %7s %-22s %s\n' N alt 'out tok/s' 'req/s' \
	'TTFT p50' 'TTFT p99' 'TPOT p50' 'TPOT p99' hit 'link MiB' wall evidence targets
nat="$OUT/$p-1-native.out"
for x in $RATIOS; do
	for a in $ALTS; do
		f="$OUT/$p-$x-$a.out"
		[ "$a" = native ] && f=$nat
		if [ "$a" = offload ] && ! has_offload "$p"; then
			printf '%4sx %-8s none: the server has no KV offload for hybrid models\n' "$x" "$a"
			continue
		fi
		base=${f%.out}
		rc=$(cat "$base.rc" 2>/dev/null || echo 99)
		if [ "$rc" != 0 ]; then
			printf '%4sx %-8s %s\n' "$x" "$a" "$(why_failed "$base" "$rc")"
			[ "$a" = kvtier ] && printf '%4sx %-8s targets: MISSED (no result)\n' "$x" "$a"
			failed=$((failed + 1))
			continue
		fi
		tps=$(val "$f" output_tokens_per_s); rps=$(val "$f" requests_per_s)
		t50=$(val "$f" ttft_ms_p50); t99=$(val "$f" ttft_ms_p99)
		p50=$(val "$f" tpot_ms_p50); p99=$(val "$f" tpot_ms_p99)
		hit=$(val "$f" prefix_hit_rate); link=$(val "$f" bytes_link); tab=$(val "$f" tables)
		cap=$(val "$f" pool_capped); cap=${cap:-0}   # the server kept the pool that fits
		verdict=- ev=-
		if [ "$a" = kvtier ]; then
			ev=$(evidence "$p" "$x")
			verdict=$(awk -v x="$x" -v k="$tps" -v kt="$t50" \
				-v n="$(val "$nat" output_tokens_per_s)" -v nt="$(val "$nat" ttft_ms_p50)" \
				-v o="$(val "$OUT/$p-$x-offload.out" output_tokens_per_s 2>/dev/null)" \
				-v ot="$(val "$OUT/$p-$x-offload.out" ttft_ms_p50 2>/dev/null)" 'BEGIN {
				m = ""
				if (n + 0 > 0 && k < n) m = m sprintf(" below native (%.2fx)", k / n)
				if (x == 4 && n + 0 > 0) {
					if (k < 1.2 * n) m = m sprintf(" tput %.2fx native (<1.2)", k / n)
					if (kt > 0.75 * nt) m = m sprintf(" TTFT %.2fx native (>0.75)", kt / nt)
				}
				if (o + 0 > 0 && k < o) m = m sprintf(" tput %.2fx offload (<1.0)", k / o)
				print (m == "" ? "met" : "MISSED:" m) }')
		fi
		printf '%4sx %-8s %12.0f %8.1f %9.3f %9.3f %9.4f %9.4f %6.3f %10d %6ss %-22s %s\n' "$x" "$a" "$tps" \
			"$rps" "$t50" "$t99" "$p50" "$p99" "$hit" $((link >> 20)) "$(cat "$base.wall")" "$ev" "$verdict"
		[ $first = 1 ] || echo "," >>"$JSON.tmp"
		first=0
		printf '  {"persona": "%s", "pool_over_hbm": %s, "alternative": "%s", "output_tokens_per_s": %s, "requests_per_s": %s, "ttft_ms_p50": %s, "ttft_ms_p99": %s, "tpot_ms_p50": %s, "tpot_ms_p99": %s, "prefix_hit_rate": %s, "bytes_link": %s, "tables": "%s", "evidence": "%s", "targets": "%s", "pool_capped": %s, "mode": "generated", "device_mode": "%s", "simulated": true}' \
			"$p" "$x" "$a" "$tps" "$rps" "$t50" "$t99" "$p50" "$p99" "$hit" "$link" "$tab" "$ev" "$verdict" "$cap" "$MODE" >>"$JSON.tmp"
	done
done
printf '\n'
done
trace_table
printf '\n]\n' >>"$JSON.tmp"
mv "$JSON.tmp" "$JSON"
printf '\n(simulated) wrote %s in %ss on %s CPUs (load %s); per-run output in %s/\n' "$JSON" \
	"$wall_all" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$OUT"
printf '(native is the pool that fits: one run, the same at every N)\n'
[ $failed -eq 0 ]
