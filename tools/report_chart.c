// SPDX-License-Identifier: MIT
/* The interactive charts of the HTML report (docs/report.md, "Interactive
 * charts"): each chart's data as JSON in the page, the static SVG beside it,
 * and uPlot (embedded at build time by tools/html/embed.sh, MIT License,
 * its notice in the page) with a short script that draws the data and hides
 * the SVG. The page loads nothing: no URL, no network. Script text is
 * wrapped in //<![CDATA[ ... //]]> so that XML parsers read the page too. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json.h"
#include "report.h"
#include "report_out.h"

/* tools/html/embed.sh's output ($(BUILD)/gen/uplot.c, mk/html.mk): empty
 * arrays, an empty version and the reason when built without uPlot. */
extern const unsigned char kvt_uplot_js[], kvt_uplot_css[], kvt_uplot_license[];
extern const size_t kvt_uplot_js_len, kvt_uplot_css_len, kvt_uplot_license_len;
extern const char kvt_uplot_version[], kvt_uplot_missing[];

static int have_uplot(void)
{
	return kvt_uplot_version[0] && kvt_uplot_js_len;
}

int kvt_chart_interactive(void)
{
	return have_uplot();
}

/* ---- the data ---- */

/* Exact for whole numbers (bytes, counts: below 2^53), else 17 digits. */
static void put_num(FILE *f, double v)
{
	if (!isfinite(v))
		fputs("null", f);
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.17g", v);
}

/* ns as seconds, exactly: "0.000199498", "2", "1.5". */
static void put_secs(FILE *f, uint64_t ns)
{
	char frac[16];
	int n = snprintf(frac, sizeof frac, "%09" PRIu64, ns % 1000000000u);
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = 0;
	fprintf(f, "%" PRIu64 "%s%s", ns / 1000000000u, n ? "." : "", frac);
}

/* <div class="kvt-chart"> holds the data, the static SVG and, once the
 * script ran, the uPlot chart. x: the nr + 1 bucket edges in seconds. */
void kvt_chart_open(FILE *f, struct kvt_chart *c)
{
	fprintf(f, "<div class=\"kvt-chart\" id=\"chart-%s\">\n<script type=\"application/json\" "
		"class=\"kvt-data\" id=\"data-%s\">{\"id\":", c->id, c->id);
	kvt_json_str_html(f, c->id);
	fputs(",\"y\":", f);
	kvt_json_str_html(f, c->y_label);
	if (c->y2_label) {
		fputs(",\"y2\":", f);
		kvt_json_str_html(f, c->y2_label);
	}
	fprintf(f, ",\"unit\":\"%s\",\"style\":\"%s\",\"bucket_s\":", c->bytes ? "bytes" : "count",
		c->bars ? "bars" : "step");
	put_secs(f, c->bucket_ns);
	fputs(",\"x\":[", f);
	for (uint32_t b = 0; b <= c->nr; b++) {
		fputs(b ? "," : "", f);
		put_secs(f, c->bucket_ns * b);
	}
	fputs("],\"series\":[", f);
	c->nr_series = 0;
	c->nr_marks = 0;
}

/* v: nr values, one per bucket (NAN: none); the last edge repeats the last
 * step (a line reaches the end) and is null for bars. o: NULL, or how the
 * series differs from the chart's own style. */
void kvt_chart_series_opt(FILE *f, struct kvt_chart *c, const char *label, const char *color,
			  const double *v, const struct kvt_chart_opt *o)
{
	int bars = c->bars || (o && o->bars);
	fprintf(f, "%s\n{\"label\":", c->nr_series++ ? "," : "");
	kvt_json_str_html(f, label);
	fputs(",\"color\":", f);
	kvt_json_str_html(f, color);
	if (o && o->bars)
		fputs(",\"style\":\"bars\"", f);
	if (o && o->right)
		fputs(",\"scale\":\"y2\"", f);
	if (o && o->dashed)
		fputs(",\"dash\":true", f);
	if (o && o->width)
		fprintf(f, ",\"width\":%u", o->width);
	if (o && o->solid) {
		fputs(",\"fill\":", f);
		kvt_json_str_html(f, color);
	}
	fputs(",\"values\":[", f);
	for (uint32_t b = 0; b < c->nr; b++) {
		fputs(b ? "," : "", f);
		put_num(f, v[b]);
	}
	if (c->nr && !bars) {
		fputc(',', f);
		put_num(f, v[c->nr - 1]);
	} else {
		fputs(c->nr ? ",null" : "null", f);
	}
	fputs("]}", f);
}

