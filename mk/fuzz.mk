# SPDX-License-Identifier: MIT
# libFuzzer targets (issue 8), clang + ASan + UBSan with -fno-sanitize-recover:
#   make fuzz [FUZZ_SECONDS=60]  every target in turn, FUZZ_SECONDS each
#   make fuzz-policy             KVTIER_POLICY parser, matching, replay lines
#   make fuzz-options            KVTIER_* options table and value readers
#   make fuzz-trace              trace reader and `kvtier replay FILE`
#   make fuzz-list               the target names, one a line (for .ci/run)
# Binaries, the corpora they grow and crash artifacts go under $(BUILD)/fuzz;
# the shipped seeds in tests/fuzz/corpus/<target> are only read. A crash,
# leak, UB or broken invariant stops the run (exit status non-zero) and
# leaves the input in $(BUILD)/fuzz/artifacts-<target>/.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := policy options trace
FUZZ_CFLAGS  := -D_GNU_SOURCE -Iinclude -std=c11 -g -O1 \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
POLICY_SRCS  := $(wildcard policy/*.c)
POLICY_HDRS  := $(wildcard include/kvtier/*.h)
# what each target links besides the target file (outside calls are stubbed
# in the target: kvt_log/kvt_log_prefix/kvt_sys_write_all, kvt_sys_mmap/munmap/map_own)
FUZZ_SRCS_policy  := $(POLICY_SRCS)
FUZZ_SRCS_options := $(POLICY_SRCS) base/options.c
FUZZ_SRCS_trace   := $(POLICY_SRCS) profiler/trace_read.c profiler/trace_replay.c \
                     profiler/registry.c profiler/names.c
FUZZ_LIBS_trace   := -lzstd
# longest input tried (a policy is at most 4096 bytes; a trace record 64 KiB)
FUZZ_LEN_policy  := 4300
FUZZ_LEN_options := 8192
FUZZ_LEN_trace   := 16384

$(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%): $(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(POLICY_HDRS) base/kvt.h profiler/trace_read.h \
		    $(POLICY_SRCS) base/options.c profiler/trace_read.c \
		    profiler/trace_replay.c profiler/registry.c profiler/names.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_SRCS_$*) $(FUZZ_LIBS_$*)

.PHONY: fuzz fuzz-list $(FUZZ_TARGETS:%=fuzz-%)
fuzz: $(FUZZ_TARGETS:%=fuzz-%)

fuzz-list:
	@printf '%s\n' $(FUZZ_TARGETS)

$(FUZZ_TARGETS:%=fuzz-%): fuzz-%: $(FUZZ_DIR)/fuzz_%
	@mkdir -p $(FUZZ_DIR)/corpus-$* $(FUZZ_DIR)/artifacts-$*
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_LEN_$*) -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/artifacts-$*/ -dict=tests/fuzz/$*.dict \
		$(FUZZ_DIR)/corpus-$* tests/fuzz/corpus/$*
