// SPDX-License-Identifier: MIT
/* Chunk heat (contract in heat.h): the decay math, the chunk arena and the
 * range table. Hot path (touch/add/find): no malloc, no locks, no syscalls
 * beyond reading the clock. track/untrack take one short mutex (rare: one
 * per redirected allocation). The arena is never unmapped. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "heat.h"
#include "kvtier/planner.h"
#include "../base/kvt.h"

static struct kvt_heat_chunk *arena;
static uint32_t arena_used;          /* chunks handed out (bump) */
/* One bit per arena chunk, mapped behind the arena. dirty: touched since the
 * migrator last collected (set by touches, taken by kvt_heat_collect).
 * act: the migrator's working set (chunks in HBM, far chunks still hot
 * enough to promote); only the migrator thread and track() write it. */
#define BM_WORDS (KVT_HEAT_MAX_CHUNKS / 64)
static uint64_t *dirty, *act;
/* Per arena chunk: pages the driver reported prefetched out (kvt_heat_prefetched_out). */
static uint32_t *outm;
static float keep_heat;
/* the migrator's table entries carry a range slot and a chunk index */
_Static_assert(KVT_HEAT_MAX_RANGES <= 1024, "struct kvt_plan_chunk.range has 10 bits");
_Static_assert(KVT_HEAT_MAX_CHUNKS <= 1u << 20, "struct kvt_plan_chunk.tag has 20 bits");              /* far chunks below it are left out (collect) */
static uint32_t tau;
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static struct kvt_heat_range slots[KVT_HEAT_MAX_RANGES];

/* The sorted index readers search, under a seqlock (odd = being rewritten). */
static uint32_t seq;
static struct { uint64_t base, end; int32_t slot; } idx[KVT_HEAT_MAX_RANGES];
static uint32_t nr_idx;
static uint64_t lo_addr = UINT64_MAX, hi_addr;

/* ---- math ---- */

float kvt_heat_decay(float h, uint32_t dt_ms, uint32_t tau_ms)
{
	if (!tau_ms || !dt_ms || h == 0.0f)     /* 0 decays to itself: no expf */
		return h;
	if (dt_ms > 64u * tau_ms)
		return 0.0f;
	return h * expf(-(float)dt_ms / (float)tau_ms);
}

static inline uint64_t pack(float h, uint32_t t)
{
	uint32_t bits;
	memcpy(&bits, &h, 4);
	return (uint64_t)t << 32 | bits;
}

static inline void unpack(uint64_t v, float *h, uint32_t *t)
{
	uint32_t bits = (uint32_t)v;
	memcpy(h, &bits, 4);
	*t = (uint32_t)(v >> 32);
}

