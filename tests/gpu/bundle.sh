#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make gpu-bundle, second half (the first built libkvtier.so, kvtier and the
# workloads under $GPU_BUILD against the real libcudart.so.13): builds the
# probe, copies the run scripts, and copies into $GPU_BUILD/lib every shared
# library those programs need that a bare GPU machine may lack. Never copies
# glibc or the driver (libcuda.so.1 belongs to the machine's driver).
set -eu
CC=${CC:-cc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GPU_BUILD=${GPU_BUILD:-build/gpu}
LIBDIR=$GPU_BUILD/lib

mkdir -p "$LIBDIR" "$GPU_BUILD/gpu"
# the workloads' real-GPU kernel must assemble for the GPU machine (Hopper;
# Ampere too): the driver JIT-compiles it there, where a PTX error would
# only show as a failed run. Checked here when the toolkit has ptxas.
if [ -x "$CUDA_HOME/bin/ptxas" ]; then
	for ptx in tests/workloads/wl_touch.ptx tests/workloads/wl_paged.ptx; do
		for arch in sm_80 sm_90; do
			"$CUDA_HOME/bin/ptxas" -arch=$arch "$ptx" -o /dev/null ||
				{ echo "gpu-bundle: $ptx does not assemble for $arch" >&2; exit 1; }
		done
		echo "gpu-bundle: $ptx assembles for sm_80 and sm_90 (ptxas)"
	done
else
	echo "gpu-bundle: no $CUDA_HOME/bin/ptxas: the workloads' PTX is not checked here"
fi
# $ORIGIN-relative run paths: the bundle works wherever it is unpacked
$CC -D_GNU_SOURCE -I"$CUDA_HOME/include" -std=c11 -O2 -g -Wall -Wextra -Werror \
	-o "$GPU_BUILD/gpu/probe" tests/gpu/probe.c \
	-L"$CUDA_HOME/lib64" -l:libcudart.so.13 -ldl -Wl,-rpath,'$ORIGIN/../lib'
cp tests/gpu/run.sh tests/gpu/torch_check.py "$GPU_BUILD/gpu/"

# glibc and the driver come with every GPU machine. lib/: kvtier's own needs
# (always on the path); lib/cuda/: the toolkit's runtime and CUPTI (on the path
# for the probe and the workloads, never for PyTorch, which brings its own);
# lib/fallback/: everything those need in turn, put on the path by run.sh
# only where the machine lacks it (an old copy must not shadow a newer one).
keep_out='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libcuda)\.so'
rm -rf "$LIBDIR"
mkdir -p "$LIBDIR/cuda" "$LIBDIR/fallback"
deps() { ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'; }
place() {   # place NAME PATH: copy into the right directory, once
	echo "$1" | grep -Eq "$keep_out" && return
	local dir=$LIBDIR/fallback
	case $1 in
	libunwind.so.*) dir=$LIBDIR ;;
	libcudart.so.*|libcupti.so.*) dir=$LIBDIR/cuda ;;
	esac
	[ -e "$dir/$1" ] || cp -L "$2" "$dir/$1"
}
bins="$GPU_BUILD/libkvtier.so $GPU_BUILD/kvtier $GPU_BUILD/gpu/probe"
for w in vllm-like sglang-like llamacpp-like; do bins="$bins $GPU_BUILD/workloads/$w"; done
for b in $bins; do
	[ -e "$b" ] || { echo "gpu-bundle: $b missing" >&2; exit 1; }
done
LD_LIBRARY_PATH=$CUDA_HOME/lib64 deps $bins | sort -u | while read -r n p; do place "$n" "$p"; done
# dlopened at run time, never linked: kvtier's CUPTI evidence source and the
# CXL topology reader (topo/topo_cxl.c; absent: kvtier falls back)
[ -e "$CUDA_HOME/lib64/libcupti.so.13" ] && place libcupti.so.13 "$CUDA_HOME/lib64/libcupti.so.13"
cxl=$(ldconfig -p | awk '$1 == "libcxl.so.1" { print $NF; exit }')
[ -n "$cxl" ] && place libcxl.so.1 "$cxl"
# what the copied libraries need in turn (libunwind -> liblzma, libcxl -> ...)
for pass in 1 2; do
	deps $(find "$LIBDIR" -name '*.so*' -type f) | sort -u | while read -r n p; do place "$n" "$p"; done
done

{
	echo "kvtier GPU bundle, built $(date -u +%Y-%m-%dT%H:%MZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "toolkit: $CUDA_HOME ($(readlink -f "$CUDA_HOME/lib64/libcudart.so.13" | xargs basename))"
	echo "run on the GPU machine: $GPU_BUILD/gpu/run.sh (carry $GPU_BUILD)"
	(cd "$GPU_BUILD" && find . -type f ! -name '*.d' ! -name '*.a' ! -path './obj/*' ! -path './tests/*' \
		! -path './fakecuda/*' ! -path './logs/*' ! -path './gen/*' | sort)
} >"$GPU_BUILD/MANIFEST"
echo "gpu-bundle: $GPU_BUILD ($(du -sh "$GPU_BUILD" --exclude=obj | cut -f1)); libraries: $(cd "$LIBDIR" && find . -type f | sort | tr '\n' ' ')"
# what run.sh needs (the MANIFEST's files) must travel in 56 MiB
carried=$(cd "$GPU_BUILD" && sed -n 's|^\./|./|p' MANIFEST | tr '\n' '\0' | xargs -0 stat -c %s | awk '{ s += $1 } END { print s + 0 }')
echo "gpu-bundle: the MANIFEST's files: $((carried >> 20)) MiB ($carried bytes; limit 56 MiB)"
[ "$carried" -le $((56 << 20)) ] || { echo "gpu-bundle: the bundle is over 56 MiB" >&2; exit 1; }
