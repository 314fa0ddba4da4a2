/* SPDX-License-Identifier: MIT */
/* Helpers shared by the report printers (text, JSON, HTML). */
#ifndef KVT_TOOLS_REPORT_OUT_H
#define KVT_TOOLS_REPORT_OUT_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "html_text.h"
#include "report.h"

/* "function (module+0xoff)" of a frame, then " at file.cc:LINE" where the
 * debug info says, then ", inlined into g at f.cc:L" for each function it
 * was inlined into; "? (0xip)" outside every module. */
const char *kvt_rpt_frame_label(struct kvt_report *r, const struct kvt_rpt_frame *f,
				char *buf, size_t len);
/* A site's label: its innermost Python frame "func (file.py:line)" if it
 * has one, else its attributed native frame; "(no stack recorded)" for 0. */
const char *kvt_rpt_site_label(struct kvt_report *r, uint32_t site, char *buf, size_t len);
/* The last component of a path. */
const char *kvt_rpt_base_name(const char *path);
/* Under a site's label, one call of line per line: its callers (Python
 * frames, else the native callers of its heaviest stack, outward to main),
 * a note when the site has several stacks, then the runtime frames below
 * it; kvtier's own frames hidden. The text and HTML reports format them. */
enum kvt_rpt_stack_line { KVT_RPT_LINE_PY, KVT_RPT_LINE_CALLER, KVT_RPT_LINE_NOTE, KVT_RPT_LINE_VIA };
void kvt_rpt_stack_lines(struct kvt_report *r, uint32_t site,
			 void (*line)(void *ctx, enum kvt_rpt_stack_line kind, const char *text),
			 void *ctx);
/* Appends " at file:line" and ", inlined into F at file:line" for each of
 * l's frames to buf (n bytes already written, len in all); returns buf. */
const char *kvt_rpt_inlined(char *buf, size_t n, size_t len, const struct kvt_dwsym_loc *l);
/* "func (file.py:line)" of a Python frame (file's basename). */
const char *kvt_rpt_py_label(const struct kvt_rpt_pyframe *p, char *buf, size_t len);
/* "0x… (size) at site" of the redirected allocation holding heat chunk c
 * ("trace N, 0x…" where none is known). */
const char *kvt_rpt_chunk_alloc_label(struct kvt_report *r, const struct kvt_rpt_chunk *c,
				      char *buf, size_t len);
/* The HTML report's "Chunk heat" section: GPU faults per chunk, then
 * kvtier's own accesses, rows named by allocation (report_heat.c). */
struct kvt_rpt_timeline;
void kvt_rpt_heat_html(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f);
/* How many of s->frames are printed as "via" lines under the label. */
uint32_t kvt_rpt_site_via(const struct kvt_rpt_site *s);


/* ---- HTML (report_html.c, report_chart.c, report_flame.c) ---- */

/* An interactive time-series chart (report_chart.c): its data as JSON in a
 * <script type="application/json"> element, then the static SVG that the
 * page's script replaces with a uPlot chart when it runs (and that stays,
 * the page read without script or without uPlot). Between kvt_chart_open
 * and kvt_chart_svg, one kvt_chart_series per series, then the marks
 * (kvt_chart_mark: a dashed line or a shaded span); the SVG follows
 * kvt_chart_svg, then kvt_chart_close. x: nr buckets of bucket_ns. */
struct kvt_chart {
	const char *id;                 /* unique in the page: [a-z0-9-] */
	const char *y_label;            /* the y axis: "live bytes", "events/s", ... */
	const char *y2_label;           /* NULL, or a right-hand axis of counts around 0 */
	int bytes;                      /* y in bytes: ticks and readouts in KiB, MiB, ... */
	int bars;                       /* one bar per bucket, else step lines */
	uint64_t bucket_ns;
	uint32_t nr;
	unsigned nr_series, nr_marks;   /* written so far */
};
void kvt_chart_open(FILE *f, struct kvt_chart *c);
void kvt_chart_series(FILE *f, struct kvt_chart *c, const char *label, const char *color,
		      const double *v);
/* How one series differs from its chart (kvt_chart_series_opt); zero: not. */
struct kvt_chart_opt {
	int bars;                       /* bars, in a chart of step lines */
	int right;                      /* on the right-hand axis (y2_label) */
	int dashed;
	unsigned width;                 /* line width in px (0: 2) */
	int solid;                      /* bars filled with the colour itself */
};
void kvt_chart_series_opt(FILE *f, struct kvt_chart *c, const char *label, const char *color,
			  const double *v, const struct kvt_chart_opt *o);
void kvt_chart_mark(FILE *f, struct kvt_chart *c, double t0_s, double t1_s, const char *label);
void kvt_chart_svg(FILE *f, struct kvt_chart *c);
void kvt_chart_close(FILE *f);
/* Inside <head>: the charts' CSS (uPlot's where the tool has it). */
void kvt_chart_head(FILE *f);
/* One line when the tool was built without uPlot (the charts are static). */
void kvt_chart_notice(FILE *f);
/* Whether the page has the charts' script (the tool was built with uPlot):
 * it also zooms the flame graph on a click. */
int kvt_chart_interactive(void);
/* At the end of <body>: uPlot, the script that builds the charts, and
 * uPlot's license notice; nothing without uPlot. */
void kvt_chart_scripts(FILE *f);

/* The flame graph of every allocating stack (report_flame.c): by bytes, or
 * by count with --value count; 0 or -1 (out of memory). */
int kvt_rpt_flame_html(struct kvt_report *r, FILE *f);

#endif
