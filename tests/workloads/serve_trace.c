/* SPDX-License-Identifier: MIT */
/* serve-like --trace: a public request trace as the arrival schedule.
 * Two formats (../shared/traces/README.md):
 *   Mooncake JSONL: {"timestamp": ms, "input_length": n, "output_length": m,
 *     "hash_ids": [...]}, one id per 512-token block of the prompt, an id
 *     standing for its block and every block before it;
 *   Azure CSV: TIMESTAMP,ContextTokens,GeneratedTokens (no prefixes: every
 *     prompt is fresh).
 * Each row is one request of its own (its own "session"); a Mooncake
 * prompt's blocks are keyed by id (sv_req_key), so a request reuses the
 * cached blocks of its longest cached id chain, as vLLM's automatic prefix
 * caching and SGLang's radix cache would. Test infrastructure: stdio and
 * exit() are fine here. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

struct tr_row {
	double t;                  /* seconds from the file's first row */
	uint32_t in, out;
	uint32_t id0, nid;         /* its ids in the id array */
};

struct tr_file {
	const char *path;
	struct tr_row *row;
	int nr, cap;
	uint64_t *ids;             /* as written in the file */
	size_t nr_ids, cap_ids;
	long line;
};

static void tr_die(const struct tr_file *f, const char *fmt, const char *what)
{
	fprintf(stderr, "serve-like: %s:%ld: ", f->path, f->line);
	fprintf(stderr, fmt, what);
	fputc('\n', stderr);
	exit(WL_EXIT_USAGE);
}

static struct tr_row *tr_push(struct tr_file *f)
{
	if (f->nr == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 1024;
		f->row = realloc(f->row, sizeof *f->row * (size_t)f->cap);
		if (!f->row)
			wl_die("out of host memory for the trace");
	}
	return memset(&f->row[f->nr++], 0, sizeof *f->row);
}

static void tr_push_id(struct tr_file *f, uint64_t id)
{
	if (f->nr_ids == f->cap_ids) {
		f->cap_ids = f->cap_ids ? 2 * f->cap_ids : 65536;
		f->ids = realloc(f->ids, sizeof *f->ids * f->cap_ids);
		if (!f->ids)
			wl_die("out of host memory for the trace");
	}
	f->ids[f->nr_ids++] = id;
}

/* The number after "key": in a JSON object line. */
static double tr_json_num(const struct tr_file *f, const char *line, const char *key)
{
	const char *p = strstr(line, key);
	if (!p)
		tr_die(f, "no %s", key);
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	char *end;
	errno = 0;
	double x = strtod(p, &end);
	if (end == p || errno || !(x >= 0) || x > 1e15)
		tr_die(f, "bad value for %s", key);
	return x;
}

static void tr_mooncake_line(struct tr_file *f, const char *line)
{
	struct tr_row *r = tr_push(f);
	r->t = tr_json_num(f, line, "\"timestamp\":") / 1e3;
	double in = tr_json_num(f, line, "\"input_length\":");
	double out = tr_json_num(f, line, "\"output_length\":");
	if (in < 1 || in > UINT32_MAX / 2 || out > UINT32_MAX / 2 || in != floor(in) ||
	    out != floor(out))
		tr_die(f, "bad %s", "input_length or output_length");
	r->in = (uint32_t)in;
	r->out = (uint32_t)out;
	const char *p = strstr(line, "\"hash_ids\":");
	if (!p || !(p = strchr(p, '[')))
		tr_die(f, "no %s array", "\"hash_ids\"");
	r->id0 = (uint32_t)f->nr_ids;
	for (p++;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ']')
			break;
		char *end;
		errno = 0;
		unsigned long long id = strtoull(p, &end, 10);
		if (end == p || errno || *p == '-')
			tr_die(f, "bad entry in %s", "\"hash_ids\"");
		tr_push_id(f, id);
		p = end;
	}
	r->nid = (uint32_t)(f->nr_ids - r->id0);
	if (r->nid != (r->in + SV_TRACE_BLOCK - 1) / SV_TRACE_BLOCK)
		tr_die(f, "%s: not one id per 512-token block of input_length", "\"hash_ids\"");
}

/* Days from 1970-01-01 of a proleptic Gregorian date. */
static long tr_days(long y, unsigned m, unsigned d)
{
	y -= m <= 2;
	long era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (long)doe - 719468;
}

static void tr_azure_line(struct tr_file *f, const char *line)
{
	int y, mo, d, h, mi, n = 0;
	double s;
	unsigned long long in, out;
	if (sscanf(line, "%d-%d-%d %d:%d:%lf,%llu,%llu%n", &y, &mo, &d, &h, &mi, &s, &in, &out,
		   &n) != 8 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    !(s >= 0 && s < 61) || (line[n] && line[n] != '\n' && line[n] != '\r'))
		tr_die(f, "%s", "not TIMESTAMP,ContextTokens,GeneratedTokens");
	if (in < 1 || in > UINT32_MAX / 2 || out > UINT32_MAX / 2)
		tr_die(f, "bad %s", "ContextTokens or GeneratedTokens");
	struct tr_row *r = tr_push(f);
	r->t = (double)tr_days(y, (unsigned)mo, (unsigned)d) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
	r->in = (uint32_t)in;
	r->out = (uint32_t)out;
}

