// SPDX-License-Identifier: MIT
/* The KVTIER_POLICY parser and its canonical formatter.
 * Pure: parses into the caller's fixed-size struct kvt_policy; no malloc,
 * no stdio beyond snprintf into caller buffers, no locale.
 * Errors carry the 1-based column and what was expected there. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kvtier/policy.h"
#include "kvtier/units.h"

/* ---- scanner ------------------------------------------------------------ */

struct scan {
	const char *text;
	const char *p;
	struct kvt_policy_error *err;
};

static unsigned col_of(const struct scan *s, const char *at)
{
	return (unsigned)(at - s->text) + 1;
}

__attribute__((format(printf, 3, 4)))
static int fail(struct scan *s, const char *at, const char *fmt, ...)
{
	if (s->err) {
		char what[160];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof what, fmt, ap);
		va_end(ap);
		s->err->column = col_of(s, at);
		snprintf(s->err->msg, sizeof s->err->msg, "column %u: %s",
			 s->err->column, what);
	}
	return -EINVAL;
}

static void skip_ws(struct scan *s)
{
	while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
		s->p++;
}

static int is_word(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/* Length of the identifier at p. */
static size_t word_len(const char *p)
{
	size_t n = 0;
	while (is_word(p[n]))
		n++;
	return n;
}

static int word_is(const char *p, size_t n, const char *w)
{
	return strlen(w) == n && memcmp(p, w, n) == 0;
}

/* A short quotation of the text at p for messages: up to the next
 * separator, at most 24 characters. */
static const char *quote(const char *p, char *buf, size_t len)
{
	size_t n = 0;
	while (p[n] && p[n] != ';' && p[n] != ',' && p[n] != ' ' && n < 24 &&
	       n + 1 < len)
		n++;
	if (n == 0 && p[0] && len > 1)
		n = 1;
	memcpy(buf, p, n);
	buf[n] = 0;
	return buf;
}

/* ---- kinds ---------------------------------------------------------------- */

static const char *const kind_names[KVT_KIND__COUNT] = {
	[KVT_KIND_NONE] = "none",     [KVT_KIND_DEVICE] = "device",
	[KVT_KIND_ASYNC] = "async",   [KVT_KIND_VMM] = "vmm",
	[KVT_KIND_MANAGED] = "managed", [KVT_KIND_HOST] = "host",
	[KVT_KIND_REGISTER] = "register", [KVT_KIND_MMAP] = "mmap",
};

const char *kvt_policy_kind_name(unsigned kind)
{
	return kind < KVT_KIND__COUNT ? kind_names[kind] : "?";
}

int kvt_policy_kind_from_name(const char *s, size_t len)
{
	for (int k = KVT_KIND_DEVICE; k < KVT_KIND__COUNT; k++)
		if (word_is(s, len, kind_names[k]))
			return k;
	return -1;
}

/* Kinds the classifier looks at: what `kv` can match. */
#define KV_KINDS ((1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) | \
		  (1u << KVT_KIND_MANAGED))
#define ALL_KINDS (((1u << KVT_KIND__COUNT) - 1) & ~1u)

unsigned kvt_policy_action_kinds(const struct kvt_policy_action *a)
{
	switch (a->type) {
	case KVT_ACT_MANAGED:
		return KV_KINDS;
	case KVT_ACT_PINNED:
		return 1u << KVT_KIND_HOST;
	case KVT_ACT_BIND:
	case KVT_ACT_INTERLEAVE:
		return (1u << KVT_KIND_MMAP) | (1u << KVT_KIND_REGISTER);
	default:
		return ALL_KINDS;
	}
}

static const char *kinds_text(unsigned mask, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (int k = KVT_KIND_DEVICE; k < KVT_KIND__COUNT; k++)
		if (mask & (1u << k)) {
			int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
					 kind_names[k]);
			if (w < 0 || (size_t)w >= len - n)
				break;
			n += (size_t)w;
		}
	return buf;
}

/* ---- selectors -------------------------------------------------------------- */

