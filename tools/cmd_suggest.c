// SPDX-License-Identifier: MIT
/* `kvtier policy suggest TRACE...`: closes the loop profile -> policy. Runs
 * each trace through the KV classifier (profiler/trace_replay.h), then reads
 * it again for what the numbers need: call sites, sizes, the device memory
 * queries and the copies/memsets that touched redirected (else KV) ranges,
 * per 2 MiB chunk and time window. Prints the rules in canonical form (the
 * only line not starting with '#') after the rationale as '#' comments.
 * Tool-side only: allocates, uses stdio; never part of libkvtier.so. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include("cmd.h")
#include "cmd.h"
#endif
#endif
#include "dwsym.h"
#include "runs.h"
#include "kvtier/policy.h"
#include "kvtier/units.h"
#include "../profiler/trace_read.h"
#include "../profiler/trace_replay.h"

int kvt_cmd_suggest(int argc, char **argv);

#define SG_CHUNK_SHIFT 21                     /* the migration unit: 2 MiB */
#define SG_CHUNK_BYTES (1ull << SG_CHUNK_SHIFT)
#define SG_KV_KINDS ((1u << KVT_KIND_DEVICE) | (1u << KVT_KIND_ASYNC) | \
		     (1u << KVT_KIND_MANAGED))
#define SG_HOST_KINDS ((1u << KVT_KIND_HOST) | (1u << KVT_KIND_REGISTER) | \
		       (1u << KVT_KIND_MMAP))

/* ---- what one or more traces said ------------------------------------------ */

struct sg_sum {
	unsigned nr_traces;
	uint64_t nr_allocs;
	uint64_t nr_kv, kv_bytes, kv_min, kv_max;    /* KV at the end of the run */
	unsigned kv_kinds;                           /* bit per kind */
	uint64_t nr_birth, nr_confirmed, nr_late;    /* how the classifier knew */
	uint64_t other_max;                          /* largest non-KV of a KV kind */
	uint64_t host_max;                           /* largest host/register/mmap */
	unsigned host_kind;
	uint64_t hot_bytes;                          /* max over windows and traces */
	int hot_from;                                /* 2 redirected, 1 KV, 0 none */
	uint64_t nr_copy, nr_memset, nr_launch, nr_touch;
	uint64_t window_ms;
	uint64_t kv_free, kv_total;                  /* the query before the KV */
	char site[KVT_POLICY_MAX_GLOB];              /* distinctive KV frame */
	char site_mod[64];
	uint64_t site_bytes;
	int site_shared;                             /* KV stacks but no own frame */
};

/* ---- one trace --------------------------------------------------------------- */

struct sg_module {
	char *path;
	uint64_t bias, start, end;
	int state;                                   /* 0 unopened, 1 open, -1 none */
	struct kvt_dwsym *sym;
};

struct sg_stack {
	uint32_t nr;
	uint64_t *ips;
	uint64_t kv_bytes;                           /* KV bytes allocated from it */
	int other;                                   /* a non-KV allocation used it */
};

#define SG_SEEN (1u << 31)

struct sg_range {
	uint64_t base, size;
	uint32_t *stamp;                             /* per chunk: SG_SEEN once touched,
						      * | window + 1 when counted there */
	uint8_t redirected, kv;
};

struct sg_trace {
	const struct kvt_replay *rp;
	uint64_t ordinal;
	struct sg_module *mods;
	size_t nr_mods, cap_mods;
	struct sg_stack *stacks;                     /* by id - 1 */
	size_t nr_stacks;
	struct sg_range *ranges;                     /* live, sorted by base */
	size_t nr_ranges, cap_ranges;
	uint64_t window_ns, cur_window;
	uint64_t hot[2], hot_max[2];                 /* [0] redirected, [1] KV */
	int any_redirected;
	uint64_t last_free, last_total;
	int kv_seen;
};

