#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rerun of run.sh's failing steps with diagnostics (backtrace under gdb when
# the machine has it, the kernel's segfault line, kvtier's debug log tail).
# Sizes as run.sh computed them on an H200 (budget 2 GiB, KV 8 GiB).
set -u
B=$(pwd)/build/gpu
L=${OUT:-/tmp/kvtier-diag}; mkdir -p "$L/fb"
for f in "$B"/lib/fallback/*; do n=$(basename "$f"); ldconfig -p | grep -q "^[[:space:]]*$n " || ln -sf "$f" "$L/fb/$n"; done
export LD_LIBRARY_PATH=$B/lib/cuda:$B/lib:$L/fb
KV=${KV:-8589934592}; BUDGET=${BUDGET:-2147483648}; BUF=$((KV / 8))
WL_ARGS="--weights-frac 0.002 --act-frac 0.002 --host-ratio 0.5 --warmup 4 --steps 8"
POL="kv => managed:cxl; device,size>=$((KV / 4 / 10 * 9)) => managed:cxl; * => native"
echo "== probe-static (KVTIER_LOG=debug)"
env KVTIER_POLICY="device,size>=$BUF => managed:cxl; * => native" KVTIER_HBM_BUDGET=$BUDGET KVTIER_MIGRATE=0 \
	KVTIER_LOG=debug "$B/kvtier" run --trace "$L/ps.%p.trace" -- "$B/gpu/probe" place "$BUF" 8 3 far \
	>"$L/ps.out" 2>"$L/ps.err"; echo "rc=$?"
head -3 "$L/ps.out"; grep -iE "advis|prefer|fallback|home|numa" "$L/ps.err" | head -12
"$B/kvtier" dump "$L"/ps.*.trace* 2>/dev/null | grep -iE "op=(advise|alloc)" | head -6
for wl in vllm-like sglang-like; do
	n=4; [ $wl = sglang-like ] && n=8
	POL="kv => managed:cxl; device,size>=$((KV / n / 10 * 9)) => managed:cxl; * => native"
	echo "== $wl kvtier (sources launch,copy,cupti)"
	env KVTIER_POLICY="$POL" KVTIER_HBM_BUDGET=$BUDGET LD_PRELOAD="$B/libkvtier.so" \
		timeout 90 "$B/workloads/$wl" --kv-bytes "$KV" $WL_ARGS >"$L/$wl.out" 2>"$L/$wl.err"; echo "rc=$?"
	tail -2 "$L/$wl.out"; tail -3 "$L/$wl.err"
done
dmesg 2>/dev/null | grep -i segfault | tail -3
