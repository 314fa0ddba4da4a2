// SPDX-License-Identifier: MIT
/* The JSON form of `kvtier report`: every number the text form prints, with
 * exact integers (byte counts, nanoseconds). One object, schema in
 * docs/report.md. */
#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "report.h"
#include "report_out.h"

static void json_frame(struct kvt_report *r, FILE *f, const struct kvt_rpt_frame *fr)
{
	const struct kvt_dwsym_loc *l = kvt_report_loc(r, fr);
	fprintf(f, "{\"function\":");
	if (l && l->fr[0].func[0])
		kvt_json_str(f, l->fr[0].func);
	else
		fprintf(f, "null");
	fprintf(f, ",\"file\":");
	if (l && l->fr[0].line)
		kvt_json_str(f, l->fr[0].file);
	else
		fprintf(f, "null");
	fprintf(f, ",\"line\":%u,\"inlined_into\":[", l ? l->fr[0].line : 0);
	for (unsigned i = 1; l && i < l->nr; i++) {
		fprintf(f, "%s{\"function\":", i > 1 ? "," : "");
		kvt_json_str(f, l->fr[i].func);
		fprintf(f, ",\"file\":");
		kvt_json_str(f, l->fr[i].file);
		fprintf(f, ",\"line\":%u}", l->fr[i].line);
	}
	fprintf(f, "]");
	fprintf(f, ",\"module\":");
	if (fr->mod == KVT_RPT_NO_MOD)
		fprintf(f, "null");
	else
		kvt_json_str(f, r->mods[fr->mod].path);
	fprintf(f, ",\"offset\":%" PRIu64 ",\"runtime\":%s}", fr->off,
		fr->mod != KVT_RPT_NO_MOD && r->mods[fr->mod].runtime ? "true" : "false");
}

/* "stacks":N,"stack_bytes":B,"callers":[...]: the heaviest stack's native
 * callers of the site, outward, kvtier's frames left out. */
static void json_callers(struct kvt_report *r, FILE *f, uint32_t site)
{
	const struct kvt_rpt_frame *up[KVT_RPT_CALLERS];
	uint32_t nr_stacks = 0, n = 0;
	const struct kvt_rpt_stack *st = site ? kvt_report_site_stack(r, site, &nr_stacks) : NULL;
	if (st && !r->sites[site].nr_py)
		n = kvt_report_callers(r, st, site, up, KVT_RPT_CALLERS);
	fprintf(f, "\"stacks\":%u,\"stack_bytes\":%" PRIu64 ",\"callers\":[", nr_stacks,
		st ? st->bytes : 0);
	for (uint32_t j = 0; j < n; j++) {
		fprintf(f, "%s", j ? "," : "");
		json_frame(r, f, up[j]);
	}
	fprintf(f, "]");
}