static void tr_read(struct tr_file *f, const char **format)
{
	FILE *fp = fopen(f->path, "r");
	if (!fp) {
		fprintf(stderr, "serve-like: --trace %s: %s\n", f->path, strerror(errno));
		exit(WL_EXIT_USAGE);
	}
	char *line = NULL;
	size_t cap = 0;
	*format = NULL;
	while (getline(&line, &cap, fp) > 0) {
		f->line++;
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n' || *p == '\r' || !*p)
			continue;
		if (!*format) {
			if (*p == '{') {
				*format = "mooncake";
			} else if (!strncmp(p, "TIMESTAMP,", 10)) {
				*format = "azure";
				continue;
			} else {
				tr_die(f, "%s", "neither Mooncake JSONL ({...} lines) nor an Azure "
				       "CSV (a TIMESTAMP,... header)");
			}
		}
		if (**format == 'm')
			tr_mooncake_line(f, p);
		else
			tr_azure_line(f, p);
		if (f->nr > 1 && f->row[f->nr - 1].t < f->row[f->nr - 2].t)
			tr_die(f, "%s", "timestamps go backwards");
	}
	free(line);
	fclose(fp);
	if (!f->nr) {
		fprintf(stderr, "serve-like: --trace %s: no requests in it\n", f->path);
		exit(WL_EXIT_USAGE);
	}
}

/* ---- ids as written -> dense ids, in order of first use ---- */

struct tr_map {
	uint64_t *key;
	uint32_t *val;
	size_t cap;
	uint32_t n;
};

static uint32_t tr_dense(struct tr_map *m, uint64_t id)
{
	if ((size_t)m->n * 2 + 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4096;
		uint64_t *k = malloc(sizeof *k * cap);
		uint32_t *v = malloc(sizeof *v * cap);
		if (!k || !v)
			wl_die("out of host memory for the trace's ids");
		memset(v, 0xff, sizeof *v * cap);
		for (size_t i = 0; i < m->cap; i++)
			if (m->val[i] != UINT32_MAX) {
				size_t h = (m->key[i] * 0x9e3779b97f4a7c15ull) >> 20 & (cap - 1);
				while (v[h] != UINT32_MAX)
					h = (h + 1) & (cap - 1);
				k[h] = m->key[i];
				v[h] = m->val[i];
			}
		free(m->key);
		free(m->val);
		m->key = k;
		m->val = v;
		m->cap = cap;
	}
	size_t h = (id * 0x9e3779b97f4a7c15ull) >> 20 & (m->cap - 1);
	while (m->val[h] != UINT32_MAX && m->key[h] != id)
		h = (h + 1) & (m->cap - 1);
	if (m->val[h] == UINT32_MAX) {
		m->key[h] = id;
		m->val[h] = m->n++;
	}
	return m->val[h];
}

/* Rows sharing a timestamp (the traces round to ms or less, conversation
 * traces to seconds) are spread evenly over the gap to the next distinct
 * one (the last group: over the window's mean gap), in file order. */
static void tr_spread(double *t, int n)
{
	double mean = n > 1 ? (t[n - 1] - t[0]) / (n - 1) : 0;
	for (int i = 0; i < n;) {
		int j = i + 1;
		while (j < n && t[j] == t[i])
			j++;
		double gap = (j < n ? t[j] : t[i] + mean) - t[i];
		for (int k = i + 1; k < j; k++)
			t[k] = t[i] + gap * (k - i) / (j - i);
		i = j;
	}
}

