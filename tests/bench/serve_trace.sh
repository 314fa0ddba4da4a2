# SPDX-License-Identifier: MIT
# Sourced by bench_serve.sh: the serving table's trace rows (issue 44).
# serve-like --trace replays a public production trace, read in place from
# ../shared/traces/ (never copied into the project; its README gives the
# sources and licenses), at a TRACE_X pool, for each persona, loop and
# alternative. Every figure is simulated.
#   BENCH_SERVE_TRACES   entries FILE:START:N:SCALE (the window's first row,
#                        rows (0: to the end), --time-scale of the open loop);
#                        "" leaves the trace rows out
#   BENCH_SERVE_TRACE_DIR (../shared/traces from the repository's root)
#   BENCH_SERVE_TRACE_PERSONAS ("vllm-v2 vllm-v1-fa")
#   BENCH_SERVE_TRACE_MODES ("open closed")
# The alternatives are bench_serve.sh's ALTS. Each open-loop scale is the
# one at which native, on vllm-v2, still keeps up with the arrivals (docs/
# workloads.md "Serving from request traces" says how each was chosen).
# Targets (kvtier rows): closed loop >= 1.2x native output tokens/s and
# >= 1.0x offload; open loop goodput >= 1.2x native and TTFT p50 <= 0.75x.
TRACE_DIR=${BENCH_SERVE_TRACE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/../shared/traces}
TRACES=${BENCH_SERVE_TRACES-"synthetic_trace.jsonl:0:0:50 AzureLLMInferenceTrace_conv.csv:0:4000:120"}
TRACE_PERSONAS=${BENCH_SERVE_TRACE_PERSONAS:-"vllm-v2 vllm-v1-fa"}
TRACE_MODES=${BENCH_SERVE_TRACE_MODES:-"open closed"}
TRACE_X=4

# the job lines: T:SPEC PERSONA ALT LOOP (nothing, with one line, when the
# traces are not there)
trace_jobs() {
	[ -n "$TRACES" ] || return 0
	if [ ! -d "$TRACE_DIR" ]; then
		echo "bench-serve: trace rows skipped: no $TRACE_DIR (the public traces)" >&2
		TRACES=""
		return 0
	fi
	local spec p m a
	for spec in $TRACES; do
		if [ ! -r "$TRACE_DIR/${spec%%:*}" ]; then
			echo "bench-serve: trace rows of ${spec%%:*} skipped: not in $TRACE_DIR" >&2
			continue
		fi
		for p in $TRACE_PERSONAS; do
			for m in $TRACE_MODES; do
				for a in $ALTS; do
					echo "T:$spec $p $a $m"
				done
			done
		done
	done
}

# trace_base SPEC PERSONA LOOP ALT: the run's file names under $OUT
trace_base() {
	local f start n
	IFS=: read -r f start n _ <<<"$1"
	echo "tr-${f%%.*}-$start+$n-$2-$3-$4"
}

# trace_cmd SPEC PERSONA ALT LOOP: the serve-like command line
trace_cmd() {
	local f start n scale loop=""
	IFS=: read -r f start n scale <<<"$1"
	[ "$4" = closed ] && loop=--closed-loop
	echo "$BUILD/workloads/serve-like --quiet --persona $2 --alt $3 --pool-over-hbm $TRACE_X" \
		"--trace $TRACE_DIR/$f --trace-start $start --trace-requests $n --time-scale $scale $loop"
}

