// SPDX-License-Identifier: MIT
/* Full call stacks of `kvtier report` (model in report.h): every distinct
 * stack that allocated, with its bytes and count, so that a call site can
 * show its callers down to main and the whole run can be written as
 * flame-graph input (--format folded). kvtier's own frames (libkvtier*)
 * are kept in the model and hidden by every printer. Memory grows with
 * distinct stacks, never with events. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_out.h"

struct kvt_rpt_stack_id {               /* one STACK record of the current trace */
	uint32_t id, glob;              /* glob: index in stk.v, or UINT32_MAX */
	uint64_t first, hash;           /* its frames in stk.id_frames */
	uint32_t nr_frames, site;       /* site: the one glob was found for */
};

static int grow(void **p, uint64_t *cap, size_t elem, uint64_t need)
{
	if (need <= *cap)
		return 0;
	uint64_t nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	void *np = realloc(*p, nc * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

static int grow32(void **p, uint32_t *cap, size_t elem, uint32_t need)
{
	uint64_t c = *cap;
	int ret = grow(p, &c, elem, need);
	*cap = (uint32_t)c;
	return ret;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static int same_frames(const struct kvt_rpt_frame *a, const struct kvt_rpt_frame *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].mod != b[i].mod || a[i].off != b[i].off)
			return 0;
	return 1;
}

/* ---- building ---- */

static void ids_reset(struct kvt_rpt_stacks *s, uint32_t file)
{
	if (s->ids_file == file)
		return;
	s->ids_file = file;
	s->nr_ids = 0;
	s->nr_id_frames = 0;
	if (s->ids)
		memset(s->ids, 0, s->ids_cap * sizeof *s->ids);
}

/* The slot of id in the current trace's table (open addressing, id 0 never
 * stored): the one holding it, or the empty one where it goes. */
static struct kvt_rpt_stack_id *id_slot(struct kvt_rpt_stacks *s, uint32_t id)
{
	if (!s->ids_cap)
		return NULL;
	uint32_t i = (uint32_t)mix(0, id) & (s->ids_cap - 1);
	while (s->ids[i].id && s->ids[i].id != id)
		i = (i + 1) & (s->ids_cap - 1);
	return &s->ids[i];
}

static int ids_rehash(struct kvt_rpt_stacks *s)
{
	uint32_t cap = s->ids_cap ? s->ids_cap * 2 : 256;
	struct kvt_rpt_stack_id *old = s->ids, *n = calloc(cap, sizeof *n);
	uint32_t old_cap = s->ids_cap;
	if (!n)
		return -ENOMEM;
	s->ids = n;
	s->ids_cap = cap;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].id)
			*id_slot(s, old[i].id) = old[i];
	free(old);
	return 0;
}

int kvt_rpt_stacks_on_stack(struct kvt_report *r, uint32_t id, const void *ips, uint32_t n)
{
	struct kvt_rpt_stacks *s = &r->stk;
	ids_reset(s, r->nr_files + 1);
	if (!id)
		return 0;
	if ((s->nr_ids + 1) * 2 > s->ids_cap && ids_rehash(s))
		return -ENOMEM;
	if (grow((void **)&s->id_frames, &s->cap_id_frames, sizeof *s->id_frames,
		 s->nr_id_frames + n))
		return -ENOMEM;
	struct kvt_rpt_stack_id *e = id_slot(s, id);
	s->nr_ids += !e->id;
	*e = (struct kvt_rpt_stack_id){ id, UINT32_MAX, s->nr_id_frames, 0, n, 0 };
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ip;
		memcpy(&ip, (const char *)ips + 8 * i, sizeof ip);      /* only 4-byte aligned */
		struct kvt_rpt_frame fr = kvt_rpt_frame_of(&r->cur, ip);
		s->id_frames[s->nr_id_frames++] = fr;
		e->hash = mix(e->hash, fr.off ^ ((uint64_t)fr.mod << 40));
	}
	return 0;
}