static int parse_u64(struct scan *s, int sizes, uint64_t *out)
{
	const char *at = s->p;
	const char *end = at;
	char q[32];
	int rc;
	if (sizes) {
		rc = kvt_parse_size(at, out, &end, 1);
	} else {
		long long v = 0;
		char num[24];
		size_t n = 0;
		while (at[n] >= '0' && at[n] <= '9' && n < sizeof num - 1) {
			num[n] = at[n];
			n++;
		}
		num[n] = 0;
		rc = n ? kvt_parse_int(num, 0, INT64_MAX, &v) : -EINVAL;
		if (at[n] >= '0' && at[n] <= '9')
			rc = -ERANGE;
		*out = (uint64_t)v;
		end = at + n;
	}
	if (rc == 0 && is_word(*end))
		rc = -EINVAL;   /* "8X", "3abc" */
	if (rc == -ERANGE)
		return fail(s, at, "number '%s' is too large", quote(at, q, sizeof q));
	if (rc)
		return fail(s, at, sizes ?
			    "expected a size (bytes, or a number with K/M/G/T suffix) but found '%s'" :
			    "expected a whole number but found '%s'",
			    quote(at, q, sizeof q));
	s->p = end;
	return 0;
}

static int parse_cmp(struct scan *s, uint8_t *cmp)
{
	const char *p = s->p;
	if (p[0] == '<' && p[1] == '=') { *cmp = KVT_CMP_LE; s->p += 2; }
	else if (p[0] == '>' && p[1] == '=') { *cmp = KVT_CMP_GE; s->p += 2; }
	else if (p[0] == '=' && p[1] == '=') { *cmp = KVT_CMP_EQ; s->p += 2; }
	else if (p[0] == '!' && p[1] == '=') { *cmp = KVT_CMP_NE; s->p += 2; }
	else if (p[0] == '<') { *cmp = KVT_CMP_LT; s->p += 1; }
	else if (p[0] == '>') { *cmp = KVT_CMP_GT; s->p += 1; }
	else
		return -1;
	return 0;
}

static int is_glob_char(int c)
{
	return c && c != ',' && c != ';' && c != ' ' && c != '\t' &&
	       c != '\n' && c != '\r' && c != '=';
}

static int parse_site(struct scan *s, struct kvt_policy_rule *r,
		      const char *sel)
{
	const char *at = s->p;
	size_t n = 0;
	if (r->site[0])
		return fail(s, sel, "only one site~ selector per rule");
	while (is_glob_char(at[n]))
		n++;
	if (n == 0)
		return fail(s, at, "expected a glob after 'site~'");
	if (n >= KVT_POLICY_MAX_GLOB)
		return fail(s, at, "site glob longer than %d characters",
			    KVT_POLICY_MAX_GLOB - 1);
	memcpy(r->site, at, n);
	r->site[n] = 0;
	s->p = at + n;
	return 0;
}

static int parse_kinds(struct scan *s, struct kvt_policy_rule *r,
		       const char *sel)
{
	if (r->kinds)
		return fail(s, sel, "a rule names its kinds once; use 'device|host' for either");
	for (;;) {
		const char *at = s->p;
		size_t n = word_len(at);
		int k = kvt_policy_kind_from_name(at, n);
		char q[32];
		if (k < 0)
			return fail(s, at, "expected a kind (device, async, vmm, managed, host, register, mmap) but found '%s'",
				    quote(at, q, sizeof q));
		r->kinds |= (uint8_t)(1u << k);
		s->p += n;
		if (*s->p != '|')
			return 0;
		s->p++;
	}
}

