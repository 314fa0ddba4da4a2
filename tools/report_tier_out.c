// SPDX-License-Identifier: MIT
/* The tiering section of `kvtier report` in its three forms (docs/report.md,
 * "tiering"): text totals per (trace, device); JSON totals and the series
 * on the report's 100-bucket timeline; HTML charts "HBM residency"
 * (residency against the budget, promotions and demotions per bucket) and
 * "GPU faults over time", interactive where the tool has uPlot
 * (report_chart.c) with the same charts in SVG as their fallback. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report.h"
#include "report_out.h"
#include "report_tier.h"
#include "kvtier/units.h"

/* Colours the screenshot test looks for (tests/unit/test_tier_report.c):
 * used by nothing else in the report. */
#define COLOR_HBM      "#e6007e"
#define COLOR_BUDGET   "#444444"
#define COLOR_PROMOTE  "#1b9e77"
#define COLOR_DEMOTE   "#d95f02"
#define COLOR_FAULTS   "#3d00b8"

#define W 860
#define H 260
#define PADL 70
#define PADB 24

static const char *dev_name(const struct kvt_report *r, const struct kvt_rpt_tier_dev *d,
			    char *buf, size_t len)
{
	if (r->nr_files > 1)
		snprintf(buf, len, "trace %u, device %d", d->file, d->device);
	else
		snprintf(buf, len, "device %d", d->device);
	return buf;
}

static void note_limits(const struct kvt_rpt_tier *t, FILE *f, const char *pre, const char *post)
{
	if (t->nr_dev_dropped)
		fprintf(f, "%s%" PRIu64 " epoch records of devices past the first %u not counted%s",
			pre, t->nr_dev_dropped, KVT_RPT_TIER_DEVS, post);
	if (t->nr_points_dropped)
		fprintf(f, "%s%" PRIu64 " epochs past the first %u counted in the totals, not charted%s",
			pre, t->nr_points_dropped, KVT_RPT_TIER_POINTS, post);
}

/* ---- text ---- */

void kvt_rpt_tier_text(const struct kvt_report *r, FILE *f)
{
	const struct kvt_rpt_tier *t = &r->tier;
	char n[64], a[32], b[32], c[32];
	fprintf(f, "\ntiering (the migration thread's epoch records; chunks of 2 MiB)\n");
	if (!t->nr_devs) {
		fprintf(f, "  no tiering epochs recorded\n");
		return;
	}
	for (uint32_t i = 0; i < t->nr_devs; i++) {
		const struct kvt_rpt_tier_dev *d = &t->devs[i];
		uint64_t mean = kvt_rpt_tier_mean(d);
		fprintf(f, "  %s: %" PRIu64 " epochs, %.4f..%.4f s\n", dev_name(r, d, n, sizeof n),
			d->epochs, (double)d->t_first_ns / 1e9, (double)d->t_last_ns / 1e9);
		fprintf(f, "    HBM residency: peak %" PRIu64 " bytes (%s), mean %" PRIu64
			" bytes (%s); budget %" PRIu64 " bytes (%s)", d->hbm_peak,
			kvt_format_size(d->hbm_peak, a, sizeof a), mean,
			kvt_format_size(mean, b, sizeof b), d->budget_last,
			kvt_format_size(d->budget_last, c, sizeof c));
		if (d->budget_peak != d->budget_last)
			fprintf(f, ", at most %" PRIu64 " bytes", d->budget_peak);
		fprintf(f, "\n    promoted %" PRIu64 " chunks, demoted %" PRIu64 " chunks, GPU faults %"
			PRIu64 ", moves not made %" PRIu64 "\n", d->promoted, d->demoted, d->faults,
			d->failed);
		if (d->over_budget)
			fprintf(f, "    residency above the budget at the end of %" PRIu64 " epochs\n",
				d->over_budget);
	}
	note_limits(t, f, "  note: ", "\n");
}

/* ---- JSON ---- */

static void json_array(FILE *f, const char *name, const uint64_t *v, uint32_t n)
{
	fprintf(f, ",\"%s\":[", name);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", v[i]);
	fprintf(f, "]");
}

