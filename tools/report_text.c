// SPDX-License-Identifier: MIT
/* The text form of `kvtier report` (and the frame labels every format
 * shares). Exact byte counts are printed next to the human sizes so that a
 * reader (or a test) can compare them with the JSON. */
#include <inttypes.h>
#include <string.h>

#include "report.h"
#include "report_out.h"
#include "kvtier/units.h"

const char *kvt_rpt_frame_label(struct kvt_report *r, const struct kvt_rpt_frame *f,
				char *buf, size_t len)
{
	if (f->mod == KVT_RPT_NO_MOD) {
		snprintf(buf, len, "? (0x%" PRIx64 ")", f->off);
		return buf;
	}
	const struct kvt_dwsym_loc *l = kvt_report_loc(r, f);
	const char *fn = l && l->fr[0].func[0] ? l->fr[0].func : "?";
	size_t n = (size_t)snprintf(buf, len, "%s (%s+0x%" PRIx64 ")", fn,
				    kvt_report_mod_name(r, f->mod), f->off);
	return kvt_rpt_inlined(buf, n, len, l);
}

const char *kvt_rpt_inlined(char *buf, size_t n, size_t len, const struct kvt_dwsym_loc *l)
{
	/* " at file:line", then the functions it was inlined into */
	for (unsigned i = 0; l && i < l->nr && n < len; i++) {
		const struct kvt_dwsym_frame *fr = &l->fr[i];
		if (i)
			n += (size_t)snprintf(buf + n, len - n, ", inlined into %s",
					      fr->func[0] ? fr->func : "?");
		if (fr->line && n < len)
			n += (size_t)snprintf(buf + n, len - n, " at %s:%u",
					      kvt_rpt_base_name(fr->file), fr->line);
	}
	return buf;
}

const char *kvt_rpt_base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

const char *kvt_rpt_py_label(const struct kvt_rpt_pyframe *p, char *buf, size_t len)
{
	const char *base = strrchr(p->file, '/');
	snprintf(buf, len, "%s (%s:%u)", p->func, base ? base + 1 : p->file, p->line);
	return buf;
}

const char *kvt_rpt_site_label(struct kvt_report *r, uint32_t i, char *buf, size_t len)
{
	if (!i) {
		snprintf(buf, len, "(no stack recorded)");
		return buf;
	}
	if (r->sites[i].nr_py)
		return kvt_rpt_py_label(&r->sites[i].py[0], buf, len);
	return kvt_rpt_frame_label(r, &r->sites[i].at, buf, len);
}

/* The native frames shown under a site: the runtime frames below the
 * attributed one, and for a Python site the attributed one too. */
uint32_t kvt_rpt_site_via(const struct kvt_rpt_site *s)
{
	return s->nr_py ? s->nr_frames : (s->nr_frames ? s->nr_frames - 1 : 0);
}

void kvt_rpt_stack_lines(struct kvt_report *r, uint32_t site,
			 void (*line)(void *ctx, enum kvt_rpt_stack_line kind, const char *text),
			 void *ctx)
{
	const struct kvt_rpt_site *s = &r->sites[site];
	const struct kvt_rpt_frame *up[KVT_RPT_CALLERS];
	uint32_t nr_stacks, n = 0;
	char lab[512];
	const struct kvt_rpt_stack *st = site ? kvt_report_site_stack(r, site, &nr_stacks) : NULL;
	for (uint32_t j = 1; j < s->nr_py; j++)
		line(ctx, KVT_RPT_LINE_PY, kvt_rpt_py_label(&s->py[j], lab, sizeof lab));
	if (st && !s->nr_py)
		n = kvt_report_callers(r, st, site, up, KVT_RPT_CALLERS);
	for (uint32_t j = 0; j < n; j++)
		line(ctx, KVT_RPT_LINE_CALLER, kvt_rpt_frame_label(r, up[j], lab, sizeof lab));
	if (st && !s->nr_py && nr_stacks > 1) {
		snprintf(lab, sizeof lab, "(the heaviest of %u call stacks: %" PRIu64 " of %" PRIu64
			 " bytes)", nr_stacks, st->bytes, s->bytes);
		line(ctx, KVT_RPT_LINE_NOTE, lab);
	}
	for (uint32_t j = 0; j < kvt_rpt_site_via(s); j++)
		if (!kvt_report_frame_hidden(r, &s->frames[j]))
			line(ctx, KVT_RPT_LINE_VIA, kvt_rpt_frame_label(r, &s->frames[j], lab, sizeof lab));
}

