// SPDX-License-Identifier: MIT
/* The HTML form of `kvtier report`: one self-contained file (inline CSS,
 * SVG and, where the tool has uPlot, script: report_chart.c), loading
 * nothing, well-formed so that `xmllint --html` and XML tools can read it.
 * It reads without script: every chart is SVG first. Every text from the
 * trace is escaped (valid UTF-8 kept). */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "html_text.h"
#include "report.h"
#include "report_out.h"
#include "kvtier/units.h"

#define W 860
#define H 220
#define PADL 70
#define PADB 24

static const char *const colors[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
	"#7f7f7f", "#bcbd22", "#17becf",
};

static const char *series_name(unsigned s)
{
	return s < KVT_RPT_SER_PLACE ? kvt_kind_name(s) : kvt_placement_name(s - KVT_RPT_SER_PLACE);
}

/* ---- charts ---- */

static int series_used(const struct kvt_rpt_timeline *tl, unsigned s)
{
	for (uint32_t b = 0; b < tl->nr; b++)
		if (tl->live[b][s])
			return 1;
	return 0;
}

/* Live bytes of the series [s0, s1) as step lines, with phase marks. */
static void svg_live(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f,
		     unsigned s0, unsigned s1)
{
	int64_t max = 1;
	for (uint32_t b = 0; b < tl->nr; b++)
		for (unsigned s = s0; s < s1; s++)
			max = tl->live[b][s] > max ? tl->live[b][s] : max;
	double span = (double)tl->bucket_ns * tl->nr, pw = W - PADL - 10, ph = H - PADB - 20;
	char a[32];
	fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
		"<rect x=\"%d\" y=\"10\" width=\"%.0f\" height=\"%.0f\" class=\"plot\"/>\n",
		W, H, W, H, PADL, pw, ph);
	fprintf(f, "<text x=\"4\" y=\"20\">%s</text><text x=\"4\" y=\"%.0f\">0</text>\n",
		kvt_format_size((uint64_t)max, a, sizeof a), 10 + ph);
	fprintf(f, "<text x=\"%d\" y=\"%d\">0 s</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3f s</text>\n",
		PADL, H - 6, W - 10, H - 6, span / 1e9);
	for (uint32_t i = 0; i < r->nr_meminfo; i++)
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"10\" y2=\"%.0f\" class=\"mark\"><title>meminfo</title></line>\n",
			PADL + pw * (double)r->meminfo[i].t0_ns / span,
			PADL + pw * (double)r->meminfo[i].t0_ns / span, 10 + ph);
	for (uint32_t i = 0; i < r->nr_bursts; i++) {
		double x0 = PADL + pw * (double)r->bursts[i].t0_ns / span;
		double x1 = PADL + pw * (double)r->bursts[i].t1_ns / span;
		fprintf(f, "<rect x=\"%.1f\" y=\"10\" width=\"%.1f\" height=\"%.0f\" class=\"burst\"><title>KV burst</title></rect>"
			"<text x=\"%.1f\" y=\"24\">KV burst</text>\n", x0, x1 - x0 + 1, ph, x0 + 2);
	}
	unsigned legend = 0;
	for (unsigned s = s0; s < s1; s++) {
		if (!series_used(tl, s))
			continue;
		const char *c = colors[legend % 10];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
		for (uint32_t b = 0; b < tl->nr; b++) {
			double y = 10 + ph - ph * (double)tl->live[b][s] / (double)max;
			fprintf(f, "%.1f,%.1f %.1f,%.1f ", PADL + pw * b / tl->nr, y,
				PADL + pw * (b + 1) / tl->nr, y);
		}
		fprintf(f, "\"/>\n<text x=\"%u\" y=\"%d\" fill=\"%s\">%s</text>\n",
			PADL + 140 + legend * 110, H - 6, c, series_name(s));
		legend++;
	}
	fprintf(f, "</svg>\n");
}

/* The same series as an interactive chart, the SVG its fallback. */
static void chart_live(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f,
		       unsigned s0, unsigned s1, const char *id, const char *title)
{
	struct kvt_chart c = { .id = id, .y_label = "live bytes", .bytes = 1,
			       .bucket_ns = tl->bucket_ns, .nr = tl->nr };
	double v[KVT_RPT_BUCKETS];
	unsigned legend = 0;
	fprintf(f, "<h3>%s</h3>\n", title);
	kvt_chart_open(f, &c);
	for (unsigned s = s0; s < s1; s++) {
		if (!series_used(tl, s))
			continue;
		for (uint32_t b = 0; b < tl->nr; b++)
			v[b] = (double)tl->live[b][s];
		kvt_chart_series(f, &c, series_name(s), colors[legend++ % 10], v);
	}
	for (uint32_t i = 0; i < r->nr_meminfo; i++)
		kvt_chart_mark(f, &c, (double)r->meminfo[i].t0_ns / 1e9,
			       (double)r->meminfo[i].t0_ns / 1e9, "meminfo");
	for (uint32_t i = 0; i < r->nr_bursts; i++)
		kvt_chart_mark(f, &c, (double)r->bursts[i].t0_ns / 1e9,
			       (double)r->bursts[i].t1_ns / 1e9, "KV burst");
	kvt_chart_svg(f, &c);
	svg_live(r, tl, f, s0, s1);
	kvt_chart_close(f);
}

