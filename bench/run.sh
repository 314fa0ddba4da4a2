#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench (the bench-table step): every figure measured side by side in
# this run, one table on stdout and $BUILD/bench.json (stable keys, see
# docs/performance.md). Benchmarks never fail the build on a time: this
# script exits non-zero only when a program it runs is broken.
#   BENCH_TRIALS (7)           trials per configuration, interleaved by round
#   BENCH_CUDA_PAIRS (200000)  cudaMalloc+cudaFree pairs per trial
#   BENCH_MMAP_PAIRS (100000)  mmap+munmap 2 MiB pairs per trial
#   BENCH_MMAP_ROUNDS (3)      mmap trials of each configuration per round
#   BENCH_MALLOC_PAIRS (1000000) malloc+free pairs per trial (heaptrack row)
#   BENCH_LAUNCHES (100000)    cudaLaunchKernel calls per trial (launch row)
#   BENCH_TRACE_EVENTS (10000000) events of the trace-writer loop
#   BENCH_DEPTH (32)           helper frames above the timed loop
set -u
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
TRIALS=${BENCH_TRIALS:-7}
CUDA_PAIRS=${BENCH_CUDA_PAIRS:-200000}
MMAP_PAIRS=${BENCH_MMAP_PAIRS:-100000}
MMAP_ROUNDS=${BENCH_MMAP_ROUNDS:-3}
MALLOC_PAIRS=${BENCH_MALLOC_PAIRS:-1000000}
LAUNCHES=${BENCH_LAUNCHES:-100000}
TRACE_EVENTS=${BENCH_TRACE_EVENTS:-10000000}
DEPTH=${BENCH_DEPTH:-32}
DIR=$BUILD/bench/run
JSON=$BUILD/bench.json
HOOKS=$BUILD/bench/hooks
LIB=$(realpath "$BUILD/libkvtier.so")
PASS_POLICY='* => native'
# the launch row's tracked configuration: its one cudaMalloc is redirected to
# managed memory on the far node and tracked by the profiler
TRACK_POLICY='device => managed:cxl; * => native'
export LD_LIBRARY_PATH=$BUILD/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The stand-in keeps a freed small device allocation's mappings for the next
# one of its size (docs/simulated-device.md): its cudaMalloc+cudaFree pair is
# then ~80 ns of CPU, not four syscalls (~6 us, whose run-to-run spread of
# several hundred ns hid the few hundred ns kvtier adds: without it the
# pair rows read anywhere from -907 to 1944 ns).
export FAKECUDA_REUSE_MAPS=1

rm -rf "$DIR"
mkdir -p "$DIR"
broken=0

# ---- statistics -----------------------------------------------------------
# median and spread (min max) of the numbers in FILE: "median min max"
stats() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (!NR) { print "nan nan nan"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}
# per-round A-B (or A/B with op=ratio, or (A-B)/2 with op=half) into OUT
paired() {
	paste "$2" "$3" | awk -v op="$1" '{
		if (op == "ratio") print $1 / $2
		else if (op == "half") print ($1 - $2) / 2
		else print $1 - $2 }' >"$4"
}
# the value of key=VALUE in a program's output line
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" | head -1; }

# ---- one trial of one configuration ----------------------------------------
# trial NAME MODE PAIRS DEPTH -- the preload environment as env assignments
trial() {
	local name=$1 mode=$2 pairs=$3 depth=$4 t=$5
	shift 5
	local log="$DIR/$name.$t.log" out
	case $name in
	*-heaptrack)
		heaptrack -o "$DIR/heaptrack.$t" "$HOOKS" "$mode" "$pairs" "$depth" >"$log" 2>&1
		rm -f "$DIR"/heaptrack."$t"* ;;
	*)
		env "$@" "$HOOKS" "$mode" "$pairs" "$depth" >"$log" 2>&1 ;;
	esac
	out=$(grep '^mode=' "$log" | field cpu_ns_per_pair)
	if [ -z "$out" ]; then
		echo "bench: $name trial $t failed: $(tail -1 "$log")" >&2
		broken=1
		return
	fi
	echo "$out" >>"$DIR/$name.ns"
}