static int parse_selector(struct scan *s, struct kvt_policy_rule *r)
{
	const char *at = s->p;
	size_t n = word_len(at);
	char q[32];

	if (*at == '*')
		return fail(s, at, "'*' must be the only selector of its rule");
	if (at[0] == '!' && word_is(at + 1, word_len(at + 1), "kv")) {
		if (r->kv)
			return fail(s, at, "kv given twice in one rule");
		r->kv = KVT_RULE_KV_NO;
		s->p += 3;
		return 0;
	}
	if (word_is(at, n, "kv")) {
		if (r->kv)
			return fail(s, at, "kv given twice in one rule");
		r->kv = KVT_RULE_KV_YES;
		s->p += n;
		return 0;
	}
	if (word_is(at, n, "site")) {
		s->p += n;
		if (*s->p != '~')
			return fail(s, s->p, "expected '~' after 'site' (site~GLOB)");
		s->p++;
		return parse_site(s, r, at);
	}
	int field = word_is(at, n, "size") ? KVT_FIELD_SIZE :
		    word_is(at, n, "nth") ? KVT_FIELD_NTH :
		    word_is(at, n, "after") ? KVT_FIELD_AFTER : 0;
	if (field) {
		struct kvt_policy_cond c = { .field = (uint8_t)field };
		s->p += n;
		skip_ws(s);
		if (parse_cmp(s, &c.cmp))
			return fail(s, s->p, "expected a comparison (<, <=, >, >=, ==, !=) after '%.*s'",
				    (int)n, at);
		skip_ws(s);
		if (parse_u64(s, field == KVT_FIELD_SIZE, &c.value))
			return -EINVAL;
		if (r->nr_conds >= KVT_POLICY_MAX_CONDS)
			return fail(s, at, "more than %d comparisons in one rule",
				    KVT_POLICY_MAX_CONDS);
		r->cond[r->nr_conds++] = c;
		return 0;
	}
	if (kvt_policy_kind_from_name(at, n) >= 0)
		return parse_kinds(s, r, at);
	if (n == 0 && (*at == 0 || *at == ';'))
		return fail(s, at, "expected a selector (kind, kv, size, nth, after, site~GLOB or *)");
	return fail(s, at, "unknown selector '%s' (expected a kind, kv, !kv, size, nth, after, site~GLOB or *)",
		    quote(at, q, sizeof q));
}

/* ---- actions ------------------------------------------------------------------ */

static int parse_node(struct scan *s, int32_t *node)
{
	uint64_t v;
	if (strncmp(s->p, "node=", 5) != 0)
		return fail(s, s->p, "expected 'node=N'");
	s->p += 5;
	if (parse_u64(s, 0, &v))
		return -EINVAL;
	if (v > 4095)
		return fail(s, s->p, "node %llu out of range (0..4095)",
			    (unsigned long long)v);
	*node = (int32_t)v;
	return 0;
}

/* hbm | cxl | node=N after "managed:", "pinned:", "bind:" */
static int parse_target(struct scan *s, struct kvt_policy_action *a,
			const char *verb, int allow_hbm)
{
	size_t n = word_len(s->p);
	char q[32];
	if (word_is(s->p, n, "cxl")) {
		a->tier = KVT_TIER_CXL;
		s->p += n;
		return 0;
	}
	if (word_is(s->p, n, "hbm") && allow_hbm) {
		a->tier = KVT_TIER_HBM;
		s->p += n;
		return 0;
	}
	if (word_is(s->p, n, "node") && s->p[n] == '=') {
		a->tier = KVT_TIER_NODE;
		return parse_node(s, &a->node);
	}
	return fail(s, s->p, "expected %s after '%s:' but found '%s'",
		    allow_hbm ? "hbm, cxl or node=N" : "cxl or node=N", verb,
		    quote(s->p, q, sizeof q));
}

static int parse_weight(struct scan *s, const char *key, uint16_t *w)
{
	uint64_t v;
	size_t kl = strlen(key);
	if (strncmp(s->p, key, kl) != 0 || s->p[kl] != '=')
		return fail(s, s->p, "expected '%s=W' in interleave:dram=W,cxl=W", key);
	s->p += kl + 1;
	const char *at = s->p;
	if (parse_u64(s, 0, &v))
		return -EINVAL;
	if (v < 1 || v > 1000)
		return fail(s, at, "interleave weight must be 1..1000");
	*w = (uint16_t)v;
	return 0;
}