static void svg_bars(FILE *f, const char *title, const uint64_t *v, uint32_t n,
		     const char *const *labels, const char *unit)
{
	uint64_t max = 1;
	for (uint32_t i = 0; i < n; i++)
		max = v[i] > max ? v[i] : max;
	double pw = W - PADL - 10, ph = H - PADB - 20, bw = pw / (n ? n : 1);
	if (title)
		fprintf(f, "<h3>%s</h3>\n", title);
	fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
		"<rect x=\"%d\" y=\"10\" width=\"%.0f\" height=\"%.0f\" class=\"plot\"/>\n"
		"<text x=\"4\" y=\"20\">%" PRIu64 " %s</text>\n", W, H, W, H, PADL, pw, ph, max, unit);
	for (uint32_t i = 0; i < n; i++) {
		double h = ph * (double)v[i] / (double)max;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#1f77b4\">"
			"<title>%s: %" PRIu64 "</title></rect>\n", PADL + bw * i + 1, 10 + ph - h,
			bw > 2 ? bw - 2 : bw, h, labels ? labels[i] : "", v[i]);
		if (labels && (n <= 16 || i % (n / 8) == 0))
			fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"9\">%s</text>\n",
				PADL + bw * i + 1, H - 6, labels[i]);
	}
	fprintf(f, "</svg>\n");
}

static void chart_events(const struct kvt_rpt_timeline *tl, FILE *f)
{
	struct kvt_chart c = { .id = "events", .y_label = "events/s", .bars = 1,
			       .bucket_ns = tl->bucket_ns, .nr = tl->nr };
	uint64_t eps[KVT_RPT_BUCKETS];
	double v[KVT_RPT_BUCKETS];
	for (uint32_t b = 0; b < tl->nr; b++) {
		eps[b] = (uint64_t)((double)tl->nr_events[b] * 1e9 / (double)tl->bucket_ns);
		v[b] = (double)eps[b];
	}
	fprintf(f, "<h3>Events per second</h3>\n");
	kvt_chart_open(f, &c);
	kvt_chart_series(f, &c, "events/s", colors[0], v);
	kvt_chart_svg(f, &c);
	svg_bars(f, NULL, eps, tl->nr, NULL, "events/s");
	kvt_chart_close(f);
}

static void html_hist(const struct kvt_report *r, FILE *f)
{
	uint64_t v[65];
	char lab[65][32];
	const char *labels[65];
	uint32_t n = 0;
	unsigned lo = 64, hi = 0;
	for (unsigned i = 0; i < 64; i++)
		if (r->hist_nr[i]) {
			lo = i < lo ? i : lo;
			hi = i;
		}
	for (unsigned i = lo; i <= hi && lo < 64; i++) {
		v[n] = r->hist_nr[i];
		kvt_format_size((uint64_t)1 << i, lab[n], sizeof lab[n]);
		labels[n] = lab[n];
		n++;
	}
	svg_bars(f, "Size histogram (allocations per power of two)", v, n, labels, "allocs");
	fprintf(f, "<table><tr><th>size &#8805;</th><th>allocs</th><th>bytes</th></tr>\n");
	for (unsigned i = 0; i < 65; i++)
		if (r->hist_nr[i])
			fprintf(f, "<tr><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
				i == 64 ? 0 : (uint64_t)1 << i, r->hist_nr[i], r->hist_bytes[i]);
	fprintf(f, "</table>\n");
}

static void html_counts(const struct kvt_report *r, FILE *f)
{
	char a[32];
	fprintf(f, "<h2>Allocations by kind</h2>\n<table id=\"kinds\"><tr><th>kind</th><th>allocs</th>"
		"<th>bytes</th><th>size</th><th>peak live</th><th>frees</th><th>failed</th></tr>\n");
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		const struct kvt_kind_sum *s = &r->kind[k];
		if (!s->nr && !s->failed && !s->nr_free)
			continue;
		fprintf(f, "<tr id=\"kind-%s\"><td>%s</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%s</td>"
			"<td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
			kvt_kind_name(k), kvt_kind_name(k), s->nr, s->bytes,
			kvt_format_size(s->bytes, a, sizeof a), s->peak_live, s->nr_free, s->failed);
	}
	fprintf(f, "</table>\n<h2>Allocations by decision</h2>\n<table id=\"placements\"><tr><th>placement</th>"
		"<th>allocs</th><th>bytes</th></tr>\n");
	for (unsigned p = 0; p < KVT_PLACE__COUNT; p++)
		fprintf(f, "<tr><td>%s</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
			kvt_placement_name(p), r->place_nr[p], r->place_bytes[p]);
	for (uint32_t i = 0; i < r->nr_fails; i++)
		fprintf(f, "<tr class=\"fail\"><td>failed: %s (%s) result %d</td><td>%" PRIu64 "</td><td>%"
			PRIu64 "</td></tr>\n", kvt_api_name(r->fails[i].api),
			kvt_kind_name(r->fails[i].kind), r->fails[i].result, r->fails[i].nr, r->fails[i].bytes);
	fprintf(f, "</table>\n");
}