void kvt_heat_touch(struct kvt_heat_chunk *c, float w, uint32_t now_ms, uint32_t tau_ms)
{
	uint64_t old = __atomic_load_n(&c->hv, __ATOMIC_RELAXED), nv;
	do {
		float h;
		uint32_t t;
		unpack(old, &h, &t);
		/* a touch stamped later than now (another thread's clock read
		 * raced ours) adds without decay */
		uint32_t dt = (int32_t)(now_ms - t) > 0 ? now_ms - t : 0;
		if (h == 0.0f)          /* empty: its stamp means nothing */
			dt = 1, h = 0.0f;
		nv = pack(kvt_heat_decay(h, dt, tau_ms) + w, dt ? now_ms : t);
	} while (!__atomic_compare_exchange_n(&c->hv, &old, nv, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	/* a far chunk still colder than the promote threshold cannot change a
	 * plan: the migrator need not look at it (most touches of a big cache) */
	float h, keep;
	uint32_t t;
	unpack(nv, &h, &t);
	__atomic_load(&keep_heat, &keep, __ATOMIC_RELAXED);
	if (h >= keep ||
	    __atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM)
		kvt_heat_mark(c);
}

void kvt_heat_set_keep(float keep)
{
	__atomic_store(&keep_heat, &keep, __ATOMIC_RELAXED);
}

/* c's index in the arena; -1 for a chunk outside it (tests, tools). */
static int64_t arena_index(const struct kvt_heat_chunk *c)
{
	uintptr_t a = (uintptr_t)__atomic_load_n(&arena, __ATOMIC_ACQUIRE), p = (uintptr_t)c;
	if (!a || !c || p < a || p >= a + (uintptr_t)KVT_HEAT_MAX_CHUNKS * sizeof *arena)
		return -1;
	return (int64_t)((p - a) / sizeof *arena);
}

void kvt_heat_mark(const struct kvt_heat_chunk *c)
{
	int64_t at = arena_index(c);
	if (at < 0)
		return;
	uint32_t i = (uint32_t)at;
	uint64_t bit = 1ull << (i & 63);
	/* a plain load first: a hot chunk's bit is usually set already, and
	 * the read keeps its cache line shared among touching threads */
	if (!(__atomic_load_n(&dirty[i >> 6], __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(&dirty[i >> 6], bit, __ATOMIC_RELAXED);
}

/* The heat as stored and its age at now_ms (0 for a stamp later than now:
 * another thread's clock read raced ours). */
static inline uint32_t load_aged(const struct kvt_heat_chunk *c, uint32_t now_ms, float *h)
{
	uint32_t t;
	unpack(__atomic_load_n(&c->hv, __ATOMIC_RELAXED), h, &t);
	return (int32_t)(now_ms - t) > 0 ? now_ms - t : 0;
}

float kvt_heat_read(const struct kvt_heat_chunk *c, uint32_t now_ms, uint32_t tau_ms)
{
	float h;
	uint32_t dt = load_aged(c, now_ms, &h);
	return kvt_heat_decay(h, dt, tau_ms);
}

float kvt_heat_recency(const struct kvt_heat_chunk *c, float top, uint32_t now_ms,
		       uint32_t tau_ms)
{
	float h;
	uint32_t dt = load_aged(c, now_ms, &h);
	return h == 0.0f ? 0.0f : kvt_heat_decay(top, dt, tau_ms);
}

uint32_t kvt_heat_now_ms(void)
{
	uint32_t ms = (uint32_t)(kvt_now_ns() / 1000000u);
	return ms ? ms : 1;
}

/* ---- arena and table ---- */

int kvt_heat_init(uint32_t tau_ms)
{
	pthread_mutex_lock(&wlock);
	tau = tau_ms;
	if (!arena) {
		size_t bytes = (size_t)KVT_HEAT_MAX_CHUNKS * sizeof *arena;
		size_t len = bytes + 2 * BM_WORDS * sizeof(uint64_t) +
			     (size_t)KVT_HEAT_MAX_CHUNKS * sizeof(uint32_t);
		void *p = kvt_sys_map_own(len + KVT_HEAT_ARENA_ALIGN, MAP_NORESERVE);
		if (p != MAP_FAILED) {
			/* The working set is scattered over 16 MiB: with 4 KiB
			 * pages nearly every collect read and touch is a TLB
			 * miss. Huge pages where the system allows them (THP
			 * "madvise" or "always"; otherwise this does nothing).
			 * Aligned by hand, as older kernels do not align
			 * anonymous maps; the slack around it is never touched. */
			uintptr_t a = ((uintptr_t)p + KVT_HEAT_ARENA_ALIGN - 1) &
				      ~(uintptr_t)(KVT_HEAT_ARENA_ALIGN - 1);
			(void)kvt_sys_madvise((void *)a, len, MADV_HUGEPAGE);
			dirty = (uint64_t *)(a + bytes);
			act = dirty + BM_WORDS;
			outm = (uint32_t *)(act + BM_WORDS);
			__atomic_store_n(&arena, (struct kvt_heat_chunk *)a, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&wlock);
	return arena ? 0 : -ENOMEM;
}

uint32_t kvt_heat_tau_ms(void)
{
	return tau;
}

/* Rebuild the sorted index (insertion sort of <= 256; writers only). */
static void publish(void)
{
	__atomic_add_fetch(&seq, 1, __ATOMIC_ACQ_REL);     /* odd: readers retry */
	uint32_t n = 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (!slots[s].live)
			continue;
		uint64_t b = slots[s].base, e = b + slots[s].size;
		uint32_t j = n++;
		while (j && __atomic_load_n(&idx[j - 1].base, __ATOMIC_RELAXED) > b) {
			__atomic_store_n(&idx[j].base, idx[j - 1].base, __ATOMIC_RELAXED);
			__atomic_store_n(&idx[j].end, idx[j - 1].end, __ATOMIC_RELAXED);
			__atomic_store_n(&idx[j].slot, idx[j - 1].slot, __ATOMIC_RELAXED);
			j--;
		}
		__atomic_store_n(&idx[j].base, b, __ATOMIC_RELAXED);
		__atomic_store_n(&idx[j].end, e, __ATOMIC_RELAXED);
		__atomic_store_n(&idx[j].slot, s, __ATOMIC_RELAXED);
		lo = b < lo ? b : lo;
		hi = e > hi ? e : hi;
	}
	__atomic_store_n(&nr_idx, n, __ATOMIC_RELAXED);
	__atomic_store_n(&lo_addr, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&hi_addr, hi, __ATOMIC_RELAXED);
	__atomic_add_fetch(&seq, 1, __ATOMIC_ACQ_REL);
}

/* Set (v = 1) or clear bits [a, a+n) of a bitmap, word by word (atomics:
 * touches set dirty bits concurrently). */
static void bits_assign(uint64_t *bm, uint32_t a, uint32_t n, int v)
{
	while (n) {
		uint32_t off = a & 63, k = 64 - off < n ? 64 - off : n;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << off;
		if (v)
			__atomic_fetch_or(&bm[a >> 6], mask, __ATOMIC_RELAXED);
		else
			__atomic_fetch_and(&bm[a >> 6], ~mask, __ATOMIC_RELAXED);
		a += k;
		n -= k;
	}
}

int kvt_heat_track(uint64_t base, uint64_t size, uint8_t tier, int32_t node, int32_t dev)
{
	uint32_t nr = (uint32_t)((size + KVT_CHUNK_BYTES - 1) >> KVT_CHUNK_SHIFT);
	int r = -ENOSPC, free_slot = -1, reuse = -1;
	if (!arena || !size)
		return -ENOSPC;
	pthread_mutex_lock(&wlock);
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (slots[s].live && slots[s].base == base) {
			r = -EEXIST;
			goto out;
		}
		if (slots[s].live)
			continue;
		/* a retired slot whose chunks fit is reused first, an unused one next */
		if (slots[s].cap_chunks >= nr && (reuse < 0 || slots[s].cap_chunks < slots[reuse].cap_chunks))
			reuse = s;
		if (!slots[s].cap_chunks && free_slot < 0)
			free_slot = s;
	}
	int s = reuse;
	if (s < 0) {
		if (arena_used + nr > KVT_HEAT_MAX_CHUNKS || arena_used + nr < nr)
			goto out;
		/* no retired slot is big enough: an unused slot, else any
		 * retired one, gets fresh chunks (its old ones are abandoned:
		 * the arena is a bump allocator, bounded by KVT_HEAT_MAX_CHUNKS) */
		for (int t = 0; free_slot < 0 && t < KVT_HEAT_MAX_RANGES; t++)
			if (!slots[t].live)
				free_slot = t;
		if (free_slot < 0)
			goto out;
		s = free_slot;
		__atomic_store_n(&slots[s].first, arena_used, __ATOMIC_RELAXED);   /* slot_view */
		__atomic_store_n(&slots[s].cap_chunks, nr, __ATOMIC_RELAXED);
		arena_used += nr;
	}
	__atomic_store_n(&slots[s].nr_chunks, nr, __ATOMIC_RELAXED);      /* a reused slot may hold more (cap_chunks) */
	struct kvt_heat_chunk *c = arena + slots[s].first;
	for (uint32_t i = 0; i < nr; i++) {
		__atomic_store_n(&c[i].hv, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&c[i].moved_ms, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&c[i].tier, tier, __ATOMIC_RELAXED);
		__atomic_store_n(&c[i].flags, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&c[i].in_seq, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&outm[slots[s].first + i], 0, __ATOMIC_RELAXED);
	}
	/* a reused slot's old bits mean nothing; chunks that start in HBM are
	 * in the migrator's working set from the start */
	bits_assign(dirty, slots[s].first, slots[s].nr_chunks, 0);
	bits_assign(act, slots[s].first, slots[s].nr_chunks, tier == KVT_PLAN_TIER_HBM);
	__atomic_store_n(&slots[s].base, base, __ATOMIC_RELAXED);   /* slot_view reads both unlocked */
	__atomic_store_n(&slots[s].size, size, __ATOMIC_RELAXED);
	__atomic_store_n(&slots[s].cursor, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&slots[s].node, node, __ATOMIC_RELAXED);
	__atomic_store_n(&slots[s].dev, dev, __ATOMIC_RELAXED);
	__atomic_add_fetch(&slots[s].gen, 1, __ATOMIC_RELAXED);   /* kvt_heat_range_peek reads it unlocked */
	__atomic_store_n(&slots[s].live, 1, __ATOMIC_RELEASE);
	publish();
	r = 0;
out:
	pthread_mutex_unlock(&wlock);
	return r;
}

int kvt_heat_set_tier(uint64_t base, uint8_t tier)
{
	int r = -ENOENT;
	pthread_mutex_lock(&wlock);
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (!slots[s].live || slots[s].base != base)
			continue;
		struct kvt_heat_chunk *c = arena + slots[s].first;
		for (uint32_t i = 0; i < slots[s].nr_chunks; i++)
			__atomic_store_n(&c[i].tier, tier, __ATOMIC_RELAXED);
		/* HBM chunks are always in the working set; far ones leave it
		 * when collect finds them colder than the keep threshold */
		if (tier == KVT_PLAN_TIER_HBM)
			bits_assign(act, slots[s].first, slots[s].nr_chunks, 1);
		r = 0;
		break;
	}
	pthread_mutex_unlock(&wlock);
	return r;
}

static uint64_t nr_fault_ins, nr_refaults, nr_evicted_backs;
static uint32_t refault_window;

void kvt_heat_set_refault_window(uint32_t chunks)
{
	__atomic_store_n(&refault_window, chunks < 65535u ? (chunks ? chunks : 1) : 65535u,
			 __ATOMIC_RELAXED);
}

uint64_t kvt_heat_fault_ins(void)
{
	return __atomic_load_n(&nr_fault_ins, __ATOMIC_RELAXED);
}

uint64_t kvt_heat_evicted_backs(void)
{
	return __atomic_load_n(&nr_evicted_backs, __ATOMIC_RELAXED);
}

uint64_t kvt_heat_refaults(void)
{
	return __atomic_load_n(&nr_refaults, __ATOMIC_RELAXED);
}

/* One more strike (KVT_HEAT_F_REFAULTS, saturating) for a chunk the driver
 * evicted that came back within tau. */
static void strike(struct kvt_heat_chunk *c)
{
	uint8_t f = __atomic_load_n(&c->flags, __ATOMIC_RELAXED);
	while ((f & KVT_HEAT_F_EVICTED) && (f & KVT_HEAT_F_REFAULTS) != KVT_HEAT_F_REFAULTS &&
	       !__atomic_compare_exchange_n(&c->flags, &f, (uint8_t)(f + 1), 1,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void kvt_heat_fault_in(uint64_t addr)
{
	struct kvt_heat_chunk *c = kvt_heat_chunk_at(addr);
	if (!c || __atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM)
		return;
	uint16_t seq = (uint16_t)__atomic_add_fetch(&nr_fault_ins, 1, __ATOMIC_RELAXED);
	uint16_t last = __atomic_load_n(&c->in_seq, __ATOMIC_RELAXED);
	__atomic_store_n(&c->in_seq, seq, __ATOMIC_RELAXED);
	uint32_t now = kvt_heat_now_ms(), was = __atomic_load_n(&c->moved_ms, __ATOMIC_RELAXED);
	uint32_t t = tau ? tau : 1000, win = __atomic_load_n(&refault_window, __ATOMIC_RELAXED);
	/* a thrash: back after at least win fault-ins of other chunks since its
	 * own last one (fault traffic: independent of how fast this machine or
	 * the device runs); before the first epoch, back within tau of wall
	 * time; a chunk out for over 64 tau never (its 16-bit distance may have
	 * wrapped) */
	if (__atomic_load_n(&c->flags, __ATOMIC_RELAXED) & KVT_HEAT_F_EVICTED)
		__atomic_fetch_add(&nr_evicted_backs, 1, __ATOMIC_RELAXED);
	uint16_t dist = (uint16_t)(seq - last);
	int quick = win ? was && now - was < 64u * t && dist >= win
			: was && now - was < t;
	if (quick) {              /* back soon after its last move */
		__atomic_fetch_add(&nr_refaults, 1, __ATOMIC_RELAXED);
		strike(c);
	} else {                 /* it stayed out a while: the strikes were not thrashing */
		__atomic_fetch_and(&c->flags, (uint8_t)~KVT_HEAT_F_REFAULTS, __ATOMIC_RELAXED);
	}
	__atomic_fetch_and(&c->flags, (uint8_t)~KVT_HEAT_F_EVICTED, __ATOMIC_RELAXED);
	__atomic_store_n(&c->moved_ms, now, __ATOMIC_RELAXED);
	__atomic_store_n(&c->tier, KVT_PLAN_TIER_HBM, __ATOMIC_RELAXED);
	kvt_heat_mark(c);
}

void kvt_heat_evicted(uint64_t addr)
{
	struct kvt_heat_chunk *c = kvt_heat_chunk_at(addr);
	if (!c)
		return;
	__atomic_store_n(&c->tier, KVT_PLAN_TIER_FAR, __ATOMIC_RELAXED);
	__atomic_fetch_or(&c->flags, KVT_HEAT_F_EVICTED, __ATOMIC_RELAXED);
}

_Static_assert(KVT_CHUNK_SHIFT - KVT_HEAT_PAGE_SHIFT == 5, "a chunk's pages fill a uint32_t");

/* fn on each tracked chunk that [addr, addr + bytes) touches, with the
 * part of the range inside it, [a, e). */
static void each_chunk(uint64_t addr, uint64_t bytes,
		       void (*fn)(struct kvt_heat_chunk *c, uint64_t a, uint64_t e))
{
	uint64_t end = addr + bytes;
	if (!bytes || end < addr)
		return;
	while (addr < end) {
		uint64_t chunk_end = (addr | (KVT_CHUNK_BYTES - 1)) + 1;
		uint64_t e = end < chunk_end ? end : chunk_end;
		struct kvt_heat_chunk *c = kvt_heat_chunk_at(addr);
		if (c)
			fn(c, addr, e);
		addr = e;
	}
}

static void note_out(struct kvt_heat_chunk *c, uint64_t a, uint64_t e)
{
	int64_t i = arena_index(c);
	if (i < 0)
		return;
	unsigned p0 = (unsigned)((a & (KVT_CHUNK_BYTES - 1)) >> KVT_HEAT_PAGE_SHIFT);
	unsigned p1 = (unsigned)(((e - 1) & (KVT_CHUNK_BYTES - 1)) >> KVT_HEAT_PAGE_SHIFT);
	uint32_t m = (p1 >= 31 ? ~0u : (2u << p1) - 1) & ~((1u << p0) - 1);
	__atomic_fetch_or(&outm[i], m, __ATOMIC_RELAXED);
}

void kvt_heat_prefetched_out(uint64_t addr, uint64_t bytes)
{
	each_chunk(addr, bytes, note_out);
}

uint32_t kvt_heat_take_out(const struct kvt_heat_chunk *c)
{
	int64_t i = arena_index(c);
	if (i < 0 || !__atomic_load_n(&outm[i], __ATOMIC_RELAXED))
		return 0;
	return __atomic_exchange_n(&outm[i], 0, __ATOMIC_RELAXED);
}

static void note_in(struct kvt_heat_chunk *c, uint64_t a, uint64_t e)
{
	int whole = !(a & (KVT_CHUNK_BYTES - 1)) && !(e & (KVT_CHUNK_BYTES - 1));
	__atomic_fetch_or(&c->flags, KVT_HEAT_F_IN_SEEN | (whole ? KVT_HEAT_F_IN_WHOLE : 0),
			  __ATOMIC_RELAXED);
}

void kvt_heat_prefetched_in(uint64_t addr, uint64_t bytes)
{
	each_chunk(addr, bytes, note_in);
}

uint8_t kvt_heat_take_in(struct kvt_heat_chunk *c)
{
	const uint8_t in = KVT_HEAT_F_IN_SEEN | KVT_HEAT_F_IN_WHOLE;
	return __atomic_fetch_and(&c->flags, (uint8_t)~in, __ATOMIC_RELAXED) & in;
}

/* The slot the migrator is prefetching from (-1: none); set under wlock. */
static int pinned = -1;

int kvt_heat_untrack(uint64_t base)
{
	int r = -ENOENT, found = -1;
	pthread_mutex_lock(&wlock);
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (slots[s].live && slots[s].base == base) {
			__atomic_store_n(&slots[s].live, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&slots[s].gen, 1, __ATOMIC_RELAXED);
			publish();
			found = s;
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&wlock);
	/* a prefetch of this range in flight: the caller frees it only after */
	while (found >= 0 && __atomic_load_n(&pinned, __ATOMIC_ACQUIRE) == found)
		sched_yield();
	return r;
}

int kvt_heat_pin(int slot, uint32_t gen)
{
	int r = -ENOENT;
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES)
		return r;
	pthread_mutex_lock(&wlock);
	if (slots[slot].live && slots[slot].gen == gen) {
		__atomic_store_n(&pinned, slot, __ATOMIC_RELEASE);
		r = 0;
	}
	pthread_mutex_unlock(&wlock);
	return r;
}

void kvt_heat_unpin(void)
{
	__atomic_store_n(&pinned, -1, __ATOMIC_RELEASE);
}

void kvt_heat_reset(void)
{
	pthread_mutex_init(&wlock, NULL);
	pinned = -1;
	seq &= ~1u;          /* a fork during publish() left it odd: readers would retry forever */
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++)
		slots[s].live = 0;
	publish();
}

/* ---- lookups (lock-free) ---- */

int kvt_heat_empty(void)
{
	return __atomic_load_n(&nr_idx, __ATOMIC_RELAXED) == 0;
}

int kvt_heat_maybe(uint64_t addr)
{
	return addr >= __atomic_load_n(&lo_addr, __ATOMIC_RELAXED) &&
	       addr < __atomic_load_n(&hi_addr, __ATOMIC_RELAXED);
}

int kvt_heat_find(uint64_t addr)
{
	for (int tries = 0; tries < 4; tries++) {
		uint32_t s0 = __atomic_load_n(&seq, __ATOMIC_ACQUIRE);
		if (s0 & 1)
			continue;
		int found = -1;
		uint32_t lo = 0, hi = __atomic_load_n(&nr_idx, __ATOMIC_RELAXED);
		if (hi > KVT_HEAT_MAX_RANGES)
			hi = KVT_HEAT_MAX_RANGES;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			uint64_t b = __atomic_load_n(&idx[mid].base, __ATOMIC_RELAXED);
			if (addr < b) {
				hi = mid;
			} else if (addr >= __atomic_load_n(&idx[mid].end, __ATOMIC_RELAXED)) {
				lo = mid + 1;
			} else {
				found = __atomic_load_n(&idx[mid].slot, __ATOMIC_RELAXED);
				break;
			}
		}
#if defined(__SANITIZE_THREAD__)
		/* TSan does not model fences: an acquire-release no-op RMW orders
		 * the loads above just as well (slower, sanitizer builds only). */
		uint32_t s1 = __atomic_fetch_add(&seq, 0, __ATOMIC_ACQ_REL);
#else
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint32_t s1 = __atomic_load_n(&seq, __ATOMIC_RELAXED);
#endif
		if (s1 == s0)
			return found;
	}
	return -1;
}

int kvt_heat_range_get(int slot, struct kvt_heat_range *out)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES ||
	    !__atomic_load_n(&slots[slot].live, __ATOMIC_ACQUIRE))
		return -ENOENT;
	pthread_mutex_lock(&wlock);
	const struct kvt_heat_range *s = &slots[slot];
	/* field by field: the cursor moves without the mutex (kvt_heat_spread,
	 * on every launch that names the range), so it is read atomically */
	*out = (struct kvt_heat_range){
		.base = s->base, .size = s->size, .first = s->first, .nr_chunks = s->nr_chunks,
		.cap_chunks = s->cap_chunks, .cursor = __atomic_load_n(&s->cursor, __ATOMIC_RELAXED),
		.gen = s->gen, .node = s->node, .dev = s->dev, .live = s->live,
	};
	pthread_mutex_unlock(&wlock);
	return out->live ? 0 : -ENOENT;
}

struct kvt_heat_chunk *kvt_heat_chunks(const struct kvt_heat_range *r)
{
	return arena + r->first;
}

/* Fields of a live slot read without the mutex: base/size/first are
 * written before live is released, and a retired slot's chunks stay mapped. */
static int slot_view(int s, uint64_t *base, uint64_t *size, uint32_t *first)
{
	if (s < 0 || !__atomic_load_n(&slots[s].live, __ATOMIC_ACQUIRE))
		return -1;
	*base = __atomic_load_n(&slots[s].base, __ATOMIC_RELAXED);
	*size = __atomic_load_n(&slots[s].size, __ATOMIC_RELAXED);
	*first = __atomic_load_n(&slots[s].first, __ATOMIC_RELAXED);
	return 0;
}

int kvt_heat_range_peek(int slot, struct kvt_heat_range *out)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES)
		return -ENOENT;
	const struct kvt_heat_range *s = &slots[slot];
	if (slot_view(slot, &out->base, &out->size, &out->first))
		return -ENOENT;
	*out = (struct kvt_heat_range){
		.base = out->base, .size = out->size, .first = out->first,
		.nr_chunks = __atomic_load_n(&s->nr_chunks, __ATOMIC_RELAXED),
		.cap_chunks = __atomic_load_n(&s->cap_chunks, __ATOMIC_RELAXED),
		.gen = __atomic_load_n(&s->gen, __ATOMIC_RELAXED),
		.node = __atomic_load_n(&s->node, __ATOMIC_RELAXED),
		.dev = __atomic_load_n(&s->dev, __ATOMIC_RELAXED), .live = 1,
	};
	return 0;
}