static int parse_action(struct scan *s, struct kvt_policy_action *a)
{
	const char *at = s->p;
	size_t n = word_len(at);
	char q[32];
	a->node = -1;
	if (word_is(at, n, "native") || word_is(at, n, "trace")) {
		a->type = at[0] == 'n' ? KVT_ACT_NATIVE : KVT_ACT_TRACE;
		s->p += n;
		return 0;
	}
	static const struct { const char *verb; uint8_t type; int hbm; } verbs[] = {
		{ "managed", KVT_ACT_MANAGED, 1 },
		{ "pinned", KVT_ACT_PINNED, 0 },
		{ "bind", KVT_ACT_BIND, 0 },
	};
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
		if (!word_is(at, n, verbs[i].verb))
			continue;
		a->type = verbs[i].type;
		s->p += n;
		if (*s->p != ':')
			return fail(s, s->p, "expected ':' after '%s' (e.g. %s:cxl)",
				    verbs[i].verb, verbs[i].verb);
		s->p++;
		return parse_target(s, a, verbs[i].verb, verbs[i].hbm);
	}
	if (word_is(at, n, "interleave")) {
		a->type = KVT_ACT_INTERLEAVE;
		a->tier = KVT_TIER_CXL;
		s->p += n;
		if (*s->p != ':')
			return fail(s, s->p, "expected ':' after 'interleave' (interleave:dram=W,cxl=W)");
		s->p++;
		if (parse_weight(s, "dram", &a->w_dram))
			return -EINVAL;
		if (*s->p != ',')
			return fail(s, s->p, "expected ',cxl=W' after the dram weight");
		s->p++;
		if (parse_weight(s, "cxl", &a->w_cxl))
			return -EINVAL;
		if (*s->p == ',') {
			s->p++;
			a->tier = KVT_TIER_NODE;
			return parse_node(s, &a->node);
		}
		return 0;
	}
	if (n == 0 && (*at == 0 || *at == ';'))
		return fail(s, at, "expected an action (native, trace, managed:, pinned:, bind:, interleave:) after '=>'");
	return fail(s, at, "unknown action '%s' (expected native, trace, managed:hbm|cxl|node=N, pinned:cxl|node=N, bind:cxl|node=N or interleave:dram=W,cxl=W)",
		    quote(at, q, sizeof q));
}

/* ---- rules ---------------------------------------------------------------------- */

static const char *act_verb(const struct kvt_policy_action *a, char *buf, size_t len)
{
	kvt_policy_format_action(a, buf, len);
	return buf;
}

/* Reject actions that cannot serve the kinds the rule can match. */
static int check_rule(struct scan *s, const struct kvt_policy_rule *r,
		      const char *rule_at, const char *act_at)
{
	unsigned ok = kvt_policy_action_kinds(&r->action);
	char ab[48], kb[80], kb2[80];
	if (r->kinds) {
		unsigned bad = r->kinds & ~ok;
		if (bad)
			return fail(s, act_at, "action '%s' cannot apply to kind %s (it serves: %s)",
				    act_verb(&r->action, ab, sizeof ab),
				    kinds_text(bad, kb, sizeof kb),
				    kinds_text(ok, kb2, sizeof kb2));
	}
	if (r->kv == KVT_RULE_KV_YES) {
		unsigned k = r->kinds ? r->kinds : KV_KINDS;
		if (!(k & KV_KINDS))
			return fail(s, rule_at, "'kv' never matches kind %s: the classifier sees device, async and managed allocations only",
				    kinds_text(k, kb, sizeof kb));
		if (!(k & KV_KINDS & ok))
			return fail(s, act_at, "action '%s' cannot apply to kv allocations (device, async, managed)",
				    act_verb(&r->action, ab, sizeof ab));
	}
	return 0;
}

static int parse_rule(struct scan *s, struct kvt_policy_rule *r)
{
	const char *start = s->p;
	r->column = (uint16_t)col_of(s, start);
	r->action.node = -1;
	if (*s->p == '*') {
		r->star = 1;
		s->p++;
	} else {
		for (;;) {
			if (parse_selector(s, r))
				return -EINVAL;
			skip_ws(s);
			if (*s->p != ',')
				break;
			s->p++;
			skip_ws(s);
		}
	}
	const char *sel_end = s->p;
	while (sel_end > start && (sel_end[-1] == ' ' || sel_end[-1] == '\t'))
		sel_end--;
	skip_ws(s);
	if (!(s->p[0] == '=' && s->p[1] == '>')) {
		int n = (int)(sel_end - start);
		if (*s->p == '*' && !r->star)
			return fail(s, s->p, "'*' must be the only selector of its rule");
		return fail(s, s->p, "expected '=>' after selector '%.*s'",
			    n > 40 ? 40 : n, start);
	}
	s->p += 2;
	skip_ws(s);
	const char *act_at = s->p;
	if (parse_action(s, &r->action))
		return -EINVAL;
	if (check_rule(s, r, start, act_at))
		return -EINVAL;
	return 0;
}

