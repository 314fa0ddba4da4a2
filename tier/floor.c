// SPDX-License-Identifier: MIT
/* The floor's notices (contract in floor.h). */
#include <stdio.h>
#include <string.h>

#include "floor.h"
#include "../base/kvt.h"
#include "../profiler/evclass.h"
#include "../profiler/trace.h"

static uint32_t held;       /* epochs in a row the condition held */
static int said;
/* the step notice: the window under way and the windows over in a row */
static struct {
	uint64_t steps0, over0;     /* the counters when the window began */
	uint32_t epochs, windows;
	int said;
} sw;

static void steps_epoch(uint64_t budget, const struct kvt_floor_steps *st)
{
	if (sw.said || !budget || !st)
		return;
	if (sw.epochs++ == 0) {
		sw.steps0 = st->steps;
		sw.over0 = st->over;
		return;
	}
	if (sw.epochs <= KVT_FLOOR_WINDOW)
		return;
	uint64_t n = st->steps - sw.steps0, over = st->over - sw.over0;
	sw.steps0 = st->steps;              /* the next window begins here */
	sw.over0 = st->over;
	sw.epochs = 1;
	if (n < KVT_FLOOR_STEPS_MIN || over * 100 < n * KVT_FLOOR_OVER_PCT) {
		sw.windows = 0;
		return;
	}
	if (++sw.windows < KVT_FLOOR_OVER_WINDOWS)
		return;
	sw.said = 1;
	unsigned pct = (unsigned)(over * 100 / n);
	unsigned long long peak = (unsigned long long)(st->peak_pages << 16 >> 20);
	kvt_warn("%u%% of the last %llu steps needed more HBM than the budget leaves them (they "
		 "named more KV than it holds, or found no room for the far part of what they "
		 "named; the most one step named: %llu MiB, the budget %llu MiB): what does not "
		 "fit is read over the link or moved every step, and such a server is expected to "
		 "run below the same server with the pool that fits. Its larger pool lets it run a "
		 "larger batch: cap the server's running requests (vLLM --max-num-seqs, SGLang "
		 "--max-running-requests, TensorRT-LLM --max_batch_size) so that one step's KV "
		 "fits; docs/performance.md \"Server personas\", hybrid", pct, (unsigned long long)n,
		 peak, (unsigned long long)(budget >> 20));
	char val[160];
	snprintf(val, sizeof val, "share_pct=%u steps=%llu peak_bytes=%llu budget=%llu", pct,
		 (unsigned long long)n, (unsigned long long)(st->peak_pages << 16),
		 (unsigned long long)budget);
	kvt_trace_info("evidence.step_over_budget", val);
}

void kvt_floor_epoch(uint64_t budget, const struct kvt_floor_steps *st)
{
	steps_epoch(budget, st);
	if (said || !budget)
		return;
	uint64_t nr[KVT_EVC__COUNT], b[KVT_EVC__COUNT];
	kvt_evc_totals(nr, b);
	uint64_t fine = b[KVT_EVC_BLOCKS] + b[KVT_EVC_EXTENT];
	uint64_t coarse = b[KVT_EVC_ALLOCATION] + b[KVT_EVC_FAULTS];
	if (fine || coarse <= budget) {
		held = 0;
		return;
	}
	if (++held < KVT_FLOOR_HOLD)
		return;
	said = 1;
	const char *cls = b[KVT_EVC_ALLOCATION] ? "allocation" : "faults";
	kvt_warn("%llu MiB of KV, %.1fx the HBM budget of %llu MiB, has no evidence finer than "
		 "the allocation (class %s): kvtier cannot tell which blocks a step reads, and a "
		 "KV pool larger than HBM is expected to run below the same server with the pool "
		 "that fits. Size the pool to fit HBM, or see README \"Serving\" for the server "
		 "options that give kvtier more", (unsigned long long)(coarse >> 20),
		 (double)coarse / (double)budget, (unsigned long long)(budget >> 20), cls);
	char val[128];
	snprintf(val, sizeof val, "kv_bytes=%llu budget=%llu class=%s", (unsigned long long)coarse,
		 (unsigned long long)budget, cls);
	kvt_trace_info("evidence.floor", val);
}

int kvt_floor_said(void)
{
	return said;
}

int kvt_floor_steps_said(void)
{
	return sw.said;
}

void kvt_floor_reset(void)
{
	held = 0;
	said = 0;
	memset(&sw, 0, sizeof sw);
}
