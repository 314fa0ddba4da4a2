// SPDX-License-Identifier: MIT
/* The flame graph of the HTML report (docs/report.md, "Flame graph"): the
 * lines of --format folded (kvt_report_folded: kvtier's own frames hidden)
 * merged into one tree of frames and drawn as SVG, root at the bottom, each
 * frame as wide as its bytes (or allocations, --value count), with a
 * <title> tooltip. It needs no script; the page's script, where there is
 * one (report_chart.c), adds click-to-zoom. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_out.h"

#define FW      860             /* width of the graph */
#define ROW     17              /* height of one frame */
#define MIN_PX  0.5             /* narrower frames (and what is above them) left out */
#define CHAR_PX 6.6             /* width of a character of the 11px labels, about */
#define NONE    UINT32_MAX

struct fnode {
	const char *name;               /* into its folded line; not NUL-terminated */
	uint32_t len, depth;
	uint64_t v;
	uint32_t last, next;            /* its newest child (the head of the child list), sibling */
};

struct flame {
	struct fnode *n;                /* n[0]: the root, "all" */
	uint32_t nr, cap;
	uint32_t max_depth, nr_hidden;  /* drawn rows above the root; frames too narrow */
	int by_count;
};

/* ---- the tree ---- */

/* Frame by frame: ';' sorts before every other byte, so that the lines
 * under one frame are next to one another whatever its name holds. */
static int cmp_frames(const void *a, const void *b)
{
	const unsigned char *x = (const unsigned char *)((const struct kvt_rpt_folded *)a)->line;
	const unsigned char *y = (const unsigned char *)((const struct kvt_rpt_folded *)b)->line;
	for (;; x++, y++) {
		unsigned cx = *x == ';' ? 1 : *x, cy = *y == ';' ? 1 : *y;
		if (cx != cy || !cx)
			return (int)cx - (int)cy;
	}
}

static int new_node(struct flame *fl, uint32_t parent, const char *name, uint32_t len)
{
	if (fl->nr == fl->cap) {
		uint32_t cap = fl->cap ? fl->cap * 2 : 256;
		struct fnode *n = realloc(fl->n, cap * sizeof *n);
		if (!n)
			return -ENOMEM;
		fl->n = n;
		fl->cap = cap;
	}
	fl->n[fl->nr] = (struct fnode){ name, len, parent == NONE ? 0 : fl->n[parent].depth + 1,
					0, NONE, parent == NONE ? NONE : fl->n[parent].last };
	if (parent != NONE)
		fl->n[parent].last = fl->nr;
	fl->nr++;
	return 0;
}

/* One folded line: down from the root, a frame equal to the newest child
 * is that child (lines sorted by cmp_frames), else a new one. */
static int add_line(struct flame *fl, const char *line, uint64_t v)
{
	uint32_t at = 0;
	fl->n[0].v += v;
	for (const char *p = line; *p;) {
		const char *e = strchr(p, ';');
		uint32_t len = (uint32_t)(e ? (size_t)(e - p) : strlen(p));
		uint32_t c = fl->n[at].last;
		if (c == NONE || fl->n[c].len != len || memcmp(fl->n[c].name, p, len)) {
			if (new_node(fl, at, p, len))
				return -ENOMEM;
			c = fl->nr - 1;
		}
		fl->n[c].v += v;
		at = c;
		p += len + (e != NULL);
	}
	return 0;
}

/* Children were linked newest first: put them back in line order. */
static void order_children(struct flame *fl)
{
	for (uint32_t i = 0; i < fl->nr; i++) {
		uint32_t prev = NONE, c = fl->n[i].last;
		while (c != NONE) {
			uint32_t next = fl->n[c].next;
			fl->n[c].next = prev;
			prev = c;
			c = next;
		}
		fl->n[i].last = prev;   /* now the first child */
	}
}

static int build(struct flame *fl, struct kvt_rpt_folded *v, uint32_t nr)
{
	if (new_node(fl, NONE, "all", 3))
		return -ENOMEM;
	if (nr)                         /* no line: v may be NULL */
		qsort(v, nr, sizeof *v, cmp_frames);
	for (uint32_t i = 0; i < nr; i++)
		if (add_line(fl, v[i].line, v[i].v))
			return -ENOMEM;
	order_children(fl);
	return 0;
}

/* ---- drawing ---- */

static double width_of(const struct flame *fl, uint32_t i)
{
	return FW * (double)fl->n[i].v / (double)fl->n[0].v;
}

