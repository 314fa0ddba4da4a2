// SPDX-License-Identifier: MIT
/* DAMON-style adaptive regions (contract in regions.h): a sorted table,
 * edited in place. Pure: no CUDA, no system calls, no allocation, no
 * globals; one caller at a time. Every function is O(regions) (adding a
 * range to a full table: O(regions) per region it needs). */
#include <errno.h>
#include <string.h>

#include "regions.h"

static uint64_t next_rand(struct kvt_region_set *s)
{
	uint64_t x = s->rng;          /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

void kvt_regions_init(struct kvt_region_set *s, uint32_t max, uint32_t min, uint64_t seed)
{
	s->nr = 0;
	s->max = max < 1 ? 1 : max > KVT_REGIONS_MAX ? KVT_REGIONS_MAX : max;
	s->min = min ? min : 1;
	s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* The first region whose range is >= range. */
static uint32_t lower_bound(const struct kvt_region_set *s, uint32_t range)
{
	uint32_t lo = 0, hi = s->nr;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->r[mid].range < range)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int kvt_regions_has(const struct kvt_region_set *s, uint16_t range)
{
	uint32_t i = lower_bound(s, range);
	return i < s->nr && s->r[i].range == range;
}

/* ---- merging ---- */

static uint8_t weighted(uint8_t a, uint32_t na, uint8_t b, uint32_t nb)
{
	uint64_t n = (uint64_t)na + nb;
	return (uint8_t)(((uint64_t)a * na + (uint64_t)b * nb + n / 2) / n);
}

/* Region i absorbs region i + 1 (same range, adjacent). */
static void absorb(struct kvt_region *a, const struct kvt_region *b)
{
	a->nr_accesses = weighted(a->nr_accesses, a->nr, b->nr_accesses, b->nr);
	a->nr_unknown = weighted(a->nr_unknown, a->nr, b->nr_unknown, b->nr);
	a->last = weighted(a->last, a->nr, b->last, b->nr);
	a->nr += b->nr;
}

static void merge_at(struct kvt_region_set *s, uint32_t i)
{
	absorb(&s->r[i], &s->r[i + 1]);
	memmove(&s->r[i + 1], &s->r[i + 2], (size_t)(s->nr - i - 2) * sizeof s->r[0]);
	s->nr--;
}

static unsigned diff(uint8_t a, uint8_t b)
{
	return a > b ? (unsigned)(a - b) : (unsigned)(b - a);
}

/* One forced merge: the neighbours (one range) whose previous counts are
 * closest, the smaller pair on ties. 0, or -ENOSPC when no range has two. */
static int merge_closest(struct kvt_region_set *s)
{
	uint32_t best = UINT32_MAX;
	unsigned best_d = ~0u;
	uint64_t best_sz = ~0ull;
	for (uint32_t i = 0; i + 1 < s->nr; i++) {
		const struct kvt_region *a = &s->r[i], *b = &s->r[i + 1];
		if (a->range != b->range)
			continue;
		unsigned d = diff(a->last, b->last);
		uint64_t sz = (uint64_t)a->nr + b->nr;
		if (d < best_d || (d == best_d && sz < best_sz)) {
			best = i;
			best_d = d;
			best_sz = sz;
		}
	}
	if (best == UINT32_MAX)
		return -ENOSPC;
	merge_at(s, best);
	return 0;
}

/* ---- ranges joining and leaving ---- */

int kvt_regions_add(struct kvt_region_set *s, uint16_t range, uint32_t nr_chunks)
{
	if (!nr_chunks)
		return -EINVAL;
	if (kvt_regions_has(s, range))
		return -EEXIST;
	uint32_t k = nr_chunks < KVT_REGIONS_INIT ? nr_chunks : KVT_REGIONS_INIT;
	if (s->nr >= s->max && merge_closest(s))
		return -ENOSPC;
	if (k > s->max - s->nr)
		k = s->max - s->nr;
	uint32_t pos = lower_bound(s, range);
	memmove(&s->r[pos + k], &s->r[pos], (size_t)(s->nr - pos) * sizeof s->r[0]);
	for (uint32_t i = 0; i < k; i++) {
		uint32_t a = (uint32_t)((uint64_t)nr_chunks * i / k);
		uint32_t b = (uint32_t)((uint64_t)nr_chunks * (i + 1) / k);
		s->r[pos + i] = (struct kvt_region){ .first = a, .nr = b - a, .range = range };
	}
	s->nr += k;
	return 0;
}

uint32_t kvt_regions_drop(struct kvt_region_set *s, uint16_t range)
{
	uint32_t lo = lower_bound(s, range), hi = lower_bound(s, (uint32_t)range + 1);
	memmove(&s->r[lo], &s->r[hi], (size_t)(s->nr - hi) * sizeof s->r[0]);
	s->nr -= hi - lo;
	return hi - lo;
}

/* ---- sampling ---- */

uint32_t kvt_regions_pick(struct kvt_region_set *s, uint32_t i)
{
	const struct kvt_region *r = &s->r[i];
	return r->first + (uint32_t)(next_rand(s) % r->nr);
}

void kvt_regions_account(struct kvt_region_set *s, uint32_t i, enum kvt_region_seen seen)
{
	struct kvt_region *r = &s->r[i];
	if (seen == KVT_REGION_ACCESSED && r->nr_accesses < UINT8_MAX)
		r->nr_accesses++;
	else if (seen == KVT_REGION_UNKNOWN && r->nr_unknown < UINT8_MAX)
		r->nr_unknown++;
}

/* ---- aggregation: merge, restart, split ---- */

/* This aggregation's count; samples not taken are estimated at the
 * previous aggregation's rate. Returns the largest. */
static unsigned settle_counts(struct kvt_region_set *s, uint32_t nr_passes)
{
	unsigned top = 0;
	for (uint32_t i = 0; i < s->nr; i++) {
		struct kvt_region *r = &s->r[i];
		uint32_t est = nr_passes ? (r->nr_unknown * r->last + nr_passes / 2) / nr_passes : 0;
		uint32_t n = r->nr_accesses + est;
		r->last = (uint8_t)(n > UINT8_MAX ? UINT8_MAX : n);
		r->nr_accesses = r->nr_unknown = 0;
		if (r->last > top)
			top = r->last;
	}
	return top;
}

static void merge_similar(struct kvt_region_set *s, unsigned thres)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < s->nr; i++)
		total += s->r[i].nr;
	uint64_t limit = total / s->min ? total / s->min : 1;
	uint32_t w = 0;
	for (uint32_t i = 0; i < s->nr; i++) {
		struct kvt_region *p = w ? &s->r[w - 1] : NULL;
		if (p && p->range == s->r[i].range && diff(p->last, s->r[i].last) <= thres &&
		    (uint64_t)p->nr + s->r[i].nr <= limit)
			absorb(p, &s->r[i]);
		else
			s->r[w++] = s->r[i];
	}
	s->nr = w;
}