static int parse_all(const char *text, struct kvt_policy *p,
		     struct kvt_policy_error *err)
{
	struct scan s = { .text = text, .p = text, .err = err };
	if (err) {
		err->column = 0;
		err->msg[0] = 0;
	}
	memset(p, 0, sizeof *p);
	if (!text)
		return fail(&s, "", "no policy text");
	size_t len = strnlen(text, KVT_POLICY_MAX_TEXT + 1);
	if (len > KVT_POLICY_MAX_TEXT)
		return fail(&s, text + KVT_POLICY_MAX_TEXT,
			    "policy text longer than %d characters", KVT_POLICY_MAX_TEXT);
	skip_ws(&s);
	if (!*s.p)
		return fail(&s, s.p, "expected a rule (selector => action); the policy is empty");
	for (;;) {
		skip_ws(&s);
		if (p->nr_rules >= KVT_POLICY_MAX_RULES)
			return fail(&s, s.p, "more than %d rules", KVT_POLICY_MAX_RULES);
		struct kvt_policy_rule *r = &p->rule[p->nr_rules];
		if (parse_rule(&s, r))
			return -EINVAL;
		p->nr_rules++;
		p->needs_site |= r->site[0] != 0;
		p->has_kv |= r->kv != KVT_RULE_KV_ANY;
		skip_ws(&s);
		if (*s.p == 0)
			break;
		if (*s.p != ';') {
			char q[32];
			return fail(&s, s.p, "expected ';' or the end after the action, found '%s'",
				    quote(s.p, q, sizeof q));
		}
		s.p++;
		skip_ws(&s);
		if (*s.p == 0)
			break;          /* a trailing ';' is fine */
	}
	return 0;
}

int kvt_policy_parse(const char *text, struct kvt_policy *p,
		     struct kvt_policy_error *err)
{
	int rc = parse_all(text, p, err);
	if (rc)
		memset(p, 0, sizeof *p);   /* never a half-parsed rule set */
	return rc;
}

void kvt_policy_default(struct kvt_policy *p)
{
	(void)kvt_policy_parse(KVT_POLICY_DEFAULT_TEXT, p, NULL);
}

/* ---- canonical form ------------------------------------------------------------- */

