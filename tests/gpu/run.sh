#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The real-GPU check (issues 10, 25, 47). Runs on a GPU machine from the
# bundle that `make gpu-bundle` built (build/gpu; nothing is compiled or
# installed here), the most informative steps first. Its third-party server
# is PyTorch (preinstalled there); llama.cpp runs from its npm package in
# make test instead (tests/real/llamacpp_check.sh, CPU build: the CUDA one
# does not fit the bundle).
#   0. free device memory first; no run asks for more than half of it; then
#      calibration: the costs the simulated device models, measured here
#   1. tests/gpu/torch_check.py (skips itself without torch)
#   2. zipf-decode (issue 6's oracle target) at KV = 2x the budget: native,
#      kvtier (remote admission) and kvtier with KVTIER_ADMIT=auto, and their
#      ratios to native.
#   3. the probe: cudaMalloc'd buffers native, blanket managed, and under
#      kvtier with a small KVTIER_HBM_BUDGET and KV 4x that budget: placement
#      (cuMemRangeGetAttribute HOST_NUMA, numa_maps), GPU touch rate
#   4. the workloads (linked to the real libcudart.so.13; on a real GPU their
#      decode runs a PTX kernel over the K/V rows, tests/workloads/wl_real.c)
#      at the same KV size: native (it fits on the card), blanket managed,
#      kvtier static (KVTIER_MIGRATE=0) and kvtier with the small budget:
#      wall-clock tokens/s side by side, KV verification (corrupt=0); and
#      each with KVTIER_ADMIT=auto: do GPU faults migrate far memory here
#      (migrate.fault_ins), or did auto give way to remote (and why)?
#      And vllm-like under kvtier with its decode replayed from CUDA graphs
#      (--graphs): graphs kept by the launch source, evidence, promotions.
# At most ~8 minutes; logs under $OUT (else build/gpu/logs); a table last.
# Exits 77 with one line when no GPU is present, 1 when a check failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# the bundle: the one this copy sits in, else $GPU_BUILD, else build/gpu
if [ -x "$here/probe" ]; then B=$(cd "$here/.." && pwd)
elif [ -n "${GPU_BUILD:-}" ]; then B=$(cd "$GPU_BUILD" 2>/dev/null && pwd || echo "$GPU_BUILD")
else B=$(cd "$here/../.." && pwd)/build/gpu; fi
LOG=${OUT:-$B/logs}
STEP_S=${GPU_STEP_S:-90}             # each step's time limit
DEADLINE=$(( $(date +%s) + ${GPU_TOTAL_S:-450} ))
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

# ---- is there a GPU? ------------------------------------------------------------
if ! { [ -e /dev/nvidiactl ] || command -v nvidia-smi >/dev/null; }; then
	echo "tests/gpu/run.sh: SKIP: no NVIDIA GPU on this machine (no /dev/nvidiactl, no nvidia-smi)"
	exit 77
fi
if [ ! -x "$B/gpu/probe" ] || [ ! -e "$B/libkvtier.so" ]; then
	echo "tests/gpu/run.sh: no bundle at $B: run 'make gpu-bundle' on the build machine and carry build/gpu" >&2
	exit 1
