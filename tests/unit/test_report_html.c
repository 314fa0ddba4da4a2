// SPDX-License-Identifier: MIT
/* The HTML report as a reader gets it (docs/report.md, "HTML"): each
 * time-series chart's JSON data equals the JSON report's timeline; uPlot
 * and the page's script are inlined where the tool was built with uPlot
 * (KVT_HAVE_UPLOT, from mk/html.mk), else the page has no script but its
 * data and says so in one line; the static SVG is there either way;
 * tools/html/embed.sh makes the static build when the package is missing
 * or unfit. Headless Chromium: no error, every chart drawn, a drag zooms,
 * a click zooms the flame graph.
 * The flame graph: the folded stacks' frames and sums, by bytes and by
 * count; names from the trace as UTF-8, bad bytes as U+FFFD. */
#include <inttypes.h>
#include <math.h>

#include "unit/kvt_test.h"
#include "unit/kvt_report_test.h"
#include "kvtier/trace_format.h"
#include "../../tools/json.c"
#include "../../tools/html_text.c"

#define CHROMIUM "/usr/bin/chromium"
#define ROW 17                  /* tools/report_flame.c's frame height */

static char tmpdir[] = "/tmp/kvt-html-XXXXXX";
static char gen_trace[600];
static struct kvt_child rc;

static const char *tmp_path(const char *name)
{
	return kvt_tmp_path(tmpdir, name);
}

static int suite_init(void)
{
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(gen_trace, sizeof gen_trace, "%s", tmp_path("gen.trace"));
	const char *argv[] = { kvt_path("bench/gen_trace"), gen_trace, "50000", NULL };
	if (kvt_run(&rc, argv, NULL) || rc.exit_code) {
		fprintf(stderr, "gen_trace failed (%d): %s\n", rc.exit_code, rc.err);
		return -1;
	}
	return 0;
}

static int suite_clean(void)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *report(const char *fmt, const char *trace)
{
	return kvt_report_run(&rc, tmpdir, fmt, trace, NULL);
}

static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* ---- the charts' data ---- */

/* The numbers of the JSON array after the markers into v (at most max);
 * how many, or -1 when a marker is missing. "null" reads as NAN. */
static int numbers_after(const char *s, const char *const *marks, double *v, int max)
{
	for (int i = 0; s && marks[i]; i++)
		if ((s = strstr(s, marks[i])))
			s += strlen(marks[i]);
	if (!s)
		return -1;
	int n = 0;
	while (*s && *s != ']' && n < max) {
		char *end;
		if (!strncmp(s, "null", 4)) {
			v[n++] = NAN;
			end = (char *)s + 4;
		} else {
			v[n++] = strtod(s, &end);
			if (end == s)
				return -1;
		}
		s = end + (*end == ',');
	}
	return n;
}

/* The text of the data block of chart id, malloc'd, or NULL. */
static char *data_block(const char *html, const char *id)
{
	char open[128];
	snprintf(open, sizeof open, "<script type=\"application/json\" class=\"kvt-data\" id=\"data-%s\">", id);
	const char *s = strstr(html, open), *e = s ? strstr(s, "</script>") : NULL;
	if (!e)
		return NULL;
	s += strlen(open);
	return strndup(s, (size_t)(e - s));
}

/* Chart id's series label equals the JSON report's live_bytes[key], each
 * bucket, the last edge repeating the last bucket. */