void kvt_rpt_tier_json(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	const struct kvt_rpt_tier *t = &r->tier;
	static struct kvt_rpt_tier_series s;
	fprintf(f, "\"tiering\":{\"records\":%" PRIu64 ",\"devices_dropped_records\":%" PRIu64
		",\"points_dropped\":%" PRIu64 ",\"bucket_ns\":%" PRIu64 ",\"devices\":[",
		t->nr_records, t->nr_dev_dropped, t->nr_points_dropped, tl->bucket_ns);
	for (uint32_t i = 0; i < t->nr_devs; i++) {
		const struct kvt_rpt_tier_dev *d = &t->devs[i];
		kvt_rpt_tier_series(t, i, tl, &s);
		fprintf(f, "%s\n{\"trace\":%u,\"device\":%d,\"epochs\":%" PRIu64 ",\"t_first_ns\":%"
			PRIu64 ",\"t_last_ns\":%" PRIu64 ",\"hbm_peak_bytes\":%" PRIu64
			",\"hbm_mean_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64
			",\"budget_peak_bytes\":%" PRIu64 ",\"over_budget_epochs\":%" PRIu64
			",\"promoted\":%" PRIu64 ",\"demoted\":%" PRIu64 ",\"faults\":%" PRIu64
			",\"failed\":%" PRIu64 ",\"series\":{\"chunk_bytes\":%u", i ? "," : "",
			d->file, d->device, d->epochs, d->t_first_ns, d->t_last_ns, d->hbm_peak,
			kvt_rpt_tier_mean(d), d->budget_last, d->budget_peak, d->over_budget,
			d->promoted, d->demoted, d->faults, d->failed, 1u << 21);
		fprintf(f, ",\"first_bucket\":%u,\"last_bucket\":%u", s.first, s.last);
		json_array(f, "epochs", s.epochs, s.nr);
		json_array(f, "hbm_bytes", s.hbm_bytes, s.nr);
		json_array(f, "budget_bytes", s.budget_bytes, s.nr);
		json_array(f, "promoted", s.promoted, s.nr);
		json_array(f, "demoted", s.demoted, s.nr);
		json_array(f, "faults", s.faults, s.nr);
		fprintf(f, "}}");
	}
	fprintf(f, "]},\n");
}

/* ---- HTML ---- */

static double y_of(uint64_t v, uint64_t max, double top, double h)
{
	return top + h - h * (double)v / (double)(max ? max : 1);
}

/* Residency (step line) against the budget (dashed step line) in the upper
 * band; promotions up and demotions down from the lower band's middle. */
static void svg_residency(uint32_t id, const struct kvt_rpt_tier_dev *d, const struct kvt_rpt_tier_series *s,
			  const struct kvt_rpt_timeline *tl, FILE *f)
{
	double pw = W - PADL - 10, top = 10, ph = 150, mid = 215, bh = 30;
	double bw = pw / s->nr, span = (double)tl->bucket_ns * tl->nr;
	uint64_t max = d->hbm_peak > d->budget_peak ? d->hbm_peak : d->budget_peak, mv = 1;
	for (uint32_t b = 0; b < s->nr; b++) {
		mv = s->promoted[b] > mv ? s->promoted[b] : mv;
		mv = s->demoted[b] > mv ? s->demoted[b] : mv;
	}
	char a[32];
	fprintf(f, "<svg class=\"chart\" id=\"hbm-residency-%u\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\">\n<rect x=\"%d\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
		"class=\"plot\"/>\n<rect x=\"%d\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" class=\"plot\"/>\n",
		id, W, H, W, H, PADL, top, pw, ph, PADL, mid - bh, pw, 2 * bh);
	fprintf(f, "<text x=\"4\" y=\"20\">%s</text><text x=\"4\" y=\"%.0f\">0</text>\n"
		"<text x=\"4\" y=\"%.0f\">+%" PRIu64 "</text><text x=\"4\" y=\"%.0f\">&#8722;%" PRIu64
		"</text><text x=\"4\" y=\"%.0f\">chunks</text>\n",
		kvt_format_size(max, a, sizeof a), top + ph, mid - bh + 10, mv, mid + bh, mv, mid + 4);
	fprintf(f, "<text x=\"%d\" y=\"%d\">0 s</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">"
		"%.3f s</text>\n", PADL, H - 6, W - 10, H - 6, span / 1e9);
	const char *names[2] = { "budget", "residency" };
	const uint64_t *vals[2] = { s->budget_bytes, s->hbm_bytes };
	for (int k = 0; k < 2; k++) {
		fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s "
			"points=\"", k ? "hbm-line" : "budget-line", k ? COLOR_HBM : COLOR_BUDGET,
			k ? "3" : "1.5", k ? "" : " stroke-dasharray=\"6 4\"");
		for (uint32_t b = s->first; b < s->nr && b <= s->last; b++) {
			double y = y_of(vals[k][b], max, top, ph);
			fprintf(f, "%.1f,%.1f %.1f,%.1f ", PADL + bw * b, y, PADL + bw * (b + 1), y);
		}
		fprintf(f, "\"><title>%s</title></polyline>\n", names[k]);
	}
	for (uint32_t b = 0; b < s->nr; b++) {
		double hp = bh * (double)s->promoted[b] / (double)mv;
		double hd = bh * (double)s->demoted[b] / (double)mv;
		if (s->promoted[b])
			fprintf(f, "<rect class=\"promoted\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				"height=\"%.1f\" fill=\"" COLOR_PROMOTE "\"><title>promoted %" PRIu64
				"</title></rect>\n", PADL + bw * b, mid - hp, bw > 2 ? bw - 1 : bw, hp,
				s->promoted[b]);
		if (s->demoted[b])
			fprintf(f, "<rect class=\"demoted\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" "
				"height=\"%.1f\" fill=\"" COLOR_DEMOTE "\"><title>demoted %" PRIu64
				"</title></rect>\n", PADL + bw * b, mid, bw > 2 ? bw - 1 : bw, hd,
				s->demoted[b]);
	}
	static const struct { const char *color, *label; } legend[] = {
		{ COLOR_HBM, "residency" }, { COLOR_BUDGET, "budget" },
		{ COLOR_PROMOTE, "promoted" }, { COLOR_DEMOTE, "demoted" },
	};
	for (unsigned k = 0; k < 4; k++)
		fprintf(f, "<rect x=\"%u\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/>"
			"<text x=\"%u\" y=\"%d\">%s</text>\n", PADL + 140 + k * 110, H - 10,
			legend[k].color, PADL + 156 + k * 110, H - 6, legend[k].label);
	fprintf(f, "</svg>\n");
}

