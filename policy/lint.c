// SPDX-License-Identifier: MIT
/* Lint for parsed KVTIER_POLICY rules (`kvtier policy check`): rules that
 * are valid but can never be the first match of any allocation, and site
 * globs that are malformed or can never match. Pure: no malloc, no I/O;
 * whether a NUMA node exists is the caller's question (tools/cmd_policy.c).
 *
 * Shadowing is decided exactly over the query space the engine produces:
 * a query is (kind, kv, size, nth, after, call site), kv can be 1 only for
 * the kinds the classifier looks at (device, async, managed), nth counts
 * from 1, and a rule with an after comparison needs after >= 1. A rule is
 * a product of independent factors (kind x kv cells, one set of values per
 * comparison field, the site), so rule B implies rule A exactly when B is
 * satisfiable and each factor of B lies inside A's. B is reported as
 * shadowed when every (kind, kv) cell it accepts is accepted by some
 * earlier rule whose comparisons and site cover B's. */
#include <stdio.h>
#include <string.h>

#include "kvtier/policy.h"

/* The kinds the classifier can call KV (policy/classify.c): kv is 0 for
 * every other kind. */
#define LINT_KV_KINDS ((1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) | \
		       (1u << KVT_KIND_MANAGED))

/* ---- sets of uint64 values: sorted, disjoint closed intervals ---- */

/* Each comparison splits at most one interval in two (!=): a rule's at
 * most KVT_POLICY_MAX_CONDS comparisons give at most 1 + 4 intervals. */
struct ivset {
	unsigned n;
	struct { uint64_t lo, hi; } v[KVT_POLICY_MAX_CONDS + 2];
};

static void set_from(struct ivset *s, uint64_t lo, uint64_t hi)
{
	s->n = lo <= hi;
	s->v[0].lo = lo;
	s->v[0].hi = hi;
}

/* The values one comparison admits. */
static void cond_set(const struct kvt_policy_cond *c, struct ivset *s)
{
	uint64_t v = c->value;
	s->n = 0;
	switch (c->cmp) {
	case KVT_CMP_LT: if (v) set_from(s, 0, v - 1); break;
	case KVT_CMP_LE: set_from(s, 0, v); break;
	case KVT_CMP_GT: if (v != UINT64_MAX) set_from(s, v + 1, UINT64_MAX); break;
	case KVT_CMP_GE: set_from(s, v, UINT64_MAX); break;
	case KVT_CMP_EQ: set_from(s, v, v); break;
	case KVT_CMP_NE:
		if (v)
			set_from(s, 0, v - 1);
		if (v != UINT64_MAX) {
			s->v[s->n].lo = v + 1;
			s->v[s->n].hi = UINT64_MAX;
			s->n++;
		}
		break;
	}
}

/* s &= t (both sorted and disjoint: so is the result, in order). */
static void set_and(struct ivset *s, const struct ivset *t)
{
	struct ivset r = { 0 };
	for (unsigned i = 0; i < s->n; i++)
		for (unsigned j = 0; j < t->n; j++) {
			uint64_t lo = s->v[i].lo > t->v[j].lo ? s->v[i].lo : t->v[j].lo;
			uint64_t hi = s->v[i].hi < t->v[j].hi ? s->v[i].hi : t->v[j].hi;
			if (lo <= hi && r.n < sizeof r.v / sizeof r.v[0]) {
				r.v[r.n].lo = lo;
				r.v[r.n].hi = hi;
				r.n++;
			}
		}
	*s = r;
}

/* b is inside a (a's intervals never touch: each of b's lies in one). */
static bool set_within(const struct ivset *b, const struct ivset *a)
{
	for (unsigned i = 0; i < b->n; i++) {
		bool in = false;
		for (unsigned j = 0; j < a->n && !in; j++)
			in = a->v[j].lo <= b->v[i].lo && b->v[i].hi <= a->v[j].hi;
		if (!in)
			return false;
	}
	return true;
}

