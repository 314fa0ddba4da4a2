// SPDX-License-Identifier: MIT
/* `kvtier report --diff A B`: two runs' call sites side by side. Sites are
 * matched by name, not address, so that two builds of a program compare:
 * a symbolized native site by "function (module) at file:line" (inlining
 * included), one without a line by "function (module+0xoffset)", an
 * unnamed one by its module and offset, a Python site by "function
 * (file.py:line)". Rows: bytes and counts in A and in B and the change,
 * sorted by the absolute change in bytes, then in count. Text and JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "report.h"
#include "report_out.h"
#include "runs.h"
#include "kvtier/units.h"

#define DIFF_TEXT_ROWS 50u

struct diff_row {
	char *key;
	uint64_t bytes[2], nr[2];
};

/* The name a site is matched by across runs, into buf. */
static const char *site_key(struct kvt_report *r, uint32_t i, char *buf, size_t len)
{
	const struct kvt_rpt_site *s = &r->sites[i];
	if (!i || s->nr_py)
		return kvt_rpt_site_label(r, i, buf, len);
	const struct kvt_dwsym_loc *l = kvt_report_loc(r, &s->at);
	if (!l || !l->fr[0].func[0] || !l->fr[0].line)
		return kvt_rpt_frame_label(r, &s->at, buf, len);
	size_t n = (size_t)snprintf(buf, len, "%s (%s)", l->fr[0].func,
				    kvt_report_mod_name(r, s->at.mod));
	return kvt_rpt_inlined(buf, n < len ? n : len, len, l);   /* no offset: builds compare */
}

static int add_rows(struct kvt_report *r, int side, struct diff_row **v, uint32_t *nr,
		    uint32_t *cap)
{
	char key[1024];
	for (uint32_t i = 0; i < r->nr_sites; i++) {
		const struct kvt_rpt_site *s = &r->sites[i];
		if (!s->nr)
			continue;
		if (*nr == *cap) {
			uint32_t nc = *cap ? *cap * 2 : 64;
			struct diff_row *nv = realloc(*v, nc * sizeof *nv);
			if (!nv)
				return -ENOMEM;
			*v = nv;
			*cap = nc;
		}
		struct diff_row *d = &(*v)[*nr];
		memset(d, 0, sizeof *d);
		if (!(d->key = strdup(site_key(r, i, key, sizeof key))))
			return -ENOMEM;
		d->bytes[side] = s->bytes;
		d->nr[side] = s->nr;
		(*nr)++;
	}
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct diff_row *)a)->key, ((const struct diff_row *)b)->key);
}

static uint64_t absdiff(const uint64_t *x)
{
	return x[1] > x[0] ? x[1] - x[0] : x[0] - x[1];
}

static int cmp_change(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;
	uint64_t bx = absdiff(x->bytes), by = absdiff(y->bytes);
	if (bx != by)
		return bx > by ? -1 : 1;
	uint64_t nx = absdiff(x->nr), ny = absdiff(y->nr);
	if (nx != ny)
		return nx > ny ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* Both runs' sites, one row per key (equal keys of one run summed). */
static int build(struct kvt_report *a, struct kvt_report *b, struct diff_row **out, uint32_t *nr)
{
	struct diff_row *v = NULL;
	uint32_t n = 0, cap = 0, m = 0;
	int ret = add_rows(a, 0, &v, &n, &cap);
	if (!ret)
		ret = add_rows(b, 1, &v, &n, &cap);
	if (ret) {
		for (uint32_t i = 0; i < n; i++)
			free(v[i].key);
		free(v);
		return ret;
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_key);
	for (uint32_t i = 0; i < n; i++) {
		if (m && !strcmp(v[m - 1].key, v[i].key)) {
			for (int s = 0; s < 2; s++) {
				v[m - 1].bytes[s] += v[i].bytes[s];
				v[m - 1].nr[s] += v[i].nr[s];
			}
			free(v[i].key);
		} else {
			v[m++] = v[i];
		}
	}
	if (m)
		qsort(v, m, sizeof *v, cmp_change);
	*out = v;
	*nr = m;
	return 0;
}

static int64_t delta(const uint64_t *x)
{
	return (int64_t)(x[1] - x[0]);
}

/* "+1.5 MiB" / "-512 B" / "0 B" */
static const char *signed_size(int64_t d, char *buf, size_t len)
{
	if (len < 2)
		return "";
	buf[0] = d > 0 ? '+' : '-';
	kvt_format_size(d < 0 ? (uint64_t)-d : (uint64_t)d, buf + (d != 0), len - 1);
	return buf;
}

static void totals(const struct kvt_report *r, uint64_t *nr, uint64_t *bytes)
{
	*nr = *bytes = 0;
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		*nr += r->kind[k].nr;
		*bytes += r->kind[k].bytes;
	}
}