static void svg_faults(uint32_t id, const struct kvt_rpt_tier_dev *d, const struct kvt_rpt_tier_series *s,
		       const struct kvt_rpt_timeline *tl, FILE *f)
{
	double pw = W - PADL - 10, ph = 120, bw = pw / s->nr, span = (double)tl->bucket_ns * tl->nr;
	uint64_t max = 1;
	for (uint32_t b = 0; b < s->nr; b++)
		max = s->faults[b] > max ? s->faults[b] : max;
	fprintf(f, "<svg class=\"chart\" id=\"faults-%u\" width=\"%d\" height=\"%.0f\" "
		"viewBox=\"0 0 %d %.0f\">\n<rect x=\"%d\" y=\"10\" width=\"%.0f\" height=\"%.0f\" "
		"class=\"plot\"/>\n<text x=\"4\" y=\"20\">%" PRIu64 "</text><text x=\"4\" y=\"%.0f\">0"
		"</text>\n<text x=\"%d\" y=\"%.0f\">0 s</text><text x=\"%d\" y=\"%.0f\" "
		"text-anchor=\"end\">%.3f s</text>\n", id, W, ph + 34, W, ph + 34, PADL, pw, ph,
		max, 10 + ph, PADL, ph + 28, W - 10, ph + 28, span / 1e9);
	if (!d->faults)
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">no GPU faults recorded</text>\n",
			PADL + 20.0, 10 + ph / 2);
	for (uint32_t b = 0; b < s->nr; b++) {
		if (!s->faults[b])
			continue;
		double h = ph * (double)s->faults[b] / (double)max;
		fprintf(f, "<rect class=\"faults\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"" COLOR_FAULTS "\"><title>%" PRIu64 " faults</title></rect>\n",
			PADL + bw * b, 10 + ph - h, bw > 2 ? bw - 1 : bw, h, s->faults[b]);
	}
	fprintf(f, "</svg>\n");
}

/* vals in the device's buckets with epochs [first, last], NAN (a gap) outside */
static void in_span(const struct kvt_rpt_tier_series *s, const uint64_t *vals, double *v)
{
	for (uint32_t b = 0; b < s->nr; b++)
		v[b] = b >= s->first && b <= s->last ? (double)vals[b] : NAN;
}

