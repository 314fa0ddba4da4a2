// SPDX-License-Identifier: MIT
/* The decision engine: per-kind ordinals, the KV classifier, the rules and
 * the CXL limit, combined into one decision per allocation plus verdicts on
 * earlier provisional placements. Runs inside allocation hooks under the
 * caller's lock: no malloc, no syscalls, fixed-size state only. */
#include <errno.h>
#include <string.h>

#include "kvtier/policy.h"

static const struct kvt_policy_action managed_hbm = {
	.type = KVT_ACT_MANAGED, .tier = KVT_TIER_HBM, .node = -1,
};
static const struct kvt_policy_action native = {
	.type = KVT_ACT_NATIVE, .tier = KVT_TIER_NONE, .node = -1,
};

void kvt_policy_engine_init(struct kvt_policy_engine *e,
			    const struct kvt_policy *pol,
			    const struct kvt_policy_cls_config *cls_cfg,
			    uint64_t hbm_budget, uint64_t cxl_limit,
			    uint64_t reserve)
{
	memset(e, 0, sizeof *e);
	e->pol = pol;
	kvt_policy_cls_init(&e->cls, cls_cfg);
	kvt_policy_budget_init(&e->budget, hbm_budget, cxl_limit, reserve);
}

static void add_res(struct kvt_policy_resolutions *res,
		    const struct kvt_policy_resolution *r)
{
	if (res && res->nr < KVT_POLICY_MAX_RESOLVE)
		res->r[res->nr++] = *r;
}

static int pending_find(const struct kvt_policy_engine *e, uint64_t id)
{
	for (unsigned i = 0; i < e->nr_pending; i++)
		if (e->pending[i].id == id)
			return (int)i;
	return -1;
}

static void pending_drop(struct kvt_policy_engine *e, unsigned i)
{
	e->pending[i] = e->pending[--e->nr_pending];
}

/* Where a provisional (managed:hbm) allocation ends up under `rule`:
 * a managed action re-homes it; anything else leaves it in managed:hbm. */
static struct kvt_policy_action final_action(const struct kvt_policy_engine *e,
					     int rule)
{
	if (rule >= 0 && e->pol->rule[rule].action.type == KVT_ACT_MANAGED)
		return e->pol->rule[rule].action;
	return managed_hbm;
}

/* Turn classifier verdicts into resolutions the interposer acts on. */
static void resolve(struct kvt_policy_engine *e,
		    const struct kvt_policy_cls_verdicts *v,
		    struct kvt_policy_resolutions *res)
{
	for (unsigned k = 0; k < v->nr; k++) {
		struct kvt_policy_resolution r = {
			.id = v->v[k].id, .verdict = v->v[k].verdict,
			.rule = -1, .action = native,
		};
		if (r.verdict == KVT_VERDICT_LATE) {
			r.reason = KVT_REASON_LATE_KV;
			add_res(res, &r);
			continue;
		}
		int i = pending_find(e, r.id);
		if (i < 0)
			continue;   /* the rules did not depend on it: nothing to do */
		const struct kvt_policy_pending *p = &e->pending[i];
		bool kv = r.verdict == KVT_VERDICT_CONFIRMED;
		r.rule = kv ? p->rule_kv : p->rule_other;
		r.reason = kv ? KVT_REASON_CONFIRMED : KVT_REASON_REFUTED;
		r.action = final_action(e, r.rule);
		uint64_t far = kvt_policy_budget_far_bytes(&r.action, p->size);
		if (far && kvt_policy_budget_charge(&e->budget, far)) {
			r.action = managed_hbm;
			r.reason = KVT_REASON_CXL_LIMIT;
			far = 0;
		}
		r.far_bytes = far;
		pending_drop(e, (unsigned)i);
		add_res(res, &r);
	}
}

static int match(const struct kvt_policy_engine *e,
		 const struct kvt_policy_alloc_event *a, bool kv)
{
	struct kvt_policy_query q = {
		.kind = a->kind, .kv = kv, .size = a->size,
		.nth = e->nth[a->kind], .after = e->after[a->kind],
		.site = a->site, .site_ctx = a->site_ctx,
	};
	return kvt_policy_match(e->pol, &q);
}

static void set_rule(const struct kvt_policy_engine *e,
		     struct kvt_policy_decision *d, int rule)
{
	d->rule = (int16_t)rule;
	if (rule < 0) {
		d->reason = KVT_REASON_NO_RULE;
		d->action = native;
		return;
	}
	d->reason = KVT_REASON_RULE;
	d->action = e->pol->rule[rule].action;
	if (d->action.type == KVT_ACT_TRACE) {
		d->action = native;
		d->flags |= KVT_DEC_TRACE;
	}
}

/* A MAYBE allocation whose rule depends on the verdict: place it
 * provisionally in managed:hbm when some outcome wants managed memory. */
/* Two matched rules (or none, -1) that would do the same thing: then
 * whether the allocation is KV does not matter and nothing is provisional. */
static bool same_action(const struct kvt_policy_engine *e, int r1, int r2)
{
	if (r1 < 0 || r2 < 0)
		return r1 == r2;
	const struct kvt_policy_action *a = &e->pol->rule[r1].action, *b = &e->pol->rule[r2].action;
	return a->type == b->type && a->tier == b->tier && a->node == b->node &&
	       a->w_dram == b->w_dram && a->w_cxl == b->w_cxl;
}

