#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make test-vm, step 1: install or locate what the VM test bed needs and
# unpack the Debian kernel into a cache under the build dir.
#   tests/vm/setup.sh CACHE_DIR
# Prints "KERNEL_DIR=<dir>" (vmlinuz + lib/modules/<ver>/ with modules.dep).
# Exit 0 ready, 77 cannot be set up here (the caller skips), 1 error.
set -euo pipefail

cache=${1:?usage: setup.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

skip() { echo "SKIP: $*" >&2; exit 77; }

pkgs="qemu-system-x86 busybox-static ndctl daxctl cpio kmod numactl libcxl1"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done

SUDO=""
if [ "$(id -u)" != 0 ]; then
	if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="-"; fi
fi
apt_updated=0
apt_update() {
	[ $apt_updated = 1 ] && return 0
	$SUDO apt-get update -qq >/dev/null 2>&1 || return 1
	apt_updated=1
}

if [ -n "$missing" ]; then
	command -v apt-get >/dev/null || skip "no apt-get to install:$missing"
	[ "$SUDO" = - ] && skip "not root and no sudo: cannot install:$missing"
	echo "test-vm: installing:$missing" >&2
	apt_update || skip "apt-get update failed (no package registry?): cannot install:$missing"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
		$missing >/dev/null 2>"$cache/apt-install.err" ||
		skip "apt-get install$missing failed: $(tail -1 "$cache/apt-install.err")"
fi
for b in qemu-system-x86_64 busybox numactl cxl ndctl daxctl kmod depmod modprobe cpio gzip; do
	PATH=$PATH:/sbin:/usr/sbin command -v "$b" >/dev/null || skip "$b not found after installing$missing"
done

# ---- the kernel: linux-image-amd64's .deb, unpacked (never /boot) ---------
# Only vmlinuz and the CXL / nvdimm / dax module directories are extracted
# (about 15 MB instead of 400 MB); depmod -b writes the modules.dep the
# package does not ship.
kdir=$(ls -d "$cache"/kernel-*/ 2>/dev/null | sort -V | tail -1 || true)
kdir=${kdir%/}
if [ -z "$kdir" ] || [ ! -f "$kdir/.ok" ]; then
	command -v apt-get >/dev/null || skip "no apt-get to fetch the kernel"
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ && !f {print $2; f = 1}')
	if [ -z "$pkg" ]; then
		[ "$SUDO" = - ] || apt_update || true
		pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/ && !f {print $2; f = 1}')
	fi
	[ -n "$pkg" ] || skip "apt-cache knows no linux-image-amd64 (run apt-get update)"
	dl="$cache/dl"
	rm -rf "$dl" && mkdir -p "$dl" && chmod 777 "$dl"
	(cd "$dl" && apt-get download -q "$pkg" >/dev/null 2>"$dl/err") ||
		skip "apt-get download $pkg failed: $(tail -1 "$dl/err")"
	deb=$(ls "$dl"/*.deb)
	ver=${pkg#linux-image-}
	kdir="$cache/kernel-$ver"
	rm -rf "$kdir" && mkdir -p "$kdir"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kdir" --wildcards \
		"./boot/vmlinuz-*" \
		"./lib/modules/*/kernel/drivers/cxl" \
		"./lib/modules/*/kernel/drivers/nvdimm" \
		"./lib/modules/*/kernel/drivers/dax" \
		"./lib/modules/*/modules.order" \
		"./lib/modules/*/modules.builtin" \
		"./lib/modules/*/modules.builtin.modinfo"
	kver=$(ls "$kdir/lib/modules")
	mv "$kdir"/boot/vmlinuz-* "$kdir/vmlinuz" && rmdir "$kdir/boot"
	PATH=$PATH:/sbin:/usr/sbin depmod -b "$kdir" "$kver"
	rm -rf "$dl"
	echo "$kver" > "$kdir/.ok"
fi
echo "KERNEL_DIR=$kdir"