static int sg_add_module(struct sg_trace *t, const struct kvt_trace_item *it)
{
	if (t->nr_mods == t->cap_mods) {
		size_t cap = t->cap_mods ? 2 * t->cap_mods : 16;
		struct sg_module *m = realloc(t->mods, cap * sizeof *m);
		if (!m)
			return -ENOMEM;
		t->mods = m;
		t->cap_mods = cap;
	}
	struct sg_module *m = &t->mods[t->nr_mods];
	memset(m, 0, sizeof *m);
	m->path = strndup(it->text, it->text_len);
	if (!m->path)
		return -ENOMEM;
	m->bias = it->mod->bias;
	m->start = it->mod->start;
	m->end = it->mod->end;
	t->nr_mods++;
	return 0;
}

static int sg_add_stack(struct sg_trace *t, const struct kvt_trace_item *it)
{
	uint32_t id = it->stack->id;
	if (!id || id > 1u << 24)
		return 0;                            /* not one the writer makes */
	if (id > t->nr_stacks) {
		struct sg_stack *s = realloc(t->stacks, id * sizeof *s);
		if (!s)
			return -ENOMEM;
		memset(s + t->nr_stacks, 0, (id - t->nr_stacks) * sizeof *s);
		t->stacks = s;
		t->nr_stacks = id;
	}
	struct sg_stack *s = &t->stacks[id - 1];
	free(s->ips);
	s->nr = it->stack->nr_frames;
	s->ips = malloc((s->nr ? s->nr : 1) * sizeof *s->ips);
	if (!s->ips)
		return -ENOMEM;
	memcpy(s->ips, it->ips, s->nr * sizeof *s->ips);
	return 0;
}

/* The function holding return address ip (copied into buf), with its
 * module's base name. */
static const char *sg_symbol(struct sg_trace *t, uint64_t ip, const char **mod,
			     char *buf, size_t len)
{
	for (size_t i = 0; i < t->nr_mods; i++) {
		struct sg_module *m = &t->mods[i];
		if (ip < m->start || ip >= m->end)
			continue;
		if (!m->state) {
			struct kvt_dwsym_args a = { .path = m->path, .lo = m->start - m->bias,
						    .hi = m->end - m->bias };
			char note[1024];
			m->state = kvt_dwsym_open(&m->sym, &a, note, sizeof note) ? -1 : 1;
		}
		const char *b = strrchr(m->path, '/');
		*mod = b ? b + 1 : m->path;
		/* the raw (mangled) symbol: what a site~ rule matches in the hook */
		static struct kvt_dwsym_loc loc;
		if (m->state < 0 || !kvt_dwsym_lookup(m->sym, ip - m->bias - 1, &loc) ||
		    !loc.symbol[0])
			return NULL;
		snprintf(buf, len, "%s", loc.symbol);
		return buf;
	}
	*mod = "?";
	return NULL;
}

/* ---- ranges and chunk touches -------------------------------------------------- */