static bool try_provisional(struct kvt_policy_engine *e,
			    const struct kvt_policy_alloc_event *a,
			    struct kvt_policy_decision *d, int r_kv, int r_other)
{
	bool managed_kv = r_kv >= 0 &&
		e->pol->rule[r_kv].action.type == KVT_ACT_MANAGED;
	bool managed_other = r_other >= 0 &&
		e->pol->rule[r_other].action.type == KVT_ACT_MANAGED;
	if (!(managed_kv || managed_other) || e->nr_pending >= KVT_POLICY_MAX_PENDING)
		return false;
	e->pending[e->nr_pending++] = (struct kvt_policy_pending){
		.id = a->id, .size = a->size, .kind = a->kind,
		.rule_kv = (int16_t)r_kv, .rule_other = (int16_t)r_other,
	};
	d->action = managed_hbm;
	d->rule = (int16_t)r_kv;
	d->reason = KVT_REASON_PROVISIONAL;
	d->flags |= KVT_DEC_PROVISIONAL;
	return true;
}

void kvt_policy_on_alloc(struct kvt_policy_engine *e,
			 const struct kvt_policy_alloc_event *a,
			 struct kvt_policy_decision *d,
			 struct kvt_policy_resolutions *res)
{
	struct kvt_policy_cls_verdicts v = { 0 };
	if (res)
		res->nr = 0;
	memset(d, 0, sizeof *d);
	d->rule = -1;
	d->action = native;
	d->reason = KVT_REASON_NO_RULE;
	if (a->kind <= KVT_KIND_NONE || a->kind >= KVT_KIND__COUNT)
		return;
	e->nth[a->kind]++;
	if (e->meminfo_seen)
		e->after[a->kind]++;

	int kv = kvt_policy_cls_alloc(&e->cls, a->kind, a->size, a->t_ns, a->id, &v);
	resolve(e, &v, res);
	if (kv != KVT_KV_NO && e->meminfo_seen)
		kvt_policy_budget_kv_start(&e->budget, e->last_free_bytes);

	if (kv == KVT_KV_YES) {
		d->flags |= KVT_DEC_KV;
		set_rule(e, d, match(e, a, true));
	} else if (kv == KVT_KV_MAYBE) {
		d->flags |= KVT_DEC_MAYBE;
		int r_kv = e->pol->has_kv ? match(e, a, true) : match(e, a, false);
		int r_other = e->pol->has_kv ? match(e, a, false) : r_kv;
		if (same_action(e, r_kv, r_other) || !try_provisional(e, a, d, r_kv, r_other))
			set_rule(e, d, r_other);
		if (d->flags & KVT_DEC_PROVISIONAL)
			return;
	} else {
		set_rule(e, d, match(e, a, false));
	}
	uint64_t far = kvt_policy_budget_far_bytes(&d->action, a->size);
	if (far && kvt_policy_budget_charge(&e->budget, far)) {
		d->action = native;
		d->reason = KVT_REASON_CXL_LIMIT;
		far = 0;
	}
	d->far_bytes = far;
}

void kvt_policy_on_free(struct kvt_policy_engine *e, uint64_t id,
			uint64_t far_bytes, uint64_t t_ns,
			struct kvt_policy_resolutions *res)
{
	struct kvt_policy_cls_verdicts v = { 0 };
	if (res)
		res->nr = 0;
	kvt_policy_budget_release(&e->budget, far_bytes);
	kvt_policy_cls_free(&e->cls, id, t_ns, &v);
	resolve(e, &v, res);
	int i = pending_find(e, id);
	if (i >= 0)
		pending_drop(e, (unsigned)i);
}

void kvt_policy_on_memset(struct kvt_policy_engine *e, uint64_t id,
			  uint64_t offset, uint64_t bytes, int value,
			  uint64_t t_ns, struct kvt_policy_resolutions *res)
{
	struct kvt_policy_cls_verdicts v = { 0 };
	if (res)
		res->nr = 0;
	kvt_policy_cls_memset(&e->cls, id, offset, bytes, value, t_ns, &v);
	resolve(e, &v, res);
}

void kvt_policy_on_meminfo(struct kvt_policy_engine *e, uint64_t free_bytes,
			   uint64_t total_bytes, uint64_t t_ns,
			   struct kvt_policy_resolutions *res)
{
	struct kvt_policy_cls_verdicts v = { 0 };
	if (res)
		res->nr = 0;
	e->meminfo_seen = true;
	e->last_free_bytes = free_bytes;
	for (unsigned k = 0; k < KVT_KIND__COUNT; k++)
		e->after[k] = 0;
	kvt_policy_cls_meminfo(&e->cls, free_bytes, total_bytes, t_ns, &v);
	resolve(e, &v, res);
}

const char *kvt_policy_reason_name(unsigned reason)
{
	static const char *const names[] = {
		[KVT_REASON_RULE] = "rule",
		[KVT_REASON_NO_RULE] = "no-rule",
		[KVT_REASON_PROVISIONAL] = "provisional",
		[KVT_REASON_CXL_LIMIT] = "cxl-limit",
		[KVT_REASON_CONFIRMED] = "confirmed",
		[KVT_REASON_REFUTED] = "refuted",
		[KVT_REASON_LATE_KV] = "late-kv",
	};
	return reason < sizeof names / sizeof names[0] && names[reason]
	       ? names[reason] : "?";
}