fi
mkdir -p "$LOG"
# the bundle's libraries (tests/gpu/bundle.sh): fallback copies only where
# the machine lacks the library
mkdir -p "$LOG/fallback-libs"
for f in "$B"/lib/fallback/*; do
	[ -e "$f" ] || continue
	n=$(basename "$f")
	ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$n " || ln -sf "$f" "$LOG/fallback-libs/$n"
done
KVT_LIBS=$B/lib:$LOG/fallback-libs
export LD_LIBRARY_PATH=$B/lib/cuda:$KVT_LIBS${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}
KVTIER=$B/kvtier
PROBE=$B/gpu/probe
rows=()
failed=0

meminfo=$(timeout 60 "$PROBE" meminfo 2>"$LOG/meminfo.err"); rc=$?
echo "$meminfo" >"$LOG/meminfo.out"
if [ $rc = 77 ]; then
	echo "tests/gpu/run.sh: SKIP: no usable GPU (driver present, no device: $(tail -1 "$LOG/meminfo.err"))"
	exit 77
fi
[ $rc = 0 ] || { echo "tests/gpu/run.sh: probe meminfo failed (rc $rc): $(tail -1 "$LOG/meminfo.err")" >&2; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi >"$LOG/nvidia-smi.txt" 2>&1
val() { echo "$1" | sed -n "s/^$2=//p" | head -1; }
GPU=$(val "$meminfo" gpu)
FREE=$(val "$meminfo" free_bytes)
TOTAL=$(val "$meminfo" total_bytes)
HALF=$((FREE / 2))
GiB=$((1 << 30))
# budget: 1/8 of half the free memory, at most 2 GiB; KV = 4x the budget
BUDGET=$((HALF / 8)); [ $BUDGET -gt $((2 * GiB)) ] && BUDGET=$((2 * GiB))
BUDGET=$((BUDGET / (2 << 20) * (2 << 20)))
KV=$((BUDGET * 4))
NR_BUFS=8
BUF=$((KV / NR_BUFS))
# The workloads' other device memory is sized from the card's TOTAL: weights
# and profiling activations / compute buffer 0.2 % of it each, rounded up per
# tensor (small: their CPU-generated patterns cost ~4 ns a byte to load).
# Under blanket managed memory all of it is managed too, so KV plus that
# must stay under half the free memory (the most any run may ask for).
WL_NONKV=$(( 2 * (TOTAL / 500) + 64 * (2 << 20) ))
[ $BUDGET -ge $((64 << 20)) ] || { echo "tests/gpu/run.sh: only $((FREE >> 20)) MiB free: too little to run" >&2; exit 1; }
[ $KV -le $HALF ] || { echo "tests/gpu/run.sh: sizing error: KV $KV > half of free $HALF" >&2; exit 1; }
[ $((KV + WL_NONKV)) -le $HALF ] || { echo "tests/gpu/run.sh: sizing error: KV $KV + other workload memory $WL_NONKV > half of free $HALF" >&2; exit 1; }
echo "gpu: $GPU, free $((FREE / GiB)) GiB; KVTIER_HBM_BUDGET=$BUDGET, KV $KV bytes in $NR_BUFS buffers" | tee "$LOG/sizes.txt"

left() { echo $(( DEADLINE - $(date +%s) )); }
# step NAME EXPECT_RC... -- CMD: runs under timeout, logs, notes a row
step() {
	local name=$1 ok_rcs=$2 lim rc
	shift 3
	lim=$(left); [ "$lim" -gt "$STEP_S" ] && lim=$STEP_S
	if [ "$lim" -le 5 ]; then
		rows+=("$(printf '%-26s %-8s %s' "$name" skipped 'out of time')")
		return 1                      # callers add their row only after a run
	fi
	timeout "$lim" "$@" >"$LOG/$name.out" 2>"$LOG/$name.err"; rc=$?
	if echo " $ok_rcs " | grep -q " $rc "; then STATUS=ok; else STATUS="FAIL($rc)"; failed=1; fi
	[ $rc = 124 ] && STATUS="TIMEOUT"
	LAST=$name
	return 0
}
probe_row() {    # the probe's summary line as a table row
	local s; s=$(grep '^buffers=' "$LOG/$LAST.out")
	rows+=("$(printf '%-26s %-8s touch %s pages/s, memset %s GiB/s, managed %s/%s, far home %s' "$LAST" "$STATUS" \
		"$(echo "$s" | sed -n 's/.*touch_pages_per_s=\([0-9]*\).*/\1/p')" \
		"$(echo "$s" | sed -n 's/.*memset_gib_per_s=\([0-9.]*\).*/\1/p')" \
		"$(echo "$s" | sed -n 's/.*managed=\([0-9]*\).*/\1/p')" "$NR_BUFS" \
		"$(echo "$s" | sed -n 's/.*far_home=\([0-9]*\).*/\1/p')")")
}
trace_counts() {  # events by op in the traces of one step
	local t; t=$(ls "$LOG/$1".*.trace* 2>/dev/null)
	[ -n "$t" ] || { echo "no trace"; return; }
	"$KVTIER" dump $t 2>/dev/null | sed -n 's/.* op=\([a-z]*\) .*/\1/p' | sort | uniq -c |
		awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }'
}
admit_info() {  # the admission counters of one step's trace
	local t; t=$(ls "$LOG/$1".*.trace* 2>/dev/null)
	[ -n "$t" ] || { echo "no trace"; return; }
	"$KVTIER" dump $t 2>/dev/null |
		sed -n 's/^info migrate\.\(admit\|fault_ins\|refaults\|far_faults\|auto_mapped\|promoted\|demoted\)=/\1=/p' |
		tr '\n' ' '
}
graph_info() {  # graphs made and launched, and what the launch source kept of them
	local t; t=$(ls "$LOG/$1".*.trace* 2>/dev/null)
	printf '%s ' "$(sed -n 's/^\(graphs\|graph_launches\)=/\1=/p' "$LOG/$1.out" 2>/dev/null | tr '\n' ' ')"
	[ -n "$t" ] || { echo "no trace"; return; }
	"$KVTIER" dump $t 2>/dev/null |
		sed -n 's/^info \(prof\.launch\.graphs\|prof\.source\.launch\|migrate\.promoted\)=/\1=/p' |
		tr '\n' ' '
}
FAR_POLICY="device,size>=$BUF => managed:cxl; * => native"
BLANKET_POLICY="device => managed:hbm; * => native"

