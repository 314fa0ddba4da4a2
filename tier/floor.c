// SPDX-License-Identifier: MIT
/* The floor's notice (contract in floor.h). */
#include <stdio.h>

#include "floor.h"
#include "../base/kvt.h"
#include "../profiler/evclass.h"
#include "../profiler/trace.h"

static uint32_t held;       /* epochs in a row the condition held */
static int said;

void kvt_floor_epoch(uint64_t budget)
{
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

void kvt_floor_reset(void)
{
	held = 0;
	said = 0;
}
