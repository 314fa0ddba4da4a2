# SPDX-License-Identifier: MIT
# The serving benchmark (issue 24): $(BUILD)/workloads/serve-like, a
# multi-turn workload with a prefix cache on the SIMULATED GPU, and
#   make bench-serve   native / offload / kvtier / uvm / oracle at
#                      BENCH_SERVE_RATIOS (default "4"; make bench: "2 4 8"), one table and
#                      $(BUILD)/bench-serve.json (tests/bench/bench_serve.sh)
SV_SRCS := tests/workloads/serve_like.c tests/workloads/serve_run.c \
	   tests/workloads/serve_cache.c tests/workloads/serve_sched.c tests/workloads/serve_trace.c \
	   tests/workloads/serve_persona.c tests/workloads/serve_fa.c \
	   tests/workloads/persona_vllm.c tests/workloads/persona_sglang.c \
	   tests/workloads/persona_llama.c tests/workloads/persona_hybrid.c
SV_OBJS := $(SV_SRCS:%.c=$(BUILD)/obj/%.o)
SV_BIN  := $(BUILD)/workloads/serve-like
# mk/serve.mk is read before mk/workloads.mk: wl_*.o named here
SV_WL_OBJS := $(patsubst %,$(BUILD)/obj/tests/workloads/%.o,wl_common wl_sched wl_decode wl_tables wl_real)

EXTRA_BINS += $(SV_BIN)

$(SV_OBJS): CPPFLAGS += -Itests

# its own rule: a static pattern, so that %-like's rule does not apply
$(SV_BIN): $(SV_OBJS) $(SV_WL_OBJS) $(BUILD)/fakecuda/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(SV_OBJS) $(SV_WL_OBJS) -L$(WL_CUDART_DIR) -l:libcudart.so.13 -ldl -lm -lpthread

# the suite runs the workload
$(BUILD)/tests/unit/test_serve: $(SV_BIN) $(FAKECUDA_LIBS)

.PHONY: bench-serve
bench-serve: $(SV_BIN) $(FAKECUDA_LIBS) $(LIBKVTIER) $(KVTIER)
	BUILD=$(BUILD) tests/bench/bench_serve.sh

# kvtier under serve-like and vllm-like in virtual time (FAKECUDA_VTIME=1)
$(BUILD)/tests/unit/test_vtime_kvtier: $(SV_BIN) $(BUILD)/workloads/vllm-like $(FAKECUDA_LIBS) $(LIBKVTIER)
