#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make test-vm, step 2: a busybox initramfs holding the freshly built project.
#   tests/vm/mkinitramfs.sh BUILD KERNEL_DIR OUT.cpio.gz
# Guest layout:
#   /opt/kvtier/{kvtier,libkvtier.so}   (kvtier run finds the library beside it)
#   /opt/kvtier/fakecuda/               the simulated CUDA driver / runtime
#   /opt/kvtier/tests/{place_probe,vm_check}
#   /usr/bin/{numactl,cxl,ndctl,daxctl,kmod}, /sbin/{modprobe,insmod,...}
#   /lib/modules/<ver>/  CXL, nvdimm and dax modules with their dependencies
#   /init, /guest.sh
# and, when node 20+ and tests/real's npm packages are installed (make test
# installs them), a second archive OUT-llama.cpio.gz = OUT plus
#   /usr/bin/node, /opt/kvtier/real/{llamacpp_npm.mjs,node_modules,tiny.gguf}
# for machine (b)'s llama.cpp check (the kernel unpacks both, in order).
set -euo pipefail
trap 'echo "mkinitramfs.sh: line $LINENO failed (exit $?)" >&2' ERR
export PATH=$PATH:/sbin:/usr/sbin

build=${1:?usage: mkinitramfs.sh BUILD KERNEL_DIR OUT}
kdir=${2:?}
out=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
kver=$(cat "$kdir/.ok")
R="$build/vm/rootfs"

rm -rf "$R"
mkdir -p "$R"/{bin,sbin,proc,sys,dev,run,tmp,usr/bin,opt/kvtier/fakecuda,opt/kvtier/tests}

# busybox; never link "busybox" to itself (a self-symlink: the guest
# panics with "Failed to execute /init (error -40)")
cp "$(command -v busybox)" "$R/bin/busybox"
for a in $("$R/bin/busybox" --list); do
	[ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"
done

# a file and the shared libraries it needs (ldd), at the same paths
copy_libs() {
	local l
	for l in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		[ -e "$R$l" ] && continue
		mkdir -p "$R$(dirname "$l")"
		cp -L "$l" "$R$l"
	done
}
add() {   # add SRC DEST_DIR
	mkdir -p "$R$2"
	cp -L "$1" "$R$2/"
	copy_libs "$1"
}

for b in numactl cxl ndctl daxctl kmod; do
	add "$(command -v $b)" /usr/bin
done
for a in modprobe insmod lsmod rmmod modinfo depmod; do
	ln -sf /usr/bin/kmod "$R/sbin/$a"
done
# kvtier dlopen()s libcxl: ldd of the project does not name it
# awk reads to the end: leaving at the first match kills ldconfig with
# SIGPIPE now and then, and under pipefail that failed the whole script
# silently (1 run in 200 here; once in CI)
libcxl=$(ldconfig -p | awk '/libcxl\.so\.1 .*x86-64/ && !f {print $NF; f = 1}')
[ -n "$libcxl" ] && add "$libcxl" "$(dirname "$libcxl")"

add "$build/kvtier" /opt/kvtier
add "$build/libkvtier.so" /opt/kvtier
for f in "$build"/fakecuda/*.so*; do
	add "$f" /opt/kvtier/fakecuda
done
add "$build/tests/progs/place_probe" /opt/kvtier/tests
add "$build/tests/vm/vm_check" /opt/kvtier/tests

# modules: cxl_acpi ... kmem and their dependencies. ndctl's modprobe
# "install" rule for libnvdimm hides it from --show-depends: name it.
mods="cxl_acpi cxl_pci cxl_mem cxl_pmem libnvdimm nd_pmem dax_pmem device_dax kmem"
for m in $mods; do
	modprobe -d "$kdir" -S "$kver" --show-depends --ignore-install "$m" |
		awk '$1 == "insmod" { print $2 }'
done | sort -u | while read -r f; do
	rel=${f#"$kdir"}
	mkdir -p "$R$(dirname "$rel")"
	cp "$f" "$R$rel"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	cp "$kdir/lib/modules/$kver/$f" "$R/lib/modules/$kver/"
done
depmod -b "$R" "$kver"

# debugging aid: VM_GUEST_EXTRA=DIR is copied to /extra; /extra/run.sh, if
# there, runs after the checks (static binaries, or add their libraries)
if [ -n "${VM_GUEST_EXTRA:-}" ]; then
	cp -r "$VM_GUEST_EXTRA" "$R/extra"
fi

cp "$here/init" "$R/init"
cp "$here/guest.sh" "$R/guest.sh"
chmod +x "$R/init" "$R/guest.sh"

(cd "$R" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out"

# ---- llama.cpp from its npm package (machine b) ---------------------------------
llama_out=${out%.cpio.gz}-llama.cpio.gz
rm -f "$llama_out"
real="$here/../real"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "${major:-0}" -ge 20 ] && cmp -s "$real/package-lock.json" "$real/node_modules/.kvtier-lock"; then
	L="$build/vm/rootfs-llama"
	rm -rf "$L"
	mkdir -p "$L/usr/bin" "$L/opt/kvtier/real"
	cp -L "$(command -v node)" "$L/usr/bin/node"
	for l in $(ldd "$(command -v node)" 2>/dev/null | grep -o '/[^ ]*'); do
		[ -e "$R$l" ] && continue
		mkdir -p "$L$(dirname "$l")"
		cp -L "$l" "$L$l"
	done
	cp "$real/llamacpp_npm.mjs" "$real/package.json" "$L/opt/kvtier/real/"
	cp -r "$real/node_modules" "$L/opt/kvtier/real/"
	node "$real/tiny_gguf.mjs" "$L/opt/kvtier/real/tiny.gguf" --seed 47 >/dev/null
	{ cat "$out"; (cd "$L" && find . | cpio -o -H newc --quiet) | gzip -1; } > "$llama_out"
	rm -rf "$L"
fi