void sv_trace_load(const struct sv_opts *o, struct sv_sched *s)
{
	struct tr_file f = { .path = o->trace };
	tr_read(&f, &s->format);
	if (o->trace_start >= f.nr) {
		fprintf(stderr, "serve-like: --trace-start %d: %s has %d requests\n", o->trace_start,
			o->trace, f.nr);
		exit(WL_EXIT_USAGE);
	}
	int n = f.nr - o->trace_start;
	if (o->trace_requests && o->trace_requests < n)
		n = o->trace_requests;
	const struct tr_row *row = f.row + o->trace_start;
	s->req = calloc((size_t)n, sizeof *s->req);
	double *t = malloc(sizeof *t * (size_t)n);
	size_t ids = 0;
	for (int i = 0; i < n; i++)
		ids += row[i].nid;
	s->hash_ids = malloc(sizeof *s->hash_ids * (ids ? ids : 1));
	if (!s->req || !t || !s->hash_ids)
		wl_die("out of host memory for the trace");
	for (int i = 0; i < n; i++)
		t[i] = row[i].t - row[0].t;
	tr_spread(t, n);
	struct tr_map map = { 0 };
	size_t at = 0;
	s->nr = s->nr_sess = n;
	s->first_row = o->trace_start;
	s->max_stream = 0;
	uint32_t ctx = (uint32_t)o->max_ctx;
	for (int i = 0; i < n; i++) {
		struct sv_req *q = &s->req[i];
		uint32_t in = row[i].in, out = row[i].out ? row[i].out : 1;
		if (in + out > ctx) {            /* the model's context: the prompt's tail is cut */
			if (out > ctx / 2)
				out = ctx / 2;
			in = ctx - out;
			s->truncated++;
		}
		q->sess = (uint32_t)i;
		q->prompt = in;
		q->out = out;
		q->arrive_s = o->closed ? 0 : t[i] / o->time_scale;
		if (f.nr_ids) {
			q->hash = s->hash_ids + at;
			q->nhash = (in + SV_TRACE_BLOCK - 1) / SV_TRACE_BLOCK;
			if (q->nhash > row[i].nid)
				q->nhash = row[i].nid;
			for (uint32_t k = 0; k < row[i].nid; k++) {
				uint32_t d = tr_dense(&map, f.ids[row[i].id0 + k]);
				if (k < q->nhash)
					s->hash_ids[at++] = d;
			}
		}
		if (in + out > s->max_stream)
			s->max_stream = in + out;
	}
	s->nr_ids = map.n;
	if (map.n >= 1u << 24)
		wl_die("--trace: more than 2^24 distinct hash ids in the window");
	free(map.key);
	free(map.val);
	free(t);
	free(f.row);
	free(f.ids);
}

/* ---- --trace-stats ---- */

/* Prompt tokens the prefix cache can serve to q (at most the prompt less
 * one token, whole blocks from the start), with the cache in p. */
static uint32_t tr_hits(const struct sv_opts *o, const struct sv_pool *p, const struct sv_req *q)
{
	uint32_t j = 0;
	while ((j + 1) * WL_BLOCK_TOKENS <= q->prompt - 1 &&
	       sv_pool_find(p, sv_req_key(o, q, j)) != SV_NONE)
		j++;
	return j * WL_BLOCK_TOKENS;
}

/* The requests one after another through an LRU cache of cap blocks
 * (cap 0: unbounded): each looks its prompt up, then its whole prompt
 * blocks are cached (most recent). Returns hit tokens. */
static uint64_t tr_replay(const struct sv_opts *o, const struct sv_sched *s, uint32_t cap)
{
	uint64_t all = 0;
	for (int i = 0; i < s->nr; i++)
		all += s->req[i].prompt / WL_BLOCK_TOKENS;
	if (!cap || cap > all)
		cap = (uint32_t)(all ? all : 1);
	struct sv_pool p;
	sv_pool_init(&p, cap);
	uint64_t hit = 0;
	for (int i = 0; i < s->nr; i++) {
		const struct sv_req *q = &s->req[i];
		hit += tr_hits(o, &p, q);
		for (uint32_t j = 0; j < q->prompt / WL_BLOCK_TOKENS; j++) {
			struct sv_key k = sv_req_key(o, q, j);
			uint32_t id = sv_pool_find(&p, k);
			struct sv_block old;
			if (id != SV_NONE) {
				sv_pool_ref(&p, id);     /* to the queue's tail: most recent */
			} else {
				id = sv_pool_take(&p, &old);
				sv_pool_set_key(&p, id, k);
			}
			sv_pool_unref(&p, id);
		}
	}
	sv_pool_fini(&p);
	return hit;
}

void sv_trace_stats(const struct sv_opts *o, const struct sv_sched *s)
{
	uint64_t prompt = 0, out = 0, ids = 0;
	for (int i = 0; i < s->nr; i++) {
		prompt += s->req[i].prompt;
		out += s->req[i].out;
		ids += s->req[i].nhash;
	}
	const struct sv_req *last = &s->req[s->nr - 1];
	printf("trace=%s\nformat=%s\nfirst_row=%d\nrequests=%d\nspan_trace_s=%.3f\n"
	       "prompt_tokens=%" PRIu64 "\noutput_tokens=%" PRIu64 "\ntruncated=%d\n"
	       "max_ctx=%d\nblock_ids=%" PRIu64 "\ndistinct_block_ids=%u\n",
	       o->trace, s->format, s->first_row, s->nr,
	       o->closed ? 0 : last->arrive_s * o->time_scale, prompt, out, s->truncated,
	       o->max_ctx, ids, s->nr_ids);
	uint64_t best = tr_replay(o, s, 0);
	printf("hit_ratio_unbounded=%.4f\n", prompt ? (double)best / (double)prompt : 0);
	/* the LRU cache from 64 Ki tokens up, doubling, to the first size that
	 * reaches the unbounded ratio */
	for (uint64_t tok = 65536; tok <= (uint64_t)1 << 31; tok *= 2) {
		uint64_t h = tr_replay(o, s, (uint32_t)(tok / WL_BLOCK_TOKENS));
		printf("hit_ratio_lru_%" PRIu64 "k_tokens=%.4f\n", tok >> 10,
		       prompt ? (double)h / (double)prompt : 0);
		if (h >= best)
			break;
	}
}