/* The deepest frame wide enough to draw; counts those left out. */
static void measure(struct flame *fl, uint32_t i)
{
	if (width_of(fl, i) < MIN_PX) {
		fl->nr_hidden++;
		return;
	}
	if (fl->n[i].depth > fl->max_depth)
		fl->max_depth = fl->n[i].depth;
	for (uint32_t c = fl->n[i].last; c != NONE; c = fl->n[c].next)
		measure(fl, c);
}

/* A warm colour of the name (the same name, the same colour); grey for the
 * lines that stand for allocations without a stack. */
static void color_of(const struct fnode *n, char *buf, size_t len)
{
	uint32_t h = 2166136261u;
	for (uint32_t i = 0; i < n->len; i++)
		h = (h ^ (unsigned char)n->name[i]) * 16777619u;
	if (n->len && n->name[0] == '(')
		snprintf(buf, len, "#bbbbbb");
	else
		snprintf(buf, len, "#%02x%02x%02x", 205 + h % 50, 80 + (h >> 8) % 130,
			 30 + (h >> 16) % 50);
}

static void draw(const struct flame *fl, FILE *f, uint32_t i, double x)
{
	const struct fnode *n = &fl->n[i];
	double w = width_of(fl, i), y = 4 + (double)(fl->max_depth - n->depth) * ROW;
	char color[16];
	if (w < MIN_PX)
		return;
	color_of(n, color, sizeof color);
	fprintf(f, "<g class=\"frame\"><title>");
	kvt_html_textn(f, n->name, n->len, SIZE_MAX);
	fprintf(f, ": %" PRIu64 " %s (%.2f%%)</title><rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" "
		"height=\"%d\" fill=\"%s\"/>", n->v, fl->by_count ? "allocations" : "bytes",
		100.0 * (double)n->v / (double)fl->n[0].v, x, y, w, ROW - 1, color);
	size_t fit = w > 8 ? (size_t)((w - 6) / CHAR_PX) : 0;
	if (fit >= 3) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">", x + 3, y + ROW - 5);
		kvt_html_textn(f, n->name, n->len, fit - 1 < n->len ? fit - 1 : n->len);
		fprintf(f, "</text>");
	}
	fprintf(f, "</g>\n");
	for (uint32_t c = n->last; c != NONE; c = fl->n[c].next) {
		draw(fl, f, c, x);
		x += width_of(fl, c);
	}
}

static void draw_graph(struct flame *fl, FILE *f)
{
	measure(fl, 0);
	double h = (double)(fl->max_depth + 1) * ROW + 8;
	fprintf(f, "<p>Every stack that allocated, its root at the bottom: each frame is as wide as "
		"the %s allocated under it (%" PRIu64 " in all); kvtier's own frames are hidden, as in "
		"<code>--format folded</code>. Point at a frame for its name, value and share%s.",
		fl->by_count ? "allocations" : "bytes", fl->n[0].v, kvt_chart_interactive() ?
		"<span class=\"kvt-js\" hidden=\"hidden\">; click one to zoom into it, and "
		"<i>all</i> to zoom out</span>" : "");
	if (fl->nr_hidden)
		fprintf(f, " %u frame%s narrower than %.1f px (and the frames above them) not drawn.",
			fl->nr_hidden, fl->nr_hidden == 1 ? "" : "s", MIN_PX);
	fprintf(f, "</p>\n<svg class=\"flame\" id=\"flame-graph\" width=\"%d\" height=\"%.0f\" "
		"viewBox=\"0 0 %d %.0f\">\n", FW, h, FW, h);
	draw(fl, f, 0, 0);
	fprintf(f, "</svg>\n");
}

int kvt_rpt_flame_html(struct kvt_report *r, FILE *f)
{
	struct kvt_rpt_folded *v;
	uint32_t nr;
	struct flame fl = { .by_count = r->value_count };
	fprintf(f, "<h2 id=\"flame\">Flame graph</h2>\n");
	if (kvt_report_folded(r, r->value_count, &v, &nr)) {
		fprintf(f, "<p id=\"flame-none\">No flame graph: out of memory.</p>\n");
		return -1;
	}
	int ret = build(&fl, v, nr);
	if (ret)
		fprintf(f, "<p id=\"flame-none\">No flame graph: out of memory.</p>\n");
	else if (!fl.n[0].v)
		fprintf(f, "<p id=\"flame-none\">No allocation recorded.</p>\n");
	else
		draw_graph(&fl, f);
	free(fl.n);
	kvt_report_folded_free(v, nr);
	return ret ? -1 : 0;
}
