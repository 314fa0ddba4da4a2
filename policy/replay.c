// SPDX-License-Identifier: MIT
/* The replay core behind `kvtier replay`: the plain-text event format
 * (docs/replay-format.md) and a driver that feeds events through the
 * decision engine and keeps one record per allocation in a caller-owned
 * table. Pure: no I/O, no malloc; the tool reads files and prints. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kvtier/policy.h"
#include "kvtier/units.h"

/* ---- text format ---------------------------------------------------------- */

static const struct {
	const char *name;
	uint8_t op, kind;
} ops[] = {
	{ "malloc", KVT_RP_ALLOC, KVT_KIND_DEVICE },
	{ "async", KVT_RP_ALLOC, KVT_KIND_ASYNC },
	{ "vmm", KVT_RP_ALLOC, KVT_KIND_VMM },
	{ "managed", KVT_RP_ALLOC, KVT_KIND_MANAGED },
	{ "host_alloc", KVT_RP_ALLOC, KVT_KIND_HOST },
	{ "register", KVT_RP_ALLOC, KVT_KIND_REGISTER },
	{ "mmap", KVT_RP_ALLOC, KVT_KIND_MMAP },
	{ "free", KVT_RP_FREE, KVT_KIND_DEVICE },
	{ "host_free", KVT_RP_FREE, KVT_KIND_HOST },
	{ "unregister", KVT_RP_FREE, KVT_KIND_REGISTER },
	{ "munmap", KVT_RP_FREE, KVT_KIND_MMAP },
	{ "memset", KVT_RP_MEMSET, KVT_KIND_NONE },
	{ "meminfo", KVT_RP_MEMINFO, KVT_KIND_NONE },
	{ "launch", KVT_RP_LAUNCH, KVT_KIND_NONE },
};

__attribute__((format(printf, 4, 5)))
static int bad(struct kvt_policy_error *err, const char *line, const char *at,
	       const char *fmt, ...)
{
	if (err) {
		char what[150];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof what, fmt, ap);
		va_end(ap);
		err->column = (unsigned)(at - line) + 1;
		snprintf(err->msg, sizeof err->msg, "column %u: %s", err->column, what);
	}
	return -EINVAL;
}

static const char *skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static size_t tok_len(const char *p)
{
	size_t n = 0;
	while (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != '#' &&
	       p[n] != '\n' && p[n] != '\r')
		n++;
	return n;
}

/* "# expect: kv" / "# expect: other" anywhere in the comment. */
static int parse_expect(const char *comment, const char *line,
			struct kvt_replay_event *ev, struct kvt_policy_error *err)
{
	const char *e = strstr(comment, "expect:");
	if (!e)
		return 0;
	const char *v = skip_blank(e + 7);
	size_t n = tok_len(v);
	if (n == 2 && !strncmp(v, "kv", 2))
		ev->expect = KVT_EXPECT_KV;
	else if (n == 5 && !strncmp(v, "other", 5))
		ev->expect = KVT_EXPECT_OTHER;
	else
		return bad(err, line, v, "expected 'kv' or 'other' after 'expect:'");
	return 0;
}

static int parse_num(const char *line, const char **pp, uint64_t *out,
		     const char *what, struct kvt_policy_error *err)
{
	const char *p = skip_blank(*pp);
	size_t n = tok_len(p);
	char tok[48];
	if (n == 0)
		return bad(err, line, p, "expected %s", what);
	if (n >= sizeof tok)
		return bad(err, line, p, "%s too long", what);
	memcpy(tok, p, n);
	tok[n] = 0;
	int rc;
	if (n > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X')) {
		uint64_t v = 0;
		rc = 0;
		for (size_t i = 2; i < n && !rc; i++) {
			int c = tok[i], d = c >= '0' && c <= '9' ? c - '0' :
				c >= 'a' && c <= 'f' ? c - 'a' + 10 :
				c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
			if (d < 0 || v >> 60)
				rc = -EINVAL;
			else
				v = v * 16 + (uint64_t)d;
		}
		*out = v;
	} else {
		rc = kvt_parse_size(tok, out, NULL, 0);
	}
	if (rc)
		return bad(err, line, p, "expected %s but found '%s'", what, tok);
	*pp = p + n;
	return 0;
}

