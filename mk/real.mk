# SPDX-License-Identifier: MIT
# Real programs under the preload (issue 8): the C programs of tests/real,
# built into $(BUILD)/tests/real; the suite is tests/unit/test_real.c (built
# by the main Makefile) and the scripts tests/real/*.sh|*.py run from the tree.
# Owner: reliability (tests/real).

.DEFAULT_GOAL := all

REAL_DIR  := $(BUILD)/tests/real
REAL_BINS := $(REAL_DIR)/spawner $(REAL_DIR)/dlcycle $(REAL_DIR)/deepbind $(REAL_DIR)/libdeep.so
EXTRA_BINS += $(REAL_BINS)

# The test library is never sanitizer-instrumented (like tests/progs/lib*.so).
$(REAL_DIR)/lib%.so: tests/real/lib%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -o $@ $< -ldl

# deepbind exports kvt_deep_whoami from the executable (-rdynamic).
$(REAL_DIR)/deepbind: tests/real/deepbind.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -rdynamic -o $@ $< -ldl

$(REAL_DIR)/%: tests/real/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -ldl -lpthread

# test_real runs those programs: make them prerequisites of the suite.
$(BUILD)/tests/unit/test_real: $(REAL_BINS)

.PHONY: real
real: $(REAL_BINS) $(BUILD)/tests/unit/test_real

# llama.cpp from its npm package (issue 47): tests/real/test_llamacpp_npm.c,
# a suite of make test (tests/run_tests.sh runs every $(BUILD)/tests/unit/test_*)
# that runs tests/real/llamacpp_check.sh; make test-llamacpp-npm runs it alone.
LLAMACPP_NPM_SUITE := $(BUILD)/tests/unit/test_llamacpp_npm
EXTRA_BINS += $(LLAMACPP_NPM_SUITE)
$(LLAMACPP_NPM_SUITE): tests/real/test_llamacpp_npm.c tests/unit/kvt_test.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -lcunit

.PHONY: test-llamacpp-npm
test-llamacpp-npm: $(LIBKVTIER) $(KVTIER) $(LLAMACPP_NPM_SUITE)
	@BUILD=$(BUILD) SAN=$(SAN) SUITES=test_llamacpp_npm tests/run_tests.sh
