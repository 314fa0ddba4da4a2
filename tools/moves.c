// SPDX-License-Identifier: MIT
/* Moves into and out of HBM by cause (see moves.h): parsing kvtier's exit
 * counters and printing them as text, JSON and HTML. Offline only. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "moves.h"
#include "kvtier/units.h"

/* ---- parsing ---- */

static int num(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	if (end == v)
		return -1;
	*out = x;
	return 0;
}

/* "name=N" among the space-separated fields of v, or 0. */
static uint64_t field(const char *v, const char *name)
{
	size_t n = strlen(name);
	uint64_t x = 0;
	for (const char *p = v; p; p = strchr(p, ' ')) {
		p += *p == ' ';
		if (!strncmp(p, name, n) && p[n] == '=' && !num(p + n + 1, &x))
			return x;
	}
	return 0;
}

static int pair(const char *v, uint64_t *n, uint64_t *bytes)
{
	uint64_t a = 0, b = 0;
	if (num(v, &a))
		return 0;
	const char *sp = strchr(v, ' ');
	if (sp)
		num(sp + 1, &b);
	*n += a;
	*bytes += b;
	return 1;
}

int kvt_moves_on_info(struct kvt_moves *m, const char *key, const char *val)
{
	uint64_t x;
	if (!strcmp(key, "migrate.enabled")) {
		m->nr_files += !strcmp(val, "1");
	} else if (!strcmp(key, "migrate.promoted")) {
		return pair(val, &m->mig_in, &m->mig_in_bytes);
	} else if (!strcmp(key, "migrate.demoted")) {
		return pair(val, &m->mig_out, &m->mig_out_bytes);
	} else if (!strcmp(key, "migrate.step")) {
		m->nr_step_files++;
		m->steps += field(val, "steps");
		m->step_in += field(val, "promoted");
		m->step_in_pages += field(val, "pages");
		m->step_out += field(val, "demoted");
		m->step_out_pages += field(val, "pages_out");
	} else if (!strcmp(key, "migrate.fault_ins") && !num(val, &x)) {
		m->nr_fault_files++;
		m->fault_ins += x;
	} else if (!strcmp(key, "migrate.evicted_backs") && !num(val, &x)) {
		m->evicted_backs += x;
	} else if (!strcmp(key, "migrate.fault_in_bytes") && !num(val, &x)) {
		m->fault_in_bytes += x;
	} else if (!strcmp(key, "migrate.evicted_bytes") && !num(val, &x)) {
		m->nr_driver_files++;
		m->evicted_bytes += x;
	} else if (!strcmp(key, "migrate.refaults") && !num(val, &x)) {
		m->refaults += x;
	} else {
		return 0;
	}
	return 1;
}

int kvt_moves_on_record(struct kvt_moves *m, const char *text, size_t len)
{
	char kv[1024], *v;                  /* migrate.step holds 17 counters */
	if (!text || len >= sizeof kv || len < 8 || memcmp(text, "migrate.", 8))
		return 0;
	memcpy(kv, text, len);
	kv[len] = 0;
	if (!(v = strchr(kv, '=')))
		return 0;
	*v++ = 0;
	return kvt_moves_on_info(m, kv, v);
}

uint64_t kvt_moves_step_in_bytes(const struct kvt_moves *m)
{
	return m->step_in * KVT_MOVES_CHUNK_BYTES + m->step_in_pages * KVT_MOVES_PAGE_BYTES;
}

uint64_t kvt_moves_step_out_bytes(const struct kvt_moves *m)
{
	return m->step_out * KVT_MOVES_CHUNK_BYTES + m->step_out_pages * KVT_MOVES_PAGE_BYTES;
}

/* ---- one table for every printer ---- */

struct move_row {
	const char *dir, *cause, *id;   /* id: JSON key and HTML row id */
	uint64_t chunks, pages, bytes;
	unsigned has_pages : 1, has_bytes : 1, at_least : 1, no_chunks : 1;
	const char *note;
};

#define NR_ROWS 6

