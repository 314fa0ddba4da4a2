// SPDX-License-Identifier: MIT
/* Budget arithmetic for KVTIER_HBM_BUDGET, KVTIER_CXL_LIMIT and
 * KVTIER_RESERVE. Pure integer arithmetic on numbers the caller passes in
 * (the options table reads the environment; the engine feeds meminfo). */
#include <errno.h>

#include "kvtier/policy.h"

void kvt_policy_budget_init(struct kvt_policy_budget *b, uint64_t hbm_budget,
			    uint64_t cxl_limit, uint64_t reserve)
{
	*b = (struct kvt_policy_budget){
		.hbm_budget_bytes = hbm_budget,
		.cxl_limit_bytes = cxl_limit,
		.reserve_bytes = reserve,
		.hbm_explicit = hbm_budget != 0,
	};
}

uint64_t kvt_policy_budget_default_hbm(uint64_t free_bytes, uint64_t reserve)
{
	return free_bytes > reserve ? free_bytes - reserve : 0;
}

void kvt_policy_budget_kv_start(struct kvt_policy_budget *b, uint64_t free_bytes)
{
	if (!b->kv_start_free_bytes)
		b->kv_start_free_bytes = free_bytes;
	if (b->hbm_explicit || b->hbm_derived)
		return;
	b->hbm_budget_bytes = kvt_policy_budget_default_hbm(free_bytes,
							    b->reserve_bytes);
	b->hbm_derived = true;
}

uint64_t kvt_policy_budget_far_bytes(const struct kvt_policy_action *a,
				     uint64_t bytes)
{
	if (!kvt_policy_action_is_far(a))
		return 0;
	if (a->type != KVT_ACT_INTERLEAVE)
		return bytes;
	uint64_t w = (uint64_t)a->w_dram + a->w_cxl;
	if (!w || !a->w_cxl)
		return 0;
	/* ceil(bytes * w_cxl / w) without overflow: weights are <= 1000. */
	uint64_t q = bytes / w, r = bytes % w;
	return q * a->w_cxl + (r * a->w_cxl + w - 1) / w;
}

int kvt_policy_budget_charge(struct kvt_policy_budget *b, uint64_t far_bytes)
{
	if (b->cxl_limit_bytes &&
	    (far_bytes > b->cxl_limit_bytes ||
	     b->cxl_used_bytes > b->cxl_limit_bytes - far_bytes))
		return -ENOSPC;
	b->cxl_used_bytes += far_bytes;
	return 0;
}

void kvt_policy_budget_release(struct kvt_policy_budget *b, uint64_t far_bytes)
{
	b->cxl_used_bytes = far_bytes > b->cxl_used_bytes ? 0
			    : b->cxl_used_bytes - far_bytes;
}

static uint64_t scale_bp(uint64_t v, unsigned bp)
{
	if (bp > 10000)
		bp = 10000;
	return (v / 10000) * bp + (v % 10000) * bp / 10000;
}

void kvt_policy_budget_watermarks(const struct kvt_policy_budget *b,
				  unsigned high_bp, unsigned low_bp,
				  uint64_t *high, uint64_t *low)
{
	if (low_bp > high_bp)
		low_bp = high_bp;
	*high = scale_bp(b->hbm_budget_bytes, high_bp);
	*low = scale_bp(b->hbm_budget_bytes, low_bp);
}