static size_t sg_range_find(const struct sg_trace *t, uint64_t addr)
{
	size_t lo = 0, hi = t->nr_ranges;            /* first range with base > addr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->ranges[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int sg_range_add(struct sg_trace *t, uint64_t base, uint64_t size,
			int redirected, int kv)
{
	if (!size)
		return 0;
	if (t->nr_ranges == t->cap_ranges) {
		size_t cap = t->cap_ranges ? 2 * t->cap_ranges : 64;
		struct sg_range *r = realloc(t->ranges, cap * sizeof *r);
		if (!r)
			return -ENOMEM;
		t->ranges = r;
		t->cap_ranges = cap;
	}
	size_t at = sg_range_find(t, base);
	uint32_t *stamp = calloc((size - 1) / SG_CHUNK_BYTES + 1, sizeof *stamp);
	if (!stamp)
		return -ENOMEM;
	memmove(&t->ranges[at + 1], &t->ranges[at], (t->nr_ranges - at) * sizeof *t->ranges);
	t->ranges[at] = (struct sg_range){ base, size, stamp, (uint8_t)redirected, (uint8_t)kv };
	t->nr_ranges++;
	return 0;
}

static void sg_range_remove(struct sg_trace *t, uint64_t base)
{
	size_t at = sg_range_find(t, base);
	if (!at || t->ranges[at - 1].base != base)
		return;
	at--;
	free(t->ranges[at].stamp);
	memmove(&t->ranges[at], &t->ranges[at + 1], (t->nr_ranges - at - 1) * sizeof *t->ranges);
	t->nr_ranges--;
}

static void sg_window(struct sg_trace *t, uint64_t t_ns)
{
	uint64_t w = t_ns / t->window_ns;
	if (w == t->cur_window)
		return;
	for (int c = 0; c < 2; c++) {
		if (t->hot[c] > t->hot_max[c])
			t->hot_max[c] = t->hot[c];
		t->hot[c] = 0;
	}
	t->cur_window = w;
}

/* [addr, addr+bytes) was read or written at t_ns. A chunk counts in the
 * window when it is touched again: its first touch (prefill, a restore) is
 * a fill, not reuse. Whole-range memsets (the zeroing at birth) the caller
 * leaves out altogether. */
static int sg_touch(struct sg_trace *t, uint64_t addr, uint64_t bytes, uint64_t t_ns)
{
	size_t at = sg_range_find(t, addr);
	if (!at || !bytes)
		return 0;
	struct sg_range *r = &t->ranges[at - 1];
	if (addr - r->base >= r->size)
		return 0;
	uint64_t off = addr - r->base, last = off + bytes - 1;
	if (last >= r->size || last < off)
		last = r->size - 1;
	sg_window(t, t_ns);
	uint32_t stamp = (uint32_t)(t->cur_window + 1) & ~SG_SEEN;
	for (uint64_t c = off >> SG_CHUNK_SHIFT; c <= last >> SG_CHUNK_SHIFT; c++) {
		uint32_t st = r->stamp[c];
		if (!st) {
			r->stamp[c] = SG_SEEN;           /* the first write: a fill */
			continue;
		}
		if ((st & ~SG_SEEN) == stamp)
			continue;                        /* counted in this window */
		r->stamp[c] = SG_SEEN | stamp;
		t->hot[0] += r->redirected;
		t->hot[1] += r->kv;
	}
	return 1;
}

/* ---- the second pass ----------------------------------------------------------- */

static int sg_alloc(struct sg_trace *t, struct sg_sum *s, const struct kvt_rec_event *e)
{
	if (e->result || !e->addr || e->kind == KVT_KIND_NONE)
		return 0;                            /* as trace_replay counts them */
	const struct kvt_replay_alloc *a = NULL;
	if (t->ordinal < t->rp->nr && t->rp->allocs[t->ordinal].id == e->addr)
		a = &t->rp->allocs[t->ordinal];
	t->ordinal++;
	int kv = a && a->kv_final, redirected = e->placement != KVT_PLACE_NATIVE;
	struct sg_stack *st = e->stack_id && e->stack_id <= t->nr_stacks ?
			      &t->stacks[e->stack_id - 1] : NULL;
	s->nr_allocs++;
	if (kv) {
		if (!t->kv_seen && t->last_total) {
			s->kv_free = t->last_free;
			s->kv_total = t->last_total;
		}
		t->kv_seen = 1;
		s->nr_kv++;
		s->kv_bytes += e->size;
		s->kv_min = s->kv_min && s->kv_min < e->size ? s->kv_min : e->size;
		s->kv_max = s->kv_max > e->size ? s->kv_max : e->size;
		s->kv_kinds |= 1u << e->kind;
		if (a->resolved && a->res.verdict == KVT_VERDICT_LATE)
			s->nr_late++;
		else if (a->resolved)
			s->nr_confirmed++;
		else
			s->nr_birth++;
		if (st)
			st->kv_bytes += e->size;
	} else {
		if (st)
			st->other = 1;
		if ((SG_KV_KINDS >> e->kind & 1) && e->size > s->other_max)
			s->other_max = e->size;
		if ((SG_HOST_KINDS >> e->kind & 1) && e->size > s->host_max) {
			s->host_max = e->size;
			s->host_kind = e->kind;
		}
	}
	t->any_redirected |= redirected;
	if (kv || redirected)
		return sg_range_add(t, e->addr, e->size, redirected, kv);
	return 0;
}

static int sg_event(struct sg_trace *t, struct sg_sum *s, const struct kvt_rec_event *e)
{
	switch (e->op) {
	case KVT_OP_ALLOC:
		return sg_alloc(t, s, e);
	case KVT_OP_FREE:
		if (!e->result)
			sg_range_remove(t, e->addr);
		return 0;
	case KVT_OP_MEMINFO:
		if (!e->result) {
			t->last_free = e->addr;
			t->last_total = e->size;
		}
		return 0;
	case KVT_OP_COPY:
		s->nr_copy++;
		if (!e->result)
			s->nr_touch += sg_touch(t, e->addr, e->size, e->t_ns) +
				       sg_touch(t, e->aux, e->size, e->t_ns);
		return 0;
	case KVT_OP_MEMSET: {
		s->nr_memset++;
		size_t at = sg_range_find(t, e->addr);
		const struct sg_range *r = at ? &t->ranges[at - 1] : NULL;
		if (!e->result && !(r && r->base == e->addr && e->size >= r->size))
			s->nr_touch += sg_touch(t, e->addr, e->size, e->t_ns);
		return 0;
	}
	case KVT_OP_LAUNCH:
		s->nr_launch++;                      /* names a function, not a range */
		return 0;
	default:
		return 0;
	}
}

/* The innermost frame of the KV stack with the most bytes whose function no
 * non-KV allocation went through: what a site~ rule can name. */
static void sg_pick_site(struct sg_trace *t, struct sg_sum *s)
{
	struct sg_stack *best = NULL;
	for (size_t i = 0; i < t->nr_stacks; i++)
		if (t->stacks[i].kv_bytes && (!best || t->stacks[i].kv_bytes > best->kv_bytes))
			best = &t->stacks[i];
	if (!best || best->kv_bytes <= s->site_bytes)
		return;
	for (uint32_t f = 0; f < best->nr; f++) {
		char b1[512], b2[512];
		const char *mod, *sym = sg_symbol(t, best->ips[f], &mod, b1, sizeof b1);
		int shared = !sym;
		for (size_t i = 0; sym && !shared && i < t->nr_stacks; i++) {
			const struct sg_stack *o = &t->stacks[i];
			for (uint32_t g = 0; o->other && g < o->nr && !shared; g++) {
				const char *m2, *s2 = sg_symbol(t, o->ips[g], &m2, b2, sizeof b2);
				shared = s2 && !strcmp(s2, sym);
			}
		}
		if (shared)
			continue;
		snprintf(s->site, sizeof s->site, "%s", sym);
		snprintf(s->site_mod, sizeof s->site_mod, "%s", mod);
		s->site_bytes = best->kv_bytes;
		s->site_shared = 0;
		return;
	}
	s->site_shared = !s->site[0];
}

static void sg_trace_free(struct sg_trace *t)
{
	for (size_t i = 0; i < t->nr_mods; i++) {
		kvt_dwsym_close(t->mods[i].sym);
		free(t->mods[i].path);
	}
	for (size_t i = 0; i < t->nr_stacks; i++)
		free(t->stacks[i].ips);
	for (size_t i = 0; i < t->nr_ranges; i++)
		free(t->ranges[i].stamp);
	free(t->mods);
	free(t->stacks);
	free(t->ranges);
}

static int sg_read(struct sg_trace *t, struct sg_sum *s, const char *path)
{
	struct kvt_trace_reader *rd = calloc(1, sizeof *rd);
	struct kvt_trace_item it;
	int rc = rd ? kvt_trace_reader_open(rd, path) : -ENOMEM;
	while (!rc && (rc = kvt_trace_next(rd, &it)) > 0) {
		rc = 0;
		if (it.type == KVT_REC_MODULE)
			rc = sg_add_module(t, &it);
		else if (it.type == KVT_REC_STACK)
			rc = sg_add_stack(t, &it);
		else if (it.ev)
			rc = sg_event(t, s, it.ev);
	}
	if (rc < 0)
		fprintf(stderr, "kvtier policy suggest: %s: %s\n", path,
			rc == -ENOMEM ? "out of memory" : rd->err);
	if (rd)
		kvt_trace_reader_close(rd);
	free(rd);
	return rc < 0 ? rc : 0;
}

/* One trace: classify (first pass), then measure (second pass). */
static int sg_trace(const char *path, uint64_t window_ns, struct sg_sum *s)
{
	static struct kvt_policy pol;
	static struct kvt_replay rp;
	char err[256];
	kvt_policy_default(&pol);
	memset(&rp, 0, sizeof rp);
	kvt_replay_init(&rp, &pol, NULL, 0);
	if (kvt_trace_replay(path, &rp, err, sizeof err) < 0) {
		size_t n = strlen(path);         /* an open failure names the path already */
		int named = !strncmp(err, path, n) && err[n] == ':';
		fprintf(stderr, "kvtier policy suggest: %s%s%s\n", named ? "" : path,
			named ? "" : ": ", err);
		free(rp.allocs);
		return 1;
	}
	struct sg_trace t = { .rp = &rp, .window_ns = window_ns };
	int rc = sg_read(&t, s, path);
	if (!rc) {
		sg_window(&t, UINT64_MAX);           /* close the last window */
		int c = t.any_redirected ? 0 : 1;       /* redirected ranges if any */
		uint64_t b = t.hot_max[c] << SG_CHUNK_SHIFT;
		if (b) {
			s->hot_bytes = b > s->hot_bytes ? b : s->hot_bytes;
			s->hot_from = s->hot_from > 2 - c ? s->hot_from : 2 - c;
		}
		sg_pick_site(&t, s);
		s->nr_traces++;
	}
	sg_trace_free(&t);
	free(rp.allocs);
	return rc ? 1 : 0;
}

/* ---- the suggestion ------------------------------------------------------------ */

static uint64_t sg_pow2_floor(uint64_t v)
{
	uint64_t p = 1;
	while (v >> 1 >= p)
		p <<= 1;
	return v ? p : 0;
}

/* site~ glob from a symbol: the parser's glob characters, under 64 bytes;
 * glob metacharacters in the name match themselves through '?'. */
static void sg_glob(const char *sym, char *out, size_t len)
{
	size_t n = 0;
	for (; sym[n] && n + 2 < len; n++) {
		char c = sym[n];
		int bad = c == ',' || c == ';' || c == ' ' || c == '\t' || c == '=' ||
			  c == '*' || c == '?' || c == '[' || c == ']' ||
			  (unsigned char)c < 0x20;
		out[n] = bad ? '?' : c;
	}
	if (sym[n])
		out[n++] = '*';
	out[n] = 0;
}

static uint64_t sg_budget(const struct sg_sum *s, uint64_t hot)
{
	uint64_t b = hot + hot / 4;                  /* 25 % headroom */
	b = (b + SG_CHUNK_BYTES - 1) & ~(SG_CHUNK_BYTES - 1);
	if (s->kv_free && b > s->kv_free)
		b = s->kv_free & ~(SG_CHUNK_BYTES - 1);
	return b;
}

static void sg_print_kv(FILE *o, const struct sg_sum *s)
{
	char a[32], b[32], c[32];
	fprintf(o, "# KV-like: %llu allocation%s, %s in all, sizes %s..%s (kinds:",
	       (unsigned long long)s->nr_kv, s->nr_kv == 1 ? "" : "s",
	       kvt_format_size(s->kv_bytes, a, sizeof a),
	       kvt_format_size_exact(s->kv_min, b, sizeof b),
	       kvt_format_size_exact(s->kv_max, c, sizeof c));
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++)
		if (s->kv_kinds >> k & 1)
			fprintf(o, " %s", kvt_policy_kind_name(k));
	fprintf(o, ")\n#   the classifier knew %llu at birth, %llu after a provisional placement, "
	       "%llu only afterwards (late)\n", (unsigned long long)s->nr_birth,
	       (unsigned long long)s->nr_confirmed, (unsigned long long)s->nr_late);
	if (s->site[0])
		fprintf(o, "#   call site: %s (%s); only KV was allocated through it\n",
		       s->site, s->site_mod);
	else if (s->site_shared)
		fprintf(o, "#   call site: every frame of the KV stacks also allocated non-KV "
		       "memory (no site~ rule can tell them apart)\n");
	else
		fprintf(o, "#   call site: unknown (no stacks in the trace: KVTIER_STACK_DEPTH=0?)\n");
}