# ---- the workloads' helpers -------------------------------------------------------
# KV = 4x the budget fits on the card natively (it is at most a quarter of the
# free memory): native is the all-in-HBM bound; kvtier keeps KVTIER_HBM_BUDGET
# of it in HBM and the rest on the far node; static is kvtier without the
# migrator; blanket makes every device allocation managed (homed on the GPU).
# Exit 77 from a workload = no real kernel (decode skipped): a failure here.
# The KV is a small share of a big card, where the classifier (which looks for
# a server sizing its KV from the free memory) rightly does not call it KV:
# the policy names the KV tensors by size instead (each at least a tenth
# less than the workload's KV tensor: vllm-like L of KV/L, sglang-like 2L of
# KV/2L, llamacpp-like one of KV; weights are 0.2 % of the card, below that).
WL_ARGS="--weights-frac 0.002 --act-frac 0.002 --host-ratio 0.5 --warmup ${GPU_WL_WARMUP:-4} --steps ${GPU_WL_STEPS:-8}"
WL_LAYERS=4                       # the workloads' default --layers
kv_policy() {   # kv_policy WORKLOAD [KV_BYTES]: the rule that redirects its KV tensors
	local n kv=${2:-$KV}
	case $1 in vllm-like) n=$WL_LAYERS ;; sglang-like) n=$((2 * WL_LAYERS)) ;; *) n=1 ;; esac
	echo "kv => managed:cxl; device,size>=$((kv / n / 10 * 9)) => managed:cxl; * => native"
}
wl_row() {   # wl_row: the workload's tokens/s, checks and kvtier trace counts
	local o=$LOG/$LAST.out
	rows+=("$(printf '%-26s %-8s %s tokens/s (%s), %s launches, verified %s corrupt %s%s' "$LAST" "$STATUS" \
		"$(sed -n 's/^tokens_per_s=//p' "$o" | head -1)" \
		"$(grep -q '^real_gpu=1' "$o" && echo wall || echo 'SIMULATED, not a real GPU')" \
		"$(sed -n 's/^launches=//p' "$o" | head -1)" \
		"$(sed -n 's/^verified=//p' "$o" | head -1)" "$(sed -n 's/^corrupt=//p' "$o" | head -1)" \
		"$([ "${1:-}" = traced ] && echo "; $(trace_counts "$LAST")")")")
	grep -q '^corrupt=[1-9]' "$o" 2>/dev/null && failed=1
	# where kvtier put what (its exit summary): which allocation went where
	local pl; pl=$(sed -n 's/^ *kvtier placed: *//p' "$LOG/$LAST.err" 2>/dev/null | head -1)
	[ -n "$pl" ] && rows+=("$(printf '%-26s %-8s %s' "  placed" - "$pl")")
	return 0
}
auto_rows() {   # auto_rows STEP: its admission counters and any give-way line
	rows+=("$(printf '%-26s %-8s %s' "  admission" - "$(admit_info "$1")")")
	local gw; gw=$(grep -h 'gives way' "$LOG/$1.err" 2>/dev/null | head -1 | cut -c1-200)
	[ -n "$gw" ] && rows+=("$(printf '%-26s %-8s %s' "  gave way" - "$gw")")
	return 0
}
tps() { sed -n 's/^tokens_per_s=//p' "$LOG/$1.out" 2>/dev/null | head -1; }

