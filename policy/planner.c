// SPDX-License-Identifier: MIT
/* The migration planner (contract in include/kvtier/planner.h): which 2 MiB
 * chunks belong in HBM this epoch, within the budget, the watermarks and the
 * rate cap, with hysteresis and a minimum residence. Pure: no CUDA, no
 * syscalls, no allocation; deterministic given its inputs. O(n): ranking is
 * done with 64-bucket heat histograms and bucket cuts, never a sort. */
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <string.h>

#include "kvtier/planner.h"

/* Incumbents rank this many buckets (one octave) higher: a far chunk must
 * be twice as hot as a resident one to displace it. */
#define INCUMBENT_BONUS 2
#define NR_KEYS (KVT_PLAN_BUCKETS + INCUMBENT_BONUS)

void kvt_planner_init(struct kvt_planner *pl, const struct kvt_plan_params *p)
{
	memset(pl, 0, offsetof(struct kvt_planner, live));   /* not the scratch */
	pl->p = *p;
	if (!pl->p.chunk_bytes)
		pl->p.chunk_bytes = 2ull << 20;
	if (pl->p.high_bp > 10000)
		pl->p.high_bp = 10000;
	if (pl->p.low_bp > pl->p.high_bp)
		pl->p.low_bp = pl->p.high_bp;
	if (pl->p.demote > pl->p.promote)
		pl->p.demote = pl->p.promote;
	pl->live_cap = KVT_PLAN_LIVE_MAX;
}

/* A candidate as pass 2 lists it: table position, direction, rank key. */
#define CAND_POS_MAX (1u << 24)
static inline uint32_t cand(uint32_t i, unsigned dir, int key)
{
	return i << 8 | dir << 7 | (uint32_t)key;
}

/* frexpf without the call: heat = m * 2^e with m in [0.5, 1) is, for a
 * normal positive float of biased exponent x and mantissa bits f,
 * e = x - 126 and m = 0x3F000000|f as a float, so m >= 0.70710678f
 * (0x3F3504F3) is f >= 0x3504F3. Denormals fall below bucket 0 either way;
 * +inf keeps frexpf's answer (e = 0, m = inf). Same buckets as before. */
static inline unsigned bucket_of(float heat)
{
	if (!(heat > 0.0f))           /* also NaN */
		return 0;
	uint32_t bits;
	memcpy(&bits, &heat, 4);
	uint32_t x = bits >> 23;      /* sign is 0 */
	if (x == 0)                   /* denormal: 2^-126 and below */
		return 0;
	if (x == 255)                 /* +inf: frexpf gives e = 0, m = inf */
		return 21;
	int b = 2 * ((int)x - 126) + ((bits & 0x7FFFFFu) >= 0x3504F3u) + 20;   /* 2^-10 .. 2^21 */
	return b < 0 ? 0 : b >= KVT_PLAN_BUCKETS ? KVT_PLAN_BUCKETS - 1 : (unsigned)b;
}

unsigned kvt_plan_bucket(float heat)
{
	return bucket_of(heat);
}

/* ---- per-epoch working state (on the stack) ---- */

struct cut {                 /* take every key above `key`, and `k` chunks at `key` */
	int key;
	uint32_t k, taken;
};

struct epoch {
	const struct kvt_planner *pl;
	uint32_t now_ms;
	struct cut choose, dem, pro;
};

static inline int movable(const struct epoch *ep, const struct kvt_plan_chunk *c)
{
	return !c->moved_ms || ep->now_ms - c->moved_ms >= ep->pl->p.min_residence_ms;
}

static inline int eligible(const struct epoch *ep, const struct kvt_plan_chunk *c)
{
	return c->tier == KVT_PLAN_TIER_HBM ? c->heat >= ep->pl->p.demote
				       : c->heat >= ep->pl->p.promote;
}

static inline int rank_key(const struct kvt_plan_chunk *c)
{
	return (int)bucket_of(c->heat) + (c->tier == KVT_PLAN_TIER_HBM ? INCUMBENT_BONUS : 0);
}

/* Walk a histogram from the top (desc) or the bottom until `want` chunks. */
static struct cut cut_of(const uint32_t *hist, int nr_keys, uint32_t want, int desc)
{
	struct cut c = { .key = desc ? nr_keys : -1, .k = 0 };
	for (int i = 0; i < nr_keys && want; i++) {
		int key = desc ? nr_keys - 1 - i : i;
		c.key = key;
		if (hist[key] >= want) {
			c.k = want;
			return c;
		}
		want -= hist[key];
		c.k = hist[key];
	}
	if (!want && c.k == 0)   /* nothing wanted: a cut nothing passes */
		c.key = desc ? nr_keys : -1;
	return c;
}

