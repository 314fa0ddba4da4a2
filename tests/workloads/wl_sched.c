/* SPDX-License-Identifier: MIT */
/* kvtier workloads: who is decoding when.  Sessions (cached contexts) are laid
 * out in the KV token space after the shared prefix; requests arrive by a
 * Zipf draw over a popularity ranking that drifts, decode a few tokens and
 * complete.  The whole schedule is computed up front from the seed, which
 * makes runs deterministic and lets the oracle see the future. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

/* ---- random numbers (xorshift64*, seeded through splitmix) ---- */

uint64_t wl_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

double wl_rand01(uint64_t *s)
{
	return (double)(wl_rand(s) >> 11) / 9007199254740992.0;
}

static uint64_t wl_seed_state(uint64_t seed, uint64_t salt)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + salt;
	x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
	return x ? x : 0x1234567ull;
}

static int wl_uniform(uint64_t *s, int lo, int hi)
{
	return lo + (int)(wl_rand(s) % (uint64_t)(hi - lo + 1));
}

/* ---- sessions ---- */

int wl_make_sessions(struct wl *w)
{
	const struct wl_opts *o = &w->o;
	uint64_t rs = wl_seed_state(o->seed, 1);
	uint64_t cursor = wl_round_up((uint64_t)o->prefix_tokens, WL_BLOCK_TOKENS);
	int cap_sess = o->seqs ? o->seqs : (int)(w->nr_tokens / WL_BLOCK_TOKENS);
	w->sess = calloc((size_t)cap_sess + 1, sizeof *w->sess);
	if (!w->sess)
		wl_die("out of host memory for sessions");
	while (w->nr_sess < cap_sess) {
		int ctx = wl_uniform(&rs, o->ctx_min, o->ctx_max);
		uint64_t cap = wl_round_up((uint64_t)ctx + (uint64_t)o->decode_max, WL_BLOCK_TOKENS);
		if (cursor + cap > w->nr_tokens)
			break;
		struct wl_session *s = &w->sess[w->nr_sess++];
		s->start = cursor;
		s->ctx = (uint32_t)ctx;
		s->cap = (uint32_t)cap;
		s->prefix = o->prefix_tokens > 0 && wl_rand01(&rs) < o->prefix_share;
		cursor += cap;
	}
	if (w->nr_sess == 0 || (o->seqs && w->nr_sess < o->seqs))
		wl_die("the KV pool (%llu tokens) holds %d sessions of %d..%d tokens, %d wanted",
		       (unsigned long long)w->nr_tokens, w->nr_sess, o->ctx_min, o->ctx_max,
		       o->seqs ? o->seqs : 1);
	int b = o->batch ? o->batch : (int)lround(o->active_frac * w->nr_sess);
	w->batch = b < 1 ? 1 : b > w->nr_sess ? w->nr_sess : b;
	return 0;
}

/* ---- the schedule ---- */

struct wl_active {
	uint32_t sess, pos, len;
};

uint32_t wl_zipf_rank(const double *cdf, int n, double u)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (uint32_t)lo;
}

static uint32_t wl_pick(const struct wl *w, uint64_t *rs, const double *cdf,
			const uint32_t *perm, const bool *busy)
{
	int n = w->nr_sess;
	for (int tries = 0; tries < 32; tries++) {
		uint32_t s = perm[wl_zipf_rank(cdf, n, wl_rand01(rs) * cdf[n - 1])];
		if (!busy[s])
			return s;
	}
	for (int r = 0; r < n; r++)              /* most popular idle session */
		if (!busy[perm[r]])
			return perm[r];
	wl_die("no idle session (batch %d, sessions %d)", w->batch, n);
}

void wl_make_schedule(struct wl *w)
{
	const struct wl_opts *o = &w->o;
	int n = w->nr_sess;
	uint64_t rs = wl_seed_state(o->seed, 2);
	double *cdf = malloc(sizeof *cdf * (size_t)n);
	uint32_t *perm = malloc(sizeof *perm * (size_t)n);
	bool *busy = calloc((size_t)n, sizeof *busy);
	struct wl_active *act = malloc(sizeof *act * (size_t)w->batch);
	int steps = o->warmup + o->steps;
	w->req = malloc(sizeof *w->req * (size_t)w->batch * ((size_t)steps + 1));
	w->step_off = malloc(sizeof *w->step_off * ((size_t)steps + 1));
	if (!cdf || !perm || !busy || !act || !w->req || !w->step_off)
		wl_die("out of host memory for the schedule");
	double sum = 0;
	for (int r = 0; r < n; r++) {
		sum += 1.0 / pow((double)r + 1, o->zipf);
		cdf[r] = sum;
		perm[r] = (uint32_t)r;
	}
	for (int r = n - 1; r > 0; r--) {        /* popularity unrelated to layout */
		int j = (int)(wl_rand(&rs) % (uint64_t)(r + 1));
		uint32_t t = perm[r]; perm[r] = perm[j]; perm[j] = t;
	}
	int nr_act = 0;
	uint32_t nreq = 0;
	int shift = n / 8 > 1 ? n / 8 : 1;
	for (int t = 0; t < steps; t++) {
		if (o->drift_every && t > 0 && t % o->drift_every == 0) {
			uint32_t *tmp = malloc(sizeof *tmp * (size_t)n);
			if (!tmp)
				wl_die("out of host memory");
			for (int r = 0; r < n; r++)
				tmp[r] = perm[(r + shift) % n];
			memcpy(perm, tmp, sizeof *tmp * (size_t)n);
			free(tmp);
		}
		while (nr_act < w->batch) {
			uint32_t s = wl_pick(w, &rs, cdf, perm, busy);
			busy[s] = true;
			act[nr_act++] = (struct wl_active){ s, 0,
				(uint32_t)wl_uniform(&rs, o->decode_min, o->decode_max) };
			w->nr_arrivals++;
		}
		w->step_off[t] = nreq;
		for (int i = 0; i < nr_act; i++)
			w->req[nreq++] = (struct wl_req){ act[i].sess, act[i].pos, act[i].len };
		for (int i = 0; i < nr_act;) {
			if (++act[i].pos == act[i].len) {
				busy[act[i].sess] = false;
				act[i] = act[--nr_act];
				w->nr_completions++;
			} else {
				i++;
			}
		}
	}
	w->step_off[steps] = nreq;
	free(cdf);
	free(perm);
	free(busy);
	free(act);
}
