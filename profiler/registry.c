// SPDX-License-Identifier: MIT
/* The allocation registry (see registry.h for the contract).
 * Runs inside hooks: no malloc, no stdio, no logging; node memory comes
 * from mmap'd slabs kept on per-stripe free lists.
 *
 * Interval hashing, for "which record contains addr":
 *   level l has granules of 2 MiB << l. A record of size s lives at the
 *   smallest level whose granule is >= s, so it overlaps at most two of
 *   that level's granules and is linked under each:
 *
 *     level 0 (2 MiB):  |g0  |g1  |g2  |g3  |      record A (1 MiB) -> g1
 *                              [A]  [B---]         record B (3 MiB) -> level 1
 *     level 1 (4 MiB):  |G0       |G1       |              -> G0 and G1
 *
 *   find(addr) probes one granule per level that has ever held a record. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "../base/kvt.h"
#include "registry.h"

#define NR_STRIPES 256u
#define GRANULE_SHIFT 21u
#define MAX_LEVEL 42u
/* One page per slab: each of the 256 stripes of a registry takes its own
 * slab on first use, and a stripe's slab is filled (touched) at once, so a
 * 64 KiB slab cost 16 MiB of RSS per registry once addresses had reached
 * every stripe (make soak), for a few hundred live records. */
#define SLAB_BYTES 4096u

struct node {
	struct kvt_alloc a;
	struct node *base_next;
	struct node *idx_next[2];
	uint64_t idx_key[2];
	uint8_t nr_idx;
};
_Static_assert(sizeof(struct node) * 16 <= SLAB_BYTES, "a slab holds too few nodes");

/* A base-table stripe also keeps its share of the live/insert/remove
 * counters, changed under its lock (one writer: a relaxed load and store,
 * no locked instruction) and summed by kvt_reg_stats: the hooks' path pays
 * no atomic read-modify-write for them (make bench, passthrough row). */
struct stripe {
	_Alignas(64) pthread_mutex_t lock;
	struct node *free_nodes;       /* used with the base table's stripes */
	uint64_t nr_live, bytes_live, nr_inserts, nr_removes;
};