static void check_live(const char *html, const char *js, const char *id, const char *label,
		       const char *key)
{
	char *d = data_block(html, id);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_PTR_NULL(strpbrk(d, "<&"));     /* nothing that ends the element */
	char lab[64], k[64];
	snprintf(lab, sizeof lab, "{\"label\":\"%s\",", label);
	snprintf(k, sizeof k, "\"%s\":[", key);
	static double got[128], want[128], x[128];
	int n = numbers_after(d, (const char *const[]){ lab, "\"values\":[", NULL }, got, 128);
	int m = numbers_after(js, (const char *const[]){ "\"live_bytes\":{", k, NULL }, want, 128);
	int nx = numbers_after(d, (const char *const[]){ "\"x\":[", NULL }, x, 128);
	CU_ASSERT_FATAL(m > 10 && n == m + 1 && nx == m + 1);
	for (int b = 0; b < m; b++)
		CU_ASSERT_DOUBLE_EQUAL(got[b], want[b], 0.5);
	CU_ASSERT_DOUBLE_EQUAL(got[m], want[m - 1], 0.5);
	uint64_t bucket_ns = kvt_num_after(js, (const char *const[]){ "\"timeline\":{\"bucket_ns\":", NULL });
	CU_ASSERT_DOUBLE_EQUAL(x[m], (double)bucket_ns * m / 1e9, 1e-9);
	free(d);
}

