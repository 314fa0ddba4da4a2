#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench-sim: the SIMULATED baseline table.  For each workload at KV =
# 1x, 2x and 4x the KV budget it runs native (only at 1x: it does not fit
# above), uvm (fault-driven managed memory) and oracle (managed + a
# future-knowing prefetcher), on the fakecuda simulated GPU, prints one table
# and writes $BUILD/bench-sim.json.  Every figure is simulated.
#   BENCH_SIM_STEPS (4)  timed decode steps per run, the SAME for every
#                        alternative (UVM thrash costs real copies)
#   BENCH_SIM_WARMUP (8) untimed decode steps before them for the baselines
#                        (uvm, oracle, blanket): past the cold start, so a
#                        thrashing baseline is measured thrashing (with 1
#                        warm-up step vllm-like 2x never thrashed: uvm =
#                        oracle = 117k tokens/s, a 2x artefact)
#   BENCH_SIM_JOBS  (2)  runs in parallel
#   BENCH_SIM_ARGS       extra workload flags, e.g. "--seed 7"
#   BENCH_SIM_KVTIER_WARMUP (3000)  untimed steps before the kvtier rows (native
#        under the preload, migration on) and kvtier-static (KVTIER_MIGRATE=0),
#        at 2x and 4x.  The migrator runs in real time while the simulated decode
#        is ~100x faster than its virtual clock, so the kvtier rows need many
#        more untimed steps for the migrator's epochs to happen (~1 s of wall).
#        Their timed window is BENCH_SIM_STEPS steps, as the baselines'.
#   Alternatives at 2x and 4x: uvm (fault-driven managed KV), oracle, blanket
#        (every device allocation made managed with its home on the GPU, the
#        approach of existing oversubscription shims: the workload in --mode
#        native under the preload with KVTIER_POLICY='device => managed:hbm;
#        async => managed:hbm; * => native' KVTIER_MIGRATE=0), kvtier-static
#        and kvtier.
#   BENCH_SIM_FULL=1 (make bench-sim-full): 40 warm-up + 10 timed steps for the
#        baselines and 10 timed steps for kvtier (minutes: UVM thrash is real copying)
set -u
BUILD=${BUILD:-build}
if [ "${BENCH_SIM_FULL:-0}" = 1 ]; then
	STEPS=${BENCH_SIM_STEPS:-10}
	WARMUP=${BENCH_SIM_WARMUP:-40}
else
	STEPS=${BENCH_SIM_STEPS:-4}
	WARMUP=${BENCH_SIM_WARMUP:-8}
fi
JOBS=${BENCH_SIM_JOBS:-2}
EXTRA=${BENCH_SIM_ARGS:-}
OUT=$BUILD/bench-sim
JSON=$BUILD/bench-sim.json
WORKLOADS="vllm-like sglang-like llamacpp-like"
# KV sizes, slowest first for packing.  Default 2x and 1x: at 4x each uvm and
# blanket run thrashes for ~45-60 s of real copying, past bench-sim's minute;
# make bench and make bench-sim-full add 4x (BENCH_SIM_RATIOS="4 2 1").
RATIOS=${BENCH_SIM_RATIOS:-"2 1"}
KV_WARMUP=${BENCH_SIM_KVTIER_WARMUP:-3000}
KV_STEPS=$STEPS
BLANKET_POLICY='device => managed:hbm; async => managed:hbm; * => native'
LIBKVTIER=$(realpath "$BUILD/libkvtier.so")
export LD_LIBRARY_PATH=$BUILD/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