LAUNCH_STATE=ok
have_heaptrack=0
command -v heaptrack >/dev/null && have_heaptrack=1

run_hooks() {
	local t trace
	for t in $(seq 1 "$TRIALS"); do
		trace="$DIR/traced.$t.trace"
		trial cuda-native cuda "$CUDA_PAIRS" "$DEPTH" "$t"
		trial cuda-pass cuda "$CUDA_PAIRS" "$DEPTH" "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY"
		trial cuda-traced cuda "$CUDA_PAIRS" "$DEPTH" "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY" \
			KVTIER_TRACE="$trace" KVTIER_STACK_DEPTH=32
		rm -f "$trace"*
		# the mmap rows judge a ~5 % margin on a ~3 us syscall pair whose
		# trial-to-trial spread is about as wide: MMAP_ROUNDS paired trials
		# a round (0.3 s each), so the median is of TRIALS x MMAP_ROUNDS
		for _ in $(seq 1 "$MMAP_ROUNDS"); do
			trial mmap-native mmap "$MMAP_PAIRS" 0 "$t"
			trial mmap-pass mmap "$MMAP_PAIRS" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY"
			trial mmap-traced mmap "$MMAP_PAIRS" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY" \
				KVTIER_TRACE="$trace" KVTIER_STACK_DEPTH=32
			rm -f "$trace"*
		done
		trial malloc-native malloc "$MALLOC_PAIRS" "$DEPTH" "$t"
		trial malloc-pass malloc "$MALLOC_PAIRS" "$DEPTH" "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY"
		trial malloc-traced malloc "$MALLOC_PAIRS" "$DEPTH" "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY" \
			KVTIER_TRACE="$trace" KVTIER_STACK_DEPTH=32
		rm -f "$trace"*
		[ $have_heaptrack = 1 ] && trial malloc-heaptrack malloc "$MALLOC_PAIRS" "$DEPTH" "$t"
		trial launch-native launch "$LAUNCHES" 0 "$t"
		trial launch-pass launch "$LAUNCHES" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$PASS_POLICY"
		trial launch-tracked launch "$LAUNCHES" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$TRACK_POLICY"
		trial launchh-native launch-host "$LAUNCHES" 0 "$t"
		trial launchh-tracked launch-host "$LAUNCHES" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$TRACK_POLICY"
		trial launchfa-native launch-fa "$LAUNCHES" 0 "$t"
		trial launchfa-tracked launch-fa "$LAUNCHES" 0 "$t" LD_PRELOAD="$LIB" KVTIER_POLICY="$TRACK_POLICY"
		# the tracked row means something only if the buffer was redirected
		grep -q '^launch_buffer managed=1' "$DIR/launch-tracked.$t.log" || LAUNCH_STATE="n/a (buffer not redirected)"
	done
	paired half "$DIR/cuda-pass.ns" "$DIR/cuda-native.ns" "$DIR/pass-added.ns"
	paired diff "$DIR/cuda-traced.ns" "$DIR/cuda-native.ns" "$DIR/traced-added.ns"
	paired diff "$DIR/launch-pass.ns" "$DIR/launch-native.ns" "$DIR/launch-pass-added.ns"
	paired diff "$DIR/launch-tracked.ns" "$DIR/launch-native.ns" "$DIR/launch-added.ns"
	paired diff "$DIR/launchh-tracked.ns" "$DIR/launchh-native.ns" "$DIR/launch-host-added.ns"
	paired diff "$DIR/launchfa-tracked.ns" "$DIR/launchfa-native.ns" "$DIR/launch-fa-added.ns"
	paired ratio "$DIR/mmap-pass.ns" "$DIR/mmap-native.ns" "$DIR/mmap-pass.ratio"
	paired diff "$DIR/malloc-pass.ns" "$DIR/malloc-native.ns" "$DIR/malloc-pass-added.ns"
	paired ratio "$DIR/mmap-traced.ns" "$DIR/mmap-native.ns" "$DIR/mmap-traced.ratio"
	if [ $have_heaptrack = 1 ]; then
		paired diff "$DIR/malloc-heaptrack.ns" "$DIR/malloc-native.ns" "$DIR/heaptrack-added.ns"
	fi
	# the traced loop's own throughput: 2 events per pair, all of its CPU
	awk '{ print 2e9 / $1 }' "$DIR/cuda-traced.ns" >"$DIR/traced-loop.eps"
}