static void rows_of(const struct kvt_moves *m, struct move_row *r)
{
	r[0] = (struct move_row){ "into HBM", "migrator", "migrator", m->mig_in, 0, m->mig_in_bytes,
				  0, 1, 0, 0, "the migration thread's epochs (the tiering section)" };
	r[1] = (struct move_row){ "into HBM", "step prefetch", "step_prefetch", m->step_in,
				  m->step_in_pages, kvt_moves_step_in_bytes(m), 1, 1, 0, 0,
				  "chunks and named pages prefetched on the application's stream" };
	int drv = m->nr_driver_files > 0;
	r[2] = (struct move_row){ "into HBM", "fault-in", "fault_in", m->fault_ins, 0,
				  m->fault_in_bytes, 0, drv, 0, drv && !m->fault_ins && m->fault_in_bytes,
				  drv ? "brought in by the driver on GPU faults (bytes: CUPTI's records)"
				      : "chunks the driver brought in on GPU faults" };
	r[3] = (struct move_row){ "out of HBM", "migrator", "migrator", m->mig_out, 0,
				  m->mig_out_bytes, 0, 1, 0, 0, "the migration thread's epochs" };
	r[4] = (struct move_row){ "out of HBM", "step prefetch", "step_prefetch", m->step_out,
				  m->step_out_pages, kvt_moves_step_out_bytes(m), 1, 1, 0, 0,
				  "victims sent to the far tier to make room for a step" };
	if (drv)
		r[5] = (struct move_row){ "out of HBM", "driver eviction", "driver_eviction", 0, 0,
					  m->evicted_bytes, 0, 1, 0, 1,
					  "evicted by the driver (bytes: CUPTI's eviction records)" };
	else
		r[5] = (struct move_row){ "out of HBM", "driver eviction", "driver_eviction",
					  m->evicted_backs, 0, 0, 0, 0, 1, 0,
					  "evicted chunks that faulted back in; evictions themselves are "
					  "not counted (no CUPTI)" };
}

/* Chunks and pages of the rows that count them; bytes of those that count
 * only bytes (the driver's, from CUPTI). */
static void totals(const struct move_row *r, int out, uint64_t *chunks, uint64_t *pages,
		   uint64_t *bytes_only)
{
	*chunks = *pages = *bytes_only = 0;
	for (unsigned i = out ? 3 : 0; i < (out ? 6u : 3u); i++) {
		if (r[i].no_chunks) {
			*bytes_only += r[i].bytes;
			continue;
		}
		*chunks += r[i].chunks;
		*pages += r[i].pages;
	}
}

/* ---- text ---- */

void kvt_moves_print_text(const struct kvt_moves *m, FILE *f)
{
	struct move_row r[NR_ROWS];
	char a[32];
	fprintf(f, "\nmoves into and out of HBM, by cause (kvtier's counters at exit)\n");
	if (!m->nr_files) {
		fprintf(f, "  no migration counters in the traces (migration off, or no process "
			"exited normally)\n");
		return;
	}
	rows_of(m, r);
	fprintf(f, "  %u trace%s with migration on; %u with step counters, %u with fault "
		"counters\n", m->nr_files, m->nr_files == 1 ? "" : "s", m->nr_step_files,
		m->nr_fault_files);
	fprintf(f, "  %-10s %-16s %11s %9s %14s\n", "direction", "cause", "chunks", "pages",
		"bytes");
	for (unsigned i = 0; i < NR_ROWS; i++) {
		char ch[24], pg[24], by[24];
		snprintf(ch, sizeof ch, r[i].no_chunks ? "-" : "%" PRIu64, r[i].chunks);
		snprintf(pg, sizeof pg, r[i].has_pages ? "%" PRIu64 : "-", r[i].pages);
		snprintf(by, sizeof by, r[i].has_bytes ? "%" PRIu64 : "-", r[i].bytes);
		fprintf(f, "  %-10s %-16s %s%8s %9s %14s %10s  %s\n", r[i].dir, r[i].cause,
			r[i].at_least ? ">= " : "   ", ch, pg, by,
			r[i].has_bytes ? kvt_format_size(r[i].bytes, a, sizeof a) : "", r[i].note);
	}
	uint64_t ci, pi, bi, co, po, bo;
	char b1[32], b2[32];
	totals(r, 0, &ci, &pi, &bi);
	totals(r, 1, &co, &po, &bo);
	fprintf(f, "  total into HBM %" PRIu64 " chunks + %" PRIu64 " pages", ci, pi);
	if (bi)
		fprintf(f, " + %s on faults", kvt_format_size(bi, b1, sizeof b1));
	fprintf(f, "; out of HBM %s%" PRIu64 " chunks + %" PRIu64 " pages", r[5].at_least ? ">= " : "",
		co, po);
	if (bo)
		fprintf(f, " + %s evicted", kvt_format_size(bo, b2, sizeof b2));
	fprintf(f, " (chunk 2 MiB, page 64 KiB)\n");
	if (m->refaults)
		fprintf(f, "  refaults: %" PRIu64 " chunks came back soon after they left "
			"(thrashing)\n", m->refaults);
}