static void sg_print_budget(FILE *o, const struct sg_sum *s, uint64_t hot, uint64_t budget)
{
	char a[32], b[32], c[32];
	if (s->hot_from)
		fprintf(o, "# hot set: %s of %s KV: 2 MiB chunks of the %s ranges that copies and "
			"memsets touched again (after their first fill) within one %llu ms window\n"
			"#   (%llu touches; launches name no range)\n",
			kvt_format_size(hot, a, sizeof a), kvt_format_size(s->kv_bytes, b, sizeof b),
			s->hot_from == 2 ? "redirected" : "KV", (unsigned long long)s->window_ms,
			(unsigned long long)s->nr_touch);
	else
		fprintf(o, "# hot set: no copy or memset touched the KV ranges after their fill; "
		       "taken as the whole KV, %s\n", kvt_format_size(hot, a, sizeof a));
	fprintf(o, "# HBM budget: the hot set + 25%% headroom, in 2 MiB chunks = %s",
	       kvt_format_size(budget, a, sizeof a));
	if (s->kv_free && budget < hot + hot / 4)
		fprintf(o, " (capped: only %s was free when the KV was allocated)",
		       kvt_format_size(s->kv_free, b, sizeof b));
	fprintf(o, "\n");
	if (s->kv_total) {
		uint64_t r = KVT_POLICY_DEFAULT_RESERVE_BYTES;
		uint64_t def = kvt_policy_budget_default_hbm(s->kv_free, r);
		fprintf(o, "#   without it kvtier derives free - KVTIER_RESERVE = %s - %s = %s\n",
		       kvt_format_size(s->kv_free, a, sizeof a), kvt_format_size(r, b, sizeof b),
		       kvt_format_size(def, c, sizeof c));
	}
	fprintf(o, "# export KVTIER_HBM_BUDGET=%s\n", kvt_format_size_exact(budget, a, sizeof a));
}

