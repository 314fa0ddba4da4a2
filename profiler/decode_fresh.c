// SPDX-License-Identifier: MIT
/* Dead blocks (contract in decode.h, "Dead blocks"): which bytes of which
 * KV tensor a fresh block id owns, known only from the server's own
 * kernels, and the dead ranges a step's fresh ids give.
 *
 * The cache-write decoder follows vLLM's reshape_and_cache_flash
 * (csrc/cache_kernels.cu; the parameter layout the vllm personas launch:
 * key, value, key_cache, value_cache, slot_mapping, block_stride,
 * page_stride, head_stride, key_stride, value_stride, num_heads,
 * head_size, block_size, k_scale, v_scale): block id i of key_cache (and
 * of value_cache) is the block_stride elements from element i *
 * block_stride, the element as wide as the cache type of the template
 * instance (bf16 or half: 2 bytes; others are not read).
 *
 * What is learned is written once: a KV tensor or a slot mapping seen
 * again with other values is never used again (its stride, link or block
 * size changed: nothing about it is certain any more). A tensor whose
 * range was freed and tracked again is not used until a cache write names
 * it again (another allocation may sit at that address). Two KV tensors in
 * one tracked range whose bases are not a whole number of blocks apart
 * (K and V of a block interleaved) are never used either: a block's
 * stride there would reach into the next block's other half. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "decode.h"
#include "heat.h"
#include "../base/kvt.h"

#define LD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define ST(x, v)  __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

struct kv {
	uint64_t base;              /* atomic: key, 0 = free */
	uint64_t stride;            /* atomic: bytes a block; 0 = not to be used */
	uint64_t slots;             /* the slot mapping it is written through */
	uint32_t bs;                /* tokens a block */
	int32_t heat;               /* the heat slot of its range at insertion */
	uint32_t gen;               /* atomic: that slot's generation when a cache write last named it */
};

struct link {
	uint64_t slots;             /* atomic: key, 0 = free */
	uint64_t dst;               /* atomic: the table it is computed from; 0 = not to be used */
	uint32_t bs;
};

static struct kv kv[KVT_DEAD_KV];
static struct link links[KVT_DEAD_LINKS];
static struct {
	uint64_t fresh, dead, dead_bytes, kv_known, dropped;
} st;                               /* atomic */

struct deadbuf {
	uint32_t n;
	uint64_t addr[KVT_DEAD_RANGES], bytes[KVT_DEAD_RANGES];
};
static __thread struct deadbuf *dead;

static uint32_t hash(uint64_t a)
{
	a ^= a >> 29;
	a *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(a >> 40);
}