static int v_rehash(struct kvt_rpt_stacks *s)
{
	uint32_t cap = s->hash_cap ? s->hash_cap * 2 : 256;
	uint32_t *h = malloc(cap * sizeof *h);
	if (!h)
		return -ENOMEM;
	memset(h, 0xff, cap * sizeof *h);
	for (uint32_t i = 0; i < s->nr; i++) {
		uint32_t k = (uint32_t)mix(s->v[i].hash, s->v[i].site) & (cap - 1);
		while (h[k] != UINT32_MAX)
			k = (k + 1) & (cap - 1);
		h[k] = i;
	}
	free(s->hash);
	s->hash = h;
	s->hash_cap = cap;
	return 0;
}

/* The entry of (site, the id's frames), made when new. */
static int glob_of(struct kvt_rpt_stacks *s, const struct kvt_rpt_stack_id *e, uint32_t site,
		   uint32_t *out)
{
	const struct kvt_rpt_frame *fr = &s->id_frames[e->first];
	if ((s->nr + 1) * 2 > s->hash_cap && v_rehash(s))
		return -ENOMEM;
	uint32_t k = (uint32_t)mix(e->hash, site) & (s->hash_cap - 1);
	for (; s->hash[k] != UINT32_MAX; k = (k + 1) & (s->hash_cap - 1)) {
		const struct kvt_rpt_stack *g = &s->v[s->hash[k]];
		if (g->hash == e->hash && g->site == site && g->nr_frames == e->nr_frames &&
		    same_frames(&s->frames[g->first], fr, e->nr_frames)) {
			*out = s->hash[k];
			return 0;
		}
	}
	if (grow32((void **)&s->v, &s->cap, sizeof *s->v, s->nr + 1) ||
	    grow((void **)&s->frames, &s->cap_frames, sizeof *s->frames, s->nr_frames + e->nr_frames))
		return -ENOMEM;
	memcpy(&s->frames[s->nr_frames], fr, e->nr_frames * sizeof *fr);
	s->v[s->nr] = (struct kvt_rpt_stack){ s->nr_frames, e->nr_frames, site, e->hash, 0, 0 };
	s->nr_frames += e->nr_frames;
	s->hash[k] = s->nr;
	*out = s->nr++;
	return 0;
}

void kvt_rpt_stacks_on_alloc(struct kvt_report *r, uint32_t id, uint32_t site, uint64_t size)
{
	struct kvt_rpt_stacks *s = &r->stk;
	ids_reset(s, r->nr_files + 1);
	struct kvt_rpt_stack_id *e = id ? id_slot(s, id) : NULL;
	if (!site)
		return;                 /* no stack: printed as its site, (no stack recorded) */
	if (!e || !e->id) {             /* cannot be: a site comes from a STACK record */
		s->lost_nr++;
		s->lost_bytes += size;
		return;
	}
	if ((e->glob == UINT32_MAX || e->site != site) && glob_of(s, e, site, &e->glob)) {
		e->glob = UINT32_MAX;
		s->lost_nr++;
		s->lost_bytes += size;
		return;
	}
	e->site = site;
	s->v[e->glob].nr++;
	s->v[e->glob].bytes += size;
	free(s->best);                  /* the printers' index is stale */
	s->best = NULL;
}

void kvt_rpt_stacks_free(struct kvt_report *r)
{
	struct kvt_rpt_stacks *s = &r->stk;
	free(s->v);
	free(s->frames);
	free(s->hash);
	free(s->ids);
	free(s->id_frames);
	free(s->best);
	memset(s, 0, sizeof *s);
}

/* ---- queries ---- */

int kvt_report_frame_hidden(const struct kvt_report *r, const struct kvt_rpt_frame *f)
{
	return f->mod < r->nr_mods &&
	       !strncmp(kvt_rpt_base_name(r->mods[f->mod].path), "libkvtier", 9);
}

