#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# llama.cpp, unmodified, as a second real server on the GPU check (issue 25):
# builds it from its own source (never vendored: exported from a public
# snapshot into build/llamacpp-src) and writes the tiny model run.sh loads.
#   build   CUDA backend with the toolkit's nvcc, sm_90 only, the two tools
#           run.sh runs (llama-cli, llama-batched-bench), shared libraries (the
#           KV site rule needs libllama's dynamic symbols), stripped, plus the
#           model: into $GPU_BUILD/llamacpp (travels with the bundle)
#   check   what `build` does short of the full build: configure, and compile
#           two ggml-cuda translation units (norm.cu, one mmq instance) with
#           nvcc for sm_90, printing their device code's size
#   cpu     CPU-only build of the same tools and the same model: loads, and
#           greedy generation at temperature 0 gives the same tokens twice
#           (make test-llamacpp-cpu)
# Skips (exit 77, one line) when the source, cmake or nvcc is missing.
#
# Pinned: llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20,
# "server (webui): Fix Premature Submission During IME Conversion (#11971)"),
# the newest commit of the public snapshot of ggml-org/llama.cpp (fetched as
# github:ggerganov/llama.cpp; the ggml-org name's snapshot was too big to
# fetch). Export it (its models/ holds large files the snapshot lacks):
#   git --git-dir=<snapshot> archive c392e5094deaf2d1a7c18683214f007fad3fe42b \
#       -- . ':(exclude)models' | tar -x -C build/llamacpp-src
set -u
LLAMACPP_COMMIT=c392e5094deaf2d1a7c18683214f007fad3fe42b
SRC=${LLAMACPP_SRC:-build/llamacpp-src}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GPU_BUILD=${GPU_BUILD:-build/gpu}
WORK=${LLAMACPP_WORK:-build}             # cmake build trees (not carried)
JOBS=${LLAMACPP_JOBS:-1}
# a Python with numpy (LLAMACPP_PYTHON, else the first of these that has it)
PY=${LLAMACPP_PYTHON:-}
for p in python3 /usr/bin/python3; do
	[ -n "$PY" ] && break
	"$p" -c 'import numpy' 2>/dev/null && PY=$p
done
TOOLS="llama-cli llama-batched-bench"
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "tests/gpu/llamacpp.sh: SKIP: $*"; exit 77; }
die() { echo "tests/gpu/llamacpp.sh: $*" >&2; exit 1; }
need_src() {
	[ -f "$SRC/CMakeLists.txt" ] && [ -d "$SRC/ggml/src/ggml-cuda" ] ||
		skip "no llama.cpp source at $SRC (LLAMACPP_SRC; export commit $LLAMACPP_COMMIT, see this script's header)"
	command -v cmake >/dev/null || skip "no cmake"
}
need_nvcc() { [ -x "$CUDA_HOME/bin/nvcc" ] || skip "no $CUDA_HOME/bin/nvcc (CUDA_HOME)"; }

# ---- configure --------------------------------------------------------------------
COMMON_FLAGS="-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
	-DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF"
# sm_90 machine code only (90-real: no PTX to JIT elsewhere), fatbins
# compressed for size: one mmq instance's device code is 2.7 MB with PTX,
# 2.1 MB without, 0.45 MB compressed (nvcc 13.0), and the bundle has 56 MiB
configure_cuda() {   # configure_cuda DIR
	# shellcheck disable=SC2086
	nice -n 19 cmake -S "$SRC" -B "$1" $COMMON_FLAGS -DBUILD_SHARED_LIBS=ON \
		-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_CUDA_FLAGS=--compress-mode=size \
		-DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
		-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >"$1.configure.log" 2>&1 ||
		die "cmake configure (CUDA) failed: $1.configure.log"
}
# the model run.sh loads (and its KV cost per token of context)
make_model() {   # make_model DIR
	[ -n "$PY" ] || die "no Python with numpy for make_gguf.py (LLAMACPP_PYTHON; Debian: python3-numpy)"
	PYTHONPATH="$SRC/gguf-py" "$PY" "$here/make_gguf.py" "$1/tiny.gguf" >"$1/model.txt" ||
		die "make_gguf.py failed (needs numpy and $SRC/gguf-py)"
	printf '%s' "$PROMPT" >"$1/prompt.txt"
	echo "$GEN_FLAGS" >"$1/gen_flags.txt"
}

cmd_check() {
	need_src; need_nvcc
	local d=$WORK/llamacpp-cuda
	mkdir -p "$d"
	configure_cuda "$d"
	echo "llamacpp.sh: cmake configure with GGML_CUDA=ON, sm_90: ok ($d.configure.log)"
	local u o
	for u in norm.cu template-instances/mmq-instance-q4_k.cu; do
		o=$d/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/$u.o
		rm -f "$o"
		nice -n 19 make -C "$d/ggml/src/ggml-cuda" "$u.o" >"$d.check.log" 2>&1 ||
			die "nvcc could not compile ggml-cuda/$u for sm_90: $d.check.log"
		echo "llamacpp.sh: ggml-cuda/$u compiles for sm_90 ($(size -A "$o" | awk '$1 == ".nv_fatbin" { print $2 }') bytes of device code)"
	done
	echo "llamacpp.sh: with $("$CUDA_HOME/bin/nvcc" --version | tail -1); the full build was not run ($(grep -c '^[^ ]*\.cu\.o:' "$d/ggml/src/ggml-cuda/Makefile") CUDA units)"
}

