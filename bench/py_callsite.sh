#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Python frames on and off on a traced cudaMalloc+cudaFree pair (the
# stand-in runtime, Debian's /usr/bin/python3): native, traced with
# KVTIER_PYTHON=0, traced with KVTIER_PYTHON=1; median of TRIALS interleaved
# runs each. Never fails on a time.
#   BENCH_TRIALS (5) BENCH_PY_PAIRS (20000) BENCH_PY_DEPTH (16)
set -u
BUILD=${BUILD:-build}
TRIALS=${BENCH_TRIALS:-5}
PAIRS=${BENCH_PY_PAIRS:-20000}
DEPTH=${BENCH_PY_DEPTH:-16}
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "py_callsite: no $PY, skipped"; exit 0; }
LIB=$(realpath "$BUILD/libkvtier.so")
FAKE=$(realpath "$BUILD/fakecuda")
DIR=$(mktemp -d /tmp/kvt-pybench-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
run() {   # run NAME [env...]: one trial, its ns per pair
	env LD_LIBRARY_PATH="$FAKE" "$@" "$PY" bench/py_callsite.py \
		"$FAKE/libcudart.so.13" "$PAIRS" "$DEPTH" | sed -n 's/^ns_per_pair=//p'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for i in $(seq 1 "$TRIALS"); do
	run >>"$DIR/native"
	run LD_PRELOAD="$LIB" KVTIER_MIGRATE=0 KVTIER_STATS=0 KVTIER_TRACE="$DIR/off.$i.%p" \
		KVTIER_PYTHON=0 >>"$DIR/off"
	run LD_PRELOAD="$LIB" KVTIER_MIGRATE=0 KVTIER_STATS=0 KVTIER_TRACE="$DIR/on.$i.%p" \
		KVTIER_PYTHON=1 >>"$DIR/on"
done
n=$(median <"$DIR/native"); off=$(median <"$DIR/off"); on=$(median <"$DIR/on")
echo "traced cudaMalloc+cudaFree pair from Python ($DEPTH nested calls, PyDLL), median of $TRIALS:"
echo "  native $n ns; traced, Python frames off $off ns (+$((off - n))); on $on ns (+$((on - n)));"
echo "  Python frames add $((on - off)) ns per traced pair"