/* best[site], count[site] for every site (one array, two halves). */
static int index_sites(struct kvt_report *r)
{
	struct kvt_rpt_stacks *s = &r->stk;
	if (s->best && s->nr_best == r->nr_sites)
		return 0;
	free(s->best);
	s->best = malloc(2 * (size_t)r->nr_sites * sizeof *s->best);
	if (!s->best)
		return -ENOMEM;
	s->count = s->best + r->nr_sites;
	s->nr_best = r->nr_sites;
	memset(s->best, 0xff, r->nr_sites * sizeof *s->best);
	memset(s->count, 0, r->nr_sites * sizeof *s->count);
	for (uint32_t i = 0; i < s->nr; i++) {
		uint32_t site = s->v[i].site;
		if (site >= r->nr_sites)
			continue;
		s->count[site]++;
		if (s->best[site] == UINT32_MAX || s->v[i].bytes > s->v[s->best[site]].bytes)
			s->best[site] = i;
	}
	return 0;
}

const struct kvt_rpt_stack *kvt_report_site_stack(struct kvt_report *r, uint32_t site,
						  uint32_t *nr_stacks)
{
	*nr_stacks = 0;
	if (index_sites(r) || site >= r->nr_sites || r->stk.best[site] == UINT32_MAX)
		return NULL;
	*nr_stacks = r->stk.count[site];
	return &r->stk.v[r->stk.best[site]];
}

uint32_t kvt_report_callers(const struct kvt_report *r, const struct kvt_rpt_stack *st,
			    uint32_t site, const struct kvt_rpt_frame **out, uint32_t max)
{
	const struct kvt_rpt_frame *fr = &r->stk.frames[st->first];
	const struct kvt_rpt_site *s = &r->sites[site];
	uint32_t at = 0, n = 0;
	while (at < st->nr_frames && (fr[at].mod != s->at.mod || fr[at].off != s->at.off))
		at++;
	for (uint32_t i = at + 1; i < st->nr_frames && n < max; i++)
		if (!kvt_report_frame_hidden(r, &fr[i]))
			out[n++] = &fr[i];
	return n;
}

/* ---- folded stacks ---- */

/* Append "sep name" to b (at *n of cap), ';' and newlines in name made ':'
 * and ' ' so that the line stays one frame list. */
static void put(char *b, size_t *n, size_t cap, const char *name)
{
	if (*n && *n + 1 < cap)
		b[(*n)++] = ';';
	for (; *name && *n + 1 < cap; name++)
		b[(*n)++] = *name == ';' ? ':' : (unsigned char)*name < 0x20 ? ' ' : *name;
	b[*n] = 0;
}

/* One native frame, root side first: the functions it was inlined into,
 * outermost first, then the innermost one. */
static void put_frame(struct kvt_report *r, const struct kvt_rpt_frame *f, char *b, size_t *n,
		      size_t cap)
{
	char name[512];
	const struct kvt_dwsym_loc *l = f->mod == KVT_RPT_NO_MOD ? NULL : kvt_report_loc(r, f);
	if (!l || !l->fr[0].func[0]) {
		if (f->mod == KVT_RPT_NO_MOD)
			snprintf(name, sizeof name, "0x%" PRIx64, f->off);
		else
			snprintf(name, sizeof name, "%s+0x%" PRIx64, kvt_report_mod_name(r, f->mod),
				 f->off);
		put(b, n, cap, name);
		return;
	}
	for (unsigned i = l->nr; i-- > 0;)
		put(b, n, cap, l->fr[i].func[0] ? l->fr[i].func : "?");
}

