// SPDX-License-Identifier: MIT
/* Recording glue between hooks and the registry/trace (see record.h).
 * Runs inside hooks: no malloc, no stdio, no locks of its own. */
#include <string.h>

#include <cuda.h>

#include "../base/kvt.h"
#include "record.h"
#include "../place/place.h"
#include "../place/stats.h"
#include "../profiler/trace.h"

struct kvt_registry *kvt_mem_reg;
struct kvt_registry *kvt_vmm_reg;
struct kvt_registry *kvt_host_reg;

/* The call site's stack id. Anonymous maps get native frames only: CPython
 * maps its own object arenas with the GIL held, and reading Python frames
 * there (which may allocate Python objects) would re-enter its allocator. */
static uint32_t callsite(uint8_t kind)
{
	return kind == KVT_KIND_MMAP ? kvt_trace_callsite() : kvt_trace_callsite_python();
}

void kvt_rec_alloc_placed(struct kvt_registry *reg, uint8_t kind, uint16_t api,
			  int ok, uint64_t addr, uint64_t size, uint64_t aux,
			  int32_t result, const struct kvt_place *pl)
{
	uint16_t who = kvt_attribute_api(api);
	uint32_t stack = kvt_trace_active() ? callsite(kind) : 0;
	uint8_t placement = ok && pl ? pl->placement : KVT_PLACE_NATIVE;
	int32_t node = placement != KVT_PLACE_NATIVE ? pl->node : -1;
	if (ok) {
		struct kvt_alloc a = {
			.base = addr, .size = size, .t_ns = kvt_coarse_ns(), .aux = aux,
			.tid = (uint32_t)kvt_gettid(), .stack_id = stack, .api = who,
			.kind = kind, .placement = placement, .node = node,
			.policy_id = pl ? pl->policy_id : 0, .far_bytes = pl ? pl->far_bytes : 0,
		};
		if (kvt_reg_insert(reg, &a) < 0)
			kvt_warn_once("registry out of memory; some allocations go untracked");
		kvt_stats_on_alloc(kind, placement, size);
	}
	if (kvt_trace_active()) {
		struct kvt_rec_event ev = {
			.op = KVT_OP_ALLOC, .api = who, .addr = ok ? addr : 0, .size = size,
			.aux = aux, .stack_id = stack, .result = result, .kind = kind,
			.placement = placement, .aux2 = (uint64_t)(int64_t)node,
		};
		kvt_trace_event(&ev);
	}
}

void kvt_rec_alloc(struct kvt_registry *reg, uint8_t kind, uint16_t api,
		   int ok, uint64_t addr, uint64_t size, uint64_t aux, int32_t result)
{
	kvt_rec_alloc_placed(reg, kind, api, ok, addr, size, aux, result, NULL);
}

int kvt_rec_free_begin(struct kvt_registry *reg, uint64_t addr, struct kvt_alloc *out)
{
	if (!addr)
		return -1;
	int r = kvt_reg_remove(reg, addr, out);
	if (!r)
		kvt_place_before_free(out);
	return r;
}

void kvt_rec_free_end(struct kvt_registry *reg, uint8_t kind, uint16_t api,
		      int tracked, const struct kvt_alloc *rec, uint64_t addr,
		      int ok, int32_t result)
{
	uint16_t who = kvt_attribute_api(api);
	if (tracked && !ok) {
		kvt_reg_insert(reg, rec);      /* the release failed: still live */
		kvt_place_free_failed(rec);
	}
	if (tracked && ok) {
		kvt_stats_on_free(rec->kind, rec->placement, rec->size);
		kvt_place_on_free(rec);
	}
	if (kvt_trace_active()) {
		struct kvt_rec_event ev = {
			.op = KVT_OP_FREE, .api = who, .addr = addr,
			.size = tracked ? rec->size : 0, .result = result,
			.kind = tracked ? rec->kind : kind,
			.placement = tracked ? rec->placement : KVT_PLACE_NATIVE,
		};
		kvt_trace_event(&ev);
	}
}

/* ---- device memory (the launch scan's device test) ---- */

/* Native device allocations and stream-ordered ones (whose pool kvtier does
 * not record: a host-NUMA pool's memory counts as device too), and VMM
 * mappings unless their handle is known to live on a host node (a handle
 * released while mapped is no longer known). Redirected allocations are
 * managed memory, which host code may read. */
int kvt_rec_device_memory(uint64_t addr)
{
	struct kvt_alloc a, h;
	if (!kvt_mem_reg || kvt_reg_find(kvt_mem_reg, addr, &a))
		return 0;
	switch (a.kind) {
	case KVT_KIND_DEVICE:
	case KVT_KIND_ASYNC:
		return a.placement == KVT_PLACE_NATIVE;
	case KVT_KIND_VMM:
		return kvt_reg_lookup(kvt_vmm_reg, a.aux, &h) ||
		       (h.aux >> 32) != (uint64_t)CU_MEM_LOCATION_TYPE_HOST_NUMA;
	default:
		return 0;
	}
}
