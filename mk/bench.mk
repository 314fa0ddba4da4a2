# SPDX-License-Identifier: MIT
# `make bench` and the real-GPU bundle (owner: bench):
#   make bench        bench-policy, bench-report, bench-sim and bench-serve (their own
#                     mk files), then bench-table: one table of figures
#                     measured side by side (bench/run.sh) and $(BUILD)/bench.json,
#                     and README.md's Performance section from it
#                     (tests/bench/perf_readme.sh)
#   make bench-table  the table step alone (still runs bench-sim first)
#   make bench-sim-full  bench-sim with longer windows (minutes)
#   make gpu-bundle   everything tests/gpu/run.sh needs on a bare GPU machine,
#                     built here against the real CUDA 13 toolkit: build/gpu
#   make test-gpu-dryrun  tests/gpu/run.sh end to end on the simulated device
#                     (tests/gpu/dryrun.sh: a stand-in bundle; ~3 minutes), so
#                     the real-GPU check is known to run before a GPU session
# Benchmarks never fail the build on a time; `make test` runs none of them.
BENCH_HOOKS := $(BUILD)/bench/hooks
BENCH_TRACE_WRITE := $(BUILD)/bench/trace_write
BENCH_PROFILER := $(BUILD)/bench/bench_profiler
MIGRATE_INTEGRITY := $(BUILD)/bench/migrate_integrity

EXTRA_BINS += $(BENCH_HOOKS) $(BENCH_TRACE_WRITE) $(BENCH_PROFILER) $(MIGRATE_INTEGRITY)

# linked to the stand-in runtime; the same binary runs native and preloaded
$(BENCH_HOOKS): bench/hooks.c $(BUILD)/fakecuda/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcudart.so.13 -ldl

$(BENCH_TRACE_WRITE): bench/trace_write.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(LIB_LIBS)

# checksummed 2 MiB blocks written and checked while the migrator moves them
# (tests/unit/test_migrate_integrity.c runs it; make soak-migrate runs it long)
$(MIGRATE_INTEGRITY): tests/bench/migrate_integrity.c $(BUILD)/fakecuda/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcudart.so.13

# heat + planner cost at 1 TiB tracked (the core archive: no hooks, no CUDA)
$(BENCH_PROFILER): bench/bench_profiler.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(LIB_LIBS)

.PHONY: bench-table bench-sim-full soak-migrate gpu-bundle test-gpu-dryrun
# data integrity under migration, long: two processes side by side, each
# SOAK_RUNS runs of SOAK_ROUNDS rounds (the CI size is 1 run of 150 rounds)
SOAK_RUNS ?= 10
SOAK_ROUNDS ?= 600
soak-migrate: $(BUILD)/tests/unit/test_migrate_integrity $(MIGRATE_INTEGRITY) $(LIBKVTIER) $(FAKECUDA_LIBS)
	@for i in 0 1; do \
		BUILD=$(BUILD) KVT_INTEGRITY_RUNS=$(SOAK_RUNS) KVT_INTEGRITY_ROUNDS=$(SOAK_ROUNDS) \
		KVT_INTEGRITY_SEED=$$((1 + $$i * 1000)) $(BUILD)/tests/unit/test_migrate_integrity \
			>$(BUILD)/soak-migrate.$$i.log 2>&1 & \
	done; wait; grep -h '^integrity:' $(BUILD)/soak-migrate.*.log; \
	! grep -l 'FAILED\|[1-9][0-9]* failed runs\|[1-9][0-9]* corrupt' $(BUILD)/soak-migrate.*.log

# the simulated rows with longer windows (40 warm-up + 10 timed steps for every
# baseline, 10 timed for kvtier): minutes, since UVM thrash is real copying
bench-sim-full: $(WL_BINS) $(FAKECUDA_LIBS) $(LIBKVTIER)
	BUILD=$(BUILD) BENCH_SIM_FULL=1 BENCH_SIM_RATIOS="4 2 1" tests/bench/bench_sim.sh

# mk/*.mk are read in name order: this file comes before the ones defining
# FAKECUDA_LIBS and FAKECUDART, hence the literal stand-in paths.
# Listed after the other bench-* prerequisites, and depending on them, so
# nothing else is timed while the table's own figures are measured (-j too).
bench: bench-table
# make bench's simulated rows include KV = 4x (minutes) and uvm and oracle at
# 1x; plain bench-sim: 2x, and native at 1x
bench: export BENCH_SIM_RATIOS := 4 2 1
bench: export BENCH_SIM_1X := native uvm oracle
# and the serving table at pools of 2, 4 and 8x (bench-serve, mk/serve.mk)
bench: export BENCH_SERVE_RATIOS := 2 4 8
bench-table: bench-policy bench-report bench-sim bench-serve $(LIBKVTIER) $(KVTIER) $(BUILD)/fakecuda/libcuda.so.1 \
		$(BUILD)/fakecuda/libcudart.so.13 $(BUILD)/bench/bench_policy $(BENCH_HOOKS) $(BENCH_TRACE_WRITE) \
		$(BENCH_PROFILER)
	@BUILD=$(BUILD) MAKE="$(MAKE)" bench/run.sh
	@tests/bench/perf_readme.sh $(BUILD)/bench.json README.md
	@tests/bench/serve_readme.sh $(BUILD)/bench-serve.json README.md
	@SERVE_ROWS=trace tests/bench/serve_readme.sh $(BUILD)/bench-serve.json README.md

# ---- the real-GPU bundle -------------------------------------------------------
# A nested make with BUILD=build/gpu links the workloads to the toolkit's
# libcudart.so.13; tests/gpu/bundle.sh adds the probe programs and copies the
# shared libraries a bare GPU machine lacks into build/gpu/lib.
GPU_BUILD ?= $(BUILD)/gpu
gpu-bundle:
	$(MAKE) --no-print-directory BUILD=$(GPU_BUILD) WL_CUDART_DIR=$(CUDA_HOME)/lib64 \
		$(GPU_BUILD)/libkvtier.so $(GPU_BUILD)/kvtier \
		$(GPU_BUILD)/workloads/vllm-like $(GPU_BUILD)/workloads/sglang-like \
		$(GPU_BUILD)/workloads/llamacpp-like
	CC="$(CC)" CUDA_HOME=$(CUDA_HOME) GPU_BUILD=$(GPU_BUILD) tests/gpu/bundle.sh

test-gpu-dryrun: $(LIBKVTIER) $(KVTIER) $(FAKECUDA_LIBS) $(WL_BINS)
	@BUILD=$(BUILD) tests/gpu/dryrun.sh
