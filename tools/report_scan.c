// SPDX-License-Identifier: MIT
/* One streaming pass of `kvtier report` over trace files (model in
 * report.h): counts, call sites (attributed at STACK time from the MODULE
 * records), the adaptive timeline, chunk heat and the KV-burst heuristic.
 * Never trusts a field of the trace: ids, sizes and addresses may be hostile. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report.h"
#include "../profiler/trace_read.h"

/* ---- small open-addressing maps ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int grow(void **p, uint32_t *cap, size_t elem, uint32_t need)
{
	if (need <= *cap)
		return 0;
	uint32_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *np = realloc(*p, (size_t)nc * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* ---- modules and call sites ---- */

static int is_runtime_lib(const char *path)
{
	static const char *const prefixes[] = {
		"libcudart", "libcuda.", "libcuda-", "libkvtier", "libc.so", "libc-",
		"libpthread", "libdl.", "libdl-", "ld-linux", "linux-vdso",
	};
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
		if (!strncmp(base, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

/* The global module of (path, build id): modules of several traces are one
 * when both match; a rebuilt library (same path, another id) is another.
 * *created says whether it is new. */
static int global_module(struct kvt_report *r, const char *path, size_t len,
			 const uint8_t *id, uint32_t id_len, uint32_t *out, int *created)
{
	*created = 0;
	for (uint32_t i = 0; i < r->nr_mods; i++)
		if (strlen(r->mods[i].path) == len && !memcmp(r->mods[i].path, path, len) &&
		    r->mods[i].build_id_len == id_len && !memcmp(r->mods[i].build_id, id, id_len)) {
			*out = i;
			return 0;
		}
	if (grow((void **)&r->mods, &r->cap_mods, sizeof *r->mods, r->nr_mods + 1))
		return -ENOMEM;
	struct kvt_rpt_module *m = &r->mods[r->nr_mods];
	memset(m, 0, sizeof *m);
	/* all len bytes (not strndup: a NUL inside a damaged record made the
	 * copy shorter than len, and the loop below wrote past it) */
	m->path = malloc(len + 1);
	if (!m->path)
		return -ENOMEM;
	memcpy(m->path, path, len);
	m->path[len] = 0;
	for (size_t i = 0; i < len; i++)       /* keep printers safe from odd bytes */
		if ((unsigned char)m->path[i] < 0x20 || m->path[i] == 0x7f)
			m->path[i] = '?';
	m->runtime = is_runtime_lib(m->path);
	memcpy(m->build_id, id, id_len);
	m->build_id_len = id_len;
	*out = r->nr_mods++;
	*created = 1;
	return 0;
}

static int on_module(struct kvt_report *r, const struct kvt_rec_module *m,
		     const char *path, size_t len)
{
	struct kvt_rpt_file *f = &r->cur;
	uint32_t g;
	int created;
	if (f->nr_mods >= 4096 || global_module(r, path, len, (const uint8_t *)"", 0, &g, &created))
		return f->nr_mods >= 4096 ? 0 : -ENOMEM;
	if (grow((void **)&f->mods, &f->cap_mods, sizeof *f->mods, f->nr_mods + 1))
		return -ENOMEM;
	if (created) {                  /* file addresses, for lookups by build id */
		r->mods[g].lo = m->start >= m->bias ? m->start - m->bias : 0;
		r->mods[g].hi = m->end >= m->bias ? m->end - m->bias : 0;
	}
	f->last_mod_new = created;
	f->mods[f->nr_mods].start = m->start;
	f->mods[f->nr_mods].end = m->end;
	f->mods[f->nr_mods].bias = m->bias;
	f->mods[f->nr_mods].mod = g;
	f->nr_mods++;
	return 0;
}

/* A BUILDID record: the id of the module of the MODULE record before it
 * (one that does not pair with it is ignored). */
static int on_build_id(struct kvt_report *r, const struct kvt_rec_module_buildid *b,
		       const uint8_t *id)
{
	struct kvt_rpt_file *f = &r->cur;
	if (!f->nr_mods || f->mods[f->nr_mods - 1].start != b->start)
		return 0;
	uint32_t g = f->mods[f->nr_mods - 1].mod, ng;
	struct kvt_rpt_module *m = &r->mods[g];
	if (m->build_id_len == b->id_bytes && !memcmp(m->build_id, id, b->id_bytes))
		return 0;
	if (f->last_mod_new && !m->build_id_len) {      /* first seen in this trace */
		memcpy(m->build_id, id, b->id_bytes);
		m->build_id_len = b->id_bytes;
		return 0;
	}
	const char *path = m->path;     /* its own allocation: survives the realloc */
	uint64_t lo = m->lo, hi = m->hi;
	int created;
	if (global_module(r, path, strlen(path), id, b->id_bytes, &ng, &created))
		return -ENOMEM;
	if (created) {
		r->mods[ng].lo = lo;
		r->mods[ng].hi = hi;
	}
	f->mods[f->nr_mods - 1].mod = ng;
	f->last_mod_new = 0;
	return 0;
}

struct kvt_rpt_frame kvt_rpt_frame_of(const struct kvt_rpt_file *f, uint64_t ip)
{
	for (uint32_t i = 0; i < f->nr_mods; i++)
		if (ip >= f->mods[i].start && ip < f->mods[i].end)
			return (struct kvt_rpt_frame){ f->mods[i].mod, ip - f->mods[i].bias };
	return (struct kvt_rpt_frame){ KVT_RPT_NO_MOD, ip };
}

static int rehash_sites(struct kvt_report *r)
{
	uint32_t cap = r->site_hash_cap ? r->site_hash_cap * 2 : 1024;
	uint32_t *h = malloc(cap * sizeof *h);
	if (!h)
		return -ENOMEM;
	memset(h, 0xff, cap * sizeof *h);
	for (uint32_t i = 1; i < r->nr_sites; i++) {
		if (r->sites[i].nr_py)
			continue;               /* Python sites live in py_hash */
		uint64_t k = mix64(r->sites[i].at.off ^ ((uint64_t)r->sites[i].at.mod << 40));
		uint32_t s = (uint32_t)k & (cap - 1);
		while (h[s] != UINT32_MAX)
			s = (s + 1) & (cap - 1);
		h[s] = i;
	}
	free(r->site_hash);
	r->site_hash = h;
	r->site_hash_cap = cap;
	return 0;
}

/* The site of a stack: first frame outside the runtime libraries (the
 * innermost frame when every frame is a runtime one). */
static int site_of_stack(struct kvt_report *r, const void *ips, uint32_t n, uint32_t *out)
{
	struct kvt_rpt_frame fr[KVT_TRACE_MAX_FRAMES];
	uint32_t at = 0;
	int found = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ip;
		memcpy(&ip, (const char *)ips + 8 * i, sizeof ip);  /* only 4-byte aligned */
		fr[i] = kvt_rpt_frame_of(&r->cur, ip);
		if (!found && (fr[i].mod == KVT_RPT_NO_MOD || !r->mods[fr[i].mod].runtime)) {
			at = i;
			found = 1;
		}
	}
	if (!n) {
		*out = 0;
		return 0;
	}
	if ((r->nr_sites + 1) * 2 > r->site_hash_cap && rehash_sites(r))
		return -ENOMEM;
	uint64_t k = mix64(fr[at].off ^ ((uint64_t)fr[at].mod << 40));
	uint32_t s = (uint32_t)k & (r->site_hash_cap - 1);
	for (; r->site_hash[s] != UINT32_MAX; s = (s + 1) & (r->site_hash_cap - 1)) {
		const struct kvt_rpt_site *x = &r->sites[r->site_hash[s]];
		if (x->at.mod == fr[at].mod && x->at.off == fr[at].off && !x->nr_py) {
			*out = r->site_hash[s];
			return 0;
		}
	}
	if (grow((void **)&r->sites, &r->cap_sites, sizeof *r->sites, r->nr_sites + 1))
		return -ENOMEM;
	struct kvt_rpt_site *site = &r->sites[r->nr_sites];
	memset(site, 0, sizeof *site);
	site->at = fr[at];
	uint32_t first = at + 1 > KVT_RPT_FRAMES ? at + 1 - KVT_RPT_FRAMES : 0;
	for (uint32_t i = first; i <= at; i++)
		site->frames[site->nr_frames++] = fr[i];
	r->site_hash[s] = r->nr_sites;
	*out = r->nr_sites++;
	return 0;
}

static int on_stack(struct kvt_report *r, const struct kvt_rec_stack *st, const void *ips)
{
	struct kvt_rpt_file *f = &r->cur;
	uint32_t site;
	r->nr_stacks++;
	if (!st->id || site_of_stack(r, ips, st->nr_frames, &site))
		return st->id ? -ENOMEM : 0;
	if (kvt_rpt_stacks_on_stack(r, st->id, ips, st->nr_frames))
		return -ENOMEM;
	if ((f->nr_stack + 1) * 2 > f->stack_cap) {
		uint32_t cap = f->stack_cap ? f->stack_cap * 2 : 256;
		uint32_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < f->stack_cap; i++) {
			if (!f->stack_key[i])
				continue;
			uint32_t s = (uint32_t)mix64(f->stack_key[i]) & (cap - 1);
			while (k[s])
				s = (s + 1) & (cap - 1);
			k[s] = f->stack_key[i];
			v[s] = f->stack_site[i];
		}
		free(f->stack_key);
		free(f->stack_site);
		f->stack_key = k;
		f->stack_site = v;
		f->stack_cap = cap;
	}
	uint32_t s = (uint32_t)mix64(st->id) & (f->stack_cap - 1);
	while (f->stack_key[s] && f->stack_key[s] != st->id)
		s = (s + 1) & (f->stack_cap - 1);
	f->nr_stack += !f->stack_key[s];
	f->stack_key[s] = st->id;
	f->stack_site[s] = site;
	return 0;
}

uint32_t *kvt_rpt_stack_slot(struct kvt_report *r, uint32_t id)
{
	const struct kvt_rpt_file *f = &r->cur;
	if (id && f->stack_cap) {
		uint32_t s = (uint32_t)mix64(id) & (f->stack_cap - 1);
		for (; f->stack_key[s]; s = (s + 1) & (f->stack_cap - 1))
			if (f->stack_key[s] == id)
				return &f->stack_site[s];
	}
	return NULL;
}

int kvt_rpt_grow_sites(struct kvt_report *r)
{
	return grow((void **)&r->sites, &r->cap_sites, sizeof *r->sites, r->nr_sites + 1);
}

static struct kvt_rpt_site *site_of_event(struct kvt_report *r, uint32_t id)
{
	const uint32_t *slot = kvt_rpt_stack_slot(r, id);
	return &r->sites[slot ? *slot : 0];
}

/* ---- timeline and heat ---- */

static void fold_timeline(struct kvt_report *r)
{
	for (uint32_t i = 0; i < KVT_RPT_FINE / 2; i++) {
		struct kvt_rpt_bucket *d = &r->fine[i];
		const struct kvt_rpt_bucket *a = &r->fine[2 * i], *b = &r->fine[2 * i + 1];
		struct kvt_rpt_bucket m;
		for (unsigned s = 0; s < KVT_RPT_NR_SER; s++)
			m.delta[s] = a->delta[s] + b->delta[s];
		m.nr_events = a->nr_events + b->nr_events;
		m.nr_prefetch = a->nr_prefetch + b->nr_prefetch;
		m.alloc_bytes = a->alloc_bytes + b->alloc_bytes;
		*d = m;
	}
	memset(&r->fine[KVT_RPT_FINE / 2], 0, sizeof r->fine / 2);
	for (uint32_t c = 0; c < r->nr_chunks; c++)
		for (int k = 0; k < 2; k++) {
			uint32_t *cnt = k ? r->chunks[c].fcnt : r->chunks[c].cnt;
			for (uint32_t i = 0; i < KVT_RPT_HEAT_COLS / 2; i++)
				cnt[i] = cnt[2 * i] + cnt[2 * i + 1];
			memset(&cnt[KVT_RPT_HEAT_COLS / 2], 0, KVT_RPT_HEAT_COLS / 2 * sizeof *cnt);
		}
	r->width_ns *= 2;
}

static struct kvt_rpt_bucket *bucket_at(struct kvt_report *r, uint64_t t)
{
	if (t > r->end_ns)
		r->end_ns = t;
	while (t / r->width_ns >= KVT_RPT_FINE)
		fold_timeline(r);
	return &r->fine[t / r->width_ns];
}

static struct kvt_rpt_chunk *chunk_get(struct kvt_report *r, uint64_t addr)
{
	uint64_t a = addr >> KVT_RPT_CHUNK_SHIFT << KVT_RPT_CHUNK_SHIFT;
	uint32_t file = r->nr_files;
	if (!r->chunk_hash_cap || (r->nr_chunks + 1) * 2 > r->chunk_hash_cap) {
		if (r->nr_chunks >= KVT_RPT_MAX_CHUNKS)
			goto lookup;
		uint32_t cap = r->chunk_hash_cap ? r->chunk_hash_cap * 2 : 256;
		uint32_t *h = malloc(cap * sizeof *h);
		if (!h)
			return NULL;
		memset(h, 0xff, cap * sizeof *h);
		for (uint32_t i = 0; i < r->nr_chunks; i++) {
			uint32_t s = (uint32_t)mix64(r->chunks[i].addr ^ r->chunks[i].file) & (cap - 1);
			while (h[s] != UINT32_MAX)
				s = (s + 1) & (cap - 1);
			h[s] = i;
		}
		free(r->chunk_hash);
		r->chunk_hash = h;
		r->chunk_hash_cap = cap;
	}
lookup:;
	uint32_t s = (uint32_t)mix64(a ^ file) & (r->chunk_hash_cap - 1);
	for (; r->chunk_hash[s] != UINT32_MAX; s = (s + 1) & (r->chunk_hash_cap - 1))
		if (r->chunks[r->chunk_hash[s]].addr == a && r->chunks[r->chunk_hash[s]].file == file)
			return &r->chunks[r->chunk_hash[s]];
	if (r->nr_chunks >= KVT_RPT_MAX_CHUNKS ||
	    grow((void **)&r->chunks, &r->cap_chunks, sizeof *r->chunks, r->nr_chunks + 1))
		return NULL;
	struct kvt_rpt_chunk *c = &r->chunks[r->nr_chunks];
	memset(c, 0, sizeof *c);
	c->addr = a;
	c->file = file;
	r->chunk_hash[s] = r->nr_chunks++;
	return c;
}

/* Index of the live redirected range holding addr, or -1. */
static long range_find(const struct kvt_rpt_file *f, uint64_t addr)
{
	uint32_t lo = 0, hi = f->nr_ranges;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->ranges[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < f->ranges[lo - 1].end)
		return (long)lo - 1;
	return -1;
}

static void range_add(struct kvt_rpt_file *f, uint64_t start, uint64_t size, uint32_t site)
{
	uint64_t end = start + size < start ? UINT64_MAX : start + size;
	if (!size || range_find(f, start) >= 0 || f->nr_ranges >= (1u << 20) ||
	    grow((void **)&f->ranges, &f->cap_ranges, sizeof *f->ranges, f->nr_ranges + 1))
		return;
	uint32_t i = 0;
	while (i < f->nr_ranges && f->ranges[i].start < start)   /* few ranges: linear */
		i++;
	if (i < f->nr_ranges && end > f->ranges[i].start)
		end = f->ranges[i].start;                          /* never overlap */
	memmove(&f->ranges[i + 1], &f->ranges[i], (f->nr_ranges - i) * sizeof *f->ranges);
	f->ranges[i] = (struct kvt_rpt_range){ start, end, size, site };
	f->nr_ranges++;
}

static void range_del(struct kvt_rpt_file *f, uint64_t start)
{
	long i = range_find(f, start);
	if (i < 0 || f->ranges[i].start != start)
		return;
	memmove(&f->ranges[i], &f->ranges[i + 1], (f->nr_ranges - i - 1) * sizeof *f->ranges);
	f->nr_ranges--;
}

/* The heat row of the chunk at a inside redirected range rg, named after
 * the allocation the first time it is seen. */
static struct kvt_rpt_chunk *chunk_in(struct kvt_report *r, const struct kvt_rpt_range *rg,
				      uint64_t a)
{
	struct kvt_rpt_chunk *c = chunk_get(r, a);
	if (c && !c->range_bytes) {
		c->range_start = rg->start;
		c->range_bytes = rg->bytes ? rg->bytes : rg->end - rg->start;
		c->site = rg->site;
	}
	return c;
}

static uint32_t heat_col(const struct kvt_report *r, uint64_t t)
{
	return (uint32_t)(t / r->width_ns / (KVT_RPT_FINE / KVT_RPT_HEAT_COLS));
}

/* Count an access to [addr, addr+len) in every redirected chunk it touches. */
static void heat_touch(struct kvt_report *r, uint64_t t, unsigned opi, uint64_t addr, uint64_t len)
{
	long i = range_find(&r->cur, addr);
	if (i < 0)
		return;
	uint64_t end = r->cur.ranges[i].end;
	if (len && addr + len > addr && addr + len < end)
		end = addr + len;
	uint32_t col = heat_col(r, t);
	r->nr_heat_events++;
	for (uint64_t a = addr, n = 0; a < end && n < 4096; n++) {
		struct kvt_rpt_chunk *c = chunk_in(r, &r->cur.ranges[i], a);
		if (!c) {
			r->nr_heat_dropped++;
			return;
		}
		c->total++;
		c->by_op[opi]++;
		c->cnt[col]++;
		uint64_t next = (a >> KVT_RPT_CHUNK_SHIFT << KVT_RPT_CHUNK_SHIFT) +
				(1ull << KVT_RPT_CHUNK_SHIFT);
		if (next <= a || !len)
			break;
		a = next;
	}
}

/* ---- events ---- */

static void burst_feed(struct kvt_report *r, uint64_t t, uint64_t size)
{
	struct kvt_rpt_file *f = &r->cur;
	if (!f->in_segment || size < (1u << 20))
		return;                         /* small allocations do not break a run */
	if (f->run.b == size && f->run.a) {
		f->run.a++;
		f->run.t1_ns = t;
	} else {
		f->run = (struct kvt_rpt_mark){ r->nr_files, t, t, 1, size };
	}
	if (f->run.a >= 2 && f->run.a * f->run.b > f->best.a * f->best.b)
		f->best = f->run;
}

static void burst_close(struct kvt_report *r)
{
	struct kvt_rpt_file *f = &r->cur;
	if (f->best.a >= 2) {
		r->nr_bursts += r->nr_bursts < KVT_RPT_MAX_MARKS;
		r->bursts[r->nr_bursts - 1] = f->best;
	}
	memset(&f->run, 0, sizeof f->run);
	memset(&f->best, 0, sizeof f->best);
}

static void on_alloc(struct kvt_report *r, const struct kvt_rec_event *ev, uint64_t t,
		     struct kvt_rpt_bucket *b)
{
	struct kvt_kind_sum *k = &r->kind[ev->kind];
	struct kvt_rpt_site *site = site_of_event(r, ev->stack_id);
	if (ev->result != 0 || !ev->addr) {
		k->failed++;
		site->nr_failed++;
		uint32_t i = 0;
		while (i < r->nr_fails && (r->fails[i].api != ev->api || r->fails[i].kind != ev->kind ||
					   r->fails[i].result != ev->result))
			i++;
		if (i == r->nr_fails && i < KVT_RPT_MAX_FAILS)
			r->fails[r->nr_fails++] = (struct kvt_rpt_fail){ ev->api, ev->kind,
									 ev->result, 0, 0 };
		if (i < r->nr_fails) {
			r->fails[i].nr++;
			r->fails[i].bytes += ev->size;
		} else {
			r->nr_fail_other++;
		}
		return;
	}
	unsigned p = ev->placement < KVT_PLACE__COUNT ? ev->placement : KVT_PLACE_NATIVE;
	k->nr++;
	k->bytes += ev->size;
	k->live += ev->size;
	if (k->live > k->peak_live)
		k->peak_live = k->live;
	r->place_nr[p]++;
	r->place_bytes[p] += ev->size;
	unsigned lg = ev->size ? 63 - (unsigned)__builtin_clzll(ev->size) : 64;
	r->hist_nr[lg]++;
	r->hist_bytes[lg] += ev->size;
	site->nr++;
	site->bytes += ev->size;
	kvt_rpt_stacks_on_alloc(r, ev->stack_id, (uint32_t)(site - r->sites), ev->size);
	b->delta[ev->kind] += (int64_t)ev->size;
	b->delta[KVT_RPT_SER_PLACE + p] += (int64_t)ev->size;
	b->alloc_bytes += ev->size;
	if (p != KVT_PLACE_NATIVE)
		range_add(&r->cur, ev->addr, ev->size, (uint32_t)(site - r->sites));
	burst_feed(r, t, ev->size);
}

static void on_free(struct kvt_report *r, const struct kvt_rec_event *ev, struct kvt_rpt_bucket *b)
{
	struct kvt_kind_sum *k = &r->kind[ev->kind];
	unsigned p = ev->placement < KVT_PLACE__COUNT ? ev->placement : KVT_PLACE_NATIVE;
	if (ev->result != 0)
		return;
	uint64_t sz = ev->size < k->live ? ev->size : k->live;
	k->nr_free++;
	k->live -= sz;
	b->delta[ev->kind] -= (int64_t)sz;
	b->delta[KVT_RPT_SER_PLACE + p] -= (int64_t)sz;
	if (p != KVT_PLACE_NATIVE)
		range_del(&r->cur, ev->addr);
}

/* ---- timestamps ---- */

/* A record's time is ns since its trace's start, stamped under the writer's
 * lock. One stamped more than 30 days after that start is damaged (8 flipped
 * bytes once gave a 584-year report): it is left out and counted, and the
 * file gets one note naming its offset (after the pass). No run lasts that
 * long; a damaged time below the bound cannot be told from a real one. */
#define KVT_RPT_MAX_T_NS (30ull * 86400 * 1000000000)

static int time_ok(struct kvt_rpt_file *f, uint64_t t_ns, uint64_t offset)
{
	if (t_ns <= KVT_RPT_MAX_T_NS)
		return 1;
	if (!f->nr_bad_time++)
		f->first_bad_off = offset;
	return 0;
}

static void note_bad_time(struct kvt_report *r, const char *path)
{
	const struct kvt_rpt_file *f = &r->cur;
	if (!f->nr_bad_time)
		return;
	kvt_report_note(r, "%s: %" PRIu64 " record%s (events, epochs) stamped more than 30 days "
			"after the trace's start left out (damaged trace; the first at byte %"
			PRIu64 ")", path, f->nr_bad_time, f->nr_bad_time == 1 ? "" : "s",
			f->first_bad_off);
}

/* A record's time on the report's clock (its trace's offset added). */
static uint64_t report_time(const struct kvt_report *r, uint64_t t_ns)
{
	uint64_t t = r->cur.base_ns + t_ns;
	return t < r->cur.base_ns ? UINT64_MAX / 2 : t;   /* hostile time: clamp, do not wrap */
}

static void on_event(struct kvt_report *r, const struct kvt_rec_event *ev)
{
	uint64_t t = report_time(r, ev->t_ns);
	struct kvt_rpt_bucket *b = bucket_at(r, t);
	b->nr_events++;
	r->nr_events++;
	if (ev->op < KVT_OP__COUNT)
		r->by_op[ev->op]++;
	unsigned kind = ev->kind < KVT_KIND__COUNT ? ev->kind : KVT_KIND_NONE;
	struct kvt_rec_event e = *ev;
	e.kind = (uint8_t)kind;
	switch (ev->op) {
	case KVT_OP_ALLOC:
		on_alloc(r, &e, t, b);
		break;
	case KVT_OP_FREE:
		on_free(r, &e, b);
		break;
	case KVT_OP_MEMINFO:
		r->nr_meminfo_total++;
		if (r->nr_meminfo < KVT_RPT_MAX_MARKS)
			r->meminfo[r->nr_meminfo++] = (struct kvt_rpt_mark){
				r->nr_files, t, t, ev->addr, ev->size };
		memset(&r->cur.run, 0, sizeof r->cur.run);   /* runs never span a meminfo */
		r->cur.in_segment = 1;
		break;
	case KVT_OP_PREFETCH:
		b->nr_prefetch++;
		/* fallthrough */
	case KVT_OP_COPY: case KVT_OP_MEMSET: case KVT_OP_LAUNCH:
		if (!r->cur.nr_ranges)
			break;
		{
			unsigned opi = ev->op == KVT_OP_COPY ? 0 : ev->op == KVT_OP_MEMSET ? 1 :
				       ev->op == KVT_OP_LAUNCH ? 2 : 3;
			uint64_t len = ev->op == KVT_OP_LAUNCH ? 0 : ev->size;
			heat_touch(r, t, opi, ev->addr, len);
			if (ev->op == KVT_OP_COPY)
				heat_touch(r, t, opi, ev->aux, len);
		}
		break;
	default:
		break;
	}
}

/* An EPOCH record: on the report's clock (it stretches the timeline as an
 * event would, without counting as one), into the tiering model. */
static int on_epoch(struct kvt_report *r, const struct kvt_rec_epoch *e)
{
	uint64_t t = report_time(r, e->t_ns);
	bucket_at(r, t);
	return kvt_rpt_tier_add(&r->tier, r->nr_files, t, e);
}

/* A FAULTS record: GPU faults per chunk (CUPTI's, one buffer of them) into
 * the fault heat of the redirected chunks; faults outside every live
 * redirected range (freed before CUPTI delivered them) are counted as
 * such. */
static void on_faults(struct kvt_report *r, const struct kvt_rec_faults *fr,
		      const struct kvt_rec_fault_entry *e)
{
	uint64_t t = report_time(r, fr->t_ns);
	bucket_at(r, t);
	uint32_t col = heat_col(r, t);
	for (uint32_t k = 0; k < fr->nr; k++) {
		long i = range_find(&r->cur, e[k].chunk);
		struct kvt_rpt_chunk *c = i < 0 ? NULL : chunk_in(r, &r->cur.ranges[i], e[k].chunk);
		r->nr_faults += e[k].nr;
		if (!c) {
			r->nr_fault_chunks_lost += e[k].nr;
			continue;
		}
		c->faults += e[k].nr;
		c->fcnt[col] += e[k].nr;
	}
}

/* ---- files ---- */

static void file_reset(struct kvt_rpt_file *f)
{
	free(f->mods);
	free(f->stack_key);
	free(f->stack_site);
	free(f->ranges);
	memset(f, 0, sizeof *f);
}

int kvt_report_init(struct kvt_report *r, char *const *paths, int nr_paths,
		    char *err, size_t errlen)
{
	static struct kvt_trace_reader rd;
	memset(r, 0, sizeof *r);
	r->width_ns = 1000;
	r->origin_ns = UINT64_MAX;
	r->sites = calloc(16, sizeof *r->sites);
	r->cap_sites = 16;
	r->nr_sites = 1;
	if (!r->sites || rehash_sites(r))
		return -ENOMEM;
	for (int i = 0; i < nr_paths; i++) {  /* the earliest start is time 0 */
		struct stat st;
		if (!stat(paths[i], &st) && !S_ISREG(st.st_mode))
			continue;            /* a pipe is read once, by kvt_report_add */
		int ret = kvt_trace_reader_open(&rd, paths[i]);
		if (ret) {
			snprintf(err, errlen, "%s: %s", paths[i], rd.err);
			kvt_trace_reader_close(&rd);
			return ret;
		}
		if (rd.hdr.start_mono_ns < r->origin_ns)
			r->origin_ns = rd.hdr.start_mono_ns;
		kvt_trace_reader_close(&rd);
	}
	return 0;
}

static void progress(const struct kvt_report *r, const struct kvt_trace_reader *rd,
		     const char *path)
{
	if (!r->progress || (r->nr_events & ((1u << 20) - 1)) || rd->file_bytes < (64u << 20))
		return;
	fprintf(stderr, "\rkvtier report: %s %3.0f%% (%.1fM events)", path,
		100.0 * (double)rd->offset / (double)rd->file_bytes, (double)r->nr_events / 1e6);
}

int kvt_report_add(struct kvt_report *r, const char *path, char *err, size_t errlen)
{
	static struct kvt_trace_reader rd;    /* 64 KiB record buffer: not on the stack */
	struct kvt_trace_item it;
	int ret = kvt_trace_reader_open(&rd, path);
	if (ret) {
		snprintf(err, errlen, "%s: %s", path, rd.err);
		kvt_trace_reader_close(&rd);
		return ret;
	}
	file_reset(&r->cur);
	if (r->origin_ns == UINT64_MAX)      /* only pipes: the first one's start */
		r->origin_ns = rd.hdr.start_mono_ns;
	r->cur.base_ns = rd.hdr.start_mono_ns - (r->origin_ns <= rd.hdr.start_mono_ns ?
						 r->origin_ns : rd.hdr.start_mono_ns);
	while ((ret = kvt_trace_next(&rd, &it)) > 0) {
		if (it.ev) {
			if (time_ok(&r->cur, it.ev->t_ns, rd.offset - it.ev->head.bytes))
				on_event(r, it.ev);
			progress(r, &rd, path);
		} else if (it.stack) {
			ret = on_stack(r, it.stack, it.ips);
		} else if (it.pystack) {
			ret = kvt_rpt_on_pystack(r, it.pystack, it.pyframes);
		} else if (it.mod) {
			ret = on_module(r, it.mod, it.text, it.text_len);
		} else if (it.build_id) {
			ret = on_build_id(r, it.build_id, it.id);
		} else if (it.end) {
			r->nr_dropped += it.end->nr_dropped;
		} else if (it.type == KVT_REC_INFO) {
			kvt_moves_on_record(&r->moves, it.text, it.text_len);
		} else if (it.faults) {
			if (time_ok(&r->cur, it.faults->t_ns, rd.offset - it.faults->head.bytes))
				on_faults(r, it.faults, it.fault_entries);
		} else if (it.epoch) {
			if (time_ok(&r->cur, it.epoch->t_ns, rd.offset - it.epoch->head.bytes))
				ret = on_epoch(r, it.epoch);
		}
		if (ret < 0) {
			snprintf(rd.err, sizeof rd.err, "out of memory");
			break;
		}
	}
	if (r->progress && rd.file_bytes >= (64u << 20))
		fprintf(stderr, "\n");
	if (ret < 0)
		snprintf(err, errlen, "%s: %s", path, rd.err);
	char stop[256];
	if (kvt_trace_stop_line(&rd, stop, sizeof stop))
		kvt_report_note(r, "%s: %s", path, stop);
	note_bad_time(r, path);
	burst_close(r);
	r->nr_files++;
	r->nr_unended += !rd.saw_end;
	kvt_trace_reader_close(&rd);
	file_reset(&r->cur);
	return ret;
}

void kvt_report_free(struct kvt_report *r)
{
	file_reset(&r->cur);
	for (uint32_t i = 0; i < r->nr_mods; i++) {
		free(r->mods[i].path);
		kvt_dwsym_close(r->mods[i].sym);
	}
	for (uint32_t i = 0; i < r->nr_notes; i++)
		free(r->notes[i]);
	free(r->mods);
	kvt_rpt_py_free(r);
	kvt_rpt_stacks_free(r);
	free(r->sites);
	free(r->site_hash);
	free(r->chunks);
	free(r->chunk_hash);
	kvt_rpt_tier_free(&r->tier);
}