# ---- policy, trace writer, report reader -----------------------------------
run_policy() {
	local t
	for t in 1 2 3; do
		"$BUILD/bench/bench_policy" >"$DIR/policy.$t.log" 2>&1 || broken=1
		sed -n 's/.*rules: *\([0-9.]*\) ns\/decision.*/\1/p' "$DIR/policy.$t.log" | sed -n 1p >>"$DIR/policy-default.ns"
		sed -n 's/.*rules: *\([0-9.]*\) ns\/decision.*/\1/p' "$DIR/policy.$t.log" | sed -n 2p >>"$DIR/policy-16.ns"
		sed -n 's/.*decision (engine), *\([0-9.]*\) ns\/match.*/\1/p' "$DIR/policy.$t.log" | sed -n 1p >>"$DIR/policy-match.ns"
	done
	NR_RULES_16=$(sed -n 's/^policy: *\([0-9]*\) rules.*/\1/p' "$DIR/policy.1.log" | sed -n 2p)
}

run_trace() {
	local t f
	for t in 1 2 3; do
		f="$DIR/trace-write.$t.trace"
		rm -f "$f"
		"$BUILD/bench/trace_write" "$f" "$TRACE_EVENTS" >"$DIR/trace-write.$t.log" 2>&1 || broken=1
		field wall_events_per_s <"$DIR/trace-write.$t.log" >>"$DIR/trace-write.eps"
		rm -f "$f"
	done
	# bench-report's own measurement (mk/report.mk), run again here so that
	# it is side by side with the rest
	for t in 1 2 3; do
		$MAKE -s --no-print-directory BUILD="$BUILD" bench-report >"$DIR/report.$t.log" 2>&1 || broken=1
		sed -n 's/.*= *\([0-9.]*\) M events\/s.*/\1/p' "$DIR/report.$t.log" |
			awk '{ print $1 * 1e6 }' >>"$DIR/report.eps"
	done
}

# ---- profiler (its owner's bench program, when it exists) ---------------------
# $BUILD/bench/bench_profiler prints profiler.core_share=, profiler.planner_ms=,
# profiler.bytes_per_chunk= (and may print more key=value lines).
PROF_STATE="n/a (profiler not built)"
run_profiler() {
	local p=$BUILD/bench/bench_profiler
	[ -x "$p" ] || return 0
	if "$p" >"$DIR/profiler.log" 2>&1; then
		PROF_STATE=ok
	else
		PROF_STATE="n/a (bench_profiler failed: $(tail -1 "$DIR/profiler.log"))"
	fi
}
prof() {   # prof KEY: the value or "null"
	local v
	[ "$PROF_STATE" = ok ] && v=$(sed -n "s/^profiler\\.$1=\\([^ ]*\\).*/\\1/p" "$DIR/profiler.log" | head -1)
	echo "${v:-null}"
}

# ---- the machine -------------------------------------------------------------
NPROC=$(nproc)
CPU=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+uncommitted"
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
KERNEL=$(uname -r)