/* ---- one rule's factors ---- */

static bool has_field(const struct kvt_policy_rule *r, int field)
{
	for (unsigned i = 0; i < r->nr_conds; i++)
		if (r->cond[i].field == field)
			return true;
	return false;
}

/* The values of field the rule admits, within what the engine produces. */
static void field_set(const struct kvt_policy_rule *r, int field, struct ivset *s)
{
	/* nth counts from 1; after is 0 until a meminfo query, and an after
	 * comparison never matches then */
	uint64_t lo = field == KVT_FIELD_NTH ||
		      (field == KVT_FIELD_AFTER && has_field(r, field)) ? 1 : 0;
	set_from(s, lo, UINT64_MAX);
	for (unsigned i = 0; i < r->nr_conds; i++) {
		struct ivset c;
		if (r->cond[i].field != field)
			continue;
		cond_set(&r->cond[i], &c);
		set_and(s, &c);
	}
}

/* Does the rule accept allocations of kind k with classifier flag kv? */
static bool cell_ok(const struct kvt_policy_rule *r, unsigned k, unsigned kv)
{
	unsigned kinds = kvt_policy_action_kinds(&r->action);
	if (r->kinds)
		kinds &= r->kinds;
	if (!(kinds >> k & 1))
		return false;
	return r->kv == KVT_RULE_KV_ANY || (r->kv == KVT_RULE_KV_YES) == (kv == 1);
}

static bool cell_exists(unsigned k, unsigned kv)
{
	return kv == 0 || (LINT_KV_KINDS >> k & 1);
}

/* A glob of '*' alone matches any frame with a symbol or a module. */
static bool glob_is_any(const char *g)
{
	return g[0] && strspn(g, "*") == strlen(g);
}

/* Comparisons and site of a cover b's (the kind x kv cells aside). */
static bool rest_within(const struct kvt_policy_rule *b, const struct kvt_policy_rule *a)
{
	for (int f = KVT_FIELD_SIZE; f <= KVT_FIELD_AFTER; f++) {
		struct ivset sb, sa;
		field_set(b, f, &sb);
		field_set(a, f, &sa);
		if (!set_within(&sb, &sa))
			return false;
	}
	if (!a->site[0])
		return true;
	return b->site[0] && (!strcmp(a->site, b->site) || glob_is_any(a->site));
}

/* ---- globs: the matcher's own reading (policy/match.c) ---- */

/* 0, or 1 with why filled: '[' not closed (a literal '[' then), a class of
 * reversed ranges only (matches no character), or a '/' (a module is
 * matched by its file name, never its path). */
static int glob_problem(const char *g, char *why, size_t len)
{
	for (const char *p = g; *p; p++) {
		if (*p != '[')
			continue;
		const char *q = p + 1;
		bool neg = *q == '!' || *q == '^', any = false;
		if (neg)
			q++;
		for (const char *first = q; *q && (*q != ']' || q == first); q++) {
			if (q[1] == '-' && q[2] && q[2] != ']') {
				any |= (unsigned char)q[0] <= (unsigned char)q[2];
				q += 2;
			} else {
				any = true;
			}
		}
		if (*q != ']') {
			snprintf(why, len, "site glob '%s': the '[' at character %d is not "
				 "closed, so it matches a literal '['", g, (int)(p - g) + 1);
			return 1;
		}
		if (!neg && !any) {
			snprintf(why, len, "site glob '%s': the class '%.*s' holds only reversed "
				 "ranges and matches no character, so the glob never matches",
				 g, (int)(q - p) + 1, p);
			return 1;
		}
		p = q;
	}
	if (strchr(g, '/')) {
		snprintf(why, len, "site glob '%s' contains '/': modules are matched by "
			 "file name (libfoo.so), not by path, so it matches no module", g);
		return 1;
	}
	return 0;
}

/* ---- the lint ---- */

