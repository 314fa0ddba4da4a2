/* SPDX-License-Identifier: MIT */
/* serve-like: the arrival schedule, fixed by the seed before the run so
 * every alternative serves the same turns at the same times. Turns arrive
 * as a Poisson process; each picks a session by Zipf popularity, skipping
 * sessions whose previous turn arrived less than the think time ago; a
 * session whose history would pass max_ctx starts a new conversation. */
#include <math.h>
#include <stdlib.h>

#include "serve.h"

static int sv_uniform(uint64_t *s, int lo, int hi)
{
	return lo + (int)(wl_rand(s) % (uint64_t)(hi - lo + 1));
}

void sv_make_schedule(const struct sv_opts *o, struct sv_sched *s)
{
	int n = o->sessions;
	uint64_t rs = o->seed * 0x9e3779b97f4a7c15ull + 0x5e7e;
	double *cdf = malloc(sizeof *cdf * (size_t)n), *last = malloc(sizeof *last * (size_t)n);
	uint32_t *hist = calloc((size_t)n, sizeof *hist), *gen = calloc((size_t)n, sizeof *gen);
	s->req = calloc((size_t)o->requests, sizeof *s->req);
	if (!cdf || !last || !hist || !gen || !s->req)
		wl_die("out of host memory for the schedule");
	double sum = 0;
	for (int r = 0; r < n; r++) {
		sum += 1.0 / pow((double)r + 1, o->zipf);
		cdf[r] = sum;
		last[r] = -1e30;
	}
	s->nr = o->requests;
	s->nr_sess = n;
	s->max_stream = 0;
	double t = 0;
	for (int i = 0; i < o->requests; i++) {
		t += -log(1.0 - wl_rand01(&rs)) / o->rate;
		uint32_t k = wl_zipf_rank(cdf, n, wl_rand01(&rs) * sum);
		for (int tries = 0; tries < n && t - last[k] < o->think_s; tries++)
			k = (k + 1) % (uint32_t)n;       /* busy thinking: the next one */
		struct sv_req *q = &s->req[i];
		q->sess = k;
		q->prompt = (uint32_t)sv_uniform(&rs, o->turn_min, o->turn_max);
		q->out = (uint32_t)sv_uniform(&rs, o->out_min, o->out_max);
		if (hist[k] + q->prompt + q->out + (uint32_t)o->sys_tokens > (uint32_t)o->max_ctx) {
			hist[k] = 0;                      /* a new conversation */
			gen[k]++;
		}
		q->hist = hist[k];
		q->gen = gen[k];
		q->arrive_s = t;
		hist[k] += q->prompt + q->out;
		last[k] = t;
		uint32_t stream = (uint32_t)o->sys_tokens + q->hist + q->prompt + q->out;
		if (stream > s->max_stream)
			s->max_stream = stream;
	}
	free(cdf);
	free(last);
	free(hist);
	free(gen);
}