int kvt_replay_parse_line(const char *line, struct kvt_replay_event *ev,
			  struct kvt_policy_error *err)
{
	memset(ev, 0, sizeof *ev);
	const char *p = skip_blank(line);
	if (*p == 0 || *p == '#' || *p == '\n' || *p == '\r')
		return 0;
	if (parse_num(line, &p, &ev->t_us, "a time in microseconds", err))
		return -EINVAL;
	p = skip_blank(p);
	size_t n = tok_len(p);
	size_t i;
	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strlen(ops[i].name) == n && !strncmp(p, ops[i].name, n))
			break;
	if (i == sizeof ops / sizeof ops[0])
		return bad(err, line, p, "unknown op '%.*s' (expected malloc, free, memset, meminfo, host_alloc, host_free, mmap, munmap, launch, async, vmm, managed, register, unregister)",
			   (int)(n > 20 ? 20 : n), p);
	ev->op = ops[i].op;
	ev->kind = ops[i].kind;
	p += n;
	if (parse_num(line, &p, &ev->size,
		      ev->op == KVT_RP_MEMINFO ? "free bytes" : "a size", err))
		return -EINVAL;
	const char *q = skip_blank(p);
	if (*q && *q != '#' && *q != '\n' && *q != '\r' && strncmp(q, "site=", 5)) {
		if (parse_num(line, &p, &ev->id,
			      ev->op == KVT_RP_MEMINFO ? "total bytes" : "an id", err))
			return -EINVAL;
		ev->has_id = true;
	}
	q = skip_blank(p);
	if (!strncmp(q, "site=", 5)) {
		size_t sl = tok_len(q + 5);
		if (ev->op != KVT_RP_ALLOC)
			return bad(err, line, q, "site= is only for allocations");
		if (sl == 0 || sl >= sizeof ev->site)
			return bad(err, line, q, "site= needs 1..%zu characters",
				   sizeof ev->site - 1);
		memcpy(ev->site, q + 5, sl);
		ev->site[sl] = 0;
		q = skip_blank(q + 5 + sl);
	}
	if (*q == '#')
		return parse_expect(q, line, ev, err) ? -EINVAL : 1;
	if (*q && *q != '\n' && *q != '\r')
		return bad(err, line, q, "unexpected '%.*s' (a comment starts with '#')",
			   (int)(tok_len(q) > 20 ? 20 : tok_len(q)), q);
	if ((ev->op == KVT_RP_FREE || ev->op == KVT_RP_MEMSET) && !ev->has_id)
		return bad(err, line, q, "expected an id");
	if (ev->op == KVT_RP_MEMINFO && !ev->has_id)
		return bad(err, line, q, "expected total bytes after free bytes");
	return 1;
}

/* ---- call sites from "sym@module|sym@module" -------------------------------- */

struct site_frames {
	char buf[256];
	const char *sym[16], *mod[16];
	unsigned nr;
};

static void split_site(struct site_frames *f, const char *site)
{
	memset(f, 0, sizeof *f);
	snprintf(f->buf, sizeof f->buf, "%s", site);
	char *p = f->buf;
	while (*p && f->nr < 16) {
		char *bar = strchr(p, '|');
		if (bar)
			*bar = 0;
		char *at = strchr(p, '@');
		if (at)
			*at = 0;
		f->sym[f->nr] = *p ? p : NULL;
		f->mod[f->nr] = at && at[1] ? at + 1 : NULL;
		f->nr++;
		if (!bar)
			break;
		p = bar + 1;
	}
}

static int site_cb(void *ctx, unsigned i, const char **sym, const char **mod)
{
	const struct site_frames *f = ctx;
	if (i >= f->nr)
		return -1;
	*sym = f->sym[i];
	*mod = f->mod[i];
	return 0;
}

/* ---- driver -------------------------------------------------------------------- */

void kvt_replay_init(struct kvt_replay *r, const struct kvt_policy *pol,
		     struct kvt_replay_alloc *table, size_t cap)
{
	memset(r, 0, sizeof *r);
	kvt_policy_engine_init(&r->eng, pol, NULL, 0, 0,
			       KVT_POLICY_DEFAULT_RESERVE_BYTES);
	r->allocs = table;
	r->cap = cap;
	r->next_auto_id = 1ull << 48;
}

/* Newest live allocation with this id (ids are reused after a free). */
static struct kvt_replay_alloc *find_live(struct kvt_replay *r, uint64_t id)
{
	for (size_t i = r->nr; i-- > 0;)
		if (r->allocs[i].live && r->allocs[i].id == id)
			return &r->allocs[i];
	return NULL;
}