static const char *const field_name[] = { "", "size", "nth", "after" };

/* 0 when rule r can match some allocation, else 1 with why filled. */
static int rule_never(const struct kvt_policy_rule *r, char *why, size_t len)
{
	bool cell = false;
	for (unsigned k = KVT_KIND_DEVICE; k < KVT_KIND__COUNT; k++)
		for (unsigned kv = 0; kv < 2; kv++)
			cell |= cell_exists(k, kv) && cell_ok(r, k, kv);
	if (!cell) {
		snprintf(why, len, "no kind it names can be %s", r->kv == KVT_RULE_KV_YES ?
			 "kv" : "matched by its action");
		return 1;
	}
	for (int f = KVT_FIELD_SIZE; f <= KVT_FIELD_AFTER; f++) {
		struct ivset s;
		field_set(r, f, &s);
		if (!s.n) {
			snprintf(why, len, "its %s comparisons admit no value%s", field_name[f],
				 f == KVT_FIELD_SIZE ? "" : f == KVT_FIELD_NTH ?
				 " (nth counts from 1)" : " (after counts from 1)");
			return 1;
		}
	}
	return 0;
}

/* The earlier rules that together cover every cell of rule i, as a mask,
 * or 0 when some cell is left. Per cell, the first earlier rule that
 * accepts it and covers the rest is the one that wins it. */
static uint64_t shadow_mask(const struct kvt_policy *p, unsigned i)
{
	const struct kvt_policy_rule *b = &p->rule[i];
	uint64_t mask = 0;
	for (unsigned k = KVT_KIND_DEVICE; k < KVT_KIND__COUNT; k++)
		for (unsigned kv = 0; kv < 2; kv++) {
			if (!cell_exists(k, kv) || !cell_ok(b, k, kv))
				continue;
			unsigned j = 0;
			while (j < i && !(cell_ok(&p->rule[j], k, kv) && rest_within(b, &p->rule[j])))
				j++;
			if (j == i)
				return 0;
			mask |= 1ull << j;
		}
	return mask;
}

static void add(struct kvt_policy_lint *out, unsigned max, unsigned *n,
		const struct kvt_policy_lint *l)
{
	if (*n < max)
		out[*n] = *l;
	(*n)++;
}

unsigned kvt_policy_lint(const struct kvt_policy *p, struct kvt_policy_lint *out,
			 unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < p->nr_rules && i < KVT_POLICY_MAX_RULES; i++) {
		const struct kvt_policy_rule *r = &p->rule[i];
		struct kvt_policy_lint l = { .rule = (uint8_t)i };
		bool bad_glob = r->site[0] && glob_problem(r->site, l.msg, sizeof l.msg);
		if (bad_glob) {
			l.kind = KVT_LINT_GLOB;
			add(out, max, &n, &l);
		}
		if (rule_never(r, l.msg, sizeof l.msg)) {
			l.kind = KVT_LINT_NEVER;
			add(out, max, &n, &l);
			continue;
		}
		if (bad_glob)
			continue;   /* it may match nothing at all: no claim about covers */
		l.by_mask = shadow_mask(p, i);
		if (!l.by_mask)
			continue;
		l.kind = KVT_LINT_SHADOWED;
		int w = snprintf(l.msg, sizeof l.msg, "earlier rule%s", l.by_mask & (l.by_mask - 1) ?
				 "s" : "");
		for (unsigned j = 0; j < i && w > 0 && (size_t)w < sizeof l.msg; j++)
			if (l.by_mask >> j & 1)
				w += snprintf(l.msg + w, sizeof l.msg - (size_t)w, " %u", j + 1);
		if (w > 0 && (size_t)w < sizeof l.msg)
			snprintf(l.msg + w, sizeof l.msg - (size_t)w, " match%s every allocation it does",
				 l.by_mask & (l.by_mask - 1) ? "" : "es");
		add(out, max, &n, &l);
	}
	return n;
}