/* Builds the rules text into rules (cap bytes); prints the rationale. */
static void sg_rules(FILE *o, const struct sg_sum *s, char *rules, size_t cap)
{
	char f[32], ob[32], g[KVT_POLICY_MAX_GLOB], h[32];
	size_t n = 0;
	if (!s->nr_kv) {
		fprintf(o, "# no KV-like allocation in %u trace%s: the default rules\n",
		       s->nr_traces, s->nr_traces == 1 ? "" : "s");
		snprintf(rules, cap, "%s", KVT_POLICY_DEFAULT_TEXT);
		return;
	}
	uint64_t floor = sg_pow2_floor(s->kv_min);
	fprintf(o, "# size>=%s: the largest power of two under the smallest KV allocation",
	       kvt_format_size_exact(floor, f, sizeof f));
	if (s->other_max)
		fprintf(o, s->other_max < floor ? "; every non-KV one is smaller (largest %s)"
						: "; larger non-KV ones (up to %s) are kept out by 'kv'",
			kvt_format_size_exact(s->other_max, ob, sizeof ob));
	fprintf(o, "\n");
	if (s->nr_late && s->site[0]) {
		sg_glob(s->site, g, sizeof g);
		fprintf(o, "# site~%s: %llu KV allocation%s recognised too late to move; "
		       "name the call site\n", g, (unsigned long long)s->nr_late,
		       s->nr_late == 1 ? " was" : "s were");
		n += (size_t)snprintf(rules + n, cap - n, "device|async,size>=%s,site~%s => managed:cxl; ",
				      f, g);
	} else if (s->site[0]) {
		sg_glob(s->site, g, sizeof g);
		fprintf(o, "#   (if the classifier misses KV in another run, add in front: "
		       "'device|async,size>=%s,site~%s => managed:cxl')\n", f, g);
	}
	n += (size_t)snprintf(rules + n, cap - n, "kv,size>=%s => managed:cxl; ", f);
	if (s->host_max >= s->kv_max && s->host_max >= (64ull << 20)) {
		int pinned = s->host_kind == KVT_KIND_HOST;
		fprintf(o, "# a %s allocation of %s (as big as the KV) stays native; to put it on the "
		       "far node add '%s,size>=%s => %s:cxl'\n", kvt_policy_kind_name(s->host_kind),
		       kvt_format_size_exact(s->host_max, h, sizeof h), kvt_policy_kind_name(s->host_kind),
		       kvt_format_size_exact(sg_pow2_floor(s->host_max), ob, sizeof ob),
		       pinned ? "pinned" : "bind");
	}
	snprintf(rules + n, cap - n, "* => native");
}