void kvt_decode_link_slots(uint64_t slots, uint64_t dst, uint32_t block_size)
{
	if (!slots || !dst || !block_size)
		return;
	for (unsigned i = 0; i < KVT_DEAD_LINKS; i++) {
		struct link *l = &links[i];
		uint64_t key = LD(l->slots);
		if (!key) {
			uint64_t none = 0;
			if (__atomic_compare_exchange_n(&l->slots, &none, slots, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				l->bs = block_size;
				ST(l->dst, dst);        /* published: usable from here */
				return;
			}
			key = none;                 /* another thread took it */
		}
		if (key != slots)
			continue;
		if (LD(l->dst) != dst || l->bs != block_size)
			ST(l->dst, 0);              /* linked otherwise now: never used again */
		return;
	}
}

/* The table slots is computed from, with its block size; 0 when none. */
static uint64_t link_of(uint64_t slots, uint32_t *bs)
{
	for (unsigned i = 0; i < KVT_DEAD_LINKS; i++)
		if (LD(links[i].slots) == slots) {
			*bs = links[i].bs;
			return LD(links[i].dst);
		}
	return 0;
}

int kvt_decode_slots_table(uint64_t dst, uint32_t *bs)
{
	for (unsigned i = 0; i < KVT_DEAD_LINKS; i++)
		if (LD(links[i].slots) && LD(links[i].dst) == dst) {
			*bs = links[i].bs;
			return 1;
		}
	return 0;
}

/* The tensors already known in heat slot h whose base is not a whole
 * number of blocks from e's: e and they are never used. */
static void interleaved(struct kv *e)
{
	uint64_t s = LD(e->stride);
	for (unsigned i = 0; i < KVT_DEAD_KV && s; i++) {
		struct kv *o = &kv[i];
		uint64_t ob = LD(o->base), os = LD(o->stride);
		if (!ob || o == e || o->heat != e->heat || !os)
			continue;
		uint64_t d = ob > e->base ? ob - e->base : e->base - ob;
		if (os != s || d % s) {
			ST(o->stride, 0);
			ST(e->stride, 0);
			s = 0;
		}
	}
}

void kvt_decode_kv_write(uint64_t base, uint64_t stride, uint64_t slots, uint32_t block_size)
{
	if (!base || !stride || !slots || !block_size)
		return;
	for (uint32_t p = 0, h = hash(base); p < KVT_DEAD_KV; p++) {
		struct kv *e = &kv[(h + p) & (KVT_DEAD_KV - 1)];
		uint64_t key = LD(e->base);
		if (!key) {
			int hs = kvt_heat_find(base);
			struct kvt_heat_range r;
			if (hs < 0 || kvt_heat_range_peek(hs, &r))
				return;                     /* not KV kvtier tracks */
			uint64_t none = 0;
			if (__atomic_compare_exchange_n(&e->base, &none, base, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				e->heat = hs;
				ST(e->gen, r.gen);
				e->slots = slots;
				e->bs = block_size;
				ST(e->stride, stride);  /* published: usable from here */
				ADD(st.kv_known, 1);
				interleaved(e);
				return;
			}
			key = none;
		}
		if (key != base)
			continue;
		if (LD(e->stride) != stride || e->slots != slots || e->bs != block_size) {
			ST(e->stride, 0);
			return;
		}
		/* each launch names it: the range's generation first (one slot
		 * read), the range lookup only when the slot was tracked anew */
		struct kvt_heat_range r;
		if (!kvt_heat_range_peek(e->heat, &r) && LD(e->gen) == r.gen)
			return;
		if (kvt_heat_find(base) != e->heat)
			ST(e->stride, 0);
		else if (!kvt_heat_range_peek(e->heat, &r))
			ST(e->gen, r.gen);          /* the same facts on a range tracked anew */
		return;
	}
}

/* Whether e's range is still the one a cache write last named (a range
 * freed and tracked again holds other data until one names it again). */
static int current(const struct kv *e, struct kvt_heat_range *r)
{
	return !kvt_heat_range_peek(e->heat, r) && r->gen == LD(e->gen);
}

uint64_t kvt_decode_kv_stride(uint64_t base, uint64_t dst)
{
	if (!base || !dst)
		return 0;
	for (uint32_t p = 0, h = hash(base); p < KVT_DEAD_KV; p++) {
		const struct kv *e = &kv[(h + p) & (KVT_DEAD_KV - 1)];
		uint64_t key = LD(e->base);
		if (!key)
			return 0;
		if (key != base)
			continue;
		uint64_t stride = LD(e->stride);
		uint32_t bs = 0;
		struct kvt_heat_range r;
		return stride && current(e, &r) && link_of(e->slots, &bs) == dst && bs == e->bs
		       ? stride : 0;
	}
	return 0;
}

static struct deadbuf *buf(void)
{
	if (!dead) {
		void *p = kvt_sys_map_own(sizeof *dead, MAP_NORESERVE);
		if (p == MAP_FAILED)
			return NULL;
		dead = p;
	}
	return dead;
}

/* ids sorted ascending (shell sort: no malloc, n is a step's fresh ids),
 * duplicates and negative ids dropped; the count left. */
static uint32_t sort_ids(int32_t *ids, uint32_t n)
{
	static const uint32_t gaps[] = { 701, 301, 132, 57, 23, 10, 4, 1 };
	for (unsigned g = 0; g < sizeof gaps / sizeof gaps[0]; g++)
		for (uint32_t i = gaps[g]; i < n; i++) {
			int32_t v = ids[i];
			uint32_t j = i;
			for (; j >= gaps[g] && ids[j - gaps[g]] > v; j -= gaps[g])
				ids[j] = ids[j - gaps[g]];
			ids[j] = v;
		}
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] >= 0 && (!k || ids[i] != ids[k - 1]))
			ids[k++] = ids[i];
	return k;
}