void kvt_moves_print_summary(const struct kvt_moves *m, FILE *f)
{
	if (!m->nr_files)
		return;
	fprintf(f, "  moves into HBM: migrator %" PRIu64 ", step prefetch %" PRIu64 " (+%" PRIu64
		" pages), fault-in %" PRIu64 " chunks\n", m->mig_in, m->step_in, m->step_in_pages,
		m->fault_ins);
	fprintf(f, "  moves out of HBM: migrator %" PRIu64 ", step prefetch %" PRIu64 " (+%" PRIu64
		" pages), ", m->mig_out, m->step_out, m->step_out_pages);
	char a[32];
	if (m->nr_driver_files)
		fprintf(f, "driver eviction %s\n", kvt_format_size(m->evicted_bytes, a, sizeof a));
	else
		fprintf(f, "driver eviction >= %" PRIu64 " chunks (those that faulted back in)\n",
			m->evicted_backs);
}

/* ---- JSON and HTML ---- */

static void json_row(const struct move_row *r, FILE *f, int first)
{
	fprintf(f, "%s\"%s\":{", first ? "" : ",", r->id);
	if (r->no_chunks)
		fprintf(f, "\"chunks\":null");
	else
		fprintf(f, "\"chunks\":%" PRIu64, r->chunks);
	if (r->has_pages)
		fprintf(f, ",\"pages\":%" PRIu64, r->pages);
	if (r->has_bytes)
		fprintf(f, ",\"bytes\":%" PRIu64, r->bytes);
	if (r->at_least)
		fprintf(f, ",\"at_least\":true");
	fprintf(f, "}");
}

void kvt_moves_print_json(const struct kvt_moves *m, FILE *f)
{
	struct move_row r[NR_ROWS];
	rows_of(m, r);
	fprintf(f, "\"hbm_moves\":{\"traces\":%u,\"step_traces\":%u,\"fault_traces\":%u,"
		"\"chunk_bytes\":%llu,\"page_bytes\":%llu,\"steps\":%" PRIu64 ",\"refaults\":%" PRIu64
		",\"into_hbm\":{", m->nr_files, m->nr_step_files, m->nr_fault_files,
		KVT_MOVES_CHUNK_BYTES, KVT_MOVES_PAGE_BYTES, m->steps, m->refaults);
	for (unsigned i = 0; i < 3; i++)
		json_row(&r[i], f, !i);
	fprintf(f, "},\"out_of_hbm\":{");
	for (unsigned i = 3; i < NR_ROWS; i++)
		json_row(&r[i], f, i == 3);
	fprintf(f, "}}");
}

void kvt_moves_print_html(const struct kvt_moves *m, FILE *f)
{
	struct move_row r[NR_ROWS];
	char a[32];
	fprintf(f, "<h2>Moves into and out of HBM</h2>\n");
	if (!m->nr_files) {
		fprintf(f, "<p id=\"hbm-moves-none\">No migration counters in the traces (migration "
			"off, or no process exited normally).</p>\n");
		return;
	}
	rows_of(m, r);
	fprintf(f, "<p>By cause, from kvtier's counters at exit (%u trace%s). The HBM residency "
		"chart counts the migrator's moves only.</p>\n<table id=\"hbm-moves\"><tr>"
		"<th>direction</th><th>cause</th><th>chunks</th><th>pages (64 KiB)</th><th>bytes</th>"
		"<th>size</th><th>what</th></tr>\n", m->nr_files, m->nr_files == 1 ? "" : "s");
	for (unsigned i = 0; i < NR_ROWS; i++) {
		fprintf(f, "<tr id=\"move-%s-%s\"><td>%s</td><td>%s</td>", i < 3 ? "in" : "out",
			r[i].id, r[i].dir, r[i].cause);
		if (r[i].no_chunks)
			fprintf(f, "<td>-</td>");
		else
			fprintf(f, "<td>%s%" PRIu64 "</td>", r[i].at_least ? "&#8805; " : "", r[i].chunks);
		if (r[i].has_pages)
			fprintf(f, "<td>%" PRIu64 "</td>", r[i].pages);
		else
			fprintf(f, "<td>-</td>");
		if (r[i].has_bytes)
			fprintf(f, "<td>%" PRIu64 "</td><td>%s</td>", r[i].bytes,
				kvt_format_size(r[i].bytes, a, sizeof a));
		else
			fprintf(f, "<td>-</td><td>-</td>");
		fprintf(f, "<td>%s</td></tr>\n", r[i].note);
	}
	fprintf(f, "</table>\n");
}