/* The folded frames of stack st, root first. */
static void fold(struct kvt_report *r, const struct kvt_rpt_stack *st, char *b, size_t cap)
{
	const struct kvt_rpt_frame *fr = &r->stk.frames[st->first];
	const struct kvt_rpt_site *s = &r->sites[st->site];
	size_t n = 0;
	char lab[512];
	b[0] = 0;
	if (s->nr_py) {                 /* Python frames, then the native ones below them */
		for (uint32_t j = s->nr_py; j-- > 0;)
			put(b, &n, cap, kvt_rpt_py_label(&s->py[j], lab, sizeof lab));
		for (uint32_t j = s->nr_frames; j-- > 0;)
			if (!kvt_report_frame_hidden(r, &s->frames[j]))
				put_frame(r, &s->frames[j], b, &n, cap);
	} else {
		for (uint32_t j = st->nr_frames; j-- > 0;)
			if (!kvt_report_frame_hidden(r, &fr[j]))
				put_frame(r, &fr[j], b, &n, cap);
	}
	if (!n)
		put(b, &n, cap, "(kvtier frames only)");
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct kvt_rpt_folded *)a)->line,
		      ((const struct kvt_rpt_folded *)b)->line);
}

static int add_line(struct kvt_rpt_folded **v, uint32_t *nr, uint32_t *cap, const char *line,
		    uint64_t x)
{
	if (!x)
		return 0;
	if (grow32((void **)v, cap, sizeof **v, *nr + 1))
		return -ENOMEM;
	if (!((*v)[*nr].line = strdup(line)))
		return -ENOMEM;
	(*v)[(*nr)++].v = x;
	return 0;
}

/* Equal lines (sorted next to one another) as one, their values summed. */
static uint32_t merge_lines(struct kvt_rpt_folded *v, uint32_t nr)
{
	uint32_t out = 0;
	for (uint32_t i = 0; i < nr; i++) {
		if (out && !strcmp(v[out - 1].line, v[i].line)) {
			v[out - 1].v += v[i].v;
			free(v[i].line);
		} else {
			v[out++] = v[i];
		}
	}
	return out;
}

int kvt_report_folded(struct kvt_report *r, int by_count, struct kvt_rpt_folded **out,
		      uint32_t *nr_out)
{
	struct kvt_rpt_folded *v = NULL;
	uint32_t nr = 0, cap = 0;
	int ret = 0;
	char *b = malloc(65536);
	*out = NULL;
	*nr_out = 0;
	if (!b)
		return -ENOMEM;
	/* allocations without a stack, and those whose stack was lost: one line
	 * each, so that the lines sum to every successful allocation */
	ret = add_line(&v, &nr, &cap, "(no stack recorded)", by_count ? r->sites[0].nr :
		       r->sites[0].bytes);
	if (!ret)
		ret = add_line(&v, &nr, &cap, "(stack not kept: out of memory)",
			       by_count ? r->stk.lost_nr : r->stk.lost_bytes);
	for (uint32_t i = 0; i < r->stk.nr && !ret; i++) {
		fold(r, &r->stk.v[i], b, 65536);
		ret = add_line(&v, &nr, &cap, b, by_count ? r->stk.v[i].nr : r->stk.v[i].bytes);
	}
	free(b);
	if (ret) {
		kvt_report_folded_free(v, nr);
		return ret;
	}
	if (nr)
		qsort(v, nr, sizeof *v, cmp_line);
	*out = v;
	*nr_out = merge_lines(v, nr);
	return 0;
}

void kvt_report_folded_free(struct kvt_rpt_folded *v, uint32_t nr)
{
	for (uint32_t i = 0; i < nr; i++)
		free(v[i].line);
	free(v);
}

int kvt_report_print_folded(struct kvt_report *r, FILE *f, int by_count)
{
	struct kvt_rpt_folded *v;
	uint32_t nr;
	if (kvt_report_folded(r, by_count, &v, &nr))
		return -1;
	for (uint32_t i = 0; i < nr; i++)
		fprintf(f, "%s %" PRIu64 "\n", v[i].line, v[i].v);
	kvt_report_folded_free(v, nr);
	return ferror(f) ? -1 : 0;
}