/* The rationale (unless quiet), then the rules, checked and canonical. */
static int sg_print(const struct sg_sum *s, int quiet)
{
	static struct kvt_policy pol;
	struct kvt_policy_error err;
	char rules[1024], canon[KVT_POLICY_MAX_TEXT * 2];
	FILE *o = quiet ? fopen("/dev/null", "w") : stdout;
	if (!o)
		return 1;
	fprintf(o, "# kvtier policy suggest: %u trace%s, %llu allocations; %llu copies, "
		"%llu memsets, %llu launches\n", s->nr_traces, s->nr_traces == 1 ? "" : "s",
		(unsigned long long)s->nr_allocs, (unsigned long long)s->nr_copy,
		(unsigned long long)s->nr_memset, (unsigned long long)s->nr_launch);
	if (s->nr_kv)
		sg_print_kv(o, s);
	sg_rules(o, s, rules, sizeof rules);
	if (s->nr_kv) {
		uint64_t hot = s->hot_from && s->hot_bytes < s->kv_bytes ? s->hot_bytes
									 : s->kv_bytes;
		sg_print_budget(o, s, hot, sg_budget(s, hot));
	}
	if (o != stdout)
		fclose(o);
	if (kvt_policy_parse(rules, &pol, &err)) {      /* a bug here, not the user's */
		fprintf(stderr, "kvtier policy suggest: internal error: '%s': %s\n", rules, err.msg);
		return 1;
	}
	kvt_policy_format(&pol, canon, sizeof canon);
	printf("%s\n", canon);
	return 0;
}

