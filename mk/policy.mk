# SPDX-License-Identifier: MIT
# policy/ extras (owner: policy):
#   make bench-policy            ns/decision of the decision engine
#                                (a prerequisite of `make bench`)
# The policy parser's fuzzer is in mk/fuzz.mk (make fuzz-policy).
.PHONY: bench-policy

$(BUILD)/bench/bench_policy: tests/bench/bench_policy.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(LIB_LIBS)

bench-policy: $(BUILD)/bench/bench_policy
	$<
bench: bench-policy

# test_policy.c compiles the two tool commands in (they are not in libkvtier.a).
$(BUILD)/tests/unit/test_policy: tools/cmd_policy.c tools/cmd_replay.c
$(BUILD)/tests/unit/test_policy_replay: tools/cmd_replay.c tools/runs.c tools/runs.h