static void text_line(void *ctx, enum kvt_rpt_stack_line kind, const char *text)
{
	static const char *const pre[] = { "   from ", "   from ", "   ", "    via " };
	fprintf((FILE *)ctx, "  %46s%s%s\n", "", pre[kind], text);
}

static void print_sites(struct kvt_report *r, FILE *f, int by_count)
{
	uint32_t idx[KVT_RPT_TOP], n = kvt_report_top(r, by_count, idx, KVT_RPT_TOP);
	char a[32], lab[512];
	fprintf(f, "\ntop call sites by %s\n", by_count ? "count" : "bytes");
	if (!n) {
		fprintf(f, "  (no allocations)\n");
		return;
	}
	fprintf(f, "  %3s %14s %10s %8s %7s  %s\n", "#", "bytes", "", "allocs", "failed", "call site");
	for (uint32_t k = 0; k < n; k++) {
		const struct kvt_rpt_site *s = &r->sites[idx[k]];
		fprintf(f, "  %3u %14" PRIu64 " %10s %8" PRIu64 " %7" PRIu64 "  %s\n", k + 1,
			s->bytes, kvt_format_size(s->bytes, a, sizeof a), s->nr, s->nr_failed,
			kvt_rpt_site_label(r, idx[k], lab, sizeof lab));
		if (!by_count)
			kvt_rpt_stack_lines(r, idx[k], text_line, f);
	}
}

static void print_kinds(const struct kvt_report *r, FILE *f)
{
	char a[32], b[32];
	fprintf(f, "\nallocations by kind\n  %-9s %8s %14s %10s %12s %8s %7s\n", "kind", "allocs",
		"bytes", "", "peak live", "frees", "failed");
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		const struct kvt_kind_sum *s = &r->kind[k];
		if (!s->nr && !s->failed && !s->nr_free)
			continue;
		fprintf(f, "  %-9s %8" PRIu64 " %14" PRIu64 " %10s %12s %8" PRIu64 " %7" PRIu64 "\n",
			kvt_kind_name(k), s->nr, s->bytes, kvt_format_size(s->bytes, a, sizeof a),
			kvt_format_size(s->peak_live, b, sizeof b), s->nr_free, s->failed);
	}
	fprintf(f, "\nallocations by decision\n  %-12s %8s %14s\n", "placement", "allocs", "bytes");
	for (unsigned p = 0; p < KVT_PLACE__COUNT; p++)
		if (r->place_nr[p] || p == KVT_PLACE_NATIVE)
			fprintf(f, "  %-12s %8" PRIu64 " %14" PRIu64 " %10s\n", kvt_placement_name(p),
				r->place_nr[p], r->place_bytes[p],
				kvt_format_size(r->place_bytes[p], a, sizeof a));
	if (!r->nr_fails) {
		fprintf(f, "  failed       none\n");
		return;
	}
	for (uint32_t i = 0; i < r->nr_fails; i++)
		fprintf(f, "  failed       %8" PRIu64 " %14" PRIu64 "  %s (%s) result %d\n",
			r->fails[i].nr, r->fails[i].bytes, kvt_api_name(r->fails[i].api),
			kvt_kind_name(r->fails[i].kind), r->fails[i].result);
	if (r->nr_fail_other)
		fprintf(f, "  failed       %8" PRIu64 "  (other api/result pairs)\n", r->nr_fail_other);
}

static void print_hist(const struct kvt_report *r, FILE *f)
{
	char a[32], b[32];
	uint64_t max = 0;
	for (unsigned i = 0; i < 65; i++)
		max = r->hist_nr[i] > max ? r->hist_nr[i] : max;
	fprintf(f, "\nsize histogram (successful allocations)\n  %-22s %8s %14s\n", "size",
		"allocs", "bytes");
	for (unsigned i = 0; i < 65; i++) {
		if (!r->hist_nr[i])
			continue;
		char lo[48];
		if (i == 64)
			snprintf(lo, sizeof lo, "0");
		else
			snprintf(lo, sizeof lo, "[%s, %s)", kvt_format_size(1ull << i, a, sizeof a),
				 i < 63 ? kvt_format_size(2ull << i, b, sizeof b) : "inf");
		int bar = (int)(r->hist_nr[i] * 30 / max);
		fprintf(f, "  %-22s %8" PRIu64 " %14" PRIu64 " %.*s\n", lo, r->hist_nr[i],
			r->hist_bytes[i], bar ? bar : 1, "##############################");
	}
}

