# SPDX-License-Identifier: MIT
# policy/ extras (owner: policy):
#   make fuzz [FUZZ_SECONDS=60]  libFuzzer (clang) + ASan + UBSan on the
#                                KVTIER_POLICY parser, the option-value readers
#                                and the replay line reader; $(BUILD)/fuzz
#   make bench-policy            ns/decision of the decision engine
#                                (a prerequisite of `make bench`)
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
POLICY_SRCS  := $(wildcard policy/*.c)
POLICY_HDRS  := include/kvtier/policy.h include/kvtier/units.h include/kvtier/trace_format.h
# the options table reader is fuzzed too (its log/write calls are stubbed
# in the fuzzer); empty this if options.c grows other outside calls
FUZZ_OPTIONS_SRCS ?= preload/options.c

$(FUZZ_DIR)/fuzz_policy: tests/fuzz/fuzz_policy.c $(POLICY_SRCS) $(POLICY_HDRS) $(FUZZ_OPTIONS_SRCS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -D_GNU_SOURCE -Iinclude -std=c11 -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-o $@ tests/fuzz/fuzz_policy.c $(POLICY_SRCS) $(FUZZ_OPTIONS_SRCS)

.PHONY: fuzz fuzz-policy bench-policy
fuzz: fuzz-policy

# The first corpus directory (under $(BUILD)) collects new inputs; the
# shipped seeds in tests/fuzz/corpus/policy are only read.
fuzz-policy: $(FUZZ_DIR)/fuzz_policy
	@mkdir -p $(FUZZ_DIR)/corpus-policy $(FUZZ_DIR)/artifacts
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=4300 -timeout=10 \
		-print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/ \
		-dict=tests/fuzz/policy.dict \
		$(FUZZ_DIR)/corpus-policy tests/fuzz/corpus/policy

$(BUILD)/bench/bench_policy: tests/bench/bench_policy.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(LIB_LIBS)

bench-policy: $(BUILD)/bench/bench_policy
	$<
bench: bench-policy

# test_policy.c compiles the two tool commands in (they are not in libkvtier.a).
$(BUILD)/tests/unit/test_policy: tools/cmd_policy.c tools/cmd_replay.c
$(BUILD)/tests/unit/test_policy_replay: tools/cmd_replay.c