/* ---- the command ------------------------------------------------------------------ */

static void suggest_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier policy suggest [--window MS] [-q] TRACE|DIR|RUNID...\n"
		"  Proposes KVTIER_POLICY rules and an HBM budget from profiled runs\n"
		"  (traces written with KVTIER_TRACE, e.g. by 'kvtier run'): the call sites\n"
		"  and sizes the KV classifier recognised, the hot set (2 MiB chunks of the\n"
		"  redirected ranges, else the KV, touched by copies and memsets within one\n"
		"  window) and a budget of the hot set + 25%%. A directory, or the run id\n"
		"  of a ./kvtier-RUNID.* directory 'kvtier run' made, reads its traces.\n"
		"  Prints the rationale as '#' lines, then the rules in canonical form\n"
		"  (the one line without '#', as 'kvtier policy check' prints it).\n"
		"  --window MS  hot-set window (default 1000, KVTIER_DECAY_MS's default)\n"
		"  -q           print only the rules\n");
}

int kvt_cmd_suggest(int argc, char **argv)
{
	long long window_ms = 1000;
	int quiet = 0, nr = 0, only_paths = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		if (only_paths || a[0] != '-' || !a[1]) {
			nr++;
		} else if (!strcmp(a, "--")) {
			only_paths = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			suggest_usage(stdout);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--window")) &&
			   !kvt_parse_int(v, 1, 86400000, &window_ms)) {
			;                       /* --window MS or --window=MS */
		} else {
			fprintf(stderr, "kvtier policy suggest: bad or incomplete option '%s'\n", a);
			suggest_usage(stderr);
			return 2;
		}
	}
	if (!nr) {
		suggest_usage(stderr);
		return 2;
	}
	struct sg_sum s = { .window_ms = (uint64_t)window_ms };
	only_paths = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_paths && !strcmp(a, "--")) {
			only_paths = 1;
			continue;
		}
		if (!only_paths && a[0] == '-' && a[1]) {
			i += !strcmp(a, "--window");
			continue;
		}
		/* a run's directory or id reads each of its traces */
		struct kvt_paths paths = { 0 };
		char err[512];
		int bad = kvt_run_arg_traces(a, &paths, err, sizeof err);
		if (bad)
			fprintf(stderr, "kvtier policy suggest: %s\n", err);
		for (int k = 0; !bad && k < paths.n; k++)
			bad = sg_trace(paths.v[k], (uint64_t)window_ms * 1000000, &s);
		kvt_paths_free(&paths);
		if (bad)
			return 1;
	}
	return sg_print(&s, quiet);
}