static void print_text(struct kvt_report *const run[2], const char *const name[2],
		       const struct diff_row *v, uint32_t n, FILE *f)
{
	uint64_t nr[2], bytes[2];
	char a[40], b[40];
	for (int s = 0; s < 2; s++)
		totals(run[s], &nr[s], &bytes[s]);
	fprintf(f, "kvtier report --diff: A = %s (%u trace file%s, %" PRIu64 " events), "
		"B = %s (%u trace file%s, %" PRIu64 " events)\n", name[0], run[0]->nr_files,
		run[0]->nr_files == 1 ? "" : "s", run[0]->nr_events, name[1], run[1]->nr_files,
		run[1]->nr_files == 1 ? "" : "s", run[1]->nr_events);
	fprintf(f, "call sites matched by function and source line (else module+offset)\n");
	fprintf(f, "\ntotal: bytes A %" PRIu64 ", B %" PRIu64 ", change %+" PRId64 " (%s); "
		"allocs A %" PRIu64 ", B %" PRIu64 ", change %+" PRId64 "\n", bytes[0], bytes[1],
		delta(bytes), signed_size(delta(bytes), a, sizeof a), nr[0], nr[1], delta(nr));
	uint32_t changed = 0;
	for (uint32_t i = 0; i < n; i++)
		changed += v[i].bytes[0] != v[i].bytes[1] || v[i].nr[0] != v[i].nr[1];
	fprintf(f, "\ncall sites by absolute change in bytes (%u sites, %u changed)\n", n, changed);
	fprintf(f, "  %3s %14s %14s %15s %10s %8s %8s %9s  %s\n", "#", "bytes A", "bytes B",
		"change", "", "allocs A", "allocs B", "change", "call site");
	for (uint32_t i = 0; i < n && i < DIFF_TEXT_ROWS; i++)
		fprintf(f, "  %3u %14" PRIu64 " %14" PRIu64 " %+15" PRId64 " %10s %8" PRIu64 " %8"
			PRIu64 " %+9" PRId64 "  %s\n", i + 1, v[i].bytes[0], v[i].bytes[1],
			delta(v[i].bytes), signed_size(delta(v[i].bytes), b, sizeof b), v[i].nr[0],
			v[i].nr[1], delta(v[i].nr), v[i].key);
	if (n > DIFF_TEXT_ROWS)
		fprintf(f, "  ... %u more sites (see --format json)\n", n - DIFF_TEXT_ROWS);
	if (!n)
		fprintf(f, "  (no allocations in either run)\n");
}