start=$(date +%s)
run_hooks
run_policy
run_trace
run_profiler
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table -----------------------------------------------------------------
read -r cn_m cn_lo cn_hi < <(stats "$DIR/cuda-native.ns")
read -r cp_m cp_lo cp_hi < <(stats "$DIR/cuda-pass.ns")
read -r ct_m ct_lo ct_hi < <(stats "$DIR/cuda-traced.ns")
read -r mn_m mn_lo mn_hi < <(stats "$DIR/mmap-native.ns")
read -r mp_m mp_lo mp_hi < <(stats "$DIR/mmap-pass.ns")
read -r mt_m mt_lo mt_hi < <(stats "$DIR/mmap-traced.ns")
read -r an_m an_lo an_hi < <(stats "$DIR/malloc-native.ns")
read -r ap_m ap_lo ap_hi < <(stats "$DIR/malloc-pass.ns")
read -r at_m at_lo at_hi < <(stats "$DIR/malloc-traced.ns")
read -r apa_m apa_lo apa_hi < <(stats "$DIR/malloc-pass-added.ns")
read -r pa_m pa_lo pa_hi < <(stats "$DIR/pass-added.ns")
read -r ta_m ta_lo ta_hi < <(stats "$DIR/traced-added.ns")
read -r mr_m mr_lo mr_hi < <(stats "$DIR/mmap-pass.ratio")
read -r mtr_m mtr_lo mtr_hi < <(stats "$DIR/mmap-traced.ratio")
read -r tl_m tl_lo tl_hi < <(stats "$DIR/traced-loop.eps")
read -r ln_m ln_lo ln_hi < <(stats "$DIR/launch-native.ns")
read -r lp_m lp_lo lp_hi < <(stats "$DIR/launch-pass.ns")
read -r lt_m lt_lo lt_hi < <(stats "$DIR/launch-tracked.ns")
read -r lpa_m lpa_lo lpa_hi < <(stats "$DIR/launch-pass-added.ns")
read -r la_m la_lo la_hi < <(stats "$DIR/launch-added.ns")
read -r lh_m lh_lo lh_hi < <(stats "$DIR/launch-host-added.ns")
read -r lf_m lf_lo lf_hi < <(stats "$DIR/launch-fa-added.ns")
# where the tracked buffer ended up (the migrator promotes it once the launch
# evidence has made it hot): proof that the scan found it
LAUNCH_BLOCK=$(sed -n 's/^launch_buffer managed=1 block=//p' "$DIR"/launch-tracked.*.log | sort | uniq -c |
	awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }')
ah_m=nan ah_lo=nan ah_hi=nan ha_m=nan ha_lo=nan ha_hi=nan
if [ $have_heaptrack = 1 ]; then
	read -r ah_m ah_lo ah_hi < <(stats "$DIR/malloc-heaptrack.ns")
	read -r ha_m ha_lo ha_hi < <(stats "$DIR/heaptrack-added.ns")
fi
read -r pd_m pd_lo pd_hi < <(stats "$DIR/policy-default.ns")
read -r p16_m p16_lo p16_hi < <(stats "$DIR/policy-16.ns")
read -r pm_m pm_lo pm_hi < <(stats "$DIR/policy-match.ns")
read -r tw_m tw_lo tw_hi < <(stats "$DIR/trace-write.eps")
read -r rr_m rr_lo rr_hi < <(stats "$DIR/report.eps")

f0() { awk -v v="$1" 'BEGIN { if (v == "nan") printf "-"; else printf "%.0f", v }'; }
f2() { awk -v v="$1" 'BEGIN { if (v == "nan") printf "-"; else printf "%.3f", v }'; }
mps() { awk -v v="$1" 'BEGIN { if (v == "nan") printf "-"; else printf "%.1f M/s", v / 1e6 }'; }
rng() { printf '[%s..%s]' "$($1 "$2")" "$($1 "$3")"; }   # spread: min..max
jn() { awk -v v="$1" 'BEGIN { if (v == "nan" || v == "") printf "null"; else printf "%.6g", v }'; }