static void print_timeline(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	int on[KVT_RPT_NR_SER] = { 0 };
	for (uint32_t b = 0; b < tl->nr; b++)
		for (unsigned s = 1; s < KVT_RPT_NR_SER; s++)
			on[s] |= tl->live[b][s] != 0;
	fprintf(f, "\ntimeline: %u buckets of %.6f s; live MiB per kind and per placement\n  %10s %12s",
		tl->nr, (double)tl->bucket_ns / 1e9, "t (s)", "events/s");
	for (unsigned s = 1; s < KVT_RPT_NR_SER; s++)
		if (on[s])
			fprintf(f, " %11s", s < KVT_RPT_SER_PLACE ? kvt_kind_name(s) :
				kvt_placement_name(s - KVT_RPT_SER_PLACE));
	fprintf(f, " %9s\n", "prefetch");
	for (uint32_t b = 0; b < tl->nr; b++) {
		if (!tl->nr_events[b] && b && b + 1 < tl->nr)
			continue;               /* quiet buckets: the live values carry over */
		fprintf(f, "  %10.4f %12.0f", (double)b * (double)tl->bucket_ns / 1e9,
			(double)tl->nr_events[b] * 1e9 / (double)tl->bucket_ns);
		for (unsigned s = 1; s < KVT_RPT_NR_SER; s++)
			if (on[s])
				fprintf(f, " %11.1f", (double)tl->live[b][s] / 1048576.0);
		fprintf(f, " %9" PRIu64 "\n", tl->nr_prefetch[b]);
	}
	(void)r;
}

static void print_phases(const struct kvt_report *r, FILE *f)
{
	char a[32], b[32];
	fprintf(f, "\nphases (meminfo events; KV burst = per trace, the biggest run of >= 2\n"
		"consecutive same-size allocations >= 1 MiB after a meminfo event)\n");
	for (uint32_t i = 0; i < r->nr_meminfo; i++)
		fprintf(f, "  meminfo   t=%.4f s  trace %u: free %s of %s\n",
			(double)r->meminfo[i].t0_ns / 1e9, r->meminfo[i].file,
			kvt_format_size(r->meminfo[i].a, a, sizeof a),
			kvt_format_size(r->meminfo[i].b, b, sizeof b));
	for (uint32_t i = 0; i < r->nr_bursts; i++) {
		const struct kvt_rpt_mark *m = &r->bursts[i];
		fprintf(f, "  KV burst  t=%.4f..%.4f s  trace %u: %" PRIu64 " x %" PRIu64
			" bytes = %" PRIu64 " bytes (%s)\n", (double)m->t0_ns / 1e9,
			(double)m->t1_ns / 1e9, m->file, m->a, m->b, m->a * m->b,
			kvt_format_size(m->a * m->b, a, sizeof a));
	}
	if (!r->nr_meminfo && !r->nr_bursts)
		fprintf(f, "  (no meminfo events)\n");
}

/* The chunks the GPU faulted on most (the trace's FAULTS records),
 * each with the allocation and call site that holds it. */
static void print_fault_heat(struct kvt_report *r, FILE *f)
{
	fprintf(f, "GPU faults on redirected chunks: ");
	if (!r->nr_faults) {
		fprintf(f, "none recorded (the cupti source was off, or nothing faulted)\n");
		return;
	}
	uint32_t top[8], n = 0;
	for (uint32_t c = 0; c < r->nr_chunks; c++) {
		if (!r->chunks[c].faults)
			continue;
		uint32_t k = n < 8 ? n++ : 8;
		while (k > 0 && r->chunks[top[k - 1]].faults < r->chunks[c].faults) {
			if (k < 8)
				top[k] = top[k - 1];
			k--;
		}
		if (k < 8)
			top[k] = c;
	}
	fprintf(f, "%" PRIu64 " (%" PRIu64 " outside the live redirected ranges); the most "
		"faulted chunks:\n", r->nr_faults, r->nr_fault_chunks_lost);
	char lab[600];
	for (uint32_t k = 0; k < n; k++) {
		const struct kvt_rpt_chunk *c = &r->chunks[top[k]];
		fprintf(f, "  %u:0x%012" PRIx64 " %8" PRIu64 " faults  in %s\n", c->file, c->addr,
			c->faults, kvt_rpt_chunk_alloc_label(r, c, lab, sizeof lab));
	}
}