mkdir -p "$OUT"
rm -f "$OUT"/*.out "$OUT"/*.err "$OUT"/*.rc "$OUT"/*.wall
start=$(date +%s)

jobs_list() {
	for x in $RATIOS; do
		for mode in uvm blanket oracle native kvtier kvtier-static; do
			[ "$mode" = native ] && [ "$x" != 1 ] && continue
			case $mode in kvtier*|blanket) [ "$x" = 1 ] && continue ;; esac
			for wl in $WORKLOADS; do
				echo "$wl $x $mode"
			done
		done
	done
}

run_one() {
	local wl=$1 x=$2 mode=$3 base="$OUT/$1-$2-$3" t0
	t0=$(date +%s.%N)
	case $mode in
	kvtier|kvtier-static)
		env LD_PRELOAD="$LIBKVTIER" $([ "$mode" = kvtier-static ] && echo KVTIER_MIGRATE=0) \
			"$BUILD/workloads/$wl" --quiet --mode native --kv-over-hbm "$x" \
			--steps "$KV_STEPS" --warmup "$KV_WARMUP" $EXTRA >"$base.out" 2>"$base.err" ;;
	blanket)
		env LD_PRELOAD="$LIBKVTIER" KVTIER_POLICY="$BLANKET_POLICY" KVTIER_MIGRATE=0 \
			"$BUILD/workloads/$wl" --quiet --mode native --kv-over-hbm "$x" \
			--steps "$STEPS" --warmup "$WARMUP" $EXTRA >"$base.out" 2>"$base.err" ;;
	*)
		"$BUILD/workloads/$wl" --quiet --mode "$mode" --kv-over-hbm "$x" --steps "$STEPS" --warmup "$WARMUP" \
			$EXTRA >"$base.out" 2>"$base.err" ;;
	esac
	echo $? >"$base.rc"
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$base.wall"
}
export -f run_one
export OUT BUILD STEPS WARMUP EXTRA KV_WARMUP KV_STEPS LIBKVTIER BLANKET_POLICY

jobs_list | xargs -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1" "$2"'

val() {  # val FILE KEY
	sed -n "s/^$2=//p" "$1" | head -1
}

failed=0
printf '\nkvtier bench-sim — SIMULATED GPU (fakecuda cost model; not a measurement of hardware)\n'
printf 'device %s MiB simulated, %s timed decode steps per run (every alternative) after %s warm-up\n' \
	"$(( $(val "$OUT/vllm-like-1-native.out" device_bytes 2>/dev/null || echo 0) >> 20 ))" \
	"$STEPS" "$WARMUP"
printf '(kvtier and kvtier-static: %s warm-up steps, default KVTIER_* settings; blanket: managed:hbm for all device allocations, no migrator)\n\n' "$KV_WARMUP"
printf '%-14s %6s %-13s %14s %10s %10s %10s %8s %s\n' workload kv/hbm mode \
	'sim tokens/s' 'HtoD MiB' 'DtoH MiB' 'remote MiB' faults note
echo "[" >"$JSON.tmp"
first=1
for wl in $WORKLOADS; do
	for x in 1 2 4; do
		case " $RATIOS " in *" $x "*) ;; *) continue ;; esac
		for mode in native uvm blanket oracle kvtier kvtier-static; do
			case $mode in kvtier*|blanket) [ "$x" = 1 ] && continue ;; esac
			f="$OUT/$wl-$x-$mode.out"
			if [ "$mode" = native ] && [ "$x" != 1 ]; then
				printf '%-14s %5sx %-13s %14s %10s %10s %10s %8s %s\n' "$wl" "$x" "$mode" \
					- - - - - "does not fit (skipped)"
				continue
			fi
			rc=$(cat "$OUT/$wl-$x-$mode.rc" 2>/dev/null || echo 99)
			if [ "$rc" != 0 ]; then
				failed=$((failed + 1))
				printf '%-14s %5sx %-13s %14s %10s %10s %10s %8s %s\n' "$wl" "$x" "$mode" \
					- - - - - "FAILED rc=$rc: $(tail -1 "$OUT/$wl-$x-$mode.err")"
				continue
			fi
			tps=$(val "$f" tokens_per_s); h=$(val "$f" bytes_htod); d=$(val "$f" bytes_dtoh)
			r=$(val "$f" bytes_remote); fl=$(val "$f" faults)
			printf '%-14s %5sx %-13s %14.0f %10d %10d %10d %8d %s\n' "$wl" "$x" "$mode" "$tps" \
				$((h >> 20)) $((d >> 20)) $((r >> 20)) "$fl" "$(val "$f" result)"
			[ $first = 1 ] || echo "," >>"$JSON.tmp"
			first=0
			printf '  {"name": "%s", "kv_over_hbm": %s, "alternative": "%s", "tokens_per_s": %s, "bytes_htod": %s, "bytes_dtoh": %s, "bytes_remote": %s, "faults": %s, "steps": %s, "simulated": true}' \
				"$wl" "$x" "$mode" "$tps" "$h" "$d" "$r" "$fl" "$STEPS" >>"$JSON.tmp"
			case $mode in kvtier*) w=$KV_WARMUP ;; *) w=$WARMUP ;; esac
			sed -i '$ s/, "simulated": true}$/, "warmup": '"$w"', "simulated": true}/' "$JSON.tmp"
		done
	done
done
# kvtier's ratios (simulated tokens/s): vs oracle, vs fault-driven UVM, vs
# static placement (kvtier with KVTIER_MIGRATE=0), vs blanket managed memory.
# Targets: >= 0.9, >= 3, >= 1.5.
printf '\n%-14s %6s %18s %16s %18s %18s\n' workload kv/hbm kvtier_vs_oracle kvtier_vs_uvm kvtier_vs_static kvtier_vs_blanket
for wl in $WORKLOADS; do
	for x in 2 4; do
		case " $RATIOS " in *" $x "*) ;; *) continue ;; esac
		k=$(val "$OUT/$wl-$x-kvtier.out" tokens_per_s); s=$(val "$OUT/$wl-$x-kvtier-static.out" tokens_per_s)
		o=$(val "$OUT/$wl-$x-oracle.out" tokens_per_s); u=$(val "$OUT/$wl-$x-uvm.out" tokens_per_s)
		b=$(val "$OUT/$wl-$x-blanket.out" tokens_per_s)
		[ -n "$k" ] && [ -n "$s" ] && [ -n "$o" ] && [ -n "$u" ] || continue
		r=$(awk -v k="$k" -v o="$o" -v u="$u" -v s="$s" -v b="${b:-0}" 'BEGIN {
			kb = (b + 0 > 0) ? sprintf("%.3f", k / b) : "null"
			printf "%.3f %.3f %.3f %s\n", k / o, k / u, k / s, kb }')
		set -- $r
		printf '%-14s %5sx %18s %16s %18s %18s\n' "$wl" "$x" "$1" "$2" "$3" "$4"
		printf ',\n  {"name": "%s", "kv_over_hbm": %s, "alternative": "kvtier-ratios", "kvtier_vs_oracle": %s, "kvtier_vs_uvm": %s, "kvtier_vs_static": %s, "kvtier_vs_blanket": %s, "simulated": true}' \
			"$wl" "$x" "$1" "$2" "$3" "$4" >>"$JSON.tmp"
	done
done
printf '\n]\n' >>"$JSON.tmp"
mv "$JSON.tmp" "$JSON"
printf '\n(simulated) wrote %s in %ss; per-run output in %s/\n' "$JSON" $(( $(date +%s) - start )) "$OUT"
[ $failed -eq 0 ]
