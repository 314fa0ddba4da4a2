// SPDX-License-Identifier: MIT
/* The online KV-cache classifier: recognises KV-cache allocations from the
 * event stream alone (design.md §4), before each pointer is returned.
 * Pure and fixed-size: one open burst, a few pending ids; no malloc, no
 * syscalls. Verdicts on earlier (provisional) allocations go to `out`.
 *
 * The model, strongest signal first:
 *   arming   a meminfo query after large allocations exist (the weights are
 *            in) arms the classifier for the next arm_bursts bursts, or
 *            until one of them is confirmed.
 *   size     "large" scales with the device: total/min_total_div from the
 *            last meminfo that reported a total, never under
 *            min_floor_bytes and never over min_bytes (min_bytes alone
 *            until a total is known). Smaller allocations are ignored.
 *   burst    identical sizes of one kind back to back (allocations under
 *            the large size, or while armed under free/maybe_free_div, are
 *            ignored; a gap over burst_gap_ns ends it, counted from the
 *            last member's birth or from the end of a memset of all of
 *            it: a synchronous zero-fill of a big member, slow where it
 *            faults memory in, is the program still making its KV cache).
 *   armed burst: KV at birth when one allocation takes pool_share_pct of
 *            the free memory; else its first members are MAYBE and the burst
 *            is confirmed by burst_confirm members, or by a full zero-fill
 *            with >= 2 members or >= fill_share_pct of free memory; it is
 *            refuted when it ends unconfirmed or a member is freed.
 *   unarmed: never KV at birth; a large allocation among the first
 *            early_large, >= total/late_total_div, zero-filled in full before
 *            the next large allocation is reported LATE (llama.cpp's shape). */
#include <string.h>

#include "kvtier/policy.h"

#define KV_KINDS ((1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) | \
		  (1u << KVT_KIND_MANAGED))

void kvt_policy_cls_config_default(struct kvt_policy_cls_config *c)
{
	*c = (struct kvt_policy_cls_config){
		.min_bytes = 32ull << 20,
		.min_total_div = 256,
		.min_floor_bytes = 4ull << 20,
		.burst_gap_ns = 5000000000ull,
		.burst_confirm = 3,
		.arm_bursts = 3,
		.maybe_free_div = 512,
		.pool_share_pct = 40,
		.fill_share_pct = 10,
		.early_large = 8,
		.late_total_div = 64,
	};
}

void kvt_policy_cls_init(struct kvt_policy_cls *c,
			 const struct kvt_policy_cls_config *cfg)
{
	memset(c, 0, sizeof *c);
	if (cfg)
		c->cfg = *cfg;
	else
		kvt_policy_cls_config_default(&c->cfg);
	if (c->cfg.burst_confirm < 2)
		c->cfg.burst_confirm = 2;
	if (c->cfg.burst_confirm > KVT_POLICY_MAX_PENDING)
		c->cfg.burst_confirm = KVT_POLICY_MAX_PENDING;
	if (!c->cfg.late_total_div)
		c->cfg.late_total_div = 1;
	c->large_bytes = c->cfg.min_bytes;
}

/* The size from which an allocation is "large" on a device of total bytes:
 * total/min_total_div within [min_floor_bytes, min_bytes]. Real servers
 * (8 GiB and more with the defaults) get min_bytes itself. */
static uint64_t large_for_total(const struct kvt_policy_cls_config *cfg,
				uint64_t total)
{
	uint64_t cap = cfg->min_bytes, v;
	if (!total || !cfg->min_total_div)
		return cap;
	v = total / cfg->min_total_div;
	if (v < cfg->min_floor_bytes)
		v = cfg->min_floor_bytes;
	return v < cap ? v : cap;
}

static void emit(struct kvt_policy_cls_verdicts *out, uint64_t id, uint8_t v)
{
	if (out && out->nr < KVT_POLICY_MAX_RESOLVE) {
		out->v[out->nr].id = id;
		out->v[out->nr].verdict = v;
		out->nr++;
	}
}

/* Verdict on every pending member; the burst stays open only if confirmed. */
static void settle(struct kvt_policy_cls *c, uint8_t verdict,
		   struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	for (unsigned i = 0; i < b->nr_pending; i++)
		emit(out, b->pending[i].id, verdict);
	b->nr_pending = 0;
	if (verdict == KVT_VERDICT_CONFIRMED) {
		b->confirmed = true;
		c->arm_left = 0;
	}
	else
		b->open = false;
}

/* share% of free memory (at arming) reached by bytes? */
static bool share_of_free(const struct kvt_policy_cls *c, uint64_t bytes,
			  unsigned pct)
{
	if (!c->free_at_arm)
		return false;
	return (unsigned __int128)bytes * 100 >=
	       (unsigned __int128)c->free_at_arm * pct;
}

static bool any_zeroed(const struct kvt_policy_cls_burst *b)
{
	for (unsigned i = 0; i < b->nr_pending; i++)
		if (b->pending[i].zeroed)
			return true;
	return false;
}

/* Confirmation test for an armed, unconfirmed burst. */
static bool armed_confirms(const struct kvt_policy_cls *c)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	if (b->nr >= c->cfg.burst_confirm)
		return true;
	if (any_zeroed(b) &&
	    (b->nr >= 2 || share_of_free(c, b->size * b->nr, c->cfg.fill_share_pct)))
		return true;
	return false;
}