static inline int pass(struct cut *c, int key, int desc)
{
	if (desc ? key > c->key : key < c->key)
		return 1;
	if (key == c->key && c->taken < c->k) {
		c->taken++;
		return 1;
	}
	return 0;
}

/* Whether a movable, eligible chunk is among the top `capacity` (call in
 * table order; the cut's counter makes the boundary bucket first-come). */
static inline int chosen(struct epoch *ep, const struct kvt_plan_chunk *c)
{
	return movable(ep, c) && eligible(ep, c) && pass(&ep->choose, rank_key(c), 1);
}

/* Whether a chunk can matter to passes 2, 3a and 3b: a far chunk below the
 * promote threshold (most of a big table) is never chosen, never demoted
 * and never promoted, and an unmovable resident one neither; skipping them
 * before chosen() leaves every cut counter exactly as it was. */
static inline int live(const struct epoch *ep, const struct kvt_plan_chunk *c)
{
	if (c->tier == KVT_PLAN_TIER_HBM)
		return movable(ep, c);
	return c->heat >= ep->pl->p.promote;
}

static inline int demote_key(const struct epoch *ep, const struct kvt_plan_chunk *c)
{
	return eligible(ep, c) ? rank_key(c) : 0;
}

/* ---- emit merged moves ---- */

static int emit(struct kvt_plan_out *out, uint32_t i, const struct kvt_plan_chunk *c, uint8_t dir)
{
	struct kvt_plan_move *m = out->nr ? &out->moves[out->nr - 1] : NULL;
	uint16_t range = c->range;
	if (m && m->dir == dir && m->range == range && m->first + m->nr == i &&
	    !(c->flags & KVT_PLAN_F_GAP)) {
		m->nr++;
		return 0;
	}
	if (out->nr >= out->cap)
		return -1;
	out->moves[out->nr++] = (struct kvt_plan_move){ .first = i, .nr = 1, .range = range,
							.dir = dir };
	return 0;
}

static void refill(struct kvt_planner *pl, uint32_t now_ms)
{
	uint64_t rate = pl->p.rate_bytes_per_s;
	if (!rate)
		return;
	uint64_t burst = rate * 2 * (pl->p.epoch_ms ? pl->p.epoch_ms : 1) / 1000;
	if (burst < pl->p.chunk_bytes)
		burst = pl->p.chunk_bytes;
	if (!pl->started)
		pl->allowance_bytes = burst;
	else
		pl->allowance_bytes += rate * (uint64_t)(now_ms - pl->last_ms) / 1000;
	if (pl->allowance_bytes > burst)
		pl->allowance_bytes = burst;
}

uint32_t kvt_plan_epoch(struct kvt_planner *pl, const struct kvt_plan_chunk *c,
			uint32_t n, uint32_t now_ms, struct kvt_plan_out *out)
{
	const uint64_t cb = pl->p.chunk_bytes;
	struct epoch ep = { .pl = pl, .now_ms = now_ms };
	uint32_t hist[NR_KEYS] = { 0 }, hist_d[NR_KEYS] = { 0 }, hist_p[NR_KEYS] = { 0 };
	uint32_t used = 0, fixed = 0;

	refill(pl, now_ms);
	pl->started = 1;
	pl->last_ms = now_ms;
	out->nr = out->nr_promote = out->nr_demote = 0;

	/* pass 1: what is in HBM, what could be; the chunks that can matter
	 * later (live()) listed in table order while they fit */
	const uint32_t cap = pl->live_cap < KVT_PLAN_LIVE_MAX ? pl->live_cap : KVT_PLAN_LIVE_MAX;
	uint32_t nl = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (c[i].tier == KVT_PLAN_TIER_HBM) {
			int m = movable(&ep, &c[i]);
			used++;
			fixed += !m;
			if (!m)
				continue;
			if (nl < cap)
				pl->live[nl] = i;
			nl++;
			if (c[i].heat >= pl->p.demote)             /* eligible */
				hist[rank_key(&c[i])]++;
		} else if (c[i].heat >= pl->p.promote) {   /* eligible; most far chunks are not */
			if (nl < cap)
				pl->live[nl] = i;
			nl++;
			if (movable(&ep, &c[i]))
				hist[rank_key(&c[i])]++;
		}
	}
	/* pass 2 walks the list, or the whole table when it overflowed */
	const int listed = nl <= cap;
	const uint32_t nw = listed ? nl : n;
