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

/* A live chunk's part in this epoch (call in table order, as chosen()):
 * KVT_PLAN_DEMOTE (resident, movable, not chosen), KVT_PLAN_PROMOTE (far
 * and chosen), with its rank key in *key; or -1. */
static inline int candidate(struct epoch *ep, const struct kvt_plan_chunk *c, int *key)
{
	int ch = chosen(ep, c);
	if (c->tier == KVT_PLAN_TIER_HBM && movable(ep, c) && !ch) {
		*key = demote_key(ep, c);
		return KVT_PLAN_DEMOTE;
	}
	if (c->tier == KVT_PLAN_TIER_FAR && ch) {
		*key = rank_key(c);
		return KVT_PLAN_PROMOTE;
	}
	return -1;
}

/* A candidate as pass 2 lists it: table position, direction, rank key. */
#define CAND_POS_MAX (1u << 24)
static inline uint32_t cand(uint32_t i, unsigned dir, int key)
{
	return i << 8 | dir << 7 | (uint32_t)key;
}

/* Where passes 3a and 3b find the candidates: pass 2's list (compact), or
 * the chunks pass 2 walked, re-deciding each as it did. */
struct walk {
	const uint32_t *live;
	int listed, compact;
	uint32_t nw, nc;
};

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

/* Pass 3a or 3b: emit up to `want` candidates of direction dir that pass
 * the cut (coldest first for demotions, hottest first for promotions; the
 * cut passes exactly `want`, so none can follow the last). */
static inline uint32_t take(struct epoch *ep, const struct kvt_plan_chunk *c, const struct walk *w,
			    unsigned dir, struct cut *cut, uint32_t want, struct kvt_plan_out *out)
{
	const int desc = dir == KVT_PLAN_PROMOTE;
	uint32_t got = 0;
	if (w->compact) {
		for (uint32_t k = 0; k < w->nc && got < want; k++) {
			uint32_t r = w->live[k], i = r >> 8;
			if ((r >> 7 & 1) != dir || !pass(cut, (int)(r & 0x7F), desc))
				continue;
			if (emit(out, i, &c[i], (uint8_t)dir))
				break;
			got++;
		}
		return got;
	}
	ep->choose.taken = 0;
	for (uint32_t j = 0; j < w->nw && got < want; j++) {
		uint32_t i = w->listed ? w->live[j] : j;
		int key = 0;
		if (!live(ep, &c[i]) || candidate(ep, &c[i], &key) != (int)dir ||
		    !pass(cut, key, desc))
			continue;
		if (emit(out, i, &c[i], (uint8_t)dir))
			break;
		got++;
	}
	return got;
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
	uint32_t hist_f[NR_KEYS] = { 0 };      /* residents within their minimum residence */
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
			if (!m) {
				hist_f[demote_key(&ep, &c[i])]++;
				continue;
			}
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
	if (pl->p.room_bytes != KVT_PLAN_ROOM_ANY) {            /* the device is short: make room */
		uint64_t ceiling = used + pl->p.room_bytes / cb;
		budget = budget < ceiling ? budget : ceiling;
	}
	uint32_t high = (uint32_t)(budget * pl->p.high_bp / 10000);
	uint32_t low = (uint32_t)(budget * pl->p.low_bp / 10000);
	uint32_t target = used > high ? low : high;          /* watermarks */
	uint32_t capacity = target > fixed ? target - fixed : 0;
	ep.choose = cut_of(hist, NR_KEYS, capacity, 1);

	/* pass 2: candidates for each direction, in table order, rewritten over
	 * the list's head (entry nc <= j: already read) while they fit */
	uint32_t nd = 0, np = 0, nc = 0;   /* locals: stores to live[] could alias a struct's */
	int compact = 1;
	for (uint32_t j = 0; j < nw; j++) {
		uint32_t i = AT(j);
		int key = 0, dir;
		if (!live(&ep, &c[i]) || (dir = candidate(&ep, &c[i], &key)) < 0)
			continue;
		if (dir == KVT_PLAN_DEMOTE) {
			hist_d[key]++;
			nd++;
		} else {
			hist_p[key]++;
			np++;
		}
		if (compact && nc < cap && i < CAND_POS_MAX)
			pl->live[nc++] = cand(i, (unsigned)dir, key);
		else
			compact = 0;
	}
#undef AT
	const struct walk w = { .live = pl->live, .listed = listed, .compact = compact,
				.nw = nw, .nc = nc };
	uint64_t allow = pl->p.rate_bytes_per_s ? pl->allowance_bytes / cb : UINT32_MAX;
	uint32_t want_d = nd < allow ? nd : (uint32_t)allow;
	ep.dem = cut_of(hist_d, NR_KEYS, want_d, 0);           /* coldest first */
	uint32_t dd = take(&ep, c, &w, KVT_PLAN_DEMOTE, &ep.dem, want_d, out);    /* pass 3a */

	allow -= dd;
	uint32_t after = used - dd;
	/* pass 3c: residents within their minimum residence that still leave
	 * more than the budget in HBM (GPU faults brought them in: every
	 * movable one not chosen is gone) leave too, coldest first; the budget
	 * outranks the residence */
	if (after > budget && allow) {
		uint32_t want_f = after - (uint32_t)budget;
		want_f = want_f < fixed ? want_f : fixed;
		want_f = want_f < allow ? want_f : (uint32_t)allow;
		struct cut cf = cut_of(hist_f, NR_KEYS, want_f, 0);
		uint32_t got = 0;
		for (uint32_t i = 0; i < n && got < want_f; i++) {
			if (c[i].tier != KVT_PLAN_TIER_HBM || movable(&ep, &c[i]) ||
			    !pass(&cf, demote_key(&ep, &c[i]), 0))
				continue;
			if (emit(out, i, &c[i], KVT_PLAN_DEMOTE))
				break;
			got++;
		}
		dd += got;
		allow -= got;
		after -= got;
	}
	uint32_t room = target > after ? target - after : 0;
	uint32_t want_p = np;
	if (want_p > allow)
		want_p = (uint32_t)allow;
	if (want_p > room)
		want_p = room;
	ep.pro = cut_of(hist_p, NR_KEYS, want_p, 1);            /* hottest first */
	uint32_t pp = take(&ep, c, &w, KVT_PLAN_PROMOTE, &ep.pro, want_p, out);   /* pass 3b */
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