static int start_burst(struct kvt_policy_cls *c, uint8_t kind, uint64_t size,
		       uint64_t t_ns, uint64_t id)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	memset(b, 0, sizeof *b);
	b->open = true;
	b->kind = kind;
	b->size = size;
	b->nr = 1;
	b->last_t_ns = t_ns;
	b->last_id = id;
	b->armed = c->arm_left > 0;
	if (b->armed)
		c->arm_left--;
	if (b->armed) {
		if (share_of_free(c, size, c->cfg.pool_share_pct)) {
			b->confirmed = true;
			c->arm_left = 0;
			return KVT_KV_YES;
		}
		b->pending[0] = (struct kvt_policy_cls_member){ .id = id, .size = size };
		b->nr_pending = 1;
		return KVT_KV_MAYBE;
	}
	if (c->nr_large < c->cfg.early_large &&
	    (!c->total_bytes || size >= c->total_bytes / c->cfg.late_total_div)) {
		c->late_open = true;
		c->late_id = id;
		c->late_size = size;
	}
	return KVT_KV_NO;
}

/* Smaller allocations are ignored (they neither join nor end a burst).
 * While armed, a KV member is at least free/maybe_free_div: even 2L
 * per-layer buffers of a 128-layer model share out the free memory. */
static uint64_t size_floor(const struct kvt_policy_cls *c)
{
	const struct kvt_policy_cls_burst *b = &c->burst;
	uint64_t floor = c->large_bytes;
	bool armed = c->arm_left || (b->open && b->armed && !b->confirmed);
	if (armed && c->cfg.maybe_free_div &&
	    c->free_at_arm / c->cfg.maybe_free_div > floor)
		floor = c->free_at_arm / c->cfg.maybe_free_div;
	return floor;
}

int kvt_policy_cls_alloc(struct kvt_policy_cls *c, uint8_t kind, uint64_t size,
			 uint64_t t_ns, uint64_t id,
			 struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	int kv;
	if (kind >= KVT_KIND__COUNT || !(KV_KINDS & (1u << kind)) ||
	    size < size_floor(c))
		return KVT_KV_NO;
	c->late_open = false;   /* the zero-fill window closes */
	if (b->open && b->kind == kind && b->size == size &&
	    t_ns - b->last_t_ns <= c->cfg.burst_gap_ns) {
		b->nr++;
		b->last_t_ns = t_ns;
		b->last_id = id;
		if (b->confirmed) {
			kv = KVT_KV_YES;
		} else if (!b->armed) {
			kv = KVT_KV_NO;
		} else if (armed_confirms(c)) {
			settle(c, KVT_VERDICT_CONFIRMED, out);
			kv = KVT_KV_YES;
		} else if (b->nr_pending < KVT_POLICY_MAX_PENDING) {
			b->pending[b->nr_pending++] =
				(struct kvt_policy_cls_member){ .id = id, .size = size };
			kv = KVT_KV_MAYBE;
		} else {
			kv = KVT_KV_NO;
		}
	} else {
		if (b->open && !b->confirmed && b->nr_pending)
			settle(c, KVT_VERDICT_REFUTED, out);
		kv = start_burst(c, kind, size, t_ns, id);
	}
	c->nr_large++;
	return kv;
}

static int pending_index(const struct kvt_policy_cls_burst *b, uint64_t id)
{
	if (!b->open)
		return -1;
	for (unsigned i = 0; i < b->nr_pending; i++)
		if (b->pending[i].id == id)
			return (int)i;
	return -1;
}

void kvt_policy_cls_free(struct kvt_policy_cls *c, uint64_t id, uint64_t t_ns,
			 struct kvt_policy_cls_verdicts *out)
{
	(void)t_ns;
	if (pending_index(&c->burst, id) >= 0)
		settle(c, KVT_VERDICT_REFUTED, out);   /* KV is never freed early */
	if (c->late_open && c->late_id == id)
		c->late_open = false;
}

void kvt_policy_cls_memset(struct kvt_policy_cls *c, uint64_t id,
			   uint64_t offset, uint64_t bytes, int value,
			   uint64_t t_ns, struct kvt_policy_cls_verdicts *out)
{
	struct kvt_policy_cls_burst *b = &c->burst;
	if (b->open && b->last_id == id && offset == 0 && bytes >= b->size &&
	    (int64_t)(t_ns - b->last_t_ns) > 0)
		b->last_t_ns = t_ns;        /* a fill of the whole member: the gap restarts */
	if (value != 0 || offset != 0)
		return;
	int i = pending_index(b, id);
	if (i >= 0 && bytes >= b->pending[i].size) {
		b->pending[i].zeroed = true;
		if (armed_confirms(c))
			settle(c, KVT_VERDICT_CONFIRMED, out);
	}
	if (c->late_open && c->late_id == id && bytes >= c->late_size) {
		c->late_open = false;
		emit(out, id, KVT_VERDICT_LATE);
	}
}

void kvt_policy_cls_meminfo(struct kvt_policy_cls *c, uint64_t free_bytes,
			    uint64_t total_bytes, uint64_t t_ns,
			    struct kvt_policy_cls_verdicts *out)
{
	(void)t_ns;
	(void)out;
	if (total_bytes) {
		c->total_bytes = total_bytes;
		c->large_bytes = large_for_total(&c->cfg, total_bytes);
	}
	if (c->nr_large > 0) {
		c->arm_left = c->cfg.arm_bursts;
		c->free_at_arm = free_bytes;
	}
}
