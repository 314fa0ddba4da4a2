# SPDX-License-Identifier: MIT
# `make bench` and the real-GPU bundle (owner: bench):
#   make bench        bench-policy, bench-report and bench-sim (their own
#                     mk files), then bench-table: one table of figures
#                     measured side by side (bench/run.sh) and $(BUILD)/bench.json
#   make bench-table  the table step alone (still runs bench-sim first)
#   make gpu-bundle   everything tests/gpu/run.sh needs on a bare GPU machine,
#                     built here against the real CUDA 13 toolkit: build/gpu
# Benchmarks never fail the build on a time; `make test` runs none of them.
BENCH_HOOKS := $(BUILD)/bench/hooks
BENCH_TRACE_WRITE := $(BUILD)/bench/trace_write

EXTRA_BINS += $(BENCH_HOOKS) $(BENCH_TRACE_WRITE)

# linked to the stand-in runtime; the same binary runs native and preloaded
$(BENCH_HOOKS): bench/hooks.c $(BUILD)/fakecuda/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcudart.so.13

$(BENCH_TRACE_WRITE): bench/trace_write.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(LIB_LIBS)

.PHONY: bench-table gpu-bundle
# mk/*.mk are read in name order: this file comes before the ones defining
# FAKECUDA_LIBS and FAKECUDART, hence the literal stand-in paths.
# Listed after the other bench-* prerequisites, and depending on them, so
# nothing else is timed while the table's own figures are measured (-j too).
bench: bench-table
bench-table: bench-policy bench-report bench-sim $(LIBKVTIER) $(KVTIER) $(BUILD)/fakecuda/libcuda.so.1 \
		$(BUILD)/fakecuda/libcudart.so.13 $(BUILD)/bench/bench_policy $(BENCH_HOOKS) $(BENCH_TRACE_WRITE)
	@BUILD=$(BUILD) MAKE="$(MAKE)" bench/run.sh

# ---- the real-GPU bundle -------------------------------------------------------
# A nested make with BUILD=build/gpu links the workloads to the toolkit's
# libcudart.so.13; tests/gpu/bundle.sh adds the probe programs and copies the
# shared libraries a bare GPU machine lacks into build/gpu/lib.
GPU_BUILD := build/gpu
gpu-bundle:
	$(MAKE) --no-print-directory BUILD=$(GPU_BUILD) WL_CUDART_DIR=$(CUDA_HOME)/lib64 \
		$(GPU_BUILD)/libkvtier.so $(GPU_BUILD)/kvtier \
		$(GPU_BUILD)/workloads/vllm-like $(GPU_BUILD)/workloads/sglang-like \
		$(GPU_BUILD)/workloads/llamacpp-like
	CC="$(CC)" CUDA_HOME=$(CUDA_HOME) GPU_BUILD=$(GPU_BUILD) tests/gpu/bundle.sh