static void html_line(FILE *f, const char *cls, const char *what, const char *text)
{
	fprintf(f, "<br/><span class=\"%s\">%s", cls, what);
	kvt_html_text(f, text);
	fprintf(f, "</span>");
}

static void html_stack_line(void *ctx, enum kvt_rpt_stack_line kind, const char *text)
{
	static const char *const cls[] = { "via", "via caller", "via", "via" };
	static const char *const what[] = { "from ", "from ", "", "via " };
	html_line((FILE *)ctx, cls[kind], what[kind], text);
}

static void html_sites(struct kvt_report *r, FILE *f, int by_count)
{
	uint32_t idx[KVT_RPT_TOP], n = kvt_report_top(r, by_count, idx, KVT_RPT_TOP);
	char lab[512];
	fprintf(f, "<h2>Top call sites by %s</h2>\n<table id=\"sites-%s\"><tr><th>#</th><th>bytes</th>"
		"<th>allocs</th><th>failed</th><th>call site (its callers, then the runtime frames below it)</th></tr>\n",
		by_count ? "count" : "bytes", by_count ? "count" : "bytes");
	for (uint32_t k = 0; k < n; k++) {
		const struct kvt_rpt_site *s = &r->sites[idx[k]];
		fprintf(f, "<tr><td>%u</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64
			"</td><td><b>", k + 1, s->bytes, s->nr, s->nr_failed);
		kvt_html_text(f, kvt_rpt_site_label(r, idx[k], lab, sizeof lab));
		fprintf(f, "</b>");
		kvt_rpt_stack_lines(r, idx[k], html_stack_line, f);
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n");
}

int kvt_report_print_html(struct kvt_report *r, FILE *f)
{
	struct kvt_rpt_timeline *tl = malloc(sizeof *tl);
	if (!tl)
		return -1;
	kvt_report_timeline(r, tl);
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
		"<title>kvtier report</title>\n<style>\n"
		"body{font-family:sans-serif;margin:1em 2em;color:#222}"
		"table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
		"text-align:right;font-size:13px}td:last-child{text-align:left}"
		".via{color:#777;font-size:11px}.plot{fill:#fafafa;stroke:#999}"
		".mark{stroke:#000;stroke-dasharray:4 3}.burst{fill:#ff7f0e;fill-opacity:.15}"
		"svg text{font-size:11px}.flame rect{stroke:#fff;stroke-width:.5}"
		".flame text{font-size:11px;font-family:monospace}\n</style>\n");
	kvt_chart_head(f);
	fprintf(f, "</head><body>\n<h1>kvtier report</h1>\n");
	fprintf(f, "<p id=\"summary\">%u trace file%s, <span id=\"nr-events\">%" PRIu64 "</span> events, %"
		PRIu64 " stacks, %u call sites, %.4f s. The call site is the innermost Python frame "
		"where one was recorded, else the first frame outside "
		"libcudart*, libcuda*, libkvtier*, libc and the loader.</p>\n", r->nr_files,
		r->nr_files == 1 ? "" : "s", r->nr_events, r->nr_stacks, r->nr_sites - 1,
		(double)r->end_ns / 1e9);
	html_counts(r, f);
	fprintf(f, "<h2>Timeline</h2>\n");
	kvt_chart_notice(f);
	chart_live(r, tl, f, 1, KVT_RPT_SER_PLACE, "live-kind", "Live bytes per kind");
	chart_live(r, tl, f, KVT_RPT_SER_PLACE, KVT_RPT_NR_SER, "live-placement",
		   "Live bytes per placement");
	chart_events(tl, f);
	kvt_moves_print_html(&r->moves, f);
	kvt_rpt_tier_html(r, tl, f);
	for (uint32_t i = 0; i < r->nr_bursts; i++)
		fprintf(f, "<p class=\"phase\">KV burst at %.4f&#8211;%.4f s (trace %u): %" PRIu64
			" &#215; %" PRIu64 " bytes</p>\n", (double)r->bursts[i].t0_ns / 1e9,
			(double)r->bursts[i].t1_ns / 1e9, r->bursts[i].file, r->bursts[i].a, r->bursts[i].b);
	html_hist(r, f);
	html_sites(r, f, 0);
	html_sites(r, f, 1);
	kvt_rpt_heat_html(r, tl, f);
	int ret = kvt_rpt_flame_html(r, f);
	if (r->nr_notes)
		fprintf(f, "<h2>Notes</h2>\n<ul id=\"notes\">\n");
	for (uint32_t i = 0; i < r->nr_notes; i++) {
		fprintf(f, "<li class=\"note\">");
		kvt_html_text(f, r->notes[i]);
		fprintf(f, "</li>\n");
	}
	if (r->nr_notes)
		fprintf(f, "</ul>\n");
	kvt_chart_scripts(f);
	fprintf(f, "</body></html>\n");
	free(tl);
	return ret || ferror(f) ? -1 : 0;
}