void kvt_chart_series(FILE *f, struct kvt_chart *c, const char *label, const char *color,
		      const double *v)
{
	kvt_chart_series_opt(f, c, label, color, v, NULL);
}

/* A mark after the series: a dashed line at t0 (t1 == t0) or a shaded
 * span, with its label. */
void kvt_chart_mark(FILE *f, struct kvt_chart *c, double t0_s, double t1_s, const char *label)
{
	fputs(c->nr_marks++ ? ",\n{\"t0\":" : "],\"marks\":[\n{\"t0\":", f);
	put_num(f, t0_s);
	fputs(",\"t1\":", f);
	put_num(f, t1_s);
	fputs(",\"label\":", f);
	kvt_json_str_html(f, label);
	fputc('}', f);
}

void kvt_chart_svg(FILE *f, struct kvt_chart *c)
{
	fputs(c->nr_marks ? "]}</script>\n" : "],\"marks\":[]}</script>\n", f);
	fputs("<div class=\"kvt-static\">\n", f);
}

void kvt_chart_close(FILE *f)
{
	fputs("</div></div>\n", f);
}

/* ---- the page's parts ---- */

static void put_bytes(FILE *f, const unsigned char *p, size_t n)
{
	fwrite(p, 1, n, f);
}

void kvt_chart_head(FILE *f)
{
	if (!have_uplot())
		return;
	fputs("<style>/*<![CDATA[*/\n", f);
	put_bytes(f, kvt_uplot_css, kvt_uplot_css_len);
	fputs("\n.kvt-chart .u-legend{font-size:12px}.kvt-chart .uplot{margin:.3em 0}"
	      ".kvt-hint{color:#777;font-size:12px}\n/*]]>*/</style>\n", f);
}

void kvt_chart_notice(FILE *f)
{
	if (have_uplot()) {
		fputs("<p class=\"kvt-hint kvt-js\" id=\"charts-interactive\" hidden=\"hidden\">"
		      "Time-series charts: drag across a "
		      "chart to zoom into that span, double-click to zoom back out; the legend "
		      "reads the values under the pointer.</p>\n", f);
		return;
	}
	fputs("<p id=\"charts-static\">The charts are static: this kvtier was built without "
	      "uPlot (", f);
	kvt_html_text(f, kvt_uplot_missing);
	fputs(").</p>\n", f);
}

/* The script that turns each div.kvt-chart into a uPlot chart (our code,
 * not uPlot's), shows the hints about them (.kvt-js, hidden without
 * script), and lets a click on a flame-graph frame zoom into it (its
 * callees across the width, its callers under it faded; a click on "all"
 * zooms out). A chart that fails keeps its SVG and says why on the
 * console. window.kvtCharts: the uPlot objects, in page order. */
