# SPDX-License-Identifier: MIT
# `make soak` (owner: reliability; not part of `make test` or CI): a bounded
# long run of a simulated serving workload (tests/progs/rt_migr_soak.c:
# sequences arriving and leaving, each allocating and freeing its own KV
# blocks) under kvtier with migration on, on the SIMULATED GPU.
# tests/soak/soak.sh prints the process's memory and kvtier's counters every
# SOAK_SAMPLE seconds and fails when kvtier's own memory (libkvtier.so's
# mappings, its stats segment and the private anonymous maps, where all it
# allocates lives) grows by more than SOAK_GROWTH_KB between the sample after
# SOAK_WARMUP seconds and the last one, when the host RSS outside the
# stand-in's device memory grows by more than SOAK_RSS_GROWTH_KB, when the
# workload finds corrupt data, or when kvtier says anything.
SOAK_SECONDS ?= 600
SOAK_WARMUP ?= 60
SOAK_SAMPLE ?= 10
SOAK_GROWTH_KB ?= 1024
SOAK_RSS_GROWTH_KB ?= 65536

.PHONY: soak
soak: $(LIBKVTIER) $(KVTIER) $(FAKECUDA_LIBS) $(BUILD)/tests/progs/rt_migr_soak
	BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_WARMUP=$(SOAK_WARMUP) \
		SOAK_SAMPLE=$(SOAK_SAMPLE) SOAK_GROWTH_KB=$(SOAK_GROWTH_KB) \
		SOAK_RSS_GROWTH_KB=$(SOAK_RSS_GROWTH_KB) tests/soak/soak.sh