# ---- 0: calibration: the costs the simulated device models, measured here ----
# (docs/simulated-device.md "Calibration"; each line has the stand-in's value)
CAL_BLOCKS=$(( HALF / 4 / (2 << 20) )); [ $CAL_BLOCKS -gt 256 ] && CAL_BLOCKS=256
step calibrate "0" -- "$PROBE" calibrate "$CAL_BLOCKS" &&
	rows+=("$(printf '%-26s %-8s %s' calibrate "$STATUS" "$(grep -v '^calibrate:' "$LOG/calibrate.out" | tr '\n' ' ')")")

# ---- 1: PyTorch -------------------------------------------------------------------
PY=${PYTHON:-python3}
if command -v "$PY" >/dev/null; then
	# PyTorch brings its own runtime: the bundle's lib/cuda stays off its path.
	# Its own limit (two generations, each a fresh torch import and CUDA
	# context); each child gets half of it, and one that overruns has its
	# Python stacks written to torch-{native,kvtier}.err before it is killed.
	TORCH_S=${GPU_TORCH_S:-200}
	tl=$(left); [ "$tl" -gt "$TORCH_S" ] && tl=$TORCH_S
	STEP_S=$TORCH_S step torch "0 77" -- env LD_LIBRARY_PATH="$KVT_LIBS${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}" \
		"$PY" "$B/gpu/torch_check.py" --kvtier "$KVTIER" --out "$LOG" \
		--child-s $(( tl > 30 ? (tl - 10) / 2 : 10 )) &&
		rows+=("$(printf '%-26s %-8s %s' torch "$STATUS" "$(tail -1 "$LOG/torch.out")")")
else
	rows+=("$(printf '%-26s %-8s %s' torch skipped "no $PY")")
fi

# ---- 2: zipf-decode --------------------------------------------------------------------
# zipf-decode, the workload of issue 6's oracle target: vllm-like with a
# Zipf-skewed decode whose hot set fits the budget and moves (bench-sim's
# zipf-decode flags and window) at KV = 2x the budget. Native keeps all of it
# in HBM, so it is at least the oracle's placement: kvtier / native is a lower
# bound on kvtier / oracle (target 0.9). kvtier as shipped (far memory mapped
# for the GPU, KVTIER_ADMIT=remote) and with KVTIER_ADMIT=auto, side by side:
# the simulated device says auto is the one that can meet it.
ZIPF_KV=$((BUDGET * 2))
ZIPF_ARGS="--zipf 2.5 --active-frac 0.15 --decode-min 32 --decode-max 128 --drift-every 400
	--weights-frac 0.002 --act-frac 0.002 --warmup ${GPU_ZIPF_WARMUP:-600} --steps ${GPU_ZIPF_STEPS:-400}"
# shellcheck disable=SC2086
step zipf-decode-native "0" -- "$B/workloads/vllm-like" --kv-bytes "$ZIPF_KV" $ZIPF_ARGS && wl_row
for adm in remote auto; do
	name=zipf-decode-kvtier; [ $adm = auto ] && name=zipf-decode-kvtier-auto
	# shellcheck disable=SC2086
	step "$name" "0" -- env KVTIER_POLICY="$(kv_policy vllm-like "$ZIPF_KV")" KVTIER_HBM_BUDGET="$BUDGET" \
		KVTIER_ADMIT=$adm "$KVTIER" run --trace "$LOG/$name.%p.trace" -- \
		"$B/workloads/vllm-like" --kv-bytes "$ZIPF_KV" $ZIPF_ARGS && wl_row traced