/* Every region of >= 2 chunks in two, at a random chunk, while room lasts
 * (filled from the end, so the table is edited in place). */
static void split_all(struct kvt_region_set *s)
{
	uint32_t can = 0;
	for (uint32_t i = 0; i < s->nr; i++)
		can += s->r[i].nr >= 2;
	uint32_t add = can < s->max - s->nr ? can : s->max - s->nr, left = add;
	uint32_t j = s->nr + add;          /* j == i + 1 + left throughout */
	for (uint32_t i = s->nr; i-- > 0;) {
		struct kvt_region r = s->r[i];
		if (left && r.nr >= 2) {
			uint32_t at = 1 + (uint32_t)(next_rand(s) % (r.nr - 1));
			struct kvt_region right = r;
			right.first = r.first + at;
			right.nr = r.nr - at;
			r.nr = at;
			s->r[--j] = right;
			left--;
		}
		s->r[--j] = r;
	}
	s->nr += add;
}

void kvt_regions_aggregate(struct kvt_region_set *s, uint32_t nr_passes)
{
	if (!s->nr)
		return;
	unsigned top = settle_counts(s, nr_passes);
	merge_similar(s, top / 10);
	if (s->nr <= s->max / 2)
		split_all(s);
}

/* ---- checks and lookups ---- */

int kvt_regions_check(const struct kvt_region_set *s, const uint32_t *nr_chunks)
{
	if (s->nr > s->max || s->max > KVT_REGIONS_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < s->nr; i++) {
		const struct kvt_region *r = &s->r[i], *p = i ? &s->r[i - 1] : NULL;
		if (!r->nr || r->first + (uint64_t)r->nr > UINT32_MAX)
			return -EINVAL;
		if (p && p->range == r->range) {
			if (r->first != p->first + p->nr)
				return -EINVAL;
			continue;
		}
		if ((p && p->range > r->range) || r->first)
			return -EINVAL;
		if (p && nr_chunks && p->first + p->nr != nr_chunks[p->range])
			return -EINVAL;
	}
	if (s->nr && nr_chunks) {
		const struct kvt_region *l = &s->r[s->nr - 1];
		if (l->first + l->nr != nr_chunks[l->range])
			return -EINVAL;
	}
	return 0;
}

int kvt_regions_find(const struct kvt_region_set *s, uint16_t range, uint32_t chunk)
{
	uint32_t lo = lower_bound(s, range), hi = lower_bound(s, (uint32_t)range + 1);
	while (lo < hi) {                /* the last region starting at or before chunk */
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->r[mid].first <= chunk)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || s->r[lo - 1].range != range)
		return -1;
	const struct kvt_region *r = &s->r[lo - 1];
	return chunk - r->first < r->nr ? (int)(lo - 1) : -1;
}