#define AT(j) (listed ? pl->live[j] : (j))
	uint64_t budget = pl->p.budget_bytes / cb;
	uint32_t high = (uint32_t)(budget * pl->p.high_bp / 10000);
	uint32_t low = (uint32_t)(budget * pl->p.low_bp / 10000);
	uint32_t target = used > high ? low : high;          /* watermarks */
	uint32_t capacity = target > fixed ? target - fixed : 0;
	ep.choose = cut_of(hist, NR_KEYS, capacity, 1);

	/* pass 2: candidates for each direction, in table order, rewritten over
	 * the list's head (entry nc <= j: already read) while they fit */
	uint32_t nd = 0, np = 0, nc = 0;
	int compact = 1;
	for (uint32_t j = 0; j < nw; j++) {
		uint32_t i = AT(j);
		if (!live(&ep, &c[i]))
			continue;
		int ch = chosen(&ep, &c[i]), key;
		unsigned dir;
		if (c[i].tier == KVT_PLAN_TIER_HBM && movable(&ep, &c[i]) && !ch) {
			key = demote_key(&ep, &c[i]);
			hist_d[key]++;
			nd++;
			dir = KVT_PLAN_DEMOTE;
		} else if (c[i].tier == KVT_PLAN_TIER_FAR && ch) {
			key = rank_key(&c[i]);
			hist_p[key]++;
			np++;
			dir = KVT_PLAN_PROMOTE;
		} else {
			continue;
		}
		if (compact && nc < cap && i < CAND_POS_MAX)
			pl->live[nc++] = cand(i, dir, key);
		else
			compact = 0;
	}
	uint64_t allow = pl->p.rate_bytes_per_s ? pl->allowance_bytes / cb : UINT32_MAX;
	uint32_t want_d = nd < allow ? nd : (uint32_t)allow;
	ep.dem = cut_of(hist_d, NR_KEYS, want_d, 0);           /* coldest first */

	/* pass 3a: demotions (the cut passes exactly want_d chunks: none can
	 * follow the last); from the candidate list, or re-deciding over the
	 * table as pass 2 did */
	uint32_t dd = 0;
	if (compact) {
		for (uint32_t k = 0; k < nc && dd < want_d; k++) {
			uint32_t r = pl->live[k], i = r >> 8;
			if ((r >> 7 & 1) != KVT_PLAN_DEMOTE || !pass(&ep.dem, (int)(r & 0x7F), 0))
				continue;
			if (emit(out, i, &c[i], KVT_PLAN_DEMOTE))
				break;
			dd++;
		}
	} else {
		ep.choose.taken = 0;
		for (uint32_t j = 0; j < nw && dd < want_d; j++) {
			uint32_t i = AT(j);
			if (!live(&ep, &c[i]))
				continue;
			int ch = chosen(&ep, &c[i]);
			if (c[i].tier != KVT_PLAN_TIER_HBM || !movable(&ep, &c[i]) || ch)
				continue;
			if (!pass(&ep.dem, demote_key(&ep, &c[i]), 0))
				continue;
			if (emit(out, i, &c[i], KVT_PLAN_DEMOTE))
				break;
			dd++;
		}
	}
	allow -= dd;
	uint32_t after = used - dd;
	uint32_t room = target > after ? target - after : 0;
	uint32_t want_p = np;
	if (want_p > allow)
		want_p = (uint32_t)allow;
	if (want_p > room)
		want_p = room;
	ep.pro = cut_of(hist_p, NR_KEYS, want_p, 1);            /* hottest first */

	/* pass 3b: promotions, the same way */
	uint32_t pp = 0;
	if (compact) {
		for (uint32_t k = 0; k < nc && pp < want_p; k++) {
			uint32_t r = pl->live[k], i = r >> 8;
			if ((r >> 7 & 1) != KVT_PLAN_PROMOTE || !pass(&ep.pro, (int)(r & 0x7F), 1))
				continue;
			if (emit(out, i, &c[i], KVT_PLAN_PROMOTE))
				break;
			pp++;
		}
	} else {
		ep.choose.taken = 0;
		for (uint32_t j = 0; j < nw && pp < want_p; j++) {
			uint32_t i = AT(j);
			if (!live(&ep, &c[i]))
				continue;
			int ch = chosen(&ep, &c[i]);
			if (c[i].tier != KVT_PLAN_TIER_FAR || !ch ||
			    !pass(&ep.pro, rank_key(&c[i]), 1))
				continue;
			if (emit(out, i, &c[i], KVT_PLAN_PROMOTE))
				break;
			pp++;
		}
	}
#undef AT
	if (pl->p.rate_bytes_per_s) {
		uint64_t spent = (uint64_t)(dd + pp) * cb;
		pl->allowance_bytes = spent > pl->allowance_bytes ? 0 : pl->allowance_bytes - spent;
	}
	out->nr_demote = dd;
	out->nr_promote = pp;
	out->hbm_before = used;
	out->hbm_after = used - dd + pp;
	out->budget_chunks = (uint32_t)budget;
	return out->nr;
}
