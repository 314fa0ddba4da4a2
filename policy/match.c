// SPDX-License-Identifier: MIT
/* Rule matching for KVTIER_POLICY: first match wins. Runs inside allocation
 * hooks: no malloc, no syscalls, no stdio; the call site is fetched through
 * the caller's callback only when a site~ rule is reached. */
#include <string.h>

#include "kvtier/policy.h"

bool kvt_policy_glob(const char *pat, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;
	while (*s) {
		if (*pat == '*') {
			star_p = ++pat;
			star_s = s;
			continue;
		}
		if (*pat == '[') {
			const char *q = pat + 1;
			bool neg = (*q == '!' || *q == '^');
			bool hit = false;
			if (neg)
				q++;
			for (const char *first = q; *q && (*q != ']' || q == first); q++) {
				if (q[1] == '-' && q[2] && q[2] != ']') {
					if ((unsigned char)*s >= (unsigned char)q[0] &&
					    (unsigned char)*s <= (unsigned char)q[2])
						hit = true;
					q += 2;
				} else if (*q == *s) {
					hit = true;
				}
			}
			if (*q == ']' && hit != neg) {
				pat = q + 1;
				s++;
				continue;
			}
			/* unterminated '[' falls through to a literal compare */
			if (*q != ']' && *pat == *s) {
				pat++;
				s++;
				continue;
			}
		} else if (*pat == '?' || *pat == *s) {
			pat++;
			s++;
			continue;
		}
		if (!star_p)
			return false;
		pat = star_p;
		s = ++star_s;
	}
	while (*pat == '*')
		pat++;
	return *pat == 0;
}

static bool cmp_ok(uint8_t cmp, uint64_t a, uint64_t b)
{
	switch (cmp) {
	case KVT_CMP_LT: return a < b;
	case KVT_CMP_LE: return a <= b;
	case KVT_CMP_GT: return a > b;
	case KVT_CMP_GE: return a >= b;
	case KVT_CMP_EQ: return a == b;
	case KVT_CMP_NE: return a != b;
	default:         return false;
	}
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

static bool site_ok(const char *glob, const struct kvt_policy_query *q)
{
	if (!q->site)
		return false;
	for (unsigned i = 0; i < KVT_POLICY_MAX_FRAMES; i++) {
		const char *sym = NULL, *mod = NULL;
		if (q->site(q->site_ctx, i, &sym, &mod) != 0)
			return false;
		if (sym && kvt_policy_glob(glob, sym))
			return true;
		if (mod && kvt_policy_glob(glob, base_name(mod)))
			return true;
	}
	return false;
}

static bool rule_ok(const struct kvt_policy_rule *r,
		    const struct kvt_policy_query *q)
{
	unsigned kbit = 1u << q->kind;
	if (r->kinds && !(r->kinds & kbit))
		return false;
	if (!(kvt_policy_action_kinds(&r->action) & kbit))
		return false;   /* implicit: the action cannot serve this kind */
	if (r->kv == KVT_RULE_KV_YES && !q->kv)
		return false;
	if (r->kv == KVT_RULE_KV_NO && q->kv)
		return false;
	for (unsigned i = 0; i < r->nr_conds; i++) {
		const struct kvt_policy_cond *c = &r->cond[i];
		uint64_t v = c->field == KVT_FIELD_SIZE ? q->size :
			     c->field == KVT_FIELD_NTH ? q->nth : q->after;
		if (c->field == KVT_FIELD_AFTER && q->after == 0)
			return false;   /* no meminfo yet: after-rules wait */
		if (!cmp_ok(c->cmp, v, c->value))
			return false;
	}
	if (r->site[0] && !site_ok(r->site, q))
		return false;
	return true;
}

int kvt_policy_match(const struct kvt_policy *p, const struct kvt_policy_query *q)
{
	if (q->kind <= KVT_KIND_NONE || q->kind >= KVT_KIND__COUNT)
		return -1;
	for (unsigned i = 0; i < p->nr_rules; i++)
		if (rule_ok(&p->rule[i], q))
			return (int)i;
	return -1;
}

enum kvt_placement kvt_policy_action_placement(const struct kvt_policy_action *a)
{
	switch (a->type) {
	case KVT_ACT_MANAGED:
		return a->tier == KVT_TIER_HBM ? KVT_PLACE_MANAGED_HBM
					       : KVT_PLACE_MANAGED_FAR;
	case KVT_ACT_PINNED:     return KVT_PLACE_PINNED_FAR;
	case KVT_ACT_BIND:       return KVT_PLACE_BIND_FAR;
	case KVT_ACT_INTERLEAVE: return KVT_PLACE_INTERLEAVE;
	default:                 return KVT_PLACE_NATIVE;
	}
}

bool kvt_policy_action_is_far(const struct kvt_policy_action *a)
{
	return a->type >= KVT_ACT_MANAGED &&
	       (a->tier == KVT_TIER_CXL || a->tier == KVT_TIER_NODE);
}