{
printf '\nkvtier make bench — %s, commit %s\n' "$DATE" "$COMMIT"
printf 'machine: %s CPUs, %s, Linux %s; load %s at start, %s at end\n' "$NPROC" "$CPU" "$KERNEL" "$LOAD" "$LOAD_END"
printf 'median of %s trials per configuration (mmap: %s), run interleaved (one process each); [min..max] over trials\n' "$TRIALS" "$((TRIALS * MMAP_ROUNDS))"
printf 'hook rows: CPU time of the whole process for the timed loop only, %s helper frames deep\n\n' "$DEPTH"
printf '%-40s %13s %13s %13s %13s\n' 'CPU ns per alloc+free pair' native 'kvtier pass' 'kvtier traced' heaptrack
printf '%-40s %13s %13s %13s %13s\n' 'cudaMalloc+cudaFree (stand-in driver)' "$(f0 "$cn_m")" "$(f0 "$cp_m")" "$(f0 "$ct_m")" -
printf '%-40s %13s %13s %13s %13s\n' 'mmap+munmap 2 MiB (kernel)' "$(f0 "$mn_m")" "$(f0 "$mp_m")" "$(f0 "$mt_m")" -
printf '%-40s %13s %13s %13s %13s\n' 'malloc+free (same pattern)' "$(f0 "$an_m")" "$(f0 "$ap_m")" "$(f0 "$at_m")" "$(f0 "$ah_m")"
printf '%-40s %13s %13s %13s %13s\n' 'cudaLaunchKernel (col 3: range tracked)' "$(f0 "$ln_m")" "$(f0 "$lp_m")" "$(f0 "$lt_m")" -
printf '\n%-48s %-26s %s\n' figure 'median [min..max]' target
printf '%-48s %-26s %s\n' 'passthrough added, ns per call (pair/2)' "$(f0 "$pa_m") $(rng f0 "$pa_lo" "$pa_hi")" '<= 50'
printf '%-48s %-26s %s\n' 'traced pair added, CPU ns (32 frames)' "$(f0 "$ta_m") $(rng f0 "$ta_lo" "$ta_hi")" '<= 500'
printf '%-48s %-26s %s\n' 'malloc+free added, CPU ns (kvtier passthrough)' "$(f0 "$apa_m") $(rng f0 "$apa_lo" "$apa_hi")" '<= 10'
printf '%-48s %-26s %s\n' 'heaptrack malloc+free added, CPU ns (in-process)' "$(f0 "$ha_m") $(rng f0 "$ha_lo" "$ha_hi")" "$([ $have_heaptrack = 1 ] && echo 'side by side' || echo 'n/a (heaptrack not installed)')"
printf '%-48s %-26s %s\n' 'launch added, ns (passthrough, nothing tracked)' "$(f0 "$lpa_m") $(rng f0 "$lpa_lo" "$lpa_hi")" '-'
printf '%-48s %-26s %s\n' 'launch added, ns (K/V bases tracked, device table)' "$(f0 "$la_m") $(rng f0 "$la_lo" "$la_hi")" \
	"$([ "$LAUNCH_STATE" = ok ] && echo "<= 100 (tracked block: ${LAUNCH_BLOCK:-?})" || echo "$LAUNCH_STATE")"
printf '%-48s %-26s %s\n' 'launch added, ns (host table followed)' "$(f0 "$lh_m") $(rng f0 "$lh_lo" "$lh_hi")" '-'
printf '%-48s %-26s %s\n' 'launch added, ns (528-byte FA2 struct, tracked)' "$(f0 "$lf_m") $(rng f0 "$lf_lo" "$lf_hi")" '<= 100'
printf '%-48s %-26s %s\n' 'mmap+munmap 2 MiB, passthrough / native' "$(f2 "$mr_m")x $(rng f2 "$mr_lo" "$mr_hi")" '<= 1.05x'
printf '%-48s %-26s %s\n' 'mmap+munmap 2 MiB, traced / native' "$(f2 "$mtr_m")x $(rng f2 "$mtr_lo" "$mtr_hi")" '-'
printf '%-48s %-26s %s\n' 'policy ns per decision, default rules' "$(f0 "$pd_m") $(rng f0 "$pd_lo" "$pd_hi")" '<= 1000'
printf '%-48s %-26s %s\n' "policy ns per decision, ${NR_RULES_16:-16} rules" "$(f0 "$p16_m") $(rng f0 "$p16_lo" "$p16_hi")" '<= 1000'
printf '%-48s %-26s %s\n' 'policy ns per rule match, default rules' "$(f0 "$pm_m") $(rng f0 "$pm_lo" "$pm_hi")" '-'
printf '%-48s %-26s %s\n' "trace writer, events/s ($((TRACE_EVENTS / 1000000)) M events, wall)" "$(mps "$tw_m") $(rng mps "$tw_lo" "$tw_hi")" '>= 2 M/s'
printf '%-48s %-26s %s\n' 'traced cudaMalloc loop, events/s (CPU)' "$(mps "$tl_m") $(rng mps "$tl_lo" "$tl_hi")" '-'
printf '%-48s %-26s %s\n' 'kvtier report, events/s (bench-report)' "$(mps "$rr_m") $(rng mps "$rr_lo" "$rr_hi")" '>= 10 M/s'
if [ "$PROF_STATE" = ok ]; then
	printf '%-48s %-26s %s\n' 'profiler CPU share of one core, 1 TiB tracked' "$(prof core_share)" '<= 0.01'
	printf '%-48s %-26s %s\n' '  epoch CPU ms (collect / plan / apply)' \
		"$(prof epoch_ms) ($(prof collect_ms) / $(prof plan_ms) / $(prof apply_ms))" '<= 0.5 (1% of 50 ms)'
	printf '%-48s %-26s %s\n' '  working set collected per epoch, chunks' "$(prof working_set_chunks)" '-'
	printf '%-48s %-26s %s\n' 'planner epoch over 512 Ki chunks, ms' "$(prof planner_ms)" '<= 2'
	printf '%-48s %-26s %s\n' 'metadata bytes per 2 MiB chunk (worst case)' "$(prof bytes_per_chunk)" '<= 32'
else
	printf '%-48s %-26s %s\n' 'profiler CPU share / planner ms / bytes per chunk' "$PROF_STATE" '<= 0.01 / 2 / 32'
fi
} | tee "$DIR/table.txt"