/* The dead ranges of tensor e for the sorted ids, into d. */
static void ranges(struct deadbuf *d, const struct kv *e, uint64_t stride, const int32_t *ids,
		   uint32_t n)
{
	struct kvt_heat_range r;
	if (!current(e, &r) || e->base < r.base || e->base >= r.base + r.size)
		return;                             /* untracked since: nothing to drop */
	uint64_t room = (r.base + r.size - e->base) / stride;   /* blocks inside the range */
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i + 1;
		while (j < n && ids[j] == ids[j - 1] + 1)
			j++;
		uint64_t id0 = (uint64_t)ids[i], id1 = (uint64_t)ids[j - 1] + 1;
		i = j;
		if (id1 > room)
			continue;
		uint64_t lo = e->base + id0 * stride, hi = e->base + id1 * stride;
		lo = (lo + KVT_DEAD_ALIGN - 1) & ~(uint64_t)(KVT_DEAD_ALIGN - 1);
		hi &= ~(uint64_t)(KVT_DEAD_ALIGN - 1);
		if (hi <= lo)
			continue;
		if (d->n && d->addr[d->n - 1] + d->bytes[d->n - 1] == lo) {
			d->bytes[d->n - 1] += hi - lo;
		} else if (d->n < KVT_DEAD_RANGES) {
			d->addr[d->n] = lo;
			d->bytes[d->n++] = hi - lo;
		} else {
			ADD(st.dropped, 1);
			continue;
		}
		ADD(st.dead_bytes, hi - lo);
	}
}

void kvt_decode_fresh(uint64_t dst, int32_t *ids, uint32_t n)
{
	if (!dst || !n)
		return;
	ADD(st.fresh, n);
	struct deadbuf *d = buf();
	if (!d)
		return;
	uint32_t before = d->n;
	n = sort_ids(ids, n);
	for (unsigned i = 0; i < KVT_DEAD_KV; i++) {
		struct kv *e = &kv[i];
		uint64_t stride = LD(e->stride);
		uint32_t bs = 0;
		if (!LD(e->base) || !stride || link_of(e->slots, &bs) != dst || bs != e->bs)
			continue;
		ranges(d, e, stride, ids, n);
	}
	ADD(st.dead, d->n - before);
}

uint32_t kvt_decode_take_dead(const uint64_t **addr, const uint64_t **bytes)
{
	struct deadbuf *d = dead;
	if (!d || !d->n)
		return 0;
	uint32_t n = d->n;
	d->n = 0;
	*addr = d->addr;
	*bytes = d->bytes;
	return n;
}

void kvt_decode_dead_info(struct kvt_decode_info *out)
{
	out->fresh = LD(st.fresh);
	out->dead = LD(st.dead);
	out->dead_bytes = LD(st.dead_bytes);
	out->kv_known = LD(st.kv_known);
}

static void forget(void)
{
	for (unsigned i = 0; i < KVT_DEAD_KV; i++) {
		ST(kv[i].stride, 0);
		ST(kv[i].base, 0);
	}
	for (unsigned i = 0; i < KVT_DEAD_LINKS; i++) {
		ST(links[i].dst, 0);
		ST(links[i].slots, 0);
	}
}

void kvt_decode_dead_reset(void)
{
	forget();
	memset(&st, 0, sizeof st);
	if (dead)
		dead->n = 0;
}

/* ---- the cache-write decoder ---- */

#define CACHE_FLASH "_Z30reshape_and_cache_flash_kernelI"

/* The instances whose cache type is 2 bytes: scalar bf16 or half, cache
 * type the same (S0_). */
static int accept16(const char *name)
{
	const char *t = name + strlen(CACHE_FLASH);
	return !strncmp(t, "13__nv_bfloat16S0_", 18) || !strncmp(t, "6__halfS0_", 10);
}

/* reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping,
 * block_stride, page_stride, head_stride, key_stride, value_stride,
 * num_heads, head_size, block_size, k_scale, v_scale). */
static int cache_launch(const uint64_t *p, unsigned gx, uint64_t stream)
{
	(void)stream;
	int64_t block_stride, page_stride;
	memcpy(&block_stride, &p[5], 8);
	memcpy(&page_stride, &p[6], 8);
	int32_t bs = (int32_t)(uint32_t)p[12];
	if (!gx)
		return 0;
	if (block_stride <= 0 || page_stride <= 0 || bs <= 0 || block_stride < page_stride ||
	    block_stride > (1ll << 40) / 2)
		return -1;
	uint64_t bytes = (uint64_t)block_stride * 2;
	kvt_decode_kv_write(p[2], bytes, p[4], (uint32_t)bs);
	kvt_decode_kv_write(p[3], bytes, p[4], (uint32_t)bs);
	return 0;
}

const struct kvt_decoder kvt_dec_vllm_cache_flash = {
	.name = "vllm_cache_flash",
	.kernel = CACHE_FLASH,
	.follows = "vLLM csrc/cache_kernels.cu reshape_and_cache_flash (bf16/half cache)",
	.nparams = 15,
	.four = 1u << 10 | 1u << 11 | 1u << 12,
	.prefix = 1,
	.accept = accept16,
	.launch = cache_launch,
	.reset = forget,
};