static void print_json(struct kvt_report *const run[2], const char *const name[2],
		       const struct diff_row *v, uint32_t n, FILE *f)
{
	uint64_t nr[2], bytes[2];
	fprintf(f, "{\"kvtier_report_diff\":1,\n");
	for (int s = 0; s < 2; s++) {
		totals(run[s], &nr[s], &bytes[s]);
		fprintf(f, "\"%c\":{\"name\":", "ab"[s]);
		kvt_json_str(f, name[s]);
		fprintf(f, ",\"traces\":%u,\"events\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"count\":%"
			PRIu64 "},\n", run[s]->nr_files, run[s]->nr_events, bytes[s], nr[s]);
	}
	fprintf(f, "\"change\":{\"bytes\":%" PRId64 ",\"count\":%" PRId64 "},\n\"sites\":[",
		delta(bytes), delta(nr));
	for (uint32_t i = 0; i < n; i++) {
		fprintf(f, "%s\n{\"site\":", i ? "," : "");
		kvt_json_str(f, v[i].key);
		fprintf(f, ",\"bytes_a\":%" PRIu64 ",\"bytes_b\":%" PRIu64 ",\"bytes_change\":%"
			PRId64 ",\"count_a\":%" PRIu64 ",\"count_b\":%" PRIu64 ",\"count_change\":%"
			PRId64 "}", v[i].bytes[0], v[i].bytes[1], delta(v[i].bytes), v[i].nr[0],
			v[i].nr[1], delta(v[i].nr));
	}
	fprintf(f, "]}\n");
}

int kvt_report_print_diff(struct kvt_report *a, struct kvt_report *b, const char *name_a,
			  const char *name_b, int json, FILE *f)
{
	struct diff_row *v;
	uint32_t n;
	if (build(a, b, &v, &n))
		return -1;
	struct kvt_report *const run[2] = { a, b };
	const char *const name[2] = { name_a, name_b };
	if (json)
		print_json(run, name, v, n, f);
	else
		print_text(run, name, v, n, f);
	for (uint32_t i = 0; i < n; i++)
		free(v[i].key);
	free(v);
	return ferror(f) ? -1 : 0;
}

/* ---- the command ---- */

/* One side's report from its argument; 0, or 1 said on stderr. */
static int load(struct kvt_report *r, const char *arg, int quiet, const char *debuginfo)
{
	struct kvt_paths p = { 0 };
	char err[600];
	int status = 0;
	if (kvt_run_arg_traces(arg, &p, err, sizeof err) ||
	    kvt_report_init(r, p.v, p.n, err, sizeof err)) {
		fprintf(stderr, "kvtier report: %s\n", err);
		status = 1;
	}
	r->progress = !quiet;
	r->debuginfo_path = debuginfo;
	for (int i = 0; i < p.n && !status; i++)
		if (kvt_report_add(r, p.v[i], err, sizeof err)) {
			fprintf(stderr, "kvtier report: %s\n", err);
			status = 1;
		}
	kvt_paths_free(&p);
	return status;
}

int kvt_report_diff_cmd(const char *a, const char *b, const char *fmt, const char *out,
			int quiet, const char *debuginfo)
{
	if (strcmp(fmt, "text") && strcmp(fmt, "json")) {
		fprintf(stderr, "kvtier report: --diff writes text or json, not '%s'\n", fmt);
		return 2;
	}
	struct kvt_report *r = calloc(2, sizeof *r);
	int status = !r;
	if (!r)
		fprintf(stderr, "kvtier report: out of memory\n");
	if (!status)
		status = load(&r[0], a, quiet, debuginfo);
	if (!status)
		status = load(&r[1], b, quiet, debuginfo);
	FILE *f = NULL;
	if (!status && !(f = out ? fopen(out, "w") : stdout)) {
		fprintf(stderr, "kvtier report: %s: %s\n", out, strerror(errno));
		status = 1;
	}
	if (f) {
		int ret = kvt_report_print_diff(&r[0], &r[1], a, b, !strcmp(fmt, "json"), f);
		if (fflush(f) || (out && fclose(f)) || ret) {
			fprintf(stderr, "kvtier report: %s: write failed\n", out ? out : "stdout");
			status = 1;
		} else if (out) {
			fprintf(stderr, "kvtier report: wrote %s\n", out);
		}
	}
	if (r) {
		kvt_report_free(&r[0]);
		kvt_report_free(&r[1]);
	}
	free(r);
	return status;
}