# The trace rows' table and JSON rows (appended to $JSON.tmp; uses
# bench_serve.sh's val, why_failed, evidence_at, first and failed).
trace_table() {
	[ -n "$TRACES" ] || return 0
	local spec p m a f base rc nat off
	for spec in $TRACES; do
		[ -r "$TRACE_DIR/${spec%%:*}" ] || continue
		for p in $TRACE_PERSONAS; do
			for m in $TRACE_MODES; do
				printf 'trace %s, persona %s, %s loop, pool %sx\n' "$spec" "$p" "$m" "$TRACE_X"
				printf '%-8s %12s %8s %9s %9s %9s %9s %9s %6s %10s %7s %-18s %s\n' alt 'out tok/s' \
					'req/s' 'goodput' 'TTFT p50' 'TTFT p99' 'TPOT p50' 'TPOT p99' hit 'link MiB' \
					wall evidence targets
				nat="$OUT/$(trace_base "$spec" "$p" "$m" native).out"
				off="$OUT/$(trace_base "$spec" "$p" "$m" offload).out"
				for a in $ALTS; do
					base="$OUT/$(trace_base "$spec" "$p" "$m" "$a")"
					f=$base.out
					rc=$(cat "$base.rc" 2>/dev/null || echo 99)
					if [ "$rc" != 0 ]; then
						printf '%-8s %s\n' "$a" "$(why_failed "$base" "$rc")"
						failed=$((failed + 1))
						continue
					fi
					local tps rps gp t50 t99 p50 p99 hit link trace ev=- verdict=-
					tps=$(val "$f" output_tokens_per_s); rps=$(val "$f" requests_per_s)
					gp=$(val "$f" goodput_rps); gp=${gp:-null}
					t50=$(val "$f" ttft_ms_p50); t99=$(val "$f" ttft_ms_p99)
					p50=$(val "$f" tpot_ms_p50); p99=$(val "$f" tpot_ms_p99)
					hit=$(val "$f" prefix_hit_rate); link=$(val "$f" bytes_link)
					trace=$(val "$f" trace)
					if [ "$a" = kvtier ]; then
						ev=$(evidence_at "$base")
						verdict=$(awk -v m="$m" -v k="$tps" -v kt="$t50" -v kg="$gp" \
							-v n="$(val "$nat" output_tokens_per_s 2>/dev/null)" \
							-v nt="$(val "$nat" ttft_ms_p50 2>/dev/null)" \
							-v ng="$(val "$nat" goodput_rps 2>/dev/null)" \
							-v o="$(val "$off" output_tokens_per_s 2>/dev/null)" 'BEGIN {
							r = ""
							if (m == "closed" && n + 0 > 0 && k < 1.2 * n)
								r = r sprintf(" tput %.2fx native (<1.2)", k / n)
							if (m == "closed" && o + 0 > 0 && k < o)
								r = r sprintf(" tput %.2fx offload (<1.0)", k / o)
							if (m == "open" && ng + 0 > 0 && kg < 1.2 * ng)
								r = r sprintf(" goodput %.2fx native (<1.2)", kg / ng)
							if (m == "open" && nt + 0 > 0 && kt > 0.75 * nt)
								r = r sprintf(" TTFT %.2fx native (>0.75)", kt / nt)
							print (r == "" ? "met" : "MISSED:" r) }')
					fi
					printf '%-8s %12.0f %8.1f %9s %9.3f %9.3f %9.4f %9.4f %6.3f %10d %6ss %-18s %s\n' \
						"$a" "$tps" "$rps" "${gp/null/-}" "$t50" "$t99" "$p50" "$p99" "$hit" \
						$((link >> 20)) "$(cat "$base.wall")" "$ev" "$verdict"
					[ "$first" = 1 ] || echo "," >>"$JSON.tmp"
					first=0
					printf '  {"persona": "%s", "pool_over_hbm": %s, "alternative": "%s", "trace": "%s", "mode": "%s", "time_scale": %s, "output_tokens_per_s": %s, "requests_per_s": %s, "goodput_rps": %s, "ttft_ms_p50": %s, "ttft_ms_p99": %s, "tpot_ms_p50": %s, "tpot_ms_p99": %s, "prefix_hit_rate": %s, "bytes_link": %s, "evidence": "%s", "targets": "%s", "device_mode": "%s", "simulated": true}' \
						"$p" "$TRACE_X" "$a" "$trace" "$m" "${spec##*:}" "$tps" "$rps" "$gp" "$t50" \
						"$t99" "$p50" "$p99" "$hit" "$link" "$ev" "$verdict" "$MODE" >>"$JSON.tmp"
				done
				printf '\n'
			done
		done
	done
}
