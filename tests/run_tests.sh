#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every CUnit suite under $BUILD/tests/unit and prints one closing line
# "N passed, N failed" (tests, as counted by CUnit's own run summaries).
# SUITES="test_a test_b": only those suites (and no layering or history check).
# HOGS=N: N busy-looping processes beside the suites for their whole run
# (make test-loaded), as on a shared machine.
# JOBS=N: N suites side by side (printed in the order they start); see
# the JOBS comment below.
set -u
BUILD=${BUILD:-build}
export BUILD
# Sanitizer builds: the preloaded (instrumented) libkvtier is loaded before
# the sanitizer runtime the test programs link, which ASan must be told.
# SAN is -fsanitize's list (make asan: "address,undefined").
case ",${SAN:-}," in
*,address,*) export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" ;;
esac
case ",${SAN:-}," in
# kvtier holds every registry stripe lock across fork() (so a child never
# inherits a lock held mid-update); TSan's deadlock detector tracks at most
# 64 held locks per thread, so it is switched off. Races are still reported.
# die_after_fork=0: a child of a process that has kvtier's migration thread
# may start threads (TSan refuses that by default; glibc allows it).
*,thread,*) export TSAN_OPTIONS="halt_on_error=0:report_signal_unsafe=0:detect_deadlocks=0:die_after_fork=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}" ;;
# built with -fno-sanitize-recover=all: the first undefined behaviour aborts
# the process (a test then fails); the stack says where.
*,undefined,*) export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" ;;
esac
passed=0; failed=0; crashed=0; skipped=0
logdir="$BUILD/test-logs"
mkdir -p "$logdir"
hogs=""
stop_hogs() { [ -n "$hogs" ] && kill $hogs 2>/dev/null; hogs=""; }
trap stop_hogs EXIT
for _ in $(seq 1 "${HOGS:-0}"); do
	( while :; do :; done ) &
	hogs="$hogs $!"
done
[ -n "$hogs" ] && echo "=== ${HOGS} CPU hogs beside the suites (pids$hogs)"
# The layering check (README "Layout") and the history check: one test
# each, no build needed.
if [ -z "${SUITES:-}" ]; then
echo "=== check_layers"
python3 "$(dirname "$0")/check_layers.py" --self-test >"$logdir/check_layers.log" 2>&1
rc_self=$?
python3 "$(dirname "$0")/check_layers.py" >>"$logdir/check_layers.log" 2>&1
rc_tree=$?
cat "$logdir/check_layers.log"
if [ $rc_self -eq 0 ] && [ $rc_tree -eq 0 ]; then
	passed=$((passed+1))
else
	failed=$((failed+1))
	echo "--- check_layers failed: an include cycle among folders, an include upward, or policy/ impure"
fi
# The history check: no numbered work periods in README, docs or comments.
echo "=== check_history"
python3 "$(dirname "$0")/check_history.py" --self-test >"$logdir/check_history.log" 2>&1
rc_self=$?
python3 "$(dirname "$0")/check_history.py" >>"$logdir/check_history.log" 2>&1
rc_tree=$?
cat "$logdir/check_history.log"
if [ $rc_self -eq 0 ] && [ $rc_tree -eq 0 ]; then
	passed=$((passed+1))
else
	failed=$((failed+1))
	echo "--- check_history failed: a numbered work period (session N, stop N) in README, docs or a code comment"
fi
fi
# run_suite NAME: one suite, its log in $logdir/NAME.log; what the summary
# shows of it in $logdir/NAME.out and its counts "p f k crashed" in
# $logdir/NAME.counts (so that suites can run side by side, JOBS=N).
run_suite() {
	local name=$1 t="$BUILD/tests/unit/$1" start rc row p f k c=0
	start=$(date +%s)
	timeout 900 "$t" >"$logdir/$name.log" 2>&1
	rc=$?
	# CUnit's summary row: "tests  <total> <ran> <passed> <failed> <inactive>"
	row=$(grep -E '^ +tests +[0-9]+' "$logdir/$name.log" | tail -1)
	if [ -n "$row" ]; then
		p=$(echo "$row" | awk '{print $4}'); f=$(echo "$row" | awk '{print $5}')
		# inactive tests: skips a suite decided on (a tool missing; its log says which)
		k=$(echo "$row" | awk '{print $6}')
	else
		p=0; f=1; k=0
	fi
	if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; c=1; fi
	{
	echo "=== $name"
	sed -n '/Run Summary/,$p' "$logdir/$name.log"
	if [ "$f" != 0 ]; then
		echo "--- $name failed (rc=$rc); its log:"
		grep -E 'FAILED|failed|ASSERT|ERROR|Sanitizer|^ +[0-9]+\. ' "$logdir/$name.log" | head -40
		# the tests' own diagnostics (stderr lines without CUnit's words):
		# the only record of a rare failure that CI shows
		echo "--- $name: what it printed besides CUnit's lines (last 30):"
		grep -vE '^ *(Test: .*\.\.\.(passed|FAILED)|Suite:|Run Summary|suites|tests|asserts|Elapsed|FAILED|[0-9]+\. |$)' \
			"$logdir/$name.log" | tail -30
	fi
	echo "    ($name: rc=$rc, $(( $(date +%s) - start ))s)"
	} >"$logdir/$name.out"
	echo "$p $f ${k:-0} $c" >"$logdir/$name.counts"
}

# collect NAME: print a finished suite's summary, add its counts.
collect() {
	local p f k c
	cat "$logdir/$1.out"
	read -r p f k c <"$logdir/$1.counts"
	passed=$((passed+p)); failed=$((failed+f)); skipped=$((skipped+k)); crashed=$((crashed+c))
}