struct kvt_registry {
	unsigned bits;
	struct node **base_tab;        /* buckets by hash(base) */
	struct node **idx_tab;         /* buckets by hash(level, granule) */
	struct stripe base_lock[NR_STRIPES];
	struct stripe idx_lock[NR_STRIPES];
	uint64_t level_mask;           /* levels that ever held a record (atomic) */
	struct kvt_reg_stats st;       /* atomic counters: nr_replaced, nr_nomem */
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline size_t bucket_of(const struct kvt_registry *r, uint64_t key)
{
	return (size_t)(mix64(key) >> (64 - r->bits));
}

static inline unsigned stripe_of(size_t bucket)
{
	return (unsigned)(bucket & (NR_STRIPES - 1));
}

static unsigned level_of(uint64_t size)
{
	unsigned l = 0;
	while (l < MAX_LEVEL && (1ull << (GRANULE_SHIFT + l)) < size)
		l++;
	return l;
}

static inline uint64_t idx_key(uint64_t addr, unsigned level)
{
	return ((addr >> (GRANULE_SHIFT + level)) << 6) | level;
}

static void *map_zeroed(size_t bytes)
{
	void *p = kvt_sys_map_own(bytes, 0);
	return p == MAP_FAILED ? NULL : p;
}

struct kvt_registry *kvt_reg_create(unsigned bits)
{
	if (bits < 4 || bits > 24)
		bits = 16;
	struct kvt_registry *r = map_zeroed(sizeof *r);
	if (!r)
		return NULL;
	r->bits = bits;
	r->base_tab = map_zeroed(sizeof(struct node *) << bits);
	r->idx_tab = map_zeroed(sizeof(struct node *) << bits);
	if (!r->base_tab || !r->idx_tab) {
		kvt_reg_destroy(r);
		return NULL;
	}
	for (unsigned i = 0; i < NR_STRIPES; i++) {
		pthread_mutex_init(&r->base_lock[i].lock, NULL);
		pthread_mutex_init(&r->idx_lock[i].lock, NULL);
	}
	return r;
}

/* Slabs are not tracked individually: destroy is for tests and tools, where
 * the few slabs left mapped are reclaimed at exit. */
void kvt_reg_destroy(struct kvt_registry *r)
{
	if (!r)
		return;
	if (r->base_tab)
		kvt_sys_munmap(r->base_tab, sizeof(struct node *) << r->bits);
	if (r->idx_tab)
		kvt_sys_munmap(r->idx_tab, sizeof(struct node *) << r->bits);
	kvt_sys_munmap(r, sizeof *r);
}

/* ---- node memory: per-stripe free lists fed from one-page slabs ---- */

static struct node *node_get(struct stripe *s)
{
	if (!s->free_nodes) {
		struct node *slab = map_zeroed(SLAB_BYTES);
		if (!slab)
			return NULL;
		size_t n = SLAB_BYTES / sizeof(struct node);
		for (size_t i = 0; i < n; i++) {
			slab[i].base_next = s->free_nodes;
			s->free_nodes = &slab[i];
		}
	}
	struct node *nd = s->free_nodes;
	s->free_nodes = nd->base_next;
	memset(nd, 0, sizeof *nd);
	return nd;
}

static void node_put(struct stripe *s, struct node *nd)
{
	nd->base_next = s->free_nodes;
	s->free_nodes = nd;
}

/* ---- the interval index ---- */

/* A node sits in a bucket's chain once per distinct bucket of its keys; in
 * bucket b its link is slot 0 when key 0 hashes to b, else slot 1. */
static inline unsigned slot_in(const struct kvt_registry *r,
			       const struct node *nd, size_t b)
{
	return bucket_of(r, nd->idx_key[0]) == b ? 0 : 1;
}

static void idx_link(struct kvt_registry *r, struct node *nd)
{
	uint64_t end = nd->a.base + nd->a.size - 1;
	unsigned level = level_of(nd->a.size);
	nd->idx_key[0] = idx_key(nd->a.base, level);
	nd->idx_key[1] = idx_key(end, level);
	nd->nr_idx = bucket_of(r, nd->idx_key[1]) != bucket_of(r, nd->idx_key[0]) ? 2 : 1;
	__atomic_fetch_or(&r->level_mask, 1ull << level, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < nd->nr_idx; i++) {
		size_t b = bucket_of(r, nd->idx_key[i]);
		struct stripe *s = &r->idx_lock[stripe_of(b)];
		pthread_mutex_lock(&s->lock);
		nd->idx_next[i] = r->idx_tab[b];
		r->idx_tab[b] = nd;
		pthread_mutex_unlock(&s->lock);
	}
}

static void idx_unlink(struct kvt_registry *r, struct node *nd)
{
	for (unsigned i = 0; i < nd->nr_idx; i++) {
		size_t b = bucket_of(r, nd->idx_key[i]);
		struct stripe *s = &r->idx_lock[stripe_of(b)];
		pthread_mutex_lock(&s->lock);
		struct node **pp = &r->idx_tab[b];
		while (*pp && *pp != nd)
			pp = &(*pp)->idx_next[slot_in(r, *pp, b)];
		if (*pp)
			*pp = nd->idx_next[i];
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---- the base table ---- */

static struct node **base_slot(struct kvt_registry *r, size_t b, uint64_t base)
{
	struct node **pp = &r->base_tab[b];
	while (*pp && (*pp)->a.base != base)
		pp = &(*pp)->base_next;
	return pp;
}

/* Unlink the node with this base from the base table (caller holds the
 * stripe lock); NULL when absent. */
static struct node *base_unlink(struct kvt_registry *r, size_t b, uint64_t base)
{
	struct node **pp = base_slot(r, b, base);
	struct node *nd = *pp;
	if (nd)      /* atomic: kvt_reg_for_each peeks at buckets without the lock */
		__atomic_store_n(pp, nd->base_next, __ATOMIC_RELAXED);
	return nd;
}

static void stats_add(uint64_t *c, int64_t d)
{
	__atomic_fetch_add(c, (uint64_t)d, __ATOMIC_RELAXED);
}

/* A stripe's counter; its lock held (readers load it atomically). d is
 * added modulo 2^64: a decrease is passed as 0 - x (sizes come from traces
 * too, and a signed difference of two of them can overflow). */
static inline void stripe_add(uint64_t *c, uint64_t d)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED);
}

/* The node left the base table, and its stripe's counters count it out. */
static void release_node(struct kvt_registry *r, struct stripe *s, struct node *nd)
{
	idx_unlink(r, nd);
	pthread_mutex_lock(&s->lock);
	node_put(s, nd);
	pthread_mutex_unlock(&s->lock);
}

int kvt_reg_insert(struct kvt_registry *r, const struct kvt_alloc *a)
{
	size_t b = bucket_of(r, a->base);
	struct stripe *s = &r->base_lock[stripe_of(b)];

	pthread_mutex_lock(&s->lock);
	struct node *old = base_unlink(r, b, a->base);
	struct node *nd = node_get(s);
	if (!nd) {
		if (old) {      /* keep the old record rather than lose both */
			old->base_next = r->base_tab[b];
			__atomic_store_n(&r->base_tab[b], old, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&s->lock);
		stats_add(&r->st.nr_nomem, 1);
		return -ENOMEM;
	}
	nd->a = *a;
	if (!nd->a.size)
		nd->a.size = 1;
	if (nd->a.base + nd->a.size < nd->a.base)      /* clamp at the top */
		nd->a.size = UINT64_MAX - nd->a.base;
	nd->base_next = r->base_tab[b];
	__atomic_store_n(&r->base_tab[b], nd, __ATOMIC_RELAXED);
	stripe_add(&s->nr_inserts, 1);
	stripe_add(&s->nr_live, old ? 0 : 1);
	stripe_add(&s->bytes_live, nd->a.size - (old ? old->a.size : 0));
	pthread_mutex_unlock(&s->lock);

	idx_link(r, nd);
	if (old) {
		stats_add(&r->st.nr_replaced, 1);
		release_node(r, s, old);
		return 1;
	}
	return 0;
}

int kvt_reg_remove(struct kvt_registry *r, uint64_t base, struct kvt_alloc *out)
{
	size_t b = bucket_of(r, base);
	struct stripe *s = &r->base_lock[stripe_of(b)];

	pthread_mutex_lock(&s->lock);
	struct node *nd = base_unlink(r, b, base);
	if (nd) {
		stripe_add(&s->nr_removes, 1);
		stripe_add(&s->nr_live, 0 - (uint64_t)1);
		stripe_add(&s->bytes_live, 0 - nd->a.size);
	}
	pthread_mutex_unlock(&s->lock);
	if (!nd)
		return -ENOENT;
	if (out)
		*out = nd->a;
	release_node(r, s, nd);
	return 0;
}

int kvt_reg_lookup(struct kvt_registry *r, uint64_t base, struct kvt_alloc *out)
{
	size_t b = bucket_of(r, base);
	struct stripe *s = &r->base_lock[stripe_of(b)];
	int ret = -ENOENT;

	pthread_mutex_lock(&s->lock);
	struct node *nd = *base_slot(r, b, base);
	if (nd) {
		if (out)
			*out = nd->a;
		ret = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int find_at_level(struct kvt_registry *r, uint64_t addr, unsigned level,
			 struct kvt_alloc *out)
{
	size_t b = bucket_of(r, idx_key(addr, level));
	struct stripe *s = &r->idx_lock[stripe_of(b)];
	int ret = -ENOENT;

	pthread_mutex_lock(&s->lock);
	for (struct node *nd = r->idx_tab[b]; nd; nd = nd->idx_next[slot_in(r, nd, b)]) {
		if (addr >= nd->a.base && addr - nd->a.base < nd->a.size) {
			if (out)
				*out = nd->a;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int kvt_reg_find(struct kvt_registry *r, uint64_t addr, struct kvt_alloc *out)
{
	uint64_t mask = __atomic_load_n(&r->level_mask, __ATOMIC_ACQUIRE);
	while (mask) {
		unsigned level = (unsigned)__builtin_ctzll(mask);
		mask &= mask - 1;
		if (!find_at_level(r, addr, level, out))
			return 0;
	}
	return -ENOENT;
}

/* ---- carving (partial munmap) ---- */

struct overlap_scan {
	uint64_t lo, hi;                 /* [lo, hi) */
	int (*keep)(const struct kvt_alloc *);
	uint64_t bases[64];
	unsigned n;
};

static void note_overlap(struct overlap_scan *sc, const struct kvt_alloc *a)
{
	if (a->base >= sc->hi || a->base + a->size <= sc->lo || sc->n == 64)
		return;
	if (sc->keep && !sc->keep(a))
		return;
	for (unsigned i = 0; i < sc->n; i++)
		if (sc->bases[i] == a->base)
			return;
	sc->bases[sc->n++] = a->base;
}

static int collect_overlap(const struct kvt_alloc *a, void *arg)
{
	struct overlap_scan *sc = arg;
	note_overlap(sc, a);
	return sc->n == 64;
}

/* Probe the granules of [lo, hi) at every level in use; a span too wide to
 * walk granule by granule falls back to a scan of the whole table. */
static void collect_overlaps(struct kvt_registry *r, struct overlap_scan *sc)
{
	uint64_t mask = __atomic_load_n(&r->level_mask, __ATOMIC_ACQUIRE);
	for (uint64_t m = mask; m; m &= m - 1) {
		unsigned level = (unsigned)__builtin_ctzll(m);
		unsigned shift = GRANULE_SHIFT + level;
		if (((sc->hi - 1) >> shift) - (sc->lo >> shift) > 4096) {
			kvt_reg_for_each(r, collect_overlap, sc);
			return;
		}
	}
	for (; mask; mask &= mask - 1) {
		unsigned level = (unsigned)__builtin_ctzll(mask);
		unsigned shift = GRANULE_SHIFT + level;
		for (uint64_t g = sc->lo >> shift; g <= (sc->hi - 1) >> shift; g++) {
			size_t b = bucket_of(r, (g << 6) | level);
			struct stripe *s = &r->idx_lock[stripe_of(b)];
			pthread_mutex_lock(&s->lock);
			for (struct node *nd = r->idx_tab[b]; nd; nd = nd->idx_next[slot_in(r, nd, b)])
				note_overlap(sc, &nd->a);
			pthread_mutex_unlock(&s->lock);
		}
	}
}

/* Take one overlapping record out and put back what lies outside the cut. */
static int64_t carve_one(struct kvt_registry *r, uint64_t base, uint64_t lo, uint64_t hi)
{
	struct kvt_alloc a;
	if (kvt_reg_remove(r, base, &a))
		return 0;
	uint64_t end = a.base + a.size;
	uint64_t cut_lo = a.base > lo ? a.base : lo;
	uint64_t cut_hi = end < hi ? end : hi;
	if (a.base < lo) {
		struct kvt_alloc left = a;
		left.size = lo - a.base;
		kvt_reg_insert(r, &left);
	}
	if (end > hi) {
		struct kvt_alloc right = a;
		right.base = hi;
		right.size = end - hi;
		kvt_reg_insert(r, &right);
	}
	return (int64_t)(cut_hi - cut_lo);
}

int64_t kvt_reg_carve(struct kvt_registry *r, uint64_t addr, uint64_t len,
		      int (*keep)(const struct kvt_alloc *))
{
	struct kvt_alloc a;
	int64_t removed = 0;

	if (!len || addr + len < addr)
		return -EINVAL;
	/* Fast path: exactly one whole record. */
	if (!kvt_reg_lookup(r, addr, &a) && a.size == len && (!keep || keep(&a))) {
		kvt_reg_remove(r, addr, NULL);
		return (int64_t)len;
	}
	for (;;) {
		struct overlap_scan sc = { .lo = addr, .hi = addr + len, .keep = keep };
		collect_overlaps(r, &sc);
		if (!sc.n)
			break;
		for (unsigned i = 0; i < sc.n; i++)
			removed += carve_one(r, sc.bases[i], addr, addr + len);
	}
	return removed;
}

int kvt_reg_for_each(struct kvt_registry *r,
		     int (*fn)(const struct kvt_alloc *, void *), void *arg)
{
	size_t nb = (size_t)1 << r->bits;
	for (size_t b = 0; b < nb; b++) {
		if (!__atomic_load_n(&r->base_tab[b], __ATOMIC_RELAXED))
			continue;
		struct kvt_alloc snap[32];
		unsigned n = 0;
		struct stripe *s = &r->base_lock[stripe_of(b)];
		pthread_mutex_lock(&s->lock);
		for (struct node *nd = r->base_tab[b]; nd && n < 32; nd = nd->base_next)
			snap[n++] = nd->a;
		pthread_mutex_unlock(&s->lock);
		for (unsigned i = 0; i < n; i++) {
			int ret = fn(&snap[i], arg);
			if (ret)
				return ret;
		}
	}
	return 0;
}

void kvt_reg_stats(struct kvt_registry *r, struct kvt_reg_stats *out)
{
	out->nr_live = out->bytes_live = out->nr_inserts = out->nr_removes = 0;
	for (unsigned i = 0; i < NR_STRIPES; i++) {
		const struct stripe *s = &r->base_lock[i];
		out->nr_live += __atomic_load_n(&s->nr_live, __ATOMIC_RELAXED);
		out->bytes_live += __atomic_load_n(&s->bytes_live, __ATOMIC_RELAXED);
		out->nr_inserts += __atomic_load_n(&s->nr_inserts, __ATOMIC_RELAXED);
		out->nr_removes += __atomic_load_n(&s->nr_removes, __ATOMIC_RELAXED);
	}
	out->nr_replaced = __atomic_load_n(&r->st.nr_replaced, __ATOMIC_RELAXED);
	out->nr_nomem = __atomic_load_n(&r->st.nr_nomem, __ATOMIC_RELAXED);
}

void kvt_reg_lock_all(struct kvt_registry *r)
{
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_lock(&r->base_lock[i].lock);
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_lock(&r->idx_lock[i].lock);
}

void kvt_reg_unlock_all(struct kvt_registry *r)
{
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_unlock(&r->idx_lock[i].lock);
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_unlock(&r->base_lock[i].lock);
}
