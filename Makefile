# SPDX-License-Identifier: MIT
# kvtier — plain hand-written Makefile (redis style). Everything lands under $(BUILD).
#   make            build/libkvtier.so, the kvtier tool, the CUDA stand-ins, tests
#   make test       CUnit suites + preload tests (tests/run_tests.sh)
#   make test-loaded  the migration suites beside two CPU hogs
#   make asan|tsan|ubsan  the same suites with a sanitizer build under
#                   $(BUILD)/asan, $(BUILD)/tsan, $(BUILD)/ubsan (build/asan ... by default);
#                   make asan is AddressSanitizer and UBSan in one build (SAN=address,undefined),
#                   make ubsan UBSan alone
#   make clean
# Sub-makefiles in mk/*.mk add their own targets (one owner each).

CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build
CC        ?= cc
OPT       ?= -O2
SAN       ?=

SANFLAGS  := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer $(if $(findstring undefined,$(SAN)),-fno-sanitize-recover=all,),)
CPPFLAGS  += -D_GNU_SOURCE -Iinclude -I$(CUDA_HOME)/include
CFLAGS    += -std=c11 $(OPT) -g -fPIC -Wall -Wextra -Werror -MMD -MP $(SANFLAGS)
LDFLAGS   += $(SANFLAGS)

