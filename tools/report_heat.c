// SPDX-License-Identifier: MIT
/* The HTML report's chunk heat maps: the GPU's faults per 2 MiB chunk over
 * time (the trace's FAULTS records, from CUPTI) and kvtier's own view
 * (copies, memsets, launches and prefetches that named the chunk). Each
 * row is a chunk; a label at the first row of each allocation names it
 * (address, size, call site), and each row's tooltip names its chunk. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_out.h"
#include "html_text.h"

#define HEAT_W 860
#define HEAT_LABEL_W 300
#define HEAT_ROWS 128
#define HEAT_ROW_H 7
#define HEAT_LABEL_CHARS 68     /* characters that fit HEAT_LABEL_W at 8 px */

/* One heat map of the rows idx[0..n) (chunk order), counts from the
 * fault counters (faults) or kvtier's (else). */
static void svg_heat(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f,
		     const uint32_t *idx, uint32_t n, int faults, const char *id)
{
	uint32_t cols = tl->heat_cols ? tl->heat_cols : 1, max = 1;
	for (uint32_t k = 0; k < n; k++) {
		const uint32_t *v = faults ? r->chunks[idx[k]].fcnt : r->chunks[idx[k]].cnt;
		for (uint32_t j = 0; j < cols; j++)
			max = v[j] > max ? v[j] : max;
	}
	double cw = (double)(HEAT_W - HEAT_LABEL_W - 10) / cols, h = n * HEAT_ROW_H + 24.0;
	fprintf(f, "<svg id=\"%s\" class=\"chart\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d "
		"%.0f\">\n", id, HEAT_W, h, HEAT_W, h);
	char lab[600];
	for (uint32_t k = 0; k < n; k++) {
		const struct kvt_rpt_chunk *c = &r->chunks[idx[k]];
		const uint32_t *v = faults ? c->fcnt : c->cnt;
		int first = !k || c->range_start != r->chunks[idx[k - 1]].range_start ||
			    c->file != r->chunks[idx[k - 1]].file || !c->range_bytes;
		kvt_rpt_chunk_alloc_label(r, c, lab, sizeof lab);
		double y = k * HEAT_ROW_H;
		if (first) {
			fprintf(f, "<line x1=\"0\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\"/>"
				"<text x=\"0\" y=\"%.1f\" font-size=\"8\" class=\"heat-alloc\"><title>",
				HEAT_W - 10, y, y, y + 7);
			kvt_html_text(f, lab);
			fprintf(f, "</title>");
			kvt_html_textn(f, lab, strlen(lab), HEAT_LABEL_CHARS);
			fprintf(f, "</text>\n");
		}
		uint64_t off = c->range_bytes ? c->addr - (c->range_start & ~((2ull << 20) - 1)) : 0;
		fprintf(f, "<g class=\"heat-row\"><title>chunk at 0x%" PRIx64 " (+%" PRIu64 " MiB into ",
			c->addr, off >> 20);
		kvt_html_text(f, lab);
		fprintf(f, "): %" PRIu64 " %s</title>\n", faults ? c->faults : c->total,
			faults ? "GPU faults" : "events");
		for (uint32_t j = 0; j < cols; j++)
			if (v[j])
				fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
					"fill=\"%s\" fill-opacity=\"%.2f\"><title>%u</title></rect>\n",
					HEAT_LABEL_W + j * cw, y, cw, HEAT_ROW_H - 1,
					faults ? "#9467bd" : "#d62728", 0.1 + 0.9 * v[j] / max, v[j]);
		fprintf(f, "</g>\n");
	}
	fprintf(f, "<text x=\"%d\" y=\"%.0f\">0 s</text><text x=\"%d\" y=\"%.0f\" "
		"text-anchor=\"end\">%.3f s</text>\n</svg>\n", HEAT_LABEL_W, h - 4, HEAT_W - 10, h - 4,
		(double)tl->heat_col_ns * cols / 1e9);
}

/* The rows of chunks with a non-zero count of the kind asked for, in chunk
 * order, at most HEAT_ROWS; *more gets how many were left out. */
static uint32_t pick_rows(const struct kvt_report *r, const uint32_t *order, int faults,
			  uint32_t *rows, uint32_t *more)
{
	uint32_t n = 0;
	*more = 0;
	for (uint32_t k = 0; k < r->nr_chunks; k++) {
		const struct kvt_rpt_chunk *c = &r->chunks[order[k]];
		if (faults ? !c->faults : !c->total)
			continue;
		if (n < HEAT_ROWS)
			rows[n++] = order[k];
		else
			(*more)++;
	}
	return n;
}

void kvt_rpt_heat_html(struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f)
{
	fprintf(f, "<h2>Chunk heat</h2>\n<p id=\"migrations\">Migrations: ");
	if (!r->by_op[KVT_OP_PREFETCH])
		fprintf(f, "no migrations recorded");
	else
		fprintf(f, "%" PRIu64 " prefetch events; %s", r->by_op[KVT_OP_PREFETCH],
			r->tier.nr_devs ? "promotions and demotions per epoch are in the HBM "
			"residency chart (Tiering, above)" : "no tiering epochs recorded");
	fprintf(f, ".</p>\n");
	if (!r->nr_chunks) {
		fprintf(f, "<p>No copy, memset, launch, prefetch or GPU fault touched a redirected "
			"range.</p>\n");
		return;
	}
	uint32_t *order = malloc(r->nr_chunks * sizeof *order);
	uint32_t *rows = malloc(HEAT_ROWS * sizeof *rows), n, more;
	if (!order || !rows) {
		free(order);
		free(rows);
		return;
	}
	kvt_report_chunk_order(r, order);
	fprintf(f, "<h3>GPU faults per chunk</h3>\n");
	if (!r->nr_faults) {
		fprintf(f, "<p id=\"heat-faults-none\">No GPU faults recorded (the cupti source was "
			"off, or nothing faulted).</p>\n");
	} else {
		n = pick_rows(r, order, 1, rows, &more);
		fprintf(f, "<p id=\"heat-faults-summary\">%" PRIu64 " GPU faults; %u chunks of 2 MiB "
			"shown%s; %" PRIu64 " of them on ranges no longer "
			"live; columns of %.6f s. Each allocation's first row names it: address, "
			"size, call site.</p>\n", r->nr_faults, n, more ? " (the first, by address)" : "",
			r->nr_fault_chunks_lost, (double)tl->heat_col_ns / 1e9);
		svg_heat(r, tl, f, rows, n, 1, "heat-faults");
	}
	fprintf(f, "<h3>kvtier's view: copies, memsets, launches and prefetches per chunk</h3>\n");
	n = pick_rows(r, order, 0, rows, &more);
	fprintf(f, "<p>%u chunks of 2 MiB shown%s, %" PRIu64 " events; columns of %.6f s</p>\n", n,
		more ? " (the first, by address)" : "", r->nr_heat_events,
		(double)tl->heat_col_ns / 1e9);
	if (n)
		svg_heat(r, tl, f, rows, n, 0, "heat-events");
	free(order);
	free(rows);
}
