// SPDX-License-Identifier: MIT
/* Read-side queries of the report model for the printers: the rebinned
 * timeline, top call sites, chunk order and lazy offline symbolization
 * (a module's ELF file is opened on first use; at most MAX_LOADED stay
 * open, so memory stays bounded by the modules a report names). */
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define MAX_LOADED 64u

void kvt_report_timeline(const struct kvt_report *r, struct kvt_rpt_timeline *tl)
{
	memset(tl, 0, sizeof *tl);
	uint64_t span = r->end_ns + 1;
	tl->nr = KVT_RPT_BUCKETS;
	tl->bucket_ns = (span + KVT_RPT_BUCKETS - 1) / KVT_RPT_BUCKETS;
	int64_t cur[KVT_RPT_NR_SER] = { 0 };
	uint32_t used = (uint32_t)(r->end_ns / r->width_ns) + 1;
	for (uint32_t b = 0, i = 0; b < KVT_RPT_BUCKETS; b++) {
		/* fine buckets starting before this bucket's end */
		while (i < used && (unsigned __int128)i * r->width_ns < (unsigned __int128)(b + 1) * tl->bucket_ns) {
			const struct kvt_rpt_bucket *f = &r->fine[i++];
			for (unsigned s = 0; s < KVT_RPT_NR_SER; s++)
				cur[s] += f->delta[s];
			tl->nr_events[b] += f->nr_events;
			tl->nr_prefetch[b] += f->nr_prefetch;
		}
		memcpy(tl->live[b], cur, sizeof cur);
	}
	uint32_t per_col = KVT_RPT_FINE / KVT_RPT_HEAT_COLS;
	tl->heat_cols = (used + per_col - 1) / per_col;
	tl->heat_col_ns = r->width_ns * per_col;
}

uint32_t kvt_report_top(const struct kvt_report *r, int by_count, uint32_t *idx, uint32_t n)
{
	uint32_t got = 0;
	for (uint32_t i = 0; i < r->nr_sites; i++) {
		const struct kvt_rpt_site *s = &r->sites[i];
		uint64_t v = by_count ? s->nr : s->bytes;
		if (!s->nr && !s->nr_failed)
			continue;
		uint32_t j = got < n ? got++ : n;
		/* insertion into the sorted top list (n is small) */
		while (j > 0) {
			const struct kvt_rpt_site *p = &r->sites[idx[j - 1]];
			uint64_t pv = by_count ? p->nr : p->bytes;
			if (pv > v || (pv == v && idx[j - 1] < i))
				break;
			if (j < n)
				idx[j] = idx[j - 1];
			j--;
		}
		if (j < n)
			idx[j] = i;
	}
	return got;
}

const char *kvt_report_mod_name(const struct kvt_report *r, uint32_t mod)
{
	if (mod >= r->nr_mods)
		return "?";
	const char *b = strrchr(r->mods[mod].path, '/');
	return b ? b + 1 : r->mods[mod].path;
}

const char *kvt_report_func(struct kvt_report *r, const struct kvt_rpt_frame *f,
			    uint64_t *sym_off)
{
	static uint32_t nr_loaded;
	if (f->mod >= r->nr_mods)
		return NULL;
	struct kvt_rpt_module *m = &r->mods[f->mod];
	if (!m->sym_state) {
		m->sym_state = -1;
		if (nr_loaded < MAX_LOADED && !kvt_elfsym_open(&m->sym, m->path)) {
			m->sym_state = 1;
			nr_loaded++;
		}
	}
	if (m->sym_state < 0 || !f->off)
		return NULL;
	/* a return address: look up the call instruction just before it */
	uint64_t o = 0;
	const char *fn = kvt_elfsym_lookup(&m->sym, f->off - 1, &o);
	if (sym_off)
		*sym_off = o + 1;
	return fn;
}

static const struct kvt_report *sort_r;

static int cmp_chunk(const void *a, const void *b)
{
	const struct kvt_rpt_chunk *x = &sort_r->chunks[*(const uint32_t *)a];
	const struct kvt_rpt_chunk *y = &sort_r->chunks[*(const uint32_t *)b];
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

uint32_t kvt_report_chunk_order(const struct kvt_report *r, uint32_t *idx)
{
	for (uint32_t i = 0; i < r->nr_chunks; i++)
		idx[i] = i;
	sort_r = r;
	qsort(idx, r->nr_chunks, sizeof *idx, cmp_chunk);
	return r->nr_chunks;
}