done
auto_rows zipf-decode-kvtier-auto
rows+=("$(printf '%-26s %-8s %s' "  zipf-decode ÷ native" - "$(awk -v n="$(tps zipf-decode-native)" \
	-v r="$(tps zipf-decode-kvtier)" -v a="$(tps zipf-decode-kvtier-auto)" 'function q(x) {
	return (n > 0 && x != "") ? sprintf("%.3f", x / n) : "-" }
	BEGIN { printf "kvtier %s, auto %s (target: kvtier >= 0.9 of the oracle; native >= the oracle)", q(r), q(a) }')")")
# ---- 3: the probe, side by side ----------------------------------------------
step probe-native "0" -- "$PROBE" place "$BUF" "$NR_BUFS" 3 native && probe_row
step probe-blanket "0" -- env KVTIER_POLICY="$BLANKET_POLICY" KVTIER_MIGRATE=0 \
	"$KVTIER" run --trace "$LOG/probe-blanket.%p.trace" -- "$PROBE" place "$BUF" "$NR_BUFS" 3 any && probe_row
step probe-static "0" -- env KVTIER_POLICY="$FAR_POLICY" KVTIER_HBM_BUDGET="$BUDGET" KVTIER_MIGRATE=0 \
	"$KVTIER" run --trace "$LOG/probe-static.%p.trace" -- "$PROBE" place "$BUF" "$NR_BUFS" 3 far && probe_row
step probe-kvtier "0" -- env KVTIER_POLICY="$FAR_POLICY" KVTIER_HBM_BUDGET="$BUDGET" KVTIER_EPOCH_MS=20 \
	"$KVTIER" run --trace "$LOG/probe-kvtier.%p.trace" -- "$PROBE" place "$BUF" "$NR_BUFS" 20 far && probe_row
rows+=("$(printf '%-26s %-8s %s' "  kvtier trace events" - "$(trace_counts probe-kvtier)")")
grep -il 'cupti' "$LOG"/probe-kvtier.err >/dev/null 2>&1 &&
	rows+=("$(printf '%-26s %-8s %s' "  cupti" - "$(grep -i cupti "$LOG/probe-kvtier.err" | head -1)")")

# ---- 4: the workloads at the same KV size, side by side ------------------------------
for wl in vllm-like sglang-like llamacpp-like; do
	# shellcheck disable=SC2086
	step "$wl-native" "0" -- "$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS && wl_row
	step "$wl-blanket" "0" -- env KVTIER_POLICY="device => managed:hbm; async => managed:hbm; * => native" \
		KVTIER_MIGRATE=0 "$KVTIER" run --trace "$LOG/$wl-blanket.%p.trace" -- \
		"$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS && wl_row traced
	step "$wl-static" "0" -- env KVTIER_POLICY="$(kv_policy "$wl")" KVTIER_HBM_BUDGET="$BUDGET" KVTIER_MIGRATE=0 \
		"$KVTIER" run --trace "$LOG/$wl-static.%p.trace" -- "$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS &&
		wl_row traced
	step "$wl-kvtier" "0" -- env KVTIER_POLICY="$(kv_policy "$wl")" KVTIER_HBM_BUDGET="$BUDGET" \
		"$KVTIER" run --trace "$LOG/$wl-kvtier.%p.trace" -- "$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS &&
		wl_row traced
done
# admission by fault (opt-in, checked on the stand-in only so far), each
# workload beside its remote-admission kvtier row above: with the zipf-decode
# rows below, what decides whether auto can be the default (docs/performance.md,
# "Real GPU")
for wl in vllm-like sglang-like llamacpp-like; do
	# shellcheck disable=SC2086
	step "$wl-kvtier-auto" "0" -- env KVTIER_POLICY="$(kv_policy "$wl")" KVTIER_HBM_BUDGET="$BUDGET" \
		KVTIER_ADMIT=auto "$KVTIER" run --trace "$LOG/$wl-kvtier-auto.%p.trace" -- \
		"$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS && wl_row traced && auto_rows "$wl-kvtier-auto"
done
# decode from CUDA graphs (captured once per shape, replayed): does the
# launch source read the graphs at instantiation and credit their launches?
step "vllm-like-kvtier-graphs" "0" -- env KVTIER_POLICY="$(kv_policy vllm-like)" KVTIER_HBM_BUDGET="$BUDGET" \
	"$KVTIER" run --trace "$LOG/vllm-like-kvtier-graphs.%p.trace" -- \
	"$B/workloads/vllm-like" --kv-bytes "$KV" $WL_ARGS --graphs && wl_row traced
rows+=("$(printf '%-26s %-8s %s' "  graphs" - "$(graph_info vllm-like-kvtier-graphs)")")

# ---- the table ------------------------------------------------------------------------
{
echo
echo "kvtier real-GPU check — $(date -u +%Y-%m-%dT%H:%MZ), $GPU, free $((FREE / GiB)) GiB, budget $((BUDGET >> 20)) MiB, KV $((KV >> 20)) MiB"
printf '%-26s %-8s %s\n' step status result
for r in "${rows[@]}"; do echo "$r"; done
echo "logs: $LOG"
} | tee "$LOG/table.txt"
[ $failed = 0 ]