static void test_chart_data(void)
{
	char *html = report("html", gen_trace), *js = report("json", gen_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	/* gen_trace: host and device memory, native and managed:far */
	check_live(html, js, "live-kind", "host", "host");
	check_live(html, js, "live-kind", "device", "device");
	check_live(html, js, "live-placement", "native", "place:native");
	check_live(html, js, "live-placement", "managed:far", "place:managed:far");
	/* the phase marks of the SVG, for the uPlot charts: gen_trace has one
	 * meminfo event and one KV burst */
	char *k = data_block(html, "live-kind");
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_EQUAL(count(k, "\"label\":\"meminfo\"}"), 1);
	CU_ASSERT_EQUAL(count(k, "\"label\":\"KV burst\"}"), 1);
	free(k);
	/* events per second: the JSON's events per bucket over the bucket */
	char *d = data_block(html, "events");
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	static double got[128], ev[128];
	int n = numbers_after(d, (const char *const[]){ "\"values\":[", NULL }, got, 128);
	int m = numbers_after(js, (const char *const[]){ "\"timeline\":{", "\"events\":[", NULL }, ev, 128);
	uint64_t bucket_ns = kvt_num_after(js, (const char *const[]){ "\"timeline\":{\"bucket_ns\":", NULL });
	CU_ASSERT_FATAL(m > 10 && n == m + 1);
	for (int b = 0; b < m; b++)
		CU_ASSERT_DOUBLE_EQUAL(got[b], floor(ev[b] * 1e9 / (double)bucket_ns), 1.0);
	CU_ASSERT(isnan(got[m]));                /* bars: no value past the last bucket */
	CU_ASSERT_PTR_NOT_NULL(strstr(d, "\"style\":\"bars\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(d, "\"marks\":[]}"));
	free(d);
	free(js);
	free(html);
}

/* ---- the page with and without uPlot ---- */

static void test_page_parts(void)
{
	char *html = report("html", gen_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	/* the static SVG of each chart, always */
	CU_ASSERT_EQUAL(count(html, "<div class=\"kvt-chart\""), 3);
	CU_ASSERT_EQUAL(count(html, "<div class=\"kvt-static\">\n<svg"), 3);
	CU_ASSERT_EQUAL(count(html, "<script type=\"application/json\""), 3);
	CU_ASSERT_EQUAL(kvt_html_other_scripts(html, KVT_HAVE_UPLOT), 0);
	CU_ASSERT_PTR_NULL(strstr(html, "http://"));
	CU_ASSERT_PTR_NULL(strstr(html, "https://"));
	if (KVT_HAVE_UPLOT) {
		CU_ASSERT_PTR_NOT_NULL(strstr(html, "var uPlot="));
		CU_ASSERT_PTR_NOT_NULL(strstr(html, "window.kvtCharts"));
		CU_ASSERT_PTR_NOT_NULL(strstr(html, "<details id=\"uplot-license\">"));
		CU_ASSERT_PTR_NOT_NULL(strstr(html, "Permission is hereby granted, free of charge"));
		CU_ASSERT_PTR_NOT_NULL(strstr(html, "Copyright (c)"));
		CU_ASSERT_PTR_NULL(strstr(html, "id=\"charts-static\""));
	} else {
		CU_ASSERT_PTR_NULL(strstr(html, "uPlot="));
		CU_ASSERT_PTR_NULL(strstr(html, "<details id=\"uplot-license\">"));
		CU_ASSERT_EQUAL(count(html, "<p id=\"charts-static\">The charts are static: this kvtier "
				      "was built without uPlot ("), 1);
	}
	free(html);
	if (access("/usr/bin/xmllint", X_OK)) {
		fprintf(stderr, "\n  SKIP: xmllint not installed: well-formedness not checked\n");
		return;
	}
	const char *argv[] = { "/usr/bin/xmllint", "--noout", tmp_path("html"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(rc.err_len, 0);
}

/* embed.sh OUT [DIR]: the generated source's kvt_uplot_missing line. */
static const char *embed(const char *dir)
{
	static char line[600];
	const char *argv[] = { "/bin/sh", "tools/html/embed.sh", tmp_path("uplot.c"), dir, NULL };
	line[0] = 0;
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	char *c = kvt_slurp(tmp_path("uplot.c"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	const char *m = strstr(c, "kvt_uplot_missing[] = \"");
	if (m)
		snprintf(line, sizeof line, "%.*s", (int)strcspn(m + 23, "\n"), m + 23);
	free(c);
	return line;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void test_embed_fallback(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(embed(NULL), "/uplot was not installed; npm ci in tools/html, "
				      "then make"));
	/* a package with a file missing, then one whose script would end the element */
	char cmd[700];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s/up/dist'", tmpdir);
	CU_ASSERT_FATAL(system(cmd) == 0);
	write_text(tmp_path("up/dist/uPlot.iife.min.js"), "/*! banner */\nvar uPlot=1;\n");
	CU_ASSERT_PTR_NOT_NULL(strstr(embed(tmp_path("up")), "/dist/uPlot.min.css is missing"));
	write_text(tmp_path("up/dist/uPlot.min.css"), ".u{color:red}\n");
	write_text(tmp_path("up/LICENSE"), "MIT\n");
	write_text(tmp_path("up/package.json"), "{\n  \"version\": \"9.9.9\"\n}\n");
	CU_ASSERT_STRING_EQUAL(embed(tmp_path("up")), "\";");         /* fit: nothing missing */
	write_text(tmp_path("up/dist/uPlot.iife.min.js"), "var s=\"</script>\";\n");
	CU_ASSERT_PTR_NOT_NULL(strstr(embed(tmp_path("up")), "uPlot.iife.min.js holds '</script'"));
	write_text(tmp_path("up/dist/uPlot.iife.min.js"), "var u=\"https://x\";\n");
	CU_ASSERT_PTR_NOT_NULL(strstr(embed(tmp_path("up")), "holds 'https://'"));
}

/* ---- in headless Chromium ---- */

/* Before the page's scripts: every error and console.error counted. */
static const char probe_head[] =
	"<script>//<![CDATA[\n"
	"window.kvtErrors = [];\n"
	"window.addEventListener(\"error\", function (e) { kvtErrors.push(\"error: \" + e.message); });\n"
	"(function () { var ce = console.error; console.error = function () {\n"
	"\tkvtErrors.push(Array.prototype.join.call(arguments, \" \")); ce.apply(console, arguments); };\n"
	"})();\n//]]></script>\n";

/* After them: a drag over a quarter of the first chart and a click on the
 * flame graph's second frame, then the x range before and after, the
 * charts drawn, the frame's width and the frames hidden after the click,
 * and the errors into the DOM. */
static const char probe_tail[] =
	"<script>//<![CDATA[\n"
	"(function () {\n"
	"var r = { charts: (window.kvtCharts || []).length, hidden: 0, x0: \"-\", x1: \"-\",\n"
	"\tflame: \"-\" }, u;\n"
	"document.querySelectorAll(\"div.kvt-static\").forEach(function (d) {\n"
	"\tif (getComputedStyle(d).display === \"none\") r.hidden++; });\n"
	"function ev(type, at, target, b) {\n"
	"\ttarget.dispatchEvent(new MouseEvent(type, { clientX: b.left + b.width * at,\n"
	"\t\tclientY: b.top + b.height / 2, bubbles: true, cancelable: true, view: window,\n"
	"\t\tbutton: 0, buttons: type === \"mouseup\" ? 0 : 1, movementX: 5, movementY: 0 }));\n"
	"}\n"
	"try {\n"
	"\tu = kvtCharts[0];\n"
	"\tvar b = u.over.getBoundingClientRect();\n"
	"\tr.x0 = u.scales.x.min + \" \" + u.scales.x.max;\n"
	"\tev(\"mousedown\", 0.25, u.over, b);\n"
	"\tev(\"mousemove\", 0.4, u.over, b);\n"
	"\tev(\"mousemove\", 0.5, u.over, b);\n"
	"\tev(\"mouseup\", 0.5, document, b);\n"
	"} catch (e) { kvtErrors.push(\"probe: \" + e); }\n"
	"var fg = document.querySelectorAll(\"#flame-graph g.frame\");\n"
	"try {\n"
	"\tfg[1].dispatchEvent(new MouseEvent(\"click\", { bubbles: true, view: window }));\n"
	"\tr.flame = fg[1].querySelector(\"rect\").getAttribute(\"width\") + \" \" +\n"
	"\t\t[].filter.call(fg, function (g) { return g.style.display === \"none\"; }).length;\n"
	"} catch (e) { kvtErrors.push(\"probe: \" + e); }\n"
	"setTimeout(function () {\n"
	"\ttry { r.x1 = u.scales.x.min + \" \" + u.scales.x.max; } catch (e) { kvtErrors.push(\"probe: \" + e); }\n"
	"\tvar out = document.createElement(\"pre\");\n"
	"\tout.textContent = \"KVT-\" + \"PROBE charts=\" + r.charts + \" hidden=\" + r.hidden + \" errors=\" +\n"
	"\t\tkvtErrors.length + \" x0=\" + r.x0 + \" x1=\" + r.x1 + \" flame=\" + r.flame + \" hints=\" +\n"
	"\t\tdocument.querySelectorAll(\".kvt-js[hidden]\").length + \" \" +\n"
	"\t\tdocument.querySelectorAll(\".kvt-js\").length + \" end \" +\n"
	"\t\tkvtErrors.join(\" | \");\n"
	"\tdocument.body.appendChild(out);\n"
	"}, 100);\n"
	"})();\n//]]></script>\n";

/* The report with the probes inserted, at path. */
static void write_probed(const char *html, const char *path)
{
	const char *head = strstr(html, "<head>"), *body = strstr(html, "</body>");
	CU_ASSERT_FATAL(head && body && head < body);
	head += 6;
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fwrite(html, 1, (size_t)(head - html), f);
	fputs(probe_head, f);
	fwrite(head, 1, (size_t)(body - head), f);
	fputs(probe_tail, f);
	fputs(body, f);
	fclose(f);
}

static void test_chromium(void)
{
	char *html = report("html", gen_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	char page[600], dom[600], cmd[3000];
	snprintf(page, sizeof page, "%s", tmp_path("probed.html"));
	snprintf(dom, sizeof dom, "%s", tmp_path("dom.html"));
	write_probed(html, page);
	free(html);
	snprintf(cmd, sizeof cmd, "exec " CHROMIUM " --headless=new --no-sandbox --disable-gpu "
		 "--no-first-run --disable-background-networking --disable-component-update "
		 "--disable-sync --window-size=1000,1400 --virtual-time-budget=5000 "
		 "'--user-data-dir=%s' --dump-dom 'file://%s' > '%s'", tmp_path("chromium-profile"),
		 page, dom);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	CU_ASSERT_FATAL(kvt_run_bounded(&rc, argv, NULL, 120) == 0);
	CU_ASSERT_EQUAL_FATAL(rc.exit_code, 0);
	char *d = kvt_slurp(dom, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	const char *p = strstr(d, "KVT-PROBE charts=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	fprintf(stderr, "\n  %.*s", (int)strcspn(p, "<"), p);
	unsigned charts = 0, hidden = 0, errors = 99;
	double x0[2] = { 0, 0 }, x1[2] = { 0, 0 }, flame_w = 0;
	unsigned flame_hidden = 0, hints_hidden = 9, hints = 0;
	int got = sscanf(p, "KVT-PROBE charts=%u hidden=%u errors=%u x0=%lf %lf x1=%lf %lf "
			 "flame=%lf %u hints=%u %u", &charts, &hidden, &errors, &x0[0], &x0[1], &x1[0],
			 &x1[1], &flame_w, &flame_hidden, &hints_hidden, &hints);
	CU_ASSERT_EQUAL(got, 11);
	/* the hints about zooming, hidden without script, shown */
	CU_ASSERT_EQUAL(hints, 2);
	CU_ASSERT_EQUAL(hints_hidden, 0);
	/* a click on the root's first callee: it spans the graph, its
	 * neighbours are hidden */
	CU_ASSERT_DOUBLE_EQUAL(flame_w, 860.0, 0.05);
	CU_ASSERT(flame_hidden > 0);
	CU_ASSERT_EQUAL(errors, 0);
	CU_ASSERT_EQUAL(charts, 3);
	CU_ASSERT_EQUAL(hidden, 3);             /* each SVG gave way to its chart */
	/* the drag from 25% to 50% of the plot: x now spans about that quarter */
	double span = x0[1] - x0[0];
	CU_ASSERT(span > 0);
	CU_ASSERT(fabs(x1[0] - (x0[0] + 0.25 * span)) < 0.05 * span);
	CU_ASSERT(fabs(x1[1] - (x0[0] + 0.50 * span)) < 0.05 * span);
	free(d);
}

/* ---- the flame graph ---- */

/* The value in "<title>NAME: V unit" of the first frame named name. */
static uint64_t frame_value(const char *html, const char *name, const char *unit)
{
	char t[600];
	snprintf(t, sizeof t, "<g class=\"frame\"><title>%s: ", name);
	const char *p = strstr(html, t);
	if (!p)
		return UINT64_MAX;
	char *end;
	uint64_t v = strtoull(p + strlen(t), &end, 10);
	return !strncmp(end, " ", 1) && !strncmp(end + 1, unit, strlen(unit)) ? v : UINT64_MAX;
}

/* Sum of the values of the frames drawn at y (one row of the graph):
 * "<g class="frame"><title>NAME: V unit (P%)</title><rect x=".." y="Y" ". */
static uint64_t row_sum(const char *graph, long y)
{
	uint64_t sum = 0;
	const char *g = "<g class=\"frame\"><title>";
	for (const char *p = graph; (p = strstr(p, g)); p++) {
		const char *end = strstr(p, "</title><rect x=\""), *v = end;
		if (!end)
			break;
		while (v > p && strncmp(v, ": ", 2))
			v--;
		const char *yat = strchr(end + 18, '"');
		if (yat && strtol(yat + 5, NULL, 10) == y && !strncmp(yat, "\" y=\"", 5))
			sum += strtoull(v + 2, NULL, 10);
	}
	return sum;
}

/* The folded line l's value, and its leaf frame into leaf. */
static uint64_t folded_line(const char *l, char *leaf, size_t len)
{
	char line[4096];
	snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
	char *sp = strrchr(line, ' ');
	if (!sp)
		return 0;
	*sp = 0;
	snprintf(leaf, len, "%s", strrchr(line, ';') ? strrchr(line, ';') + 1 : line);
	return strtoull(sp + 1, NULL, 10);
}

/* The folded output's total, after checking that each line of at least a
 * 200th of it has its leaf drawn as a frame. */
static uint64_t check_leaves(const char *folded, const char *graph, const char *unit)
{
	uint64_t total = 0;
	char leaf[4096];
	for (const char *l = folded; *l; l = strchr(l, '\n') + 1)
		total += folded_line(l, leaf, sizeof leaf);
	unsigned checked = 0;
	for (const char *l = folded; *l; l = strchr(l, '\n') + 1) {
		if (folded_line(l, leaf, sizeof leaf) * 200 < total)
			continue;
		checked++;
		if (frame_value(graph, leaf, unit) == UINT64_MAX)
			fprintf(stderr, "\n  no frame %s", leaf);
		CU_ASSERT_NOT_EQUAL(frame_value(graph, leaf, unit), UINT64_MAX);
	}
	CU_ASSERT(checked > 0);
	return total;
}

static void test_flame(void)
{
	for (int by_count = 0; by_count < 2; by_count++) {
		const char *value = by_count ? "count" : "bytes", *unit = by_count ? "allocations" : "bytes";
		const char *fa[] = { kvt_path("kvtier"), "report", "-q", "--format", "folded", "--value",
				     value, gen_trace, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, fa, NULL) == 0 && rc.exit_code == 0);
		char *folded = strdup(rc.out);
		const char *ha[] = { kvt_path("kvtier"), "report", "-q", "--format", "html", "--value",
				     value, "-o", tmp_path("flame.html"), gen_trace, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, ha, NULL) == 0 && rc.exit_code == 0);
		char *html = kvt_slurp(tmp_path("flame.html"), NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(html);
		const char *g = strstr(html, "<svg class=\"flame\" id=\"flame-graph\"");
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		uint64_t total = check_leaves(folded, g, unit);
		CU_ASSERT(total > 0);
		CU_ASSERT_EQUAL(frame_value(g, "all", unit), total);
		CU_ASSERT_PTR_NULL(strstr(g, "<title>libkvtier"));        /* kvtier's frames hidden */
		/* the row above the root sums to it */
		const char *root = strstr(g, "<title>all: ");
		long y = strtol(strstr(strstr(root, "<rect"), " y=\"") + 4, NULL, 10);
		CU_ASSERT_EQUAL(row_sum(g, y - ROW), total);
		free(html);
		free(folded);
	}
}

/* A trace of a header and an end record: no allocation, no flame graph
 * but one line; the charts' data is still there (all zeros). */
static void test_flame_empty(void)
{
	struct kvt_trace_header h = { .magic = "KVTTRACE", .version = KVT_TRACE_VERSION,
				      .header_bytes = sizeof h };
	struct kvt_rec_end end = { .head = { KVT_REC_END, sizeof end } };
	FILE *f = fopen(tmp_path("empty.trace"), "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fwrite(&h, sizeof h, 1, f) == 1 && fwrite(&end, sizeof end, 1, f) == 1);
	fclose(f);
	char *html = report("html", tmp_path("empty.trace"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<p id=\"flame-none\">No allocation recorded.</p>"));
	CU_ASSERT_PTR_NULL(strstr(html, "<svg class=\"flame\""));
	CU_ASSERT_EQUAL(count(html, "<div class=\"kvt-static\">\n<svg"), 3);
	free(html);
}

/* ---- UTF-8 ---- */

static const char *html_of(const char *in, size_t n, size_t max)
{
	static char buf[256];
	buf[0] = 0;
	FILE *f = fmemopen(buf, sizeof buf, "w");
	kvt_html_textn(f, in, n, max);
	fclose(f);
	return buf;
}

static void test_html_escaper(void)
{
	static const struct { const char *in; size_t max; const char *out; } cases[] = {
		{ "a<b>&\"c'", SIZE_MAX, "a&lt;b&gt;&amp;&quot;c'" },
		{ "mod\xc3\xa8l \xe6\x97\xa5 \xf0\x9f\x98\x80", SIZE_MAX, "mod\xc3\xa8l \xe6\x97\xa5 \xf0\x9f\x98\x80" },
		{ "x\xffy", SIZE_MAX, "x&#xfffd;y" },
		{ "\xed\xa0\x80", SIZE_MAX, "&#xfffd;&#xfffd;&#xfffd;" },        /* a surrogate */
		{ "\xc0\xaf", SIZE_MAX, "&#xfffd;&#xfffd;" },                    /* overlong */
		{ "cut \xc3", SIZE_MAX, "cut &#xfffd;" },
		{ "\x01\x1b\x7f", SIZE_MAX, "&#xfffd;&#xfffd;&#xfffd;" },
		{ "a\nb\tc", SIZE_MAX, "a\nb\tc" },
		{ "\xef\xbf\xbe\xef\xbf\xbd", SIZE_MAX, "&#xfffd;\xef\xbf\xbd" }, /* U+FFFE: no XML char */
		{ "h\xc3\xa9llo", 2, "h\xc3\xa9&#8230;" },                        /* cut by characters */
		{ "h\xc3\xa9llo", 5, "h\xc3\xa9llo" },
		{ "<<<", 1, "&lt;&#8230;" },
		{ "", SIZE_MAX, "" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *got = html_of(cases[i].in, strlen(cases[i].in), cases[i].max);
		if (strcmp(got, cases[i].out))
			fprintf(stderr, "\n  case %zu: got %s", i, got);
		CU_ASSERT_STRING_EQUAL(got, cases[i].out);
	}
}

/* gen_trace's program module renamed (6 bytes, "server"): the flame graph
 * and the call-site table show want, and the page stays well-formed. */
static void check_renamed(const char *name6, const char *want)
{
	size_t n = 0;
	char *t = kvt_slurp(gen_trace, &n);
	CU_ASSERT_FATAL(t != NULL);
	int renamed = 0;
	for (char *m = t; (m = memmem(m, n - (size_t)(m - t), "/nonexistent/server", 19)); m += 19)
		renamed += !!memcpy(m + 13, name6, 6);
	CU_ASSERT_FATAL(renamed > 0);
	FILE *f = fopen(tmp_path("renamed.trace"), "wb");
	CU_ASSERT_FATAL(f && fwrite(t, 1, n, f) == n);
	fclose(f);
	free(t);
	char *html = report("html", tmp_path("renamed.trace"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	char title[128];
	snprintf(title, sizeof title, "<g class=\"frame\"><title>%s+0x", want);
	CU_ASSERT_PTR_NOT_NULL(strstr(strstr(html, "<svg class=\"flame\""), title));
	snprintf(title, sizeof title, "<td><b>? (%s+0x", want);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, title));
	free(html);
	if (access("/usr/bin/xmllint", X_OK))
		return;
	const char *argv[] = { "/usr/bin/xmllint", "--noout", tmp_path("html"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
}

static void test_utf8_names(void)
{
	check_renamed("s\xc3\xa9rve", "s\xc3\xa9rve");
	check_renamed("se\xffver", "se&#xfffd;ver");
	check_renamed("se<ver", "se&lt;ver");
}

#define CHROMIUM_TEST "Chromium: no error, the charts drawn, a drag zooms x, a click the flame graph"

int main(void)
{
	CU_TestInfo tests[] = {
		{ "chart data: the JSON report's timeline, bucket by bucket", test_chart_data },
		{ "page: SVG always; uPlot inlined, or no script and one line", test_page_parts },
		{ "embed.sh: no package, or one unfit, builds the static page", test_embed_fallback },
		{ CHROMIUM_TEST, test_chromium },
		{ "flame graph: folded stacks' frames and sums, bytes and count", test_flame },
		{ "flame graph: a trace without allocations, one line", test_flame_empty },
		{ "HTML text: UTF-8 kept, bad bytes U+FFFD, cut by characters", test_html_escaper },
		{ "UTF-8 module names in the flame graph and the tables", test_utf8_names },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "report-html", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	const char *why = access(CHROMIUM, X_OK) ? CHROMIUM " is not installed" :
			  !KVT_HAVE_UPLOT ? "this kvtier was built without uPlot" : NULL;
	return kvt_test_main_skip(suites, why ? CHROMIUM_TEST : NULL, why);
}