cmd_build() {
	need_src; need_nvcc
	local d=$WORK/llamacpp-cuda out=$GPU_BUILD/llamacpp
	mkdir -p "$d"
	configure_cuda "$d"
	# shellcheck disable=SC2086
	nice -n 19 cmake --build "$d" -j"$JOBS" --target $TOOLS >"$d.build.log" 2>&1 ||
		die "CUDA build failed: $d.build.log"
	rm -rf "$out"; mkdir -p "$out"
	for t in $TOOLS; do cp "$d/bin/$t" "$out/"; done
	find "$d/bin" -maxdepth 1 -name 'lib*.so*' -exec cp -P {} "$out/" \;
	# .dynsym stays: the KV rule names llama_kv_cache_init through dladdr
	find "$out" -type f \( -name 'llama-*' -o -name 'lib*.so*' \) -exec strip --strip-unneeded {} \;
	make_model "$out"
	echo "llama.cpp $LLAMACPP_COMMIT, CUDA sm_90, $("$CUDA_HOME/bin/nvcc" --version | tail -1)" >"$out/VERSION"
	echo "llamacpp.sh: $out ($(du -sh "$out" | cut -f1)): $(cd "$out" && ls | tr '\n' ' ')"
}

# ---- the CPU-only check -----------------------------------------------------------------
cmd_cpu() {
	need_src
	local d=$WORK/llamacpp-cpu m=$WORK/llamacpp-cpu-model a b
	mkdir -p "$d" "$m"
	# shellcheck disable=SC2086
	nice -n 19 cmake -S "$SRC" -B "$d" $COMMON_FLAGS -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA=OFF \
		>"$d.configure.log" 2>&1 || die "cmake configure (CPU) failed: $d.configure.log"
	# shellcheck disable=SC2086
	nice -n 19 cmake --build "$d" -j"$JOBS" --target $TOOLS >"$d.build.log" 2>&1 ||
		die "CPU build failed: $d.build.log"
	make_model "$m"
	cp "$m/tiny.gguf" "$m/tiny.1.gguf"
	make_model "$m"
	cmp -s "$m/tiny.gguf" "$m/tiny.1.gguf" || die "make_gguf.py wrote two different models from one seed"
	# twice at -c 4096, then with 4 sequences at -c 16384 (a 512 MiB KV): the
	# KV's size must not change the tokens (run.sh sizes it from the card)
	for r in 1:4096:1 2:4096:1 3:16384:4; do
		# shellcheck disable=SC2086
		nice -n 19 "$d/bin/llama-cli" -m "$m/tiny.gguf" -c "$(echo $r | cut -d: -f2)" -np "${r##*:}" \
			-f "$m/prompt.txt" $GEN_FLAGS -t 1 >"$m/gen.${r%%:*}.out" 2>"$m/gen.${r%%:*}.err" ||
			die "llama-cli failed: $m/gen.${r%%:*}.err"
	done
	a=$(output_tokens "$m/gen.1.err"); b=$(output_tokens "$m/gen.2.err")
	[ "$(output_tokens "$m/gen.3.err")" = "$a" ] || die "-c 16384 -np 4 gives other tokens than -c 4096: $m/gen.3.err"
	[ "$(echo "$a" | wc -w)" -ge 8 ] || die "llama-cli generated fewer than 8 tokens: $m/gen.1.err"
	[ "$a" = "$b" ] || die "two greedy runs differ: $m/gen.1.err $m/gen.2.err"
	echo "llamacpp.sh: CPU-only llama.cpp loads the tiny model ($(sed -n 's/^kv_bytes_per_token=//p' "$m/model.txt") KV bytes a token); two greedy runs (and one at -c 16384 -np 4) give the same $(echo "$a" | wc -w) tokens: $(echo "$a" | cut -c1-80) ..."
	echo "llamacpp-cpu: 1 passed, 0 failed"
}

# the fixed greedy prompt, written next to the model: run.sh reads it there
PROMPT="w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16"
# -v: llama-cli logs each token it evaluates ("eval: [ 'piece':id ]") on stderr
GEN_FLAGS="-n 32 --temp 0 --top-k 1 --seed 25 -no-cnv --no-warmup --no-display-prompt -ub 64 -v"
# the generated token ids: every evaluated batch after the prompt is one
# sampled token (the last one sampled is never evaluated: n - 1 of them)
output_tokens() { grep -a '^eval: ' "$1" | tail -n +2 | sed 's/.*:\([0-9][0-9]*\) \]$/\1/' | tr '\n' ' ' | sed 's/ $//'; }

case ${1:-} in
build) cmd_build ;;
check) cmd_check ;;
cpu) cmd_cpu ;;
*) echo "usage: tests/gpu/llamacpp.sh build|check|cpu (LLAMACPP_SRC=<llama.cpp $LLAMACPP_COMMIT>)" >&2; exit 2 ;;
esac