# JOBS=N: N suites at a time (default 1). A slot is refilled as soon as any
# suite in it ends; summaries are printed in the order the suites started.
# The suites in FIRST start first, longest first (wall times on 2 cores,
# plain / TSan: test_migrate 176 / 515 s, test_workloads 98 / 427 s,
# test_tier_report 145 / 148 s, test_passthrough 48 / 158 s,
# test_policy_workloads 53 / 94 s with its 1 GiB device under TSan; the
# rest under 90 s under TSan), so that no long suite starts last beside an
# idle slot. A suite in ALONE runs with no other beside it (it lists or
# sweeps what every kvtier process leaves in /dev/shm). Of the suites in
# HEAVY, which simulate a 2 GiB device in host memory, only one runs at a
# time: two side by side under TSan (its shadow memory) took more than this
# 24 GiB machine has (the OOM killer took a 16 GiB sglang-like of
# test_policy_workloads beside test_workloads).
JOBS=${JOBS:-1}
ALONE=${ALONE:-test_stat}
HEAVY=${HEAVY:-test_workloads test_policy_workloads}
# Under ThreadSanitizer a heavy suite runs alone too: its shadow memory makes
# one 2 GiB-device sglang-like about 16 GiB, and beside any other TSan suite
# the OOM killer took it (in CI: exit 137 in test_policy_workloads with
# test_workloads already kept apart).
case ",${SAN:-}," in
*,thread,*) ALONE="$ALONE $HEAVY" ;;
esac
# Under ThreadSanitizer the suites of the offline tools are not run: the
# kvtier command is single-threaded, and the traces they read come from
# workloads whose kvtier threads the other suites run under TSan (697 s of
# suite time in a TSan run here, beside other work). Nor is test_workloads:
# it runs the workloads on the CUDA stand-ins with no libkvtier loaded
# (632 s alone under TSan, a HEAVY suite). ASan and the plain build run
# them all.
TSAN_SKIP=${TSAN_SKIP:-test_cli test_report test_report_html test_report_views test_tier_report test_workloads}
case ",${SAN:-}," in
*,thread,*) ;;
*) TSAN_SKIP="" ;;
esac
FIRST=${FIRST:-test_migrate test_workloads test_tier_report test_passthrough test_policy_workloads test_migrate_faults test_real test_cli}
order=()
for name in $FIRST; do
	[ -x "$BUILD/tests/unit/$name" ] && order+=("$name")
done
for t in "$BUILD"/tests/unit/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	case " $FIRST " in *" $name "*) continue ;; esac
	order+=("$name")
done
queue=()      # "pid name" of the suites started and not yet printed, in start order
# print_done: print (and count) the finished suites at the head of the queue
print_done() {
	while [ ${#queue[@]} -gt 0 ]; do
		local head=${queue[0]}
		[ -f "$logdir/${head#* }.counts" ] || break
		wait "${head%% *}"
		collect "${head#* }"
		queue=("${queue[@]:1}")
	done
}
# running: how many suites of the queue have not ended (run_suite writes
# NAME.counts last)
running() {
	local n=0 q
	for q in "${queue[@]}"; do
		[ -f "$logdir/${q#* }.counts" ] || n=$((n + 1))
	done
	echo $n
}
# heavy_running: whether a suite of HEAVY in the queue has not ended
heavy_running() {
	local q
	for q in "${queue[@]}"; do
		case " $HEAVY " in *" ${q#* } "*) ;; *) continue ;; esac
		[ -f "$logdir/${q#* }.counts" ] || return 0
	done
	return 1
}
# wait_slots N: print what has ended until fewer than N suites run
wait_slots() {
	print_done
	while [ "$(running)" -ge "$1" ]; do
		sleep 0.5
		print_done
	done
}
is_heavy() { case " $HEAVY " in *" $1 "*) return 0 ;; esac; return 1; }
pending=()
for name in "${order[@]}"; do
	case " $TSAN_SKIP " in
	*" $name "*)
		echo "=== $name: not run under ThreadSanitizer (no kvtier thread of its own to check; TSAN_SKIP)"
		continue ;;
	esac
	case " ${SUITES:- $name } " in *" $name "*) pending+=("$name") ;; esac
done
# With suites side by side, those that run alone go last, in their order:
# started earlier, each would first wait for every running suite to end
# with the other slots idle.
if [ "$JOBS" -gt 1 ]; then
	together=(); apart=()
	for name in "${pending[@]}"; do
		case " $ALONE " in *" $name "*) apart+=("$name") ;; *) together+=("$name") ;; esac
	done
	pending=("${together[@]}" "${apart[@]}")
fi
while [ ${#pending[@]} -gt 0 ]; do
	if [ "$JOBS" -le 1 ]; then
		name=${pending[0]}; pending=("${pending[@]:1}")
		rm -f "$logdir/$name.counts"
		run_suite "$name"; collect "$name"; continue
	fi
	wait_slots "$JOBS"
	# the first suite in line that may start now: a heavy one waits while
	# another heavy one runs, and the next in line goes first
	pick=-1
	for i in "${!pending[@]}"; do
		if is_heavy "${pending[$i]}" && heavy_running; then continue; fi
		pick=$i; break
	done
	if [ $pick -lt 0 ]; then
		sleep 0.5; print_done; continue
	fi
	name=${pending[$pick]}
	pending=("${pending[@]:0:$pick}" "${pending[@]:$((pick + 1))}")
	rm -f "$logdir/$name.counts"
	case " $ALONE " in
	*" $name "*)
		wait_slots 1
		run_suite "$name"; collect "$name"; continue ;;
	esac
	run_suite "$name" &
	queue+=("$! $name")
done
wait_slots 1
echo
[ "$skipped" -gt 0 ] && echo "$skipped skipped (inactive: a tool they need is missing; see the SKIP lines)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