int32_t kvt_heat_dev_at(uint64_t addr)
{
	int s = kvt_heat_find(addr);
	if (s < 0 || !__atomic_load_n(&slots[s].live, __ATOMIC_ACQUIRE))
		return -1;
	return __atomic_load_n(&slots[s].dev, __ATOMIC_RELAXED);
}

struct kvt_heat_chunk *kvt_heat_chunk_at(uint64_t addr)
{
	uint64_t base, size;
	uint32_t first;
	if (slot_view(kvt_heat_find(addr), &base, &size, &first) || addr - base >= size)
		return NULL;
	return arena + first + ((addr - base) >> KVT_CHUNK_SHIFT);
}

unsigned kvt_heat_add(uint64_t addr, uint64_t len, float w, unsigned max_chunks)
{
	uint64_t base, size;
	uint32_t first;
	if (!kvt_heat_maybe(addr) || slot_view(kvt_heat_find(addr), &base, &size, &first) ||
	    addr - base >= size)
		return 0;
	uint64_t end = len && addr + len - base < size ? addr + len - base : size;
	uint64_t a = (addr - base) >> KVT_CHUNK_SHIFT, b = (end - 1) >> KVT_CHUNK_SHIFT;
	uint32_t now = kvt_heat_now_ms();
	unsigned n = 0;
	for (uint64_t i = a; i <= b && n < max_chunks; i++, n++)
		kvt_heat_touch(&arena[first + i], w, now, tau);
	return n;
}

