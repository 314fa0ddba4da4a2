// SPDX-License-Identifier: MIT
/* Dead KV dropped (contract in discard.h). */
#include <stdio.h>
#include <string.h>

#include "discard.h"
#include "../base/kvt.h"
#include "../cuda_shim/shim.h"
#include "../profiler/decode.h"
#include "../profiler/trace.h"

#define DISCARD_BATCH 1024          /* ranges a driver call */

static struct kvt_discard_info dc;  /* atomic */
static int dc_stopped;              /* atomic: a call failed */

#define DC_ADD(f, v) __atomic_fetch_add(&dc.f, (v), __ATOMIC_RELAXED)

void kvt_discard_step(uint64_t stream)
{
	const uint64_t *addr, *bytes;
	uint32_t n = kvt_decode_take_dead(&addr, &bytes);
	if (!n)
		return;
	CUstream s = (CUstream)(uintptr_t)stream;
	if (!kvt_opt.discard || __atomic_load_n(&dc_stopped, __ATOMIC_RELAXED) ||
	    !kvt_cuda_can_discard() || kvt_cuda_stream_capturing(s)) {
		DC_ADD(skipped, n);
		return;
	}
	for (uint32_t i = 0; i < n; i += DISCARD_BATCH) {
		uint32_t k = n - i < DISCARD_BATCH ? n - i : DISCARD_BATCH;
		CUresult r = kvt_cuda_discard(addr + i, bytes + i, k, s);
		if (r != CUDA_SUCCESS) {
			DC_ADD(failed, 1);
			DC_ADD(skipped, n - i);
			if (!__atomic_exchange_n(&dc_stopped, 1, __ATOMIC_RELAXED))
				kvt_warn_once("cuMemDiscardBatchAsync of %u dead KV ranges failed with "
					      "CUresult %d: kvtier stops dropping dead blocks (they are "
					      "moved as before)", k, (int)r);
			return;
		}
		uint64_t b = 0;
		for (uint32_t j = 0; j < k; j++)
			b += bytes[i + j];
		DC_ADD(calls, 1);
		DC_ADD(ranges, k);
		DC_ADD(bytes, b);
	}
}

void kvt_discard_info(struct kvt_discard_info *out)
{
	out->calls = __atomic_load_n(&dc.calls, __ATOMIC_RELAXED);
	out->ranges = __atomic_load_n(&dc.ranges, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&dc.bytes, __ATOMIC_RELAXED);
	out->skipped = __atomic_load_n(&dc.skipped, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&dc.failed, __ATOMIC_RELAXED);
}

void kvt_discard_trace_counters(void)
{
	struct kvt_discard_info i;
	kvt_discard_info(&i);
	char val[256];
	snprintf(val, sizeof val, "calls=%llu ranges=%llu bytes=%llu skipped=%llu failed=%llu%s",
		 (unsigned long long)i.calls, (unsigned long long)i.ranges,
		 (unsigned long long)i.bytes, (unsigned long long)i.skipped,
		 (unsigned long long)i.failed,
		 __atomic_load_n(&dc_stopped, __ATOMIC_RELAXED) ? " stopped" : "");
	kvt_trace_info("migrate.discard", val);
}

void kvt_discard_reset(void)
{
	memset(&dc, 0, sizeof dc);
	dc_stopped = 0;
}