static void print_heat(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	uint64_t nr_pf = r->by_op[KVT_OP_PREFETCH];
	fprintf(f, "\nmigrations: ");
	if (!nr_pf)
		fprintf(f, "no migrations recorded\n");
	else
		fprintf(f, "%" PRIu64 " prefetch events\n", nr_pf);
	fprintf(f, "chunk heat (2 MiB chunks of redirected ranges x %u columns of %.6f s):",
		tl->heat_cols, (double)tl->heat_col_ns / 1e9);
	if (!r->nr_chunks) {
		fprintf(f, " no accesses to redirected ranges\n");
		return;
	}
	fprintf(f, " %u chunks, %" PRIu64 " events%s\n", r->nr_chunks, r->nr_heat_events,
		r->nr_heat_dropped ? " (some chunks beyond the row limit dropped)" : "");
	uint32_t *idx = malloc(r->nr_chunks * sizeof *idx);
	if (!idx)
		return;
	kvt_report_chunk_order(r, idx);
	static const char shade[] = " .:-=+*#%@";
	for (uint32_t k = 0; k < r->nr_chunks && k < 64; k++) {
		const struct kvt_rpt_chunk *c = &r->chunks[idx[k]];
		uint32_t max = 1;
		for (uint32_t j = 0; j < tl->heat_cols; j++)
			max = c->cnt[j] > max ? c->cnt[j] : max;
		fprintf(f, "  %u:0x%012" PRIx64 " %8" PRIu64 " |", c->file, c->addr, c->total);
		for (uint32_t j = 0; j < tl->heat_cols; j++)
			fputc(shade[c->cnt[j] ? 1 + (int)((uint64_t)c->cnt[j] * 8 / max) : 0], f);
		fprintf(f, "|\n");
	}
	if (r->nr_chunks > 64)
		fprintf(f, "  ... %u more chunks (see --format json)\n", r->nr_chunks - 64);
	free(idx);
	print_fault_heat(r, f);
}

int kvt_report_print_text(struct kvt_report *r, FILE *f)
{
	struct kvt_rpt_timeline *tl = malloc(sizeof *tl);
	if (!tl)
		return -1;
	kvt_report_timeline(r, tl);
	fprintf(f, "kvtier report: %u trace file%s, %" PRIu64 " events, %" PRIu64
		" stacks, %" PRIu64 " call sites, %.4f s\n", r->nr_files, r->nr_files == 1 ? "" : "s",
		r->nr_events, r->nr_stacks, (uint64_t)r->nr_sites - 1, (double)r->end_ns / 1e9);
	fprintf(f, "call site = innermost Python frame where one was recorded, else the first "
		"frame outside libcudart*, libcuda*, libkvtier*, libc and the loader\n");
	print_kinds(r, f);
	print_sites(r, f, 0);
	print_sites(r, f, 1);
	print_hist(r, f);
	print_timeline(r, tl, f);
	kvt_moves_print_text(&r->moves, f);
	kvt_rpt_tier_text(r, f);
	print_phases(r, f);
	print_heat(r, tl, f);
	fprintf(f, "\nother events:");
	for (unsigned o = KVT_OP_MEMSET; o < KVT_OP__COUNT; o++)
		if (r->by_op[o])
			fprintf(f, " %s %" PRIu64, kvt_op_name(o), r->by_op[o]);
	fprintf(f, "\n");
	if (r->nr_dropped)
		fprintf(f, "WARNING: %" PRIu64 " events were lost while tracing\n", r->nr_dropped);
	if (r->nr_unended)
		fprintf(f, "note: %u trace file%s without an end record\n", r->nr_unended,
			r->nr_unended == 1 ? "" : "s");
	for (uint32_t i = 0; i < r->nr_notes; i++)
		fprintf(f, "WARNING: %s\n", r->notes[i]);
	free(tl);
	return ferror(f) ? -1 : 0;
}