static const char page_script[] =
	"(function () {\n"
	"\"use strict\";\n"
	"var units = [\"B\", \"KiB\", \"MiB\", \"GiB\", \"TiB\", \"PiB\", \"EiB\"];\n"
	"function size(v) {\n"
	"\tif (v == null) return \"-\";\n"
	"\tvar a = Math.abs(v), i = 0;\n"
	"\twhile (a >= 1024 && i + 1 < units.length) { a /= 1024; i++; }\n"
	"\treturn (v < 0 ? \"-\" : \"\") + (i ? a.toFixed(a < 10 ? 2 : 1) : a.toFixed(0)) +\n"
	"\t\t\" \" + units[i];\n"
	"}\n"
	"function count(v) {\n"
	"\tif (v == null) return \"-\";\n"
	"\treturn Math.abs(v) >= 1e6 ? v.toExponential(2) : String(Math.round(v * 100) / 100);\n"
	"}\n"
	"var pow2 = [];\n"
	"for (var k = 0; k < 62; k++) pow2.push(Math.pow(2, k));\n"
	"function secs(u, v) { return v == null ? \"-\" : v.toFixed(4) + \" s\"; }\n"
	"function paths(style) {\n"
	"\treturn style === \"bars\" ? uPlot.paths.bars({ align: 1, size: [1, Infinity], gap: 1 })\n"
	"\t\t: uPlot.paths.stepped({ align: 1 });\n"
	"}\n"
	"function above0(u, lo, hi) { return [Math.min(0, lo), hi > 0 ? hi * 1.05 : 1]; }\n"
	"function around0(u, lo, hi) {\n"
	"\tvar m = Math.max(Math.abs(lo || 0), Math.abs(hi || 0), 1) * 1.05;\n"
	"\treturn [-m, m];\n"
	"}\n"
	"function marks(u, list) {\n"
	"\tvar ctx = u.ctx, b = u.bbox, px = window.devicePixelRatio || 1;\n"
	"\tctx.save();\n"
	"\tctx.beginPath(); ctx.rect(b.left, b.top, b.width, b.height); ctx.clip();\n"
	"\tctx.font = Math.round(11 * px) + \"px sans-serif\";\n"
	"\tlist.forEach(function (m) {\n"
	"\t\tvar x0 = u.valToPos(m.t0, \"x\", true), x1 = u.valToPos(m.t1, \"x\", true);\n"
	"\t\tif (m.t1 > m.t0) {\n"
	"\t\t\tctx.fillStyle = \"rgba(255,127,14,0.15)\";\n"
	"\t\t\tctx.fillRect(x0, b.top, Math.max(px, x1 - x0), b.height);\n"
	"\t\t} else {\n"
	"\t\t\tctx.strokeStyle = \"#000\"; ctx.lineWidth = px; ctx.setLineDash([4 * px, 3 * px]);\n"
	"\t\t\tctx.beginPath(); ctx.moveTo(x0, b.top); ctx.lineTo(x0, b.top + b.height); ctx.stroke();\n"
	"\t\t}\n"
	"\t\tctx.fillStyle = \"#222\";\n"
	"\t\tctx.fillText(m.label, x0 + 2 * px, b.top + 12 * px);\n"
	"\t});\n"
	"\tctx.restore();\n"
	"}\n"
	"function build(el) {\n"
	"\tvar d = JSON.parse(el.querySelector(\"script.kvt-data\").textContent);\n"
	"\tvar fmt = d.unit === \"bytes\" ? size : count;\n"
	"\tvar series = [{ label: \"time\", value: secs }], data = [d.x];\n"
	"\td.series.forEach(function (s) {\n"
	"\t\tvar style = s.style || d.style, f2 = s.scale === \"y2\" ? count : fmt;\n"
	"\t\tseries.push({ label: s.label, stroke: s.color, width: s.width || 2,\n"
	"\t\t\tscale: s.scale || \"y\", dash: s.dash ? [6, 4] : undefined, paths: paths(style),\n"
	"\t\t\tfill: style === \"bars\" ? s.fill || s.color + \"88\" : undefined,\n"
	"\t\t\tvalue: function (u, v) { return f2(v); } });\n"
	"\t\tdata.push(s.values);\n"
	"\t});\n"
	"\tvar axes = [{ label: \"time (s)\" },\n"
	"\t\t{ label: d.y, size: 80, incrs: d.unit === \"bytes\" ? pow2 : undefined,\n"
	"\t\t  values: function (u, t) { return t.map(fmt); } }];\n"
	"\tvar scales = { x: { time: false }, y: { range: above0 } };\n"
	"\tif (d.y2) {\n"
	"\t\taxes.push({ scale: \"y2\", side: 1, label: d.y2, size: 60, grid: { show: false },\n"
	"\t\t\tvalues: function (u, t) { return t.map(count); } });\n"
	"\t\tscales.y2 = { range: around0 };\n"
	"\t}\n"
	"\tvar box = document.createElement(\"div\");\n"
	"\tel.appendChild(box);\n"
	"\tvar u = new uPlot({\n"
	"\t\twidth: Math.max(400, Math.min(860, el.clientWidth || 860)), height: 240,\n"
	"\t\tseries: series,\n"
	"\t\tscales: scales, axes: axes,\n"
	"\t\tcursor: { drag: { x: true, y: false, setScale: true } },\n"
	"\t\thooks: { draw: [function (u) { marks(u, d.marks || []); }] }\n"
	"\t}, data, box);\n"
	"\tel.querySelector(\"div.kvt-static\").style.display = \"none\";\n"
	"\treturn u;\n"
	"}\n"
	"function flame(svg) {\n"
	"\tvar W = +svg.getAttribute(\"width\"), ns = svg.namespaceURI;\n"
	"\tvar info = [].map.call(svg.querySelectorAll(\"g.frame\"), function (g) {\n"
	"\t\tvar r = g.querySelector(\"rect\"), title = g.querySelector(\"title\").textContent;\n"
	"\t\treturn { g: g, r: r, t: g.querySelector(\"text\"), x: +r.getAttribute(\"x\"),\n"
	"\t\t\tw: +r.getAttribute(\"width\"), y: +r.getAttribute(\"y\"),\n"
	"\t\t\tname: Array.from(title.slice(0, title.lastIndexOf(\": \"))) };\n"
	"\t});\n"
	"\tfunction label(f, x, w) {\n"
	"\t\tvar fit = Math.floor((w - 6) / 6.6);\n"
	"\t\tif (!f.t && fit >= 3) {\n"
	"\t\t\tf.t = document.createElementNS(ns, \"text\");\n"
	"\t\t\tf.t.setAttribute(\"y\", f.y + 12);\n"
	"\t\t\tf.g.appendChild(f.t);\n"
	"\t\t}\n"
	"\t\tif (!f.t) return;\n"
	"\t\tf.t.setAttribute(\"x\", (x + 3).toFixed(1));\n"
	"\t\tf.t.textContent = fit < 3 ? \"\" : f.name.length > fit - 1 ?\n"
	"\t\t\tf.name.slice(0, fit - 1).join(\"\") + \"\\u2026\" : f.name.join(\"\");\n"
	"\t}\n"
	"\tfunction zoom(z) {\n"
	"\t\tinfo.forEach(function (f) {\n"
	"\t\t\tvar inside = f.y <= z.y && f.x >= z.x - 0.01 && f.x + f.w <= z.x + z.w + 0.01;\n"
	"\t\t\tvar under = f.y > z.y && f.x <= z.x + 0.01 && f.x + f.w >= z.x + z.w - 0.01;\n"
	"\t\t\tvar x = inside ? (f.x - z.x) * W / z.w : 0, w = inside ? f.w * W / z.w : W;\n"
	"\t\t\tf.g.style.display = inside || under ? \"\" : \"none\";\n"
	"\t\t\tf.g.style.opacity = under ? \"0.6\" : \"\";\n"
	"\t\t\tf.r.setAttribute(\"x\", x.toFixed(1));\n"
	"\t\t\tf.r.setAttribute(\"width\", w.toFixed(1));\n"
	"\t\t\tlabel(f, x, w);\n"
	"\t\t});\n"
	"\t}\n"
	"\tinfo.forEach(function (f) {\n"
	"\t\tf.g.style.cursor = \"pointer\";\n"
	"\t\tf.g.addEventListener(\"click\", function () { zoom(f); });\n"
	"\t});\n"
	"}\n"
	"window.kvtCharts = [];\n"
	"var els = document.querySelectorAll(\"div.kvt-chart\");\n"
	"for (var i = 0; i < els.length; i++) {\n"
	"\ttry { window.kvtCharts.push(build(els[i])); }\n"
	"\tcatch (e) { console.error(\"kvtier chart \" + els[i].id + \": \" + e); }\n"
	"}\n"
	"document.querySelectorAll(\".kvt-js\").forEach(function (e) { e.removeAttribute(\"hidden\"); });\n"
	"var fg = document.getElementById(\"flame-graph\");\n"
	"try { if (fg) flame(fg); } catch (e) { console.error(\"kvtier flame graph: \" + e); }\n"
	"})();\n";

void kvt_chart_scripts(FILE *f)
{
	if (!have_uplot())
		return;
	fprintf(f, "<script>//<![CDATA[\n/* uPlot %s, MIT License: the notice is at the end of "
		"this page */\n", kvt_uplot_version);
	put_bytes(f, kvt_uplot_js, kvt_uplot_js_len);
	fputs("\n//]]></script>\n<script>//<![CDATA[\n", f);
	fputs(page_script, f);
	fputs("//]]></script>\n", f);
	fprintf(f, "<details id=\"uplot-license\"><summary>The interactive charts use uPlot %s "
		"(MIT License)</summary>\n<pre>", kvt_uplot_version);
	kvt_html_textn(f, (const char *)kvt_uplot_license, kvt_uplot_license_len, SIZE_MAX);
	fputs("</pre></details>\n", f);
}