static void apply(struct kvt_replay *r, const struct kvt_policy_resolutions *res)
{
	for (unsigned k = 0; k < res->nr; k++) {
		struct kvt_replay_alloc *a = find_live(r, res->r[k].id);
		if (!a)
			continue;
		a->resolved = true;
		a->res = res->r[k];
		a->kv_final = res->r[k].verdict != KVT_VERDICT_REFUTED;
	}
}

int kvt_replay_feed(struct kvt_replay *r, const struct kvt_replay_event *ev)
{
	struct kvt_policy_resolutions res = { 0 };
	uint64_t t_ns = ev->t_us * 1000;
	struct kvt_replay_alloc *a;

	switch (ev->op) {
	case KVT_RP_ALLOC: {
		if (r->nr >= r->cap)
			return -ENOSPC;
		struct site_frames f;
		split_site(&f, ev->site);
		a = &r->allocs[r->nr];
		memset(a, 0, sizeof *a);
		a->ordinal = r->nr + 1;
		a->id = ev->has_id ? ev->id : r->next_auto_id++;
		a->size = ev->size;
		a->t_us = ev->t_us;
		a->kind = ev->kind;
		a->expect = ev->expect;
		a->live = true;
		r->nr++;
		struct kvt_policy_alloc_event ae = {
			.kind = ev->kind, .size = ev->size, .t_ns = t_ns, .id = a->id,
			.site = ev->site[0] ? site_cb : NULL, .site_ctx = &f,
		};
		kvt_policy_on_alloc(&r->eng, &ae, &a->birth, &res);
		a->kv_final = (a->birth.flags & KVT_DEC_KV) != 0;
		/* a MAYBE counts as KV only once confirmed */
		apply(r, &res);
		return 0;
	}
	case KVT_RP_FREE:
		a = find_live(r, ev->id);
		if (!a)
			return -ENOENT;
		kvt_policy_on_free(&r->eng, a->id,
				   a->birth.far_bytes + (a->resolved ? a->res.far_bytes : 0),
				   t_ns, &res);
		apply(r, &res);
		a->live = false;
		a->kv_final = false;   /* KV is never freed: freed means not KV */
		return 0;
	case KVT_RP_MEMSET:
		a = find_live(r, ev->id);
		if (!a)
			return -ENOENT;
		kvt_policy_on_memset(&r->eng, a->id, ev->offset, ev->size, ev->value,
				     t_ns, &res);
		apply(r, &res);
		return 0;
	case KVT_RP_MEMINFO:
		kvt_policy_on_meminfo(&r->eng, ev->size, ev->id, t_ns, &res);
		apply(r, &res);
		return 0;
	default:
		return 0;
	}
}

/* ---- report lines ----------------------------------------------------------------- */

size_t kvt_replay_format(const struct kvt_replay *r, size_t i, char *buf,
			 size_t len)
{
	const struct kvt_replay_alloc *a = &r->allocs[i];
	char sz[32], act[48], why[48], fin[96] = "";
	kvt_format_size_exact(a->size, sz, sizeof sz);
	kvt_policy_format_action(&a->birth.action, act, sizeof act);
	if (a->birth.flags & KVT_DEC_TRACE)
		snprintf(act, sizeof act, "trace");
	const char *kv = a->birth.flags & KVT_DEC_KV ? ", kv" :
			 a->birth.flags & KVT_DEC_MAYBE ? ", kv?" : "";
	if (a->birth.reason == KVT_REASON_RULE)
		snprintf(why, sizeof why, "rule %d%s", a->birth.rule + 1, kv);
	else if (a->birth.rule >= 0)
		snprintf(why, sizeof why, "%s (rule %d)%s",
			 kvt_policy_reason_name(a->birth.reason), a->birth.rule + 1, kv);
	else
		snprintf(why, sizeof why, "%s%s",
			 kvt_policy_reason_name(a->birth.reason), kv);
	if (a->resolved) {
		char ra[48];
		kvt_policy_format_action(&a->res.action, ra, sizeof ra);
		snprintf(fin, sizeof fin, " -> %s%s%s",
			 kvt_policy_reason_name(a->res.reason),
			 a->res.verdict == KVT_VERDICT_LATE ? "" : ": ",
			 a->res.verdict == KVT_VERDICT_LATE ? "" : ra);
	}
	return (size_t)snprintf(buf, len, "%6llu %-8s %7s  %-20s %s%s  [%s%s]",
				(unsigned long long)a->ordinal,
				kvt_policy_kind_name(a->kind), sz, act, why, fin,
				a->kv_final ? "kv" : "other",
				a->live ? "" : ", freed");
}