static void json_sites(struct kvt_report *r, FILE *f, int by_count)
{
	uint32_t idx[KVT_RPT_TOP], n = kvt_report_top(r, by_count, idx, KVT_RPT_TOP);
	char lab[512];
	fprintf(f, "\"top_sites_by_%s\":[", by_count ? "count" : "bytes");
	for (uint32_t k = 0; k < n; k++) {
		const struct kvt_rpt_site *s = &r->sites[idx[k]];
		fprintf(f, "%s{\"label\":", k ? "," : "");
		kvt_json_str(f, kvt_rpt_site_label(r, idx[k], lab, sizeof lab));
		fprintf(f, ",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"failed\":%" PRIu64
			",\"site\":", s->bytes, s->nr, s->nr_failed);
		if (idx[k])
			json_frame(r, f, &s->at);
		else
			fprintf(f, "null");
		fprintf(f, ",\"frames\":[");
		for (uint32_t j = 0, first = 1; j < s->nr_frames; j++) {
			if (kvt_report_frame_hidden(r, &s->frames[j]))
				continue;
			fprintf(f, "%s", first ? "" : ",");
			json_frame(r, f, &s->frames[j]);
			first = 0;
		}
		fprintf(f, "],");
		json_callers(r, f, idx[k]);
		fprintf(f, ",\"python\":[");
		for (uint32_t j = 0; j < s->nr_py; j++) {
			fprintf(f, "%s{\"function\":", j ? "," : "");
			kvt_json_str(f, s->py[j].func);
			fprintf(f, ",\"file\":");
			kvt_json_str(f, s->py[j].file);
			fprintf(f, ",\"line\":%u}", s->py[j].line);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "],\n");
}

static void json_counts(const struct kvt_report *r, FILE *f)
{
	fprintf(f, "\"kinds\":{");
	for (unsigned k = 1, first = 1; k < KVT_KIND__COUNT; k++) {
		const struct kvt_kind_sum *s = &r->kind[k];
		fprintf(f, "%s\"%s\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"peak_live\":%"
			PRIu64 ",\"frees\":%" PRIu64 ",\"failed\":%" PRIu64 "}", first ? "" : ",",
			kvt_kind_name(k), s->nr, s->bytes, s->peak_live, s->nr_free, s->failed);
		first = 0;
	}
	fprintf(f, "},\n\"placements\":{");
	for (unsigned p = 0; p < KVT_PLACE__COUNT; p++)
		fprintf(f, "%s\"%s\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", p ? "," : "",
			kvt_placement_name(p), r->place_nr[p], r->place_bytes[p]);
	fprintf(f, "},\n\"failures\":[");
	for (uint32_t i = 0; i < r->nr_fails; i++)
		fprintf(f, "%s{\"api\":\"%s\",\"kind\":\"%s\",\"result\":%d,\"count\":%" PRIu64
			",\"bytes\":%" PRIu64 "}", i ? "," : "", kvt_api_name(r->fails[i].api),
			kvt_kind_name(r->fails[i].kind), r->fails[i].result, r->fails[i].nr,
			r->fails[i].bytes);
	fprintf(f, "],\n\"failures_other\":%" PRIu64 ",\n\"ops\":{", r->nr_fail_other);
	for (unsigned o = 1; o < KVT_OP__COUNT; o++)
		fprintf(f, "%s\"%s\":%" PRIu64, o > 1 ? "," : "", kvt_op_name(o), r->by_op[o]);
	fprintf(f, "},\n\"size_histogram\":[");
	for (unsigned i = 0, first = 1; i < 65; i++) {
		if (!r->hist_nr[i])
			continue;
		fprintf(f, "%s{\"min\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
			first ? "" : ",", i == 64 ? 0 : (uint64_t)1 << i, r->hist_nr[i], r->hist_bytes[i]);
		first = 0;
	}
	fprintf(f, "],\n");
}

static void json_marks(FILE *f, const char *name, const struct kvt_rpt_mark *m, uint32_t n,
		       int burst)
{
	fprintf(f, "\"%s\":[", name);
	for (uint32_t i = 0; i < n; i++) {
		if (burst)
			fprintf(f, "%s{\"trace\":%u,\"t0_ns\":%" PRIu64 ",\"t1_ns\":%" PRIu64
				",\"count\":%" PRIu64 ",\"size\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
				i ? "," : "", m[i].file, m[i].t0_ns, m[i].t1_ns, m[i].a, m[i].b,
				m[i].a * m[i].b);
		else
			fprintf(f, "%s{\"trace\":%u,\"t_ns\":%" PRIu64 ",\"free\":%" PRIu64
				",\"total\":%" PRIu64 "}", i ? "," : "", m[i].file, m[i].t0_ns,
				m[i].a, m[i].b);
	}
	fprintf(f, "],\n");
}

static void json_timeline(const struct kvt_rpt_timeline *tl, FILE *f)
{
	fprintf(f, "\"timeline\":{\"bucket_ns\":%" PRIu64 ",\"events\":[", tl->bucket_ns);
	for (uint32_t b = 0; b < tl->nr; b++)
		fprintf(f, "%s%" PRIu64, b ? "," : "", tl->nr_events[b]);
	fprintf(f, "],\"prefetch\":[");
	for (uint32_t b = 0; b < tl->nr; b++)
		fprintf(f, "%s%" PRIu64, b ? "," : "", tl->nr_prefetch[b]);
	fprintf(f, "],\"live_bytes\":{");
	for (unsigned s = 1; s < KVT_RPT_NR_SER; s++) {
		fprintf(f, "%s\"%s%s\":[", s > 1 ? "," : "", s < KVT_RPT_SER_PLACE ? "" : "place:",
			s < KVT_RPT_SER_PLACE ? kvt_kind_name(s) : kvt_placement_name(s - KVT_RPT_SER_PLACE));
		for (uint32_t b = 0; b < tl->nr; b++)
			fprintf(f, "%s%" PRId64, b ? "," : "", tl->live[b][s]);
		fprintf(f, "]");
	}
	fprintf(f, "}},\n");
}

static void json_heat(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	char lab[512];
	fprintf(f, "\"migrations\":%" PRIu64 ",\n\"heat\":{\"chunk_bytes\":%u,\"column_ns\":%"
		PRIu64 ",\"columns\":%u,\"events\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"faults\":%"
		PRIu64 ",\"faults_outside\":%" PRIu64 ",\"chunks\":[", r->by_op[KVT_OP_PREFETCH],
		1u << KVT_RPT_CHUNK_SHIFT, tl->heat_col_ns, tl->heat_cols, r->nr_heat_events,
		r->nr_heat_dropped, r->nr_faults, r->nr_fault_chunks_lost);
	uint32_t *idx = malloc((r->nr_chunks + 1) * sizeof *idx);
	if (idx) {
		kvt_report_chunk_order(r, idx);
		for (uint32_t k = 0; k < r->nr_chunks; k++) {
			const struct kvt_rpt_chunk *c = &r->chunks[idx[k]];
			fprintf(f, "%s{\"trace\":%u,\"addr\":%" PRIu64 ",\"total\":%" PRIu64
				",\"copy\":%" PRIu64 ",\"memset\":%" PRIu64 ",\"launch\":%" PRIu64
				",\"prefetch\":%" PRIu64 ",\"counts\":[", k ? "," : "", c->file, c->addr,
				c->total, c->by_op[0], c->by_op[1], c->by_op[2], c->by_op[3]);
			for (uint32_t j = 0; j < tl->heat_cols; j++)
				fprintf(f, "%s%u", j ? "," : "", c->cnt[j]);
			fprintf(f, "],\"faults\":%" PRIu64, c->faults);
			if (c->faults) {
				fprintf(f, ",\"fault_counts\":[");
				for (uint32_t j = 0; j < tl->heat_cols; j++)
					fprintf(f, "%s%u", j ? "," : "", c->fcnt[j]);
				fprintf(f, "]");
			}
			fprintf(f, ",\"alloc_addr\":%" PRIu64 ",\"alloc_bytes\":%" PRIu64,
				c->range_start, c->range_bytes);
			/* the site once per allocation: on its first chunk in this order */
			const struct kvt_rpt_chunk *p = k ? &r->chunks[idx[k - 1]] : NULL;
			if (c->range_bytes && (!p || p->file != c->file ||
					       p->range_start != c->range_start)) {
				fprintf(f, ",\"alloc_site\":");
				kvt_json_str(f, kvt_rpt_site_label(r, c->site, lab, sizeof lab));
			}
			fprintf(f, "}");
		}
		free(idx);
	}
	fprintf(f, "]}\n");
}

int kvt_report_print_json(struct kvt_report *r, FILE *f)
{
	struct kvt_rpt_timeline *tl = malloc(sizeof *tl);
	if (!tl)
		return -1;
	kvt_report_timeline(r, tl);
	fprintf(f, "{\"kvtier_report\":1,\n\"traces\":%u,\"unended\":%u,\"events\":%" PRIu64
		",\"stacks\":%" PRIu64 ",\"call_sites\":%u,\"dropped\":%" PRIu64 ",\"duration_ns\":%"
		PRIu64 ",\n", r->nr_files, r->nr_unended, r->nr_events, r->nr_stacks,
		r->nr_sites - 1, r->nr_dropped, r->end_ns);
	json_counts(r, f);
	json_sites(r, f, 0);
	json_sites(r, f, 1);
	json_timeline(tl, f);
	json_marks(f, "meminfo", r->meminfo, r->nr_meminfo, 0);
	json_marks(f, "kv_bursts", r->bursts, r->nr_bursts, 1);
	kvt_moves_print_json(&r->moves, f);
	fprintf(f, ",\n");
	kvt_rpt_tier_json(r, tl, f);
	json_heat(r, tl, f);
	fprintf(f, ",\"notes\":[");
	for (uint32_t i = 0; i < r->nr_notes; i++) {
		fprintf(f, "%s", i ? "," : "");
		kvt_json_str(f, r->notes[i]);
	}
	fprintf(f, "]}\n");
	free(tl);
	return ferror(f) ? -1 : 0;
}