# ---- simulated rows ($BUILD/bench-sim.json from make bench-sim) --------------
SIM_JSON=$BUILD/bench-sim.json
SIM_STATE=ok
if [ ! -s "$SIM_JSON" ]; then
	SIM_STATE="n/a (no $SIM_JSON: run make bench-sim)"
elif ! command -v jq >/dev/null; then
	SIM_STATE="n/a (jq not installed)"
fi
# Group bench-sim.json's flat rows into one object per workload and KV size.
# Alternatives: native, blanket, uvm, static (kvtier-static), kvtier, remote
# (kvtier-remote: KVTIER_ADMIT=remote), oracle.
sim_list() {
	jq -c '
	  def alt: if .alternative == "kvtier-static" then "static"
	           elif .alternative == "kvtier-remote" then "remote" else .alternative end;
	  def ratio($a; $b): if ($a != null and $b != null and $b > 0) then ($a / $b * 1000 | round / 1000) else null end;
	  . as $all
	  | [ .[] | select(.tokens_per_s != null) ]
	  | group_by([.name, .kv_over_hbm])
	  | map({ name: .[0].name, kv_over_hbm: .[0].kv_over_hbm, simulated: true,
	          tables: (map(select(.tables != null) | .tables) | first // "host"),
	          tokens_per_s: (map({ key: alt, value: .tokens_per_s }) | from_entries),
	          bytes_moved: (map({ key: alt, value: ((.bytes_htod // 0) + (.bytes_dtoh // 0)) }) | from_entries),
	          warmup: (map(select(.warmup != null) | { key: alt, value: .warmup }) | from_entries),
	          steps: (map(.steps) | max),
	          pace: (map(select(.pace != null) | .pace) | first) })
	  | map(. + { kvtier_vs_oracle: ratio(.tokens_per_s.kvtier; .tokens_per_s.oracle),
	              kvtier_vs_uvm: ratio(.tokens_per_s.kvtier; .tokens_per_s.uvm),
	              kvtier_vs_blanket: ratio(.tokens_per_s.kvtier; .tokens_per_s.blanket),
	              kvtier_vs_static: ratio(.tokens_per_s.kvtier; .tokens_per_s.static),
	              kvtier_remote_vs_oracle: ratio(.tokens_per_s.remote; .tokens_per_s.oracle),
	              kvtier_remote_vs_uvm: ratio(.tokens_per_s.remote; .tokens_per_s.uvm),
	              kvtier_remote_vs_static: ratio(.tokens_per_s.remote; .tokens_per_s.static),
	              oracle_vs_static: ratio(.tokens_per_s.oracle; .tokens_per_s.static) })
	  | map(. as $r | . + { targets: ([ $all[] | select(.alternative == "kvtier-ratios" and
	              .name == $r.name and .kv_over_hbm == $r.kv_over_hbm) | .targets ] | first) })' "$SIM_JSON"
}
SIM='[]'
if [ "$SIM_STATE" = ok ]; then
	SIM=$(sim_list) || { SIM='[]'; SIM_STATE="n/a ($SIM_JSON did not parse)"; }
fi
{
printf '\nsimulated tiering (fakecuda cost model, from %s; simulated tokens/s)\n' "$SIM_JSON"
if [ "$SIM_STATE" != ok ]; then
	echo "  $SIM_STATE"
else
	printf '%-14s %6s %9s %9s %9s %9s %9s %9s %9s   %-36s %s\n' workload kv/hbm native blanket uvm static kvtier remote oracle \
		'kvtier vs oracle/uvm/blanket/static' 'remote vs oracle/uvm/static'
	echo "$SIM" | jq -r '.[] | [.name, (.kv_over_hbm | tostring + "x"),
	    (.tokens_per_s | (.native, .blanket, .uvm, .static, .kvtier, .remote, .oracle) | if . == null then "-" else (. | round | tostring) end),
	    ([.kvtier_vs_oracle, .kvtier_vs_uvm, .kvtier_vs_blanket, .kvtier_vs_static]
	      | map(if . == null then "-" else tostring end) | join(" / ")),
	    ([.kvtier_remote_vs_oracle, .kvtier_remote_vs_uvm, .kvtier_remote_vs_static]
	      | map(if . == null then "-" else tostring end) | join(" / "))] | @tsv' |
	while IFS=$'\t' read -r n x a b c d e g f r q; do
		printf '%-14s %6s %9s %9s %9s %9s %9s %9s %9s   %-36s %s\n' "$n" "$x" "$a" "$b" "$c" "$d" "$e" "$g" "$f" "$r" "$q"
	done
fi
} | tee -a "$DIR/table.txt"

# ---- bench.json --------------------------------------------------------------
cat >"$JSON.tmp" <<EOF
{
  "date": "$DATE",
  "commit": "$COMMIT",
  "machine": { "nproc": $NPROC, "cpu": "$CPU", "kernel": "$KERNEL", "load_start": "$LOAD", "load_end": "$LOAD_END" },
  "trials": $TRIALS,
  "mmap_trials": $((TRIALS * MMAP_ROUNDS)),
  "hooks": {
    "passthrough_added_ns": $(jn "$pa_m"),
    "passthrough_added_ns_spread": [$(jn "$pa_lo"), $(jn "$pa_hi")],
    "traced_alloc_ns": $(jn "$ta_m"),
    "traced_alloc_ns_spread": [$(jn "$ta_lo"), $(jn "$ta_hi")],
    "mmap_ratio": $(jn "$mr_m"),
    "mmap_ratio_spread": [$(jn "$mr_lo"), $(jn "$mr_hi")],
    "mmap_traced_ratio": $(jn "$mtr_m"),
    "malloc_pass_added_ns": $(jn "$apa_m"),
    "malloc_pass_added_ns_spread": [$(jn "$apa_lo"), $(jn "$apa_hi")],
    "heaptrack_alloc_ns": $(jn "$ha_m"),
    "heaptrack_alloc_ns_spread": [$(jn "$ha_lo"), $(jn "$ha_hi")],
    "cuda_pair_ns": { "native": $(jn "$cn_m"), "passthrough": $(jn "$cp_m"), "traced": $(jn "$ct_m") },
    "mmap_pair_ns": { "native": $(jn "$mn_m"), "passthrough": $(jn "$mp_m"), "traced": $(jn "$mt_m") },
    "malloc_pair_ns": { "native": $(jn "$an_m"), "kvtier_pass": $(jn "$ap_m"), "kvtier_traced": $(jn "$at_m"), "heaptrack": $(jn "$ah_m") },
    "launch_added_ns": $([ "$LAUNCH_STATE" = ok ] && jn "$la_m" || echo null),
    "launch_added_ns_spread": [$(jn "$la_lo"), $(jn "$la_hi")],
    "launch_host_added_ns": $(jn "$lh_m"),
    "launch_host_added_ns_spread": [$(jn "$lh_lo"), $(jn "$lh_hi")],
    "launch_fa_added_ns": $(jn "$lf_m"),
    "launch_fa_added_ns_spread": [$(jn "$lf_lo"), $(jn "$lf_hi")],
    "launch_pass_added_ns": $(jn "$lpa_m"),
    "launch_pass_added_ns_spread": [$(jn "$lpa_lo"), $(jn "$lpa_hi")],
    "launch_ns": { "native": $(jn "$ln_m"), "passthrough": $(jn "$lp_m"), "tracked": $(jn "$lt_m") },
    "launch_state": "$LAUNCH_STATE",
    "stack_frames": $DEPTH
  },
  "policy": {
    "decision_ns": $(jn "$pd_m"),
    "decision_ns_spread": [$(jn "$pd_lo"), $(jn "$pd_hi")],
    "decision_ns_16_rules": $(jn "$p16_m"),
    "match_ns": $(jn "$pm_m")
  },
  "profiler": {
    "core_share": $(prof core_share),
    "planner_ms": $(prof planner_ms),
    "bytes_per_chunk": $(prof bytes_per_chunk),
    "epoch_ms": $(prof epoch_ms),
    "collect_ms": $(prof collect_ms),
    "plan_ms": $(prof plan_ms),
    "working_set_chunks": $(prof working_set_chunks),
    "bytes_per_chunk_resident": $(prof bytes_per_chunk_resident),
    "apply_ms": $(prof apply_ms),
    "state": "$PROF_STATE"
  },
  "trace": {
    "write_events_per_s": $(jn "$tw_m"),
    "write_events_per_s_spread": [$(jn "$tw_lo"), $(jn "$tw_hi")],
    "traced_loop_events_per_s": $(jn "$tl_m"),
    "report_events_per_s": $(jn "$rr_m"),
    "report_events_per_s_spread": [$(jn "$rr_lo"), $(jn "$rr_hi")]
  },
  "sim_state": "$SIM_STATE",
  "sim": $SIM
}
EOF
if command -v jq >/dev/null && ! jq . "$JSON.tmp" >/dev/null; then
	echo "bench: $JSON.tmp is not valid JSON" >&2
	broken=1
fi
mv "$JSON.tmp" "$JSON"
printf '\nwrote %s and %s/table.txt in %ss\n' "$JSON" "$DIR" $(( $(date +%s) - start ))
[ $broken = 0 ]
