# SPDX-License-Identifier: MIT
# `kvtier report` extras (owner: report):
#   make bench-report [REPORT_BENCH_EVENTS=10000000]
#        generates a synthetic trace ($(BUILD)/bench/report-10m.trace, kept)
#        and prints the report's read throughput in events/s
#        (a prerequisite of `make bench`)
REPORT_BENCH_EVENTS ?= 10000000
REPORT_BENCH_TRACE  := $(BUILD)/bench/report-$(REPORT_BENCH_EVENTS).trace

$(BUILD)/bench/gen_trace: tests/bench/gen_trace.c include/kvtier/trace_format.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

EXTRA_BINS += $(BUILD)/bench/gen_trace

$(REPORT_BENCH_TRACE): $(BUILD)/bench/gen_trace
	$< $@ $(REPORT_BENCH_EVENTS)

.PHONY: bench-report
bench-report: $(KVTIER) $(REPORT_BENCH_TRACE)
	@cat $(REPORT_BENCH_TRACE) > /dev/null
	@s=$$(date +%s.%N); $(KVTIER) report -q --format json $(REPORT_BENCH_TRACE) > /dev/null || exit 1; \
	e=$$(date +%s.%N); \
	awk -v n=$(REPORT_BENCH_EVENTS) -v s=$$s -v e=$$e \
		'BEGIN { printf "bench-report: %d events in %.2f s = %.1f M events/s\n", n, e - s, n / (e - s) / 1e6 }'
bench: bench-report

# test_report.c compiles the libdwfl symbolizer in (tools are not in
# libkvtier.a) and runs $(KVTIER) and gen_trace.
$(BUILD)/tests/unit/test_report: tools/dwsym.c tools/dwsym.h
$(BUILD)/tests/unit/test_report: LIB_LIBS += -ldw -lelf

# The C++ program of test_symbolize (g++ -g -O0, with a build id) and its
# "rebuilt" variant: other code, another build id.
CXX ?= g++
$(BUILD)/tests/progs/pool_grow: tests/progs/pool_grow.cc
	@mkdir -p $(dir $@)
	$(CXX) -g -O0 -Wall -Wextra -Werror -Wl,--build-id $(SANFLAGS) -o $@ $<
$(BUILD)/tests/progs/pool_grow_v2: tests/progs/pool_grow.cc
	@mkdir -p $(dir $@)
	$(CXX) -g -O0 -Wall -Wextra -Werror -Wl,--build-id -DKVT_POOL_V2 $(SANFLAGS) -o $@ $<
EXTRA_BINS += $(BUILD)/tests/progs/pool_grow $(BUILD)/tests/progs/pool_grow_v2
