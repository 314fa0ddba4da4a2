// SPDX-License-Identifier: MIT
/* Read-side queries of the report model for the printers: the rebinned
 * timeline, top call sites, chunk order and lazy offline symbolization
 * through libdwfl (tools/dwsym.c: a module is opened on first use; at most
 * MAX_LOADED stay open, so memory stays bounded by the modules a report
 * names) with its notes. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_out.h"
#include "kvtier/units.h"

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

/* ---- symbolization ---- */

void kvt_report_note(struct kvt_report *r, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	for (uint32_t i = 0; i < r->nr_notes; i++)
		if (!strcmp(r->notes[i], buf))
			return;                 /* one note per cause */
	fprintf(stderr, "kvtier report: warning: %s\n", buf);
	if (r->nr_notes < KVT_RPT_MAX_NOTES && (r->notes[r->nr_notes] = strdup(buf)))
		r->nr_notes++;
}

/* The module's symbols, opened on first use (at most MAX_LOADED). */
static struct kvt_dwsym *module_syms(struct kvt_report *r, struct kvt_rpt_module *m)
{
	static uint32_t nr_loaded;
	if (m->sym_state)
		return m->sym_state > 0 ? m->sym : NULL;
	m->sym_state = -1;
	if (nr_loaded >= MAX_LOADED) {
		kvt_report_note(r, "more than %u modules to symbolize: the others are shown as ?",
				MAX_LOADED);
		return NULL;
	}
	struct kvt_dwsym_args a = { m->path, m->build_id, m->build_id_len, m->lo, m->hi,
				    r->debuginfo_path };
	char note[1024];
	int ret = kvt_dwsym_open(&m->sym, &a, note, sizeof note);
	if (note[0])
		kvt_report_note(r, "%s", note);
	if (ret)
		return NULL;
	m->sym_state = 1;
	nr_loaded++;
	return m->sym;
}

const struct kvt_dwsym_loc *kvt_report_loc(struct kvt_report *r, const struct kvt_rpt_frame *f)
{
	static struct kvt_dwsym_loc loc;
	static const struct kvt_report *last_r;         /* --diff has two reports */
	static uint32_t last_mod = KVT_RPT_NO_MOD;
	static uint64_t last_off;
	static int last_ok;
	if (f->mod >= r->nr_mods || !f->off)
		return NULL;
	if (r == last_r && f->mod == last_mod && f->off == last_off)
		return last_ok ? &loc : NULL;
	struct kvt_dwsym *s = module_syms(r, &r->mods[f->mod]);
	last_r = r;
	last_mod = f->mod;
	last_off = f->off;
	/* a return address: look up the call instruction just before it */
	last_ok = s && kvt_dwsym_lookup(s, f->off - 1, &loc);
	if (last_ok)
		loc.sym_off++;
	return last_ok ? &loc : NULL;
}

const char *kvt_report_func(struct kvt_report *r, const struct kvt_rpt_frame *f,
			    uint64_t *sym_off)
{
	const struct kvt_dwsym_loc *l = kvt_report_loc(r, f);
	if (sym_off)
		*sym_off = l ? l->sym_off : 0;
	return l && l->fr[0].func[0] ? l->fr[0].func : NULL;
}

void kvt_report_symbolize(struct kvt_report *r)
{
	uint32_t idx[KVT_RPT_TOP];
	for (int by_count = 0; by_count < 2; by_count++) {
		uint32_t n = kvt_report_top(r, by_count, idx, KVT_RPT_TOP);
		for (uint32_t k = 0; k < n; k++) {
			for (uint32_t j = 0; idx[k] && j < r->sites[idx[k]].nr_frames; j++)
				kvt_report_loc(r, &r->sites[idx[k]].frames[j]);
			uint32_t nr;
			const struct kvt_rpt_stack *st = idx[k] ? kvt_report_site_stack(r, idx[k], &nr) : NULL;
			for (uint32_t j = 0; st && j < st->nr_frames; j++)
				kvt_report_loc(r, &r->stk.frames[st->first + j]);
		}
	}
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

const char *kvt_rpt_chunk_alloc_label(struct kvt_report *r, const struct kvt_rpt_chunk *c,
				      char *buf, size_t len)
{
	char sz[32], site[400];
	if (!c->range_bytes) {
		snprintf(buf, len, "trace %u, 0x%" PRIx64, c->file, c->addr);
		return buf;
	}
	snprintf(buf, len, "0x%" PRIx64 " (%s) at %s", c->range_start,
		 kvt_format_size(c->range_bytes, sz, sizeof sz),
		 kvt_rpt_site_label(r, c->site, site, sizeof site));
	return buf;
}