static void chart_residency(uint32_t id, const struct kvt_rpt_tier_dev *d,
			    const struct kvt_rpt_tier_series *s, const struct kvt_rpt_timeline *tl,
			    FILE *f)
{
	char name[32];
	double v[KVT_RPT_TIER_BUCKETS];
	snprintf(name, sizeof name, "hbm-residency-%u", id);
	struct kvt_chart c = { .id = name, .y_label = "HBM residency", .bytes = 1,
			       .y2_label = "chunks moved", .bucket_ns = tl->bucket_ns, .nr = s->nr };
	kvt_chart_open(f, &c);
	in_span(s, s->hbm_bytes, v);
	kvt_chart_series_opt(f, &c, "residency", COLOR_HBM, v, &(struct kvt_chart_opt){ .width = 3 });
	in_span(s, s->budget_bytes, v);
	kvt_chart_series_opt(f, &c, "budget", COLOR_BUDGET, v, &(struct kvt_chart_opt){ .dashed = 1 });
	for (uint32_t b = 0; b < s->nr; b++)           /* no bar where none moved */
		v[b] = s->promoted[b] ? (double)s->promoted[b] : NAN;
	kvt_chart_series_opt(f, &c, "promoted", COLOR_PROMOTE, v,
			     &(struct kvt_chart_opt){ .bars = 1, .right = 1, .solid = 1 });
	for (uint32_t b = 0; b < s->nr; b++)
		v[b] = s->demoted[b] ? -(double)s->demoted[b] : NAN;
	kvt_chart_series_opt(f, &c, "demoted (down)", COLOR_DEMOTE, v,
			     &(struct kvt_chart_opt){ .bars = 1, .right = 1, .solid = 1 });
	kvt_chart_svg(f, &c);
	svg_residency(id, d, s, tl, f);
	kvt_chart_close(f);
}

static void chart_faults(uint32_t id, const struct kvt_rpt_tier_dev *d,
			 const struct kvt_rpt_tier_series *s, const struct kvt_rpt_timeline *tl, FILE *f)
{
	char name[32];
	double v[KVT_RPT_TIER_BUCKETS];
	snprintf(name, sizeof name, "faults-%u", id);
	struct kvt_chart c = { .id = name, .y_label = "GPU faults", .bars = 1,
			       .bucket_ns = tl->bucket_ns, .nr = s->nr };
	kvt_chart_open(f, &c);
	for (uint32_t b = 0; b < s->nr; b++)
		v[b] = s->faults[b] ? (double)s->faults[b] : NAN;
	kvt_chart_series_opt(f, &c, "faults", COLOR_FAULTS, v, &(struct kvt_chart_opt){ .solid = 1 });
	kvt_chart_svg(f, &c);
	svg_faults(id, d, s, tl, f);
	kvt_chart_close(f);
}

void kvt_rpt_tier_html(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	const struct kvt_rpt_tier *t = &r->tier;
	static struct kvt_rpt_tier_series s;
	char n[64], a[32], b[32], c[32];
	fprintf(f, "<h2 id=\"tiering\">Tiering</h2>\n");
	if (!t->nr_devs) {
		fprintf(f, "<p id=\"tiering-none\">No tiering epochs recorded (no migration thread "
			"ran, or the trace predates epoch records).</p>\n");
		return;
	}
	for (uint32_t i = 0; i < t->nr_devs; i++) {
		const struct kvt_rpt_tier_dev *d = &t->devs[i];
		kvt_rpt_tier_series(t, i, tl, &s);
		fprintf(f, "<h3>HBM residency</h3>\n<p class=\"tier-dev\">%s: %" PRIu64 " epochs; "
			"redirected memory in HBM peak %s, mean %s, budget %s; promoted %" PRIu64
			", demoted %" PRIu64 " chunks of 2 MiB (bars: per bucket of %.6f s).</p>\n",
			dev_name(r, d, n, sizeof n), d->epochs, kvt_format_size(d->hbm_peak, a, sizeof a),
			kvt_format_size(kvt_rpt_tier_mean(d), b, sizeof b),
			kvt_format_size(d->budget_last, c, sizeof c), d->promoted, d->demoted,
			(double)tl->bucket_ns / 1e9);
		chart_residency(i, d, &s, tl, f);
		fprintf(f, "<h3>GPU faults over time</h3>\n<p class=\"tier-dev\">%s: %" PRIu64
			" GPU page-fault records on redirected memory.</p>\n",
			dev_name(r, d, n, sizeof n), d->faults);
		chart_faults(i, d, &s, tl, f);
	}
	note_limits(t, f, "<p class=\"note\">", ".</p>\n");
}
