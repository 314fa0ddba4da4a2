#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make test-gpu-dryrun: tests/gpu/run.sh end to end on the SIMULATED device,
# so that the real-GPU check is known to run before a scarce GPU session
# spends minutes on it. A stand-in bundle in a temporary directory holds this
# build's libkvtier.so, kvtier and workloads (linked to the fakecuda test
# doubles, whose libraries take the place of lib/cuda), a stand-in probe
# (fakecuda has no PTX loader: `meminfo` reports the simulated device's
# size, `place` only says it is a stand-in) and a stand-in nvidia-smi.
# Checks: run.sh exits 0, every step it ran is "ok" (torch: skipped, with a
# reason: it needs a real GPU), no llama.cpp step (issue 47), every
# workload row is labelled SIMULATED, the zipf-decode ratio row is there,
# and no KV check found a corruption. Prints the table; about 3 minutes on
# 2 cores (a 1 GiB simulated device; DRYRUN_DEVICE_BYTES). The
# steps' logs stay in $BUILD/gpu-dryrun-logs.
set -u
BUILD=${BUILD:-build}
DEV_BYTES=${DRYRUN_DEVICE_BYTES:-1073741824}   # 1 GiB: every step runs, in half the time of 4 GiB
root=$(cd "$(dirname "$0")/../.." && pwd)
for f in "$BUILD/libkvtier.so" "$BUILD/kvtier" "$BUILD/workloads/vllm-like" "$BUILD/fakecuda/libcudart.so.13"; do
	[ -e "$f" ] || { echo "gpu-dryrun: $f missing (make first)" >&2; exit 1; }
done
B=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-gpu-dryrun.XXXXXX")
trap 'rm -rf "$B"' EXIT
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
mkdir -p "$B/gpu" "$B/lib/fallback" "$B/bin"
ln -s "$(abs "$BUILD/libkvtier.so")" "$B/libkvtier.so"
ln -s "$(abs "$BUILD/kvtier")" "$B/kvtier"
ln -s "$(abs "$BUILD/workloads")" "$B/workloads"
ln -s "$(abs "$BUILD/fakecuda")" "$B/lib/cuda"
cp "$root/tests/gpu/run.sh" "$B/gpu/run.sh"
cat >"$B/gpu/probe" <<EOF
#!/bin/sh
# stand-in for tests/gpu/probe.c on the simulated device (gpu-dryrun only)
case \$1 in
meminfo) printf 'gpu=fakecuda stand-in (SIMULATED)\nfree_bytes=%s\ntotal_bytes=%s\ndevices=1\n' $DEV_BYTES $DEV_BYTES ;;
place) echo "buffers=\$3 stand-in: the simulated device loads no PTX" ;;
calibrate) printf 'calibrate: stand-in (SIMULATED: the defaults, not a measurement)\nfault_migrate_us_per_2mib=628 standin=628\n' ;;
*) echo "stand-in probe: \$1: not simulated" >&2; exit 1 ;;
esac
EOF
printf '#!/bin/sh\necho "nvidia-smi stand-in (gpu-dryrun)"\n' >"$B/bin/nvidia-smi"
chmod +x "$B/gpu/probe" "$B/bin/nvidia-smi"

logs=$(abs "$BUILD")/gpu-dryrun-logs
rm -rf "$logs"
out=$B/run.out
env PATH="$B/bin:$PATH" FAKECUDA_DEVICE_BYTES="$DEV_BYTES" PYTHON=/nonexistent-python \
	OUT="$logs" bash "$B/gpu/run.sh" >"$out" 2>&1
rc=$?
cat "$out"
bad=0
fail() { echo "gpu-dryrun: FAIL: $*"; bad=1; }
[ $rc = 0 ] || fail "run.sh exited $rc"
table=$(sed -n '/^step  *status/,/^logs:/p' "$out")
[ -n "$table" ] || fail "no table"
# step rows start in the first column; their detail rows are indented
steps=$(echo "$table" | awk 'NR > 1 && /^[^ ]/ && $1 != "logs:" { print }')
n=$(echo "$steps" | grep -c .)
[ "$n" -ge 20 ] || fail "only $n steps in the table"
# torch needs a real GPU: skipped here, with its reason; llama.cpp is no
# step of the GPU check any more (it runs from its npm package in make test)
echo "$steps" | awk '$2 != "ok" && !($1 == "torch" && $2 == "skipped") { print; f = 1 }
	END { exit f }' || fail "steps above are not ok"
echo "$steps" | grep -E '^llama\.cpp' && fail "llama.cpp rows above: the GPU check has no llama.cpp step"
echo "$steps" | grep 'tokens/s' | grep -v 'SIMULATED' && fail "workload rows above are not labelled SIMULATED"
[ "$(echo "$steps" | grep -c 'tokens/s')" -ge 16 ] || fail "fewer than 16 workload rows"
echo "$table" | grep -q '^  zipf-decode ÷ native' || fail "no zipf-decode ratio row"
echo "$steps" | grep -E 'corrupt [1-9]' && fail "a KV check found corruption"
if [ $bad = 0 ]; then
	echo "gpu-dryrun: $n steps ok on the simulated device; 1 passed, 0 failed"
else
	echo "gpu-dryrun: 0 passed, 1 failed"
fi
exit $bad
