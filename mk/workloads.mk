# SPDX-License-Identifier: MIT
# Workload programs (tests/workloads): replay the allocation life of LLM
# servers on the SIMULATED GPU, plus the runtime probes used by the tests.
#   $(BUILD)/workloads/{vllm,sglang,llamacpp}-like   workloads
#   $(BUILD)/workloads/rt-probe        exercises the runtime (stand-in linked)
#   $(BUILD)/workloads/rt-probe-real   the same, linked against the toolkit's
#                                      libcudart.so.13 (run with the stand-in)
#   $(BUILD)/workloads/librt-trace.so  dlopen/dlsym/resolver tracer (tests)
#   make bench-sim                      the simulated baseline table
# WL_CUDART_DIR picks the runtime the workloads link against (the stand-in by
# default; $(CUDA_HOME)/lib64 on a GPU machine — same soname and version node).
# Without the stand-in's fakecuda_* symbols (a real GPU) decode runs a real
# PTX kernel instead (tests/workloads/wl_real.c) and reports wall-clock tokens/s.
WL_CUDART_DIR ?= $(BUILD)/fakecuda
WL_NAMES      := vllm-like sglang-like llamacpp-like
WL_BINS       := $(WL_NAMES:%=$(BUILD)/workloads/%)
WL_LIB_SRCS   := tests/workloads/wl_common.c tests/workloads/wl_sched.c tests/workloads/wl_decode.c tests/workloads/wl_tables.c \
		 tests/workloads/wl_real.c
WL_LIB_OBJS   := $(WL_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
WL_ALL_OBJS   := $(WL_LIB_OBJS) $(patsubst %,$(BUILD)/obj/tests/workloads/%.o,vllm_like sglang_like llamacpp_like rt_probe)
WL_TOOLS      := $(BUILD)/workloads/rt-probe $(BUILD)/workloads/rt-probe-real $(BUILD)/workloads/librt-trace.so

EXTRA_BINS += $(WL_BINS) $(WL_TOOLS)

$(WL_ALL_OBJS): CPPFLAGS += -Itests

# the real-GPU kernel (PTX) as a C string literal for wl_real.c
$(BUILD)/gen/wl_touch_ptx.h: tests/workloads/wl_touch.ptx
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< >$@
$(BUILD)/gen/wl_paged_ptx.h: tests/workloads/wl_paged.ptx
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< >$@
$(BUILD)/obj/tests/workloads/wl_real.o: $(BUILD)/gen/wl_touch_ptx.h $(BUILD)/gen/wl_paged_ptx.h
$(BUILD)/obj/tests/workloads/wl_real.o: CPPFLAGS += -I$(BUILD)/gen

$(BUILD)/workloads/%-like: $(BUILD)/obj/tests/workloads/%_like.o $(WL_LIB_OBJS) $(FAKECUDART)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(WL_LIB_OBJS) -L$(WL_CUDART_DIR) -l:libcudart.so.13 -ldl -lm -lpthread

$(BUILD)/workloads/rt-probe: $(BUILD)/obj/tests/workloads/rt_probe.o $(FAKECUDART)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(BUILD)/fakecuda -l:libcudart.so.13 -ldl -lpthread

$(BUILD)/workloads/rt-probe-real: $(BUILD)/obj/tests/workloads/rt_probe.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -l:libcudart.so.13 -ldl -lpthread

$(BUILD)/workloads/librt-trace.so: tests/workloads/rt_trace.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(filter-out -MMD -MP,$(CFLAGS)) -shared $(LDFLAGS) -o $@ $< -ldl

.PHONY: workloads bench-sim
workloads: $(WL_BINS) $(WL_TOOLS)

bench-sim: $(WL_BINS) $(FAKECUDA_LIBS)
	BUILD=$(BUILD) tests/bench/bench_sim.sh