unsigned kvt_heat_spread(int slot, unsigned nr, float w)
{
	uint64_t base, size;
	uint32_t first;
	if (slot_view(slot, &base, &size, &first))
		return 0;
	uint32_t chunks = (uint32_t)((size + KVT_CHUNK_BYTES - 1) >> KVT_CHUNK_SHIFT);
	uint32_t at = __atomic_fetch_add(&slots[slot].cursor, nr, __ATOMIC_RELAXED);
	uint32_t now = kvt_heat_now_ms();
	if (nr > chunks)
		nr = chunks;
	for (unsigned i = 0; i < nr; i++)
		kvt_heat_touch(&arena[first + (at + i) % chunks], w, now, tau);
	return nr;
}

void kvt_heat_count_tiers(uint64_t *hbm_out, uint64_t *far_out)
{
	struct kvt_heat_range r;
	uint64_t hbm = 0, far = 0;
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (kvt_heat_range_get(s, &r))
			continue;
		struct kvt_heat_chunk *c = kvt_heat_chunks(&r);
		for (uint32_t i = 0; i < r.nr_chunks; i++) {
			if (__atomic_load_n(&c[i].tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM)
				hbm++;
			else
				far++;
		}
	}
	*hbm_out = hbm;
	*far_out = far;
}

/* ---- the migrator's view of one epoch ---- */

