#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make test-vm: boot two QEMU machines (TCG) on a stock Debian kernel with a
# busybox initramfs holding the freshly built project, and check topology
# discovery and placement against the real Linux NUMA / HMAT / CXL code.
#   tests/vm/run.sh [BUILD]            (default build; see docs/vm-testbed.md)
# Environment: VM_MACHINES="numa cxl" (which to boot), VM_TIMEOUT=120 (s per
# boot; 360 for machine cxl with the llama.cpp step), VM_PARALLEL=1 (0: one machine after the other), VM_VERBOSE=1 (print the whole
# serial console, not only the guest's own output).
# Exit 0: all passed, or skipped (QEMU / kernel cannot be installed here).
set -uo pipefail
cd "$(dirname "$0")/../.."

build=${1:-build}
vm="$build/vm"
machines=${VM_MACHINES:-numa cxl}
tmo=${VM_TIMEOUT:-120}
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

if [ "$(uname -m)" != x86_64 ]; then
	echo "test-vm: SKIPPED: the host is $(uname -m), the test bed needs x86_64"
	exit 0
fi
mkdir -p "$vm"
out=$(tests/vm/setup.sh "$vm/cache" 2>"$vm/setup.err")
rc=$?
if [ $rc = 77 ]; then
	echo "test-vm: SKIPPED: $(sed -n 's/^SKIP: //p' "$vm/setup.err" | tail -1)"
	exit 0
elif [ $rc != 0 ]; then
	cat "$vm/setup.err"
	echo "test-vm: setup failed (exit $rc)"
	exit 1
fi
grep -v '^SKIP' "$vm/setup.err" || true
kdir=$(sed -n 's/^KERNEL_DIR=//p' <<<"$out")
echo "test-vm: packages and kernel $(cat "$kdir/.ok") ready ($(elapsed) s)"

for f in kvtier libkvtier.so fakecuda/libcuda.so.1 tests/progs/place_probe tests/vm/vm_check; do
	if [ ! -e "$build/$f" ]; then
		echo "test-vm: $build/$f is missing (make BUILD=$build all test-vm builds it)"
		exit 1
	fi
done
if ! tests/vm/mkinitramfs.sh "$build" "$kdir" "$vm/initramfs.cpio.gz" 2>"$vm/initramfs.err"; then
	cat "$vm/initramfs.err"
	echo "test-vm: building the initramfs failed"
	exit 1
fi
echo "test-vm: initramfs $(du -h "$vm/initramfs.cpio.gz" | cut -f1) ($(elapsed) s)"
# machine (b) also runs llama.cpp's npm package when make test installed it
# (two node runs: about a minute each under TCG)
initrd_cxl="$vm/initramfs.cpio.gz" tmo_cxl=$tmo
if [ -s "$vm/initramfs-llama.cpio.gz" ]; then
	initrd_cxl="$vm/initramfs-llama.cpio.gz" tmo_cxl=${VM_TIMEOUT:-360}
	echo "test-vm: with llama.cpp's npm package for machine cxl: $(du -h "$initrd_cxl" | cut -f1)"
else
	echo "test-vm: llama.cpp check SKIPPED: no node 20+ or tests/real's npm packages not installed (make test installs them)"
fi

# ---- the machines ------------------------------------------------------------
common=(-accel tcg -cpu max -smp 2,sockets=2 -nographic -no-reboot -net none
	-device isa-debug-exit,iobase=0xf4,iosize=0x04
	-kernel "$kdir/vmlinuz"
	-object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M
	-numa node,nodeid=0,memdev=m0 -numa node,nodeid=1,memdev=m1,initiator=0
	-numa cpu,node-id=0,socket-id=0 -numa cpu,node-id=0,socket-id=1
	-numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=10
	-numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=10G
	-numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=25
	-numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=5G)
append="console=ttyS0 panic=-1 loglevel=3"

# (a) node 1: CPU-less, HMAT 25 ns / 5 GB/s from node 0
args_numa=(-machine q35,hmat=on -m 1G -initrd "$vm/initramfs.cpio.gz" -append "$append scenario=numa")
# (b) the same plus a CXL type-3 persistent-memory device (QEMU 7.2 has no
# volatile type-3) behind a CXL host bridge, a 4 GiB fixed memory window
args_cxl=(-machine q35,cxl=on,hmat=on -m 1G,maxmem=8G,slots=4 -initrd "$initrd_cxl" -append "$append scenario=cxl"
	-object memory-backend-ram,id=cxl-mem0,size=512M
	-object memory-backend-ram,id=cxl-lsa0,size=256M
	-device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1
	-device cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2
	-device cxl-rp,port=1,bus=cxl.1,id=root_port14,chassis=0,slot=3
	-device cxl-type3,bus=root_port13,memdev=cxl-mem0,lsa=cxl-lsa0,id=cxl-pmem0
	-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G)

boot() {   # boot NAME: serial console to $vm/NAME.log, QEMU's status to $vm/NAME.rc
	local name=$1 a s
	eval "a=(\"\${args_$name[@]}\")"
	s=$(date +%s.%N)
	local t=$tmo
	[ "$name" = cxl ] && t=$tmo_cxl
	timeout "$t" qemu-system-x86_64 "${common[@]}" "${a[@]}" </dev/null >"$vm/$name.log" 2>&1
	echo $? >"$vm/$name.rc"
	awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$vm/$name.time"
}

if [ "${VM_PARALLEL:-1}" = 1 ]; then
	for m in $machines; do boot "$m" & done
	wait
else
	for m in $machines; do boot "$m"; done
fi

# ---- the verdict ---------------------------------------------------------------
passed=0 failed=0
for m in $machines; do
	rc=$(cat "$vm/$m.rc")
	tr -d '\r' <"$vm/$m.log" >"$vm/$m.clean.log"
	echo
	echo "=== machine $m: QEMU exit $rc in $(cat "$vm/$m.time") s (serial log $vm/$m.log)"
	if [ "${VM_VERBOSE:-0}" = 1 ]; then
		cat "$vm/$m.clean.log"
	else
		sed -n '/=== guest start/,/^RESULT /{s/^.*=== guest start/=== guest start/;p}' "$vm/$m.clean.log"
	fi
	p=$(grep -c '^PASS ' "$vm/$m.clean.log")
	f=$(grep -c '^FAIL ' "$vm/$m.clean.log")
	result=$(grep '^RESULT ' "$vm/$m.clean.log" | tail -1)
	# isa-debug-exit: QEMU exits rc*2+1; 124 = timeout; 0 = powered off
	# without a verdict (a kernel panic with panic=-1 and -no-reboot)
	case $rc in
	1) why="" ;;
	3) why="the guest reported failures" ;;
	124) why="timed out" ;;
	*) why="QEMU exit $rc, no verdict from the guest" ;;
	esac
	if [ -z "$why" ] && [ -n "$result" ] && [ "$f" = 0 ] && [ "$p" -gt 0 ]; then
		echo "PASS machine-$m: booted, $result"
		p=$((p + 1))
	else
		echo "FAIL machine-$m: ${why:-inconsistent verdict} (${result:-no RESULT line})"
		[ -n "$result" ] || tail -40 "$vm/$m.clean.log"
		f=$((f + 1))
	fi
	echo "machine $m: $p passed, $f failed"
	passed=$((passed + p)) failed=$((failed + f))
done
echo
echo "test-vm: wall time $(elapsed) s"
echo "test-vm: $passed passed, $failed failed"
[ "$failed" = 0 ]
