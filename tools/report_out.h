/* SPDX-License-Identifier: MIT */
/* Helpers shared by the report printers (text, JSON, HTML). */
#ifndef KVT_TOOLS_REPORT_OUT_H
#define KVT_TOOLS_REPORT_OUT_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

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
/* s as HTML text (the five markup characters escaped). */
void kvt_rpt_html_esc(FILE *f, const char *s);
/* The HTML report's "Chunk heat" section: GPU faults per chunk, then
 * kvtier's own accesses, rows named by allocation (report_heat.c). */
struct kvt_rpt_timeline;
void kvt_rpt_heat_html(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f);
/* How many of s->frames are printed as "via" lines under the label. */
uint32_t kvt_rpt_site_via(const struct kvt_rpt_site *s);

#endif