/* kvt_heat_read() with a small memo of decay factors: chunks touched in the
 * same millisecond share their age, and expf is most of the cost of a warm
 * chunk. The same float as kvt_heat_read() (h * the same expf). A chunk
 * whose undecayed heat is already below `floor` returns it without decay
 * (decay only lowers it; the caller drops it either way). */
#define MEMO_SLOTS 64
struct decay_memo {
	uint32_t dt[MEMO_SLOTS];
	float f[MEMO_SLOTS];
};

static float read_memo(const struct kvt_heat_chunk *c, uint32_t now_ms, uint32_t tau_ms,
		       float floor, struct decay_memo *m)
{
	float h;
	uint32_t dt = load_aged(c, now_ms, &h);
	if (!tau_ms || !dt || h == 0.0f || h < floor)
		return h;
	if (dt > 64u * tau_ms)
		return 0.0f;
	unsigned k = (dt * 2654435761u) >> 26;          /* Fibonacci hash, 6 bits */
	if (m->dt[k] != dt) {
		m->dt[k] = dt;
		m->f[k] = expf(-(float)dt / (float)tau_ms);
	}
	return h * m->f[k];
}

/* Bits of word w that belong to chunks [a, end). */
static inline uint64_t span_mask(uint32_t w, uint32_t a, uint32_t end)
{
	uint64_t m = ~0ull;
	if (w == a >> 6)
		m &= ~0ull << (a & 63);
	if (w == (end - 1) >> 6 && (end & 63))
		m &= ~0ull >> (64 - (end & 63));
	return m;
}