struct out {
	char *buf;
	size_t len, n;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(o->n < o->len ? o->buf + o->n : NULL,
			  o->n < o->len ? o->len - o->n : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->n += (size_t)w;
}

static void put_size(struct out *o, uint64_t v)
{
	char text[32];
	put(o, "%s", kvt_format_size_exact(v, text, sizeof text));
}

static void put_action(struct out *o, const struct kvt_policy_action *a)
{
	static const char *const verb[] = {
		[KVT_ACT_NATIVE] = "native", [KVT_ACT_TRACE] = "trace",
		[KVT_ACT_MANAGED] = "managed", [KVT_ACT_PINNED] = "pinned",
		[KVT_ACT_BIND] = "bind", [KVT_ACT_INTERLEAVE] = "interleave",
	};
	if (a->type > KVT_ACT_INTERLEAVE) {
		put(o, "?");
		return;
	}
	put(o, "%s", verb[a->type]);
	if (a->type == KVT_ACT_INTERLEAVE) {
		put(o, ":dram=%u,cxl=%u", a->w_dram, a->w_cxl);
		if (a->tier == KVT_TIER_NODE)
			put(o, ",node=%d", (int)a->node);
		return;
	}
	if (a->type == KVT_ACT_NATIVE || a->type == KVT_ACT_TRACE)
		return;
	if (a->tier == KVT_TIER_HBM)
		put(o, ":hbm");
	else if (a->tier == KVT_TIER_NODE)
		put(o, ":node=%d", (int)a->node);
	else
		put(o, ":cxl");
}

size_t kvt_policy_format_action(const struct kvt_policy_action *a, char *buf,
				size_t len)
{
	struct out o = { buf, len, 0 };
	if (len)
		buf[0] = 0;
	put_action(&o, a);
	return o.n;
}

static void put_rule(struct out *o, const struct kvt_policy_rule *r)
{
	static const char *const field[] = { "", "size", "nth", "after" };
	static const char *const cmp[] = { "", "<", "<=", ">", ">=", "==", "!=" };
	int first = 1;
#define SEP() do { if (!first) put(o, ","); first = 0; } while (0)
	if (r->star || (!r->kinds && !r->kv && !r->nr_conds && !r->site[0])) {
		put(o, "*");
		first = 0;
	}
	if (r->kinds) {
		SEP();
		int bar = 0;
		for (int k = KVT_KIND_DEVICE; k < KVT_KIND__COUNT; k++)
			if (r->kinds & (1u << k)) {
				put(o, "%s%s", bar ? "|" : "", kind_names[k]);
				bar = 1;
			}
	}
	if (r->kv) {
		SEP();
		put(o, r->kv == KVT_RULE_KV_YES ? "kv" : "!kv");
	}
	for (int f = KVT_FIELD_SIZE; f <= KVT_FIELD_AFTER; f++)
		for (unsigned i = 0; i < r->nr_conds; i++) {
			const struct kvt_policy_cond *c = &r->cond[i];
			if (c->field != f || c->cmp < 1 || c->cmp > 6)
				continue;
			SEP();
			put(o, "%s%s", field[f], cmp[c->cmp]);
			if (f == KVT_FIELD_SIZE)
				put_size(o, c->value);
			else
				put(o, "%llu", (unsigned long long)c->value);
		}
	if (r->site[0]) {
		SEP();
		put(o, "site~%s", r->site);
	}
#undef SEP
	put(o, " => ");
	put_action(o, &r->action);
}

size_t kvt_policy_format_rule(const struct kvt_policy_rule *r, char *buf,
			      size_t len)
{
	struct out o = { buf, len, 0 };
	if (len)
		buf[0] = 0;
	put_rule(&o, r);
	return o.n;
}

size_t kvt_policy_format(const struct kvt_policy *p, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	if (len)
		buf[0] = 0;
	for (unsigned i = 0; i < p->nr_rules; i++) {
		if (i)
			put(&o, "; ");
		put_rule(&o, &p->rule[i]);
	}
	return o.n;
}

/* Comparisons are compared in canonical (field-sorted, stable) order. */
static void sorted_conds(const struct kvt_policy_rule *r,
			 struct kvt_policy_cond *out)
{
	unsigned n = 0;
	for (int f = KVT_FIELD_SIZE; f <= KVT_FIELD_AFTER; f++)
		for (unsigned i = 0; i < r->nr_conds; i++)
			if (r->cond[i].field == f)
				out[n++] = r->cond[i];
}

static bool rule_equal(const struct kvt_policy_rule *a,
		       const struct kvt_policy_rule *b)
{
	struct kvt_policy_cond ca[KVT_POLICY_MAX_CONDS], cb[KVT_POLICY_MAX_CONDS];
	if (a->kinds != b->kinds || a->kv != b->kv ||
	    a->nr_conds != b->nr_conds || strcmp(a->site, b->site) != 0)
		return false;
	if (a->action.type != b->action.type || a->action.tier != b->action.tier ||
	    a->action.node != b->action.node ||
	    a->action.w_dram != b->action.w_dram ||
	    a->action.w_cxl != b->action.w_cxl)
		return false;
	sorted_conds(a, ca);
	sorted_conds(b, cb);
	for (unsigned i = 0; i < a->nr_conds; i++)
		if (ca[i].field != cb[i].field || ca[i].cmp != cb[i].cmp ||
		    ca[i].value != cb[i].value)
			return false;
	return true;
}

bool kvt_policy_equal(const struct kvt_policy *a, const struct kvt_policy *b)
{
	if (a->nr_rules != b->nr_rules)
		return false;
	for (unsigned i = 0; i < a->nr_rules; i++)
		if (!rule_equal(&a->rule[i], &b->rule[i]))
			return false;
	return true;
}