# ---- the preload library -------------------------------------------------
# Files named hook_*.c / *.S define interposed symbols, init.c has the
# constructor, record.c and fork.c the in-process glue, place/ placement and
# the live counters, tier/ the migration loop, cuda_shim/ the real entry
# points and kvtier's own driver calls: they go only into the shared object.
# Everything else (topo/ included) also goes into libkvtier.a for tools and
# unit tests. The offline trace reader (profiler/trace_read.c and
# trace_replay.c: reading a finished trace back, `kvtier replay`) goes into
# libkvtier.a only: libkvtier.so holds what runs in the process.
HOOK_SRCS := $(wildcard preload/hook_*.c) $(wildcard preload/*.S) preload/init.c preload/record.c \
             $(wildcard place/*.c) $(wildcard tier/*.c) $(wildcard cuda_shim/*.c)
READ_SRCS := profiler/trace_read.c profiler/trace_replay.c
CORE_SRCS := $(filter-out $(HOOK_SRCS) $(READ_SRCS),$(wildcard base/*.c preload/*.c topo/*.c profiler/*.c policy/*.c))
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
READ_OBJS := $(READ_SRCS:%.c=$(BUILD)/obj/%.o)
HOOK_OBJS := $(patsubst %.S,$(BUILD)/obj/%.o,$(HOOK_SRCS:%.c=$(BUILD)/obj/%.o))
# libkvtier.so never links libzstd (profiler/trace_zstd.c loads it with
# dlopen); libkvtier.a's trace reader does, so whatever links the archive does.
SO_LIBS   := -ldl -lpthread -lunwind -lnuma -lm
LIB_LIBS  := $(SO_LIBS) -lzstd

LIBKVTIER := $(BUILD)/libkvtier.so
LIBCORE   := $(BUILD)/libkvtier.a

# ---- the kvtier command ----------------------------------------------------
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
# libdwfl symbolization (tools/dwsym.c): the tool only, never libkvtier
TOOL_LIBS := -ldw -lelf
KVTIER    := $(BUILD)/kvtier

# ---- tests ------------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
PROG_SRCS := $(wildcard tests/progs/*.c)
PROG_BINS := $(patsubst $(BUILD)/tests/progs/lib%,$(BUILD)/tests/progs/lib%.so,$(PROG_SRCS:tests/progs/%.c=$(BUILD)/tests/progs/%))

# mk/*.mk set FAKECUDA_LIBS, EXTRA_BINS and their own targets.
FAKECUDA_LIBS :=
EXTRA_BINS    :=
-include mk/*.mk

.PHONY: all test test-loaded asan tsan ubsan clean demo bench
all: $(LIBKVTIER) $(LIBCORE) $(KVTIER) $(FAKECUDA_LIBS) $(UNIT_BINS) $(PROG_BINS) $(EXTRA_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -c $< -o $@

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -fPIC -c $< -o $@

$(LIBKVTIER): $(CORE_OBJS) $(HOOK_OBJS)
	$(CC) -shared $(LDFLAGS) -Wl,-z,now -Wl,--no-undefined -o $@ $^ $(SO_LIBS)

$(LIBCORE): $(CORE_OBJS) $(READ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(KVTIER): $(TOOL_OBJS) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJS) $(LIBCORE) $(TOOL_LIBS) $(LIB_LIBS)

# Unit tests link the core archive (never the hooks) and CUnit.
$(BUILD)/tests/unit/%: tests/unit/%.c $(LIBCORE) tests/unit/kvt_test.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) -lcunit $(LIB_LIBS)

# Test programs run under LD_PRELOAD; those named rt_* link the stand-in runtime,
# those named drv_* link the stand-in driver, real_rt_* the toolkit's libcudart.
$(BUILD)/tests/progs/rt_%: tests/progs/rt_%.c $(FAKECUDA_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcudart.so.13 -ldl -lpthread
$(BUILD)/tests/progs/real_rt_%: tests/progs/real_rt_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -l:libcudart.so.13 -ldl -lpthread
$(BUILD)/tests/progs/drv_%: tests/progs/drv_%.c $(FAKECUDA_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcuda.so.1 -ldl -lpthread
# Stand-ins for third-party preloads: never instrumented (a sanitizer runtime
# would reach them during its own start-up, as it would a real one).
$(BUILD)/tests/progs/lib%.so: tests/progs/lib%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -o $@ $< -ldl
$(BUILD)/tests/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -ldl -lpthread

# TEST_JOBS suites side by side (the migration suites are built to pass
# beside two CPU hogs; test_stat runs alone); TEST_JOBS=1: one at a time.
TEST_JOBS ?= 2
test: all
	@BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) SAN=$(SAN) JOBS=$(TEST_JOBS) tests/run_tests.sh

# The suites that run the migration thread, with two CPU hogs beside them
# (a shared machine): their verdicts must not depend on the machine's speed.
LOADED_SUITES ?= test_migrate test_migrate_faults test_migrate_integrity test_migrate_devices \
		 test_sample test_launch_graph
test-loaded: all
	@BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) SAN=$(SAN) HOGS=2 SUITES="$(LOADED_SUITES)" \
		tests/run_tests.sh

# Sanitizer builds nest under $(BUILD), so BUILD=build-x gives build-x/asan.
# make asan is ASan and UBSan in one build and one run of the suites (GCC
# and clang combine them; -fno-sanitize-recover=all: the first undefined
# behaviour aborts, as in make ubsan): CI runs it instead of the two.
asan:
	$(MAKE) BUILD=$(BUILD)/asan SAN=address,undefined OPT=-O1 test

# The README's first command: kvtier's main job on its built-in default. The
# serving workload (multi-turn sessions, a prefix cache) on the SIMULATED
# GPU, at make bench-serve's scale: the server with the KV pool that fits,
# the same with its own KV offload to a host pool, and the server asking for
# a 4x pool under `kvtier run` with shipped defaults, all on the device in
# virtual time (the same figures every run); one table of throughput, TTFT
# and prefix hits, then the HTML report of kvtier's run.
demo:
	@echo "demo: 1/4 installing the build packages that are missing (.ci/install-deps --build-only)"
	@.ci/install-deps --build-only
	@echo "demo: 2/4 building (make all)"
	@$(MAKE) --no-print-directory all >/dev/null
	@echo "demo: 3/4 serving 400 requests on the simulated GPU as vLLM (Model Runner V2) would: native, offload, kvtier at a 4x pool"
	@BUILD=$(BUILD) BENCH_SERVE_OUT=$(BUILD)/demo BENCH_SERVE_RATIOS=4 \
		BENCH_SERVE_PERSONAS=vllm-v2 BENCH_SERVE_ALTS="native offload kvtier" \
		BENCH_SERVE_TRACES= tests/bench/bench_serve.sh
	@echo "demo: 4/4 writing the HTML report of kvtier's run"
	@$(KVTIER) report --format html -o $(BUILD)/demo.html $(BUILD)/demo/vllm-v2-4-kvtier.*.trace
	@echo "HTML report of kvtier's run: $(BUILD)/demo.html"

tsan:
	$(MAKE) BUILD=$(BUILD)/tsan SAN=thread OPT=-O1 test

# UBSan with -fno-sanitize-recover=all: the first undefined behaviour aborts.
ubsan:
	$(MAKE) BUILD=$(BUILD)/ubsan SAN=undefined OPT=-O1 test

clean:
	rm -rf build

# and the test programs' own (a suite that includes a .c file, as test_step
# includes tier/step.c, is rebuilt when that file changes)
-include $(shell find $(BUILD)/obj $(BUILD)/tests -name '*.d' 2>/dev/null)
