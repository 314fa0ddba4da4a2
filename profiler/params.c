// SPDX-License-Identifier: MIT
/* Kernel parameter layouts (contract in params.h): an open-addressing table
 * of CUfunction -> layout, filled on a function's first scanned launch and
 * read by every later one. Runs inside hooks: no malloc, no locks; a slot
 * is published under a sequence count (odd while it is written), so a
 * reader never uses a half-written layout: it falls back for that launch.
 * A layout records "none" too (the driver could not say), so the driver is
 * asked about a function once per generation; kvt_param_layouts_forget()
 * starts a new one. */
#include <string.h>

#include "params.h"

#define SLOTS   4096            /* functions kept (power of 2): 384 KiB */
#define PROBES  16              /* slots looked at from a function's hash */

#define META_READY  1u          /* the slot's layout is written */
#define META_NONE   2u          /* the driver could not say: no layout */
#define PACKED      (KVT_PARAM_MAX / 8)   /* words bytes packed 8 to a uint64 */

/* A layout as stored: the words of parameter i in byte i % 8 of
 * words[i / 8], the 4-byte scalars' bits in four. */
struct packed {
	uint64_t words[PACKED];
	uint64_t four;
};

struct slot {
	uint64_t func;              /* key, 0 = free; set once, never cleared */
	uint32_t seq;               /* odd while the slot is (re)written */
	uint32_t gen;               /* generation it was written in */
	uint32_t meta;              /* META_* | nr << 8 */
	uint32_t pad;
	struct packed lay;
};

static struct slot table[SLOTS];
static int (*info_fn)(uint64_t func, unsigned i, size_t *size);
static uint32_t generation = 1;
static uint64_t nr_kept, nr_full;

void kvt_prof_set_param_info(int (*fn)(uint64_t func, unsigned i, size_t *size))
{
	__atomic_store_n(&info_fn, fn, __ATOMIC_RELEASE);
}

void kvt_param_layouts_forget(void)
{
	__atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
}

uint64_t kvt_param_layouts_kept(void) { return __atomic_load_n(&nr_kept, __ATOMIC_RELAXED); }
uint64_t kvt_param_layouts_full(void) { return __atomic_load_n(&nr_full, __ATOMIC_RELAXED); }

static uint32_t hash(uint64_t func)
{
	func ^= func >> 29;
	func *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(func >> 32);
}

/* Ask the driver: META_READY | nr << 8 with *lay, or META_NONE. */
static uint32_t ask(uint64_t func, struct packed *lay)
{
	int (*fn)(uint64_t, unsigned, size_t *) = __atomic_load_n(&info_fn, __ATOMIC_ACQUIRE);
	unsigned i;
	memset(lay, 0, sizeof *lay);
	if (!fn)
		return META_NONE;
	for (i = 0; i < KVT_PARAM_MAX; i++) {
		size_t size = 0;
		int r = fn(func, i, &size);
		if (r < 0)
			return META_NONE;
		if (r > 0)
			break;
		uint64_t w = size / 8 < KVT_PARAM_WORDS ? size / 8 : KVT_PARAM_WORDS;
		if (size == 4) {
			w = 0;
			lay->four |= 1ull << i;    /* a 4-byte scalar: a stride, a count */
		}
		lay->words[i / 8] |= w << (8 * (i % 8));
	}
	/* no parameter at all: as likely a handle the query misreads (a
	 * CUkernel) as a kernel without arguments; the old reads are safe */
	return i ? META_READY | i << 8 : META_NONE;
}

static int decode(uint32_t meta, const struct packed *lay, struct kvt_param_layout *out)
{
	if (!(meta & META_READY))
		return 0;
	out->nr = meta >> 8;
	out->four = lay->four;
	for (unsigned i = 0; i < KVT_PARAM_MAX; i++)
		out->words[i] = i < out->nr ? (uint8_t)(lay->words[i / 8] >> (8 * (i % 8))) : 0;
	return 1;
}

/* Write the slot (its func already set) if no other thread is. */
static void publish(struct slot *s, uint32_t gen, uint32_t meta, const struct packed *lay)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	if ((seq & 1) || !__atomic_compare_exchange_n(&s->seq, &seq, seq + 1, 0,
						      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	/* release stores, not a fence (TSan has no fences): a reader that
	 * sees any new field with its acquire load then sees seq moved on */
	__atomic_store_n(&s->gen, gen, __ATOMIC_RELEASE);
	__atomic_store_n(&s->meta, meta, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < PACKED; i++)
		__atomic_store_n(&s->lay.words[i], lay->words[i], __ATOMIC_RELEASE);
	__atomic_store_n(&s->lay.four, lay->four, __ATOMIC_RELEASE);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* A consistent read of a slot: 1 (fresh: *meta, *lay), 0 (stale or
 * never written), -1 (being written now). */
static int read_slot(struct slot *s, uint32_t gen, uint32_t *meta, struct packed *lay)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	if (seq & 1)
		return -1;
	/* acquire loads: the second read of seq cannot move above them */
	uint32_t g = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
	*meta = __atomic_load_n(&s->meta, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < PACKED; i++)
		lay->words[i] = __atomic_load_n(&s->lay.words[i], __ATOMIC_ACQUIRE);
	lay->four = __atomic_load_n(&s->lay.four, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != seq)
		return -1;
	return g == gen && *meta ? 1 : 0;
}

int kvt_param_layout(uint64_t func, struct kvt_param_layout *out)
{
	uint32_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE), meta;
	struct packed lay;
	if (!func)
		return 0;
	for (uint32_t p = 0, h = hash(func); p < PROBES; p++) {
		struct slot *s = &table[(h + p) & (SLOTS - 1)];
		uint64_t key = __atomic_load_n(&s->func, __ATOMIC_ACQUIRE);
		if (!key) {
			uint64_t free_key = 0;
			if (!__atomic_compare_exchange_n(&s->func, &free_key, func, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
			    free_key != func)
				continue;          /* another function took it */
			key = func;
			if (free_key != func)
				__atomic_add_fetch(&nr_kept, 1, __ATOMIC_RELAXED);
		}
		if (key != func)
			continue;
		int r = read_slot(s, gen, &meta, &lay);
		if (r < 0)
			return 0;                  /* being written: the old reads, this once */
		if (!r) {
			meta = ask(func, &lay);
			publish(s, gen, meta, &lay);
		}
		return decode(meta, &lay, out);
	}
	__atomic_add_fetch(&nr_full, 1, __ATOMIC_RELAXED);
	return 0;
}