struct collect {
	struct kvt_plan_chunk *t;
	uint32_t cap, n, now_ms, tau_ms, prev;
	float keep;
	int have_prev;
	struct decay_memo memo;
};

/* One word of one range: emit its working-set chunks, drop far ones that
 * cooled below `keep`. Returns the word's bits to keep in the working set. */
static uint64_t collect_word(struct collect *k, uint16_t s, uint32_t first, uint32_t w,
			     uint64_t bits)
{
	/* locals: stores into the table could alias k's fields */
	struct kvt_plan_chunk *t = k->t;
	uint32_t n = k->n, cap = k->cap, prev = k->prev, now = k->now_ms, tau_ms = k->tau_ms;
	int have_prev = k->have_prev;
	const float keep = k->keep;
	uint64_t keep_bits = bits;
	while (bits) {
		unsigned b = (unsigned)__builtin_ctzll(bits);
		bits &= bits - 1;
		uint32_t i = (w << 6) + b;
		const struct kvt_heat_chunk *c = arena + i;
		uint8_t tier = __atomic_load_n(&c->tier, __ATOMIC_RELAXED);
		int hbm = tier == KVT_PLAN_TIER_HBM;
		float h = read_memo(c, now, tau_ms, hbm ? 0.0f : keep, &k->memo);
		if (!hbm && !(h >= keep)) {
			keep_bits &= ~(1ull << b);     /* back when touched above it */
			continue;
		}
		if (n == cap)                          /* stays in the set for later */
			continue;
		t[n++] = (struct kvt_plan_chunk){
			.heat = h,
			.moved_ms = __atomic_load_n(&c->moved_ms, __ATOMIC_RELAXED),
			.range = s,
			.tier = tier,
			.flags = have_prev && i == prev + 1 ? 0 : KVT_PLAN_F_GAP,
			.tag = i - first,
		};
		prev = i;
		have_prev = 1;
	}
	k->n = n;
	k->prev = prev;
	k->have_prev = have_prev;
	return keep_bits;
}

