#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make soak: SOAK_SECONDS (600) of tests/progs/rt_migr_soak.c (sequences
# arriving and leaving on the SIMULATED GPU) under kvtier with migration on.
# Every SOAK_SAMPLE seconds it prints the process's memory from
# /proc/PID/smaps and kvtier's counters (kvtier stat); at the end it compares
# the sample after SOAK_WARMUP seconds with the last one and fails when
# kvtier's own memory grew by more than SOAK_GROWTH_KB.
#
# kvtier's own memory = the Rss of libkvtier.so's mappings and its stats
# segment (/dev/shm/kvtier.PID), plus every private anonymous mapping:
# kvtier never calls malloc, so all it allocates is in those maps (registry,
# heat arena, planner table, trace buffer, migration thread stack). The
# workload keeps everything else out of them: glibc's malloc is held to one
# arena in [heap] (GLIBC_TUNABLES below), its own host maps are shared
# (/dev/zero), and device memory is the stand-in's memfds (redirected to
# managed memory). What is left besides kvtier is a few static pages of the
# loader and libc (constant).
#
# Columns: t_s, rss_kB (VmRSS), kvtier_kB (kvtier's own, as above), anon_kB
# (its anonymous part), heap_kB (malloc), device_kB (the stand-in's memfds:
# the workload's KV data), epochs and moves (kvtier stat), live (allocations
# live), host_kB (every class but device, from the same smaps read).
set -u
BUILD=${BUILD:-build}
SECS=${SOAK_SECONDS:-600}
WARM=${SOAK_WARMUP:-60}
EVERY=${SOAK_SAMPLE:-10}
BOUND_KB=${SOAK_GROWTH_KB:-1024}
RSS_BOUND_KB=${SOAK_RSS_GROWTH_KB:-65536}
[ "$WARM" -lt "$SECS" ] || WARM=$((SECS / 2))

lib=$(realpath "$BUILD/libkvtier.so") || exit 2
fake=$(realpath "$BUILD/fakecuda") || exit 2
prog="$BUILD/tests/progs/rt_migr_soak"
kvtier="$BUILD/kvtier"
out=$(mktemp /tmp/kvtier-soak.XXXXXX)
trap 'rm -f "$out"' EXIT

# kB per class: kvfile (libkvtier.so with its .bss, its stats segment),
# anon (other private anonymous maps), heap, device (the stand-in's memfds),
# appmap (the workload's shared anonymous maps), other (libraries and their
# .bss, e.g. the stand-in driver's 3 MiB CUPTI record ring; stacks)
classes() {
	awk '
	/^[0-9a-f]+-[0-9a-f]+ / { path = ""; for (i = 6; i <= NF; i++) path = path (i > 6 ? " " : "") $i
		split($1, r, "-")
		c = "other"
		if (path ~ /libkvtier\.so/ || path ~ /^\/dev\/shm\/kvtier\./) c = "kvfile"
		else if (path == "" && r[1] == prev_end && prev_class != "") c = prev_class  # a .bss
		else if (path == "") c = "anon"
		else if (path == "[heap]") c = "heap"
		else if (path ~ /memfd:fakecuda/) c = "device"
		else if (path ~ /^\/dev\/zero/) c = "appmap"
		prev_end = r[2]
		prev_class = path ~ /^\// && path !~ /^\/(dev|memfd)/ ? c : ""
		next }
	/^Rss:/ { kb[c] += $2 }
	END { printf "%d %d %d %d %d %d\n", kb["kvfile"], kb["anon"], kb["heap"], kb["device"], kb["appmap"], kb["other"] }
	' "/proc/$1/smaps" 2>/dev/null
}

counter() {   # counter NAME: a value from kvtier stat --prometheus
	"$kvtier" stat "$pid" --prometheus 2>/dev/null |
		awk -v k="$1" '$1 == k || index($1, k "{") == 1 { s += $2 } END { printf "%d", s }'
}

env LD_LIBRARY_PATH="$fake" LD_PRELOAD="$lib" \
	GLIBC_TUNABLES=glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=33554432 \
	KVTIER_POLICY='device => managed:cxl; * => native' KVTIER_HBM_BUDGET=64M \
	KVTIER_EPOCH_MS=5 KVTIER_DECAY_MS=200 KVTIER_STATS=1 \
	FAKECUDA_DEVICE_BYTES=256M "$prog" 7 >"$out" 2>&1 &
pid=$!

printf '%6s %10s %10s %10s %10s %10s %8s %8s %6s %10s\n' t_s rss_kB kvtier_kB anon_kB \
	heap_kB device_kB epochs moves live host_kB
t=0
warm_line="" last_line=""
while [ "$t" -lt "$SECS" ]; do
	sleep "$EVERY"
	t=$((t + EVERY))
	kill -0 "$pid" 2>/dev/null || { echo "soak: the workload died at ${t}s:"; cat "$out"; exit 1; }
	read -r kvf anon heap dev appm other < <(classes "$pid")
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
	epochs=$(counter kvtier_migrate_epochs_total)
	moves=$(( $(counter kvtier_promoted_chunks_total) + $(counter kvtier_demoted_chunks_total) ))
	live=$(counter kvtier_live_allocations)
	host=$((kvf + anon + heap + appm + other))     # the same smaps read, without $dev
	line="$t $rss $((kvf + anon)) $anon $heap $dev $epochs $moves $live $host"
	printf '%6d %10d %10d %10d %10d %10d %8d %8d %6d %10d\n' $line
	[ -z "$warm_line" ] && [ "$t" -ge "$WARM" ] && warm_line=$line
	last_line=$line
done
echo "--- kvtier stat $pid at the end:"
"$kvtier" stat "$pid" 2>&1 | sed 's/^/    /'
kill -TERM "$pid"
wait "$pid"
rc=$?
cat "$out"

set -- $warm_line; w_t=$1 w_rss=$2 w_kv=$3 w_heap=$5
set -- $last_line; e_t=$1 e_rss=$2 e_kv=$3 e_heap=$5
# the simulated device's memfds hold the workload's data, not kvtier's
set -- $warm_line; w_host=${10}
set -- $last_line; e_host=${10}
echo "soak: ${SECS}s; kvtier's own memory ${w_kv} kB at ${w_t}s (after warm-up), ${e_kv} kB at ${e_t}s:" \
	"$((e_kv - w_kv)) kB (bound ${BOUND_KB} kB)"
echo "soak: process RSS ${w_rss} -> ${e_rss} kB; without the simulated device's memfds ${w_host} -> ${e_host} kB" \
	"($((e_host - w_host)) kB, bound ${RSS_BOUND_KB} kB); malloc heap ${w_heap} -> ${e_heap} kB"
fail=0
[ "$rc" -eq 0 ] || { echo "soak: FAILED: the workload exited with $rc"; fail=1; }
[ $((e_kv - w_kv)) -le "$BOUND_KB" ] || { echo "soak: FAILED: kvtier's memory grew past the bound"; fail=1; }
[ $((e_host - w_host)) -le "$RSS_BOUND_KB" ] || { echo "soak: FAILED: host RSS grew past the bound"; fail=1; }
# any message from kvtier fails it (a range it could not track, ...), except
# a migration prefetch that lost a race with the workload's free: counted,
# said once, harmless (the range is gone)
if grep -E '^kvtier\[[0-9]+\]: ' "$out" | grep -qv 'migration prefetch of .* failed'; then
	echo "soak: FAILED: kvtier said something (above)"; fail=1
fi
[ "$fail" -eq 0 ] && echo "soak: passed"
exit "$fail"