#define PREFETCH_WORDS 8      /* ~20 chunks ahead at a 4 % working set (4: ~8 % slower collect) */

/* Process one word's bits and update its working-set bits (atomics: a
 * neighbouring range's track() may share the word). */
static void settle(struct collect *k, uint16_t s, uint32_t first, uint32_t w, uint64_t bits,
		   uint64_t was)
{
	uint64_t now_bits = collect_word(k, s, first, w, bits);
	if (now_bits & ~was)
		__atomic_fetch_or(&act[w], now_bits & ~was, __ATOMIC_RELAXED);
	if (was & ~now_bits)
		__atomic_fetch_and(&act[w], ~(was & ~now_bits), __ATOMIC_RELAXED);
}

uint32_t kvt_heat_collect(struct kvt_plan_chunk *t, uint32_t cap, uint32_t now_ms,
			  struct kvt_heat_range *ranges, int32_t dev)
{
	float keep;
	__atomic_load(&keep_heat, &keep, __ATOMIC_RELAXED);
	static __thread struct collect k;     /* the memo is 512 B: not on a small stack */
	k = (struct collect){ .t = t, .cap = cap, .now_ms = now_ms, .tau_ms = tau, .keep = keep };
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		ranges[s].live = 0;
		if (kvt_heat_range_get(s, &ranges[s]) || !ranges[s].nr_chunks ||
		    (dev >= 0 && ranges[s].dev != dev))
			continue;
		uint32_t a = ranges[s].first, end = a + ranges[s].nr_chunks;
		k.have_prev = 0;
		for (uint32_t w = a >> 6; w <= (end - 1) >> 6; w++) {
			/* the working set is scattered over the arena: prefetch
			 * the chunks PREFETCH_WORDS words ahead (a guess from
			 * their bits: it only costs a load if wrong) */
			uint32_t pw = w + PREFETCH_WORDS;
			if (pw <= (end - 1) >> 6) {
				uint64_t pb = (__atomic_load_n(&act[pw], __ATOMIC_RELAXED) |
					       __atomic_load_n(&dirty[pw], __ATOMIC_RELAXED)) &
					      span_mask(pw, a, end);
				for (; pb; pb &= pb - 1)
					__builtin_prefetch(arena + (pw << 6) + __builtin_ctzll(pb));
			}
			uint64_t mask = span_mask(w, a, end);
			uint64_t d = __atomic_load_n(&dirty[w], __ATOMIC_RELAXED) & mask;
			if (d)                                 /* take this range's bits */
				d &= __atomic_fetch_and(&dirty[w], ~d, __ATOMIC_RELAXED);
			uint64_t was = __atomic_load_n(&act[w], __ATOMIC_RELAXED) & mask;
			/* keep <= 0: every far chunk qualifies, touched or not */
			uint64_t bits = keep > 0.0f ? was | d : mask;
			if (bits)
				settle(&k, (uint16_t)s, a, w, bits, was);
		}
	}
	return k.n;
}

unsigned kvt_heat_devices(int32_t *out, unsigned cap)
{
	int32_t all[KVT_HEAT_MAX_RANGES];      /* distinct, ascending */
	unsigned n = 0;
	pthread_mutex_lock(&wlock);
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		if (!slots[s].live)
			continue;
		int32_t d = slots[s].dev;
		unsigned i = 0;
		while (i < n && all[i] < d)
			i++;
		if (i < n && all[i] == d)
			continue;
		memmove(all + i + 1, all + i, (n - i) * sizeof all[0]);
		all[i] = d;
		n++;
	}
	pthread_mutex_unlock(&wlock);
	if (cap)
		memcpy(out, all, (n < cap ? n : cap) * sizeof all[0]);
	return n;
}
