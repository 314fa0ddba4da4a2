// SPDX-License-Identifier: MIT
/* Large heap blocks: malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc and free, wrapped (the allocator behind
 * them is whatever the process has: glibc's, or another preloaded one).
 *
 * glibc serves a block of more than 32 MiB (the ceiling of its mmap
 * threshold) with an anonymous map of its own, made by an internal call that
 * the mmap hook never sees. llama.cpp's CPU KV buffer (posix_memalign) and
 * PyTorch's CPU tensors are such blocks. A block of at least
 * KVT_HEAP_MIN_BYTES is therefore handled as an anonymous map: kind mmap,
 * api the call that made it. The rules decide; the pages that hold the block
 * are bound (those already touched are moved); free() and realloc() give
 * them back to the default policy before the allocator reuses or unmaps them.
 * Smaller blocks pass straight through: one compare on the way in, one
 * relaxed load on the way out.
 *
 * The live blocks are in a small open-addressing table that free() reads
 * without a lock (a sequence count makes a read that overlapped a change
 * retry); changes take a mutex. A block that is not in the table is never
 * touched, so a block made before kvtier started, or past the table's
 * room, simply stays native.
 *
 * Resolving the next definitions (dlsym) may itself allocate; while a thread
 * resolves, its allocations come from a small static arena, never freed,
 * and its frees wait until the resolution is done. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "../base/kvt.h"
#include "fork.h"
#include "guard.h"
#include "record.h"
#include "../place/place.h"
#include "../profiler/trace.h"

#ifndef MPOL_DEFAULT
#define MPOL_DEFAULT 0
#endif

#define KVT_HEAP_MIN_BYTES (32ull << 20)

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void *(*valloc_fn)(size_t);

/* glibc's own entry points: the last resort when dlsym finds no next. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);

static struct {
	malloc_fn malloc;
	calloc_fn calloc;
	realloc_fn realloc;
	free_fn free;
	posix_memalign_fn posix_memalign;
	memalign_fn aligned_alloc, memalign;
	valloc_fn valloc;
} next;

/* ---- resolving, and the arena that serves it ---- */

static KVT_TLS int resolving;
static _Alignas(4096) char arena[256 << 10];
static size_t arena_used;

KVT_NO_SANITIZE static int in_arena(const void *p)
{
	return (const char *)p >= arena && (const char *)p < arena + sizeof arena;
}

/* 16 bytes before each block hold its size (realloc copies that much). */
KVT_NO_SANITIZE static void *arena_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	if (align > 4096 || n > sizeof arena)
		return NULL;
	size_t old = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), start, end;
	do {
		start = (old + 16 + align - 1) & ~(align - 1);
		end = start + n;
		if (end > sizeof arena)
			return NULL;
	} while (!__atomic_compare_exchange_n(&arena_used, &old, end, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcpy(arena + start - 16, &n, sizeof n);
	return arena + start;           /* zero: never handed out before */
}

KVT_NO_SANITIZE static size_t arena_size(const void *p)
{
	size_t n;
	memcpy(&n, (const char *)p - 16, sizeof n);
	return n;
}

KVT_NO_SANITIZE static int glibc_posix_memalign(void **out, size_t align, size_t n);

/* Frees that arrive while this thread resolves: dlsym frees the error text a
 * failed lookup left (glibc does so at the start of every dlsym), and
 * resolving free() again there would never end. They are done after. */
static KVT_TLS void *deferred[16];
static KVT_TLS unsigned nr_deferred;

/* All the next definitions at once, the first time any is needed. */
KVT_NO_SANITIZE static void resolve_all(void)
{
	const struct { void **slot; const char *name; void *fallback; } want[] = {
		{ (void **)&next.malloc, "malloc", (void *)__libc_malloc },
		{ (void **)&next.calloc, "calloc", (void *)__libc_calloc },
		{ (void **)&next.realloc, "realloc", (void *)__libc_realloc },
		{ (void **)&next.free, "free", (void *)__libc_free },
		{ (void **)&next.posix_memalign, "posix_memalign", (void *)glibc_posix_memalign },
		{ (void **)&next.aligned_alloc, "aligned_alloc", (void *)__libc_memalign },
		{ (void **)&next.memalign, "memalign", (void *)__libc_memalign },
		{ (void **)&next.valloc, "valloc", (void *)__libc_valloc },
	};
	resolving++;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		if (__atomic_load_n(want[i].slot, __ATOMIC_ACQUIRE))
			continue;
		void *f = kvt_real_dlsym(RTLD_NEXT, want[i].name);
		__atomic_store_n(want[i].slot, f ? f : want[i].fallback, __ATOMIC_RELEASE);
	}
	resolving--;
	while (nr_deferred)
		next.free(deferred[--nr_deferred]);
}

#define NEXT(fn) \
	(KVT_LIKELY(__atomic_load_n(&next.fn, __ATOMIC_ACQUIRE) != NULL) \
		 ? __atomic_load_n(&next.fn, __ATOMIC_ACQUIRE) : (resolve_all(), next.fn))

KVT_NO_SANITIZE static int glibc_posix_memalign(void **out, size_t align, size_t n)
{
	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

/* ---- the live blocks ---- */

#define SLOTS 512u                      /* a power of two */
#define MAX_LIVE (SLOTS / 2)

static uintptr_t slot_addr[SLOTS];
static uint64_t slot_size[SLOTS];
static unsigned nr_live;                /* read on every free */
static unsigned seq;                    /* odd while a change is under way */
/* changes take kvt_heap_lock (preload/fork.c, which keeps it across fork) */

static unsigned home(uintptr_t p)
{
	return (unsigned)(((uint64_t)p * 0x9e3779b97f4a7c15ull) >> 40) & (SLOTS - 1);
}

/* Under the lock, or a read that seq validates. SLOTS when absent. */
KVT_NO_SANITIZE static unsigned find_slot(uintptr_t p)
{
	for (unsigned i = home(p), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
		uintptr_t v = __atomic_load_n(&slot_addr[i], __ATOMIC_ACQUIRE);
		if (v == p)
			return i;
		if (!v)
			break;
	}
	return SLOTS;
}

/* Lock-free: is p a live block? */
KVT_NO_SANITIZE static int tracked(uintptr_t p)
{
	for (;;) {
		unsigned s = __atomic_load_n(&seq, __ATOMIC_ACQUIRE);
		if (s & 1)
			continue;
		unsigned i = find_slot(p);     /* acquire loads: seq is read after them */
		if (__atomic_load_n(&seq, __ATOMIC_RELAXED) == s)
			return i < SLOTS;
	}
}

/* A change: seq odd, the slots stored with release (a read that sees one
 * new value then sees seq changed), seq even again. No fences: ThreadSanitizer
 * does not model them. */
static void change_begin(void)
{
	__atomic_store_n(&seq, seq + 1, __ATOMIC_RELAXED);
}

static void change_end(void)
{
	__atomic_store_n(&seq, seq + 1, __ATOMIC_RELEASE);
}

/* Under the lock. Removal shifts later entries of the run back, so a read
 * never needs tombstones. */
static void slot_remove(unsigned i)
{
	unsigned j = i;
	for (;;) {
		__atomic_store_n(&slot_addr[i], 0, __ATOMIC_RELEASE);
		for (;;) {
			j = (j + 1) & (SLOTS - 1);
			uintptr_t v = slot_addr[j];
			if (!v)
				return;
			unsigned h = home(v);
			/* v may move to i when its home is not in (i, j] */
			if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
				break;
		}
		__atomic_store_n(&slot_addr[i], slot_addr[j], __ATOMIC_RELEASE);
		slot_size[i] = slot_size[j];
		i = j;
	}
}

/* ---- a block's pages ---- */

/* Every page that holds a byte of the block. For glibc these are exactly
 * the block's own map (its header shares the first page); with another
 * allocator an end page may be shared with a neighbour, which then follows
 * the block's policy: a policy moves pages, never changes their bytes. */
static void block_pages(uintptr_t p, uint64_t n, void **lo, uint64_t *len)
{
	uint64_t pg = kvt_page_bytes();
	uint64_t a = (uint64_t)p & ~(pg - 1), b = ((uint64_t)p + n + pg - 1) & ~(pg - 1);
	*lo = (void *)(uintptr_t)a;
	*len = b - a;
}

static int is_tracked_mmap(const struct kvt_alloc *a)
{
	return a->kind == KVT_KIND_MMAP;
}

/* Whether large blocks matter now: traced, or some rule places maps. */
static int heap_watched(void)
{
	return __atomic_load_n(&kvt_started, __ATOMIC_RELAXED) &&
	       (kvt_trace_active() || kvt_place_kind_placeable(KVT_KIND_MMAP));
}

/* A block of n >= KVT_HEAP_MIN_BYTES was just made at p by api. */
KVT_NO_SANITIZE static void heap_made(void *p, uint64_t n, uint64_t align, uint16_t api)
{
	if (!p || !heap_watched() || !kvt_hook_enter())
		return;
	uintptr_t a = (uintptr_t)p;
	struct kvt_alloc seen;
	pthread_mutex_lock(&kvt_heap_lock);
	unsigned i = find_slot(a);
	if (i < SLOTS) {
		/* still listed: the block there was released by a path kvtier
		 * does not wrap; its record goes */
		kvt_reg_carve(kvt_mem_reg, a, slot_size[i], is_tracked_mmap);
		change_begin();
		slot_remove(i);
		nr_live--;
		change_end();
	}
	/* Inside a map kvtier already saw (an allocator that maps through the
	 * hooked mmap): that map's record and placement stand. */
	int inside = !kvt_reg_find(kvt_mem_reg, a, &seen);
	int room = nr_live < MAX_LIVE;
	if (!inside && room) {
		unsigned j = home(a);
		while (slot_addr[j])
			j = (j + 1) & (SLOTS - 1);
		change_begin();
		slot_size[j] = n;
		__atomic_store_n(&slot_addr[j], a, __ATOMIC_RELEASE);
		__atomic_store_n(&nr_live, nr_live + 1, __ATOMIC_RELAXED);
		change_end();
	}
	pthread_mutex_unlock(&kvt_heap_lock);
	if (inside || !room) {
		if (!room)
			kvt_warn_once("more than %u heap blocks of %llu MiB or more are live; "
				      "later ones stay native and untraced", MAX_LIVE,
				      KVT_HEAP_MIN_BYTES >> 20);
		kvt_hook_exit();
		return;
	}
	struct kvt_place pl;
	void *lo;
	uint64_t len;
	kvt_place_decide(KVT_KIND_MMAP, n, &pl);
	if (pl.placement != KVT_PLACE_NATIVE) {
		block_pages(a, n, &lo, &len);
		if (kvt_place_bind(lo, len, &pl, 1))
			pl.placement = KVT_PLACE_NATIVE;
	}
	kvt_rec_alloc_placed(kvt_mem_reg, KVT_KIND_MMAP, api, 1, (uint64_t)a, n, align, 0, &pl);
	kvt_place_commit(&pl, (uint64_t)a, n);
	kvt_hook_exit();
}

/* p is about to be released by api: if it is a live block, it leaves the
 * table and the registry and its pages get the default policy back.
 * Returns its size, 0 when p is not a live block. */
KVT_NO_SANITIZE static uint64_t heap_release(void *p, uint16_t api)
{
	uintptr_t a = (uintptr_t)p;
	if (!tracked(a))
		return 0;
	pthread_mutex_lock(&kvt_heap_lock);
	unsigned i = find_slot(a);
	uint64_t n = i < SLOTS ? slot_size[i] : 0;
	if (i < SLOTS) {
		change_begin();
		slot_remove(i);
		__atomic_store_n(&nr_live, nr_live - 1, __ATOMIC_RELAXED);
		change_end();
	}
	pthread_mutex_unlock(&kvt_heap_lock);
	if (!n)
		return 0;
	void *lo;
	uint64_t len;
	block_pages(a, n, &lo, &len);
	kvt_sys_mbind(lo, len, MPOL_DEFAULT, NULL, 0, 0);
	/* The record must go whatever the guard says (the address will be
	 * reused); recording allocates nothing. */
	kvt_tls.depth++;
	struct kvt_alloc rec;
	int was = kvt_mem_reg && !kvt_rec_free_begin(kvt_mem_reg, (uint64_t)a, &rec);
	if (kvt_mem_reg)
		kvt_rec_free_end(kvt_mem_reg, KVT_KIND_MMAP, api, was, &rec, (uint64_t)a, 1, 0);
	kvt_tls.depth--;
	return n;
}

/* ---- the entry points ---- */

/* A call passed straight on is a tail call, so the allocator behind sees
 * its caller's return address, not kvtier's: LeakSanitizer knows the
 * dynamic linker's own allocations by that caller, and an allocator's
 * profiler attributes by it. GCC makes sibling calls from -O2; the
 * sanitizer builds are -O1. */
#if defined(__GNUC__) && !defined(__clang__)
#define KVT_TAIL_CALLS __attribute__((optimize("optimize-sibling-calls")))
#else
#define KVT_TAIL_CALLS
#endif
#define KVT_HEAP_ENTRY KVT_EXPORT KVT_NO_SANITIZE KVT_TAIL_CALLS

KVT_HEAP_ENTRY void *malloc(size_t n)
{
	if (KVT_UNLIKELY(resolving))
		return arena_alloc(n, 16);
	malloc_fn f = NEXT(malloc);
	if (KVT_LIKELY(n < KVT_HEAP_MIN_BYTES))
		return f(n);
	void *p = f(n);
	heap_made(p, n, 0, KVT_API_malloc);
	return p;
}

KVT_HEAP_ENTRY void *calloc(size_t nmemb, size_t size)
{
	size_t n;
	int over = __builtin_mul_overflow(nmemb, size, &n);
	if (KVT_UNLIKELY(resolving))
		return over ? NULL : arena_alloc(n, 16);
	calloc_fn f = NEXT(calloc);
	if (KVT_LIKELY(over || n < KVT_HEAP_MIN_BYTES))
		return f(nmemb, size);
	void *p = f(nmemb, size);
	heap_made(p, n, 0, KVT_API_calloc);
	return p;
}

KVT_HEAP_ENTRY void free(void *p)
{
	if (KVT_UNLIKELY(in_arena(p)))
		return;
	if (KVT_UNLIKELY(resolving)) {
		if (p && nr_deferred < sizeof deferred / sizeof deferred[0])
			deferred[nr_deferred++] = p;        /* else it leaks: never seen */
		return;
	}
	if (KVT_UNLIKELY(__atomic_load_n(&nr_live, __ATOMIC_RELAXED) != 0) && p)
		heap_release(p, KVT_API_free);
	NEXT(free)(p);
}

KVT_HEAP_ENTRY void *realloc(void *p, size_t n)
{
	if (KVT_UNLIKELY(resolving && p && !in_arena(p)))   /* not seen in practice */
		return (next.realloc ? next.realloc : __libc_realloc)(p, n);
	if (KVT_UNLIKELY(in_arena(p) || resolving)) {
		void *q = resolving ? arena_alloc(n, 16) : malloc(n);
		if (q && p) {
			size_t had = arena_size(p);
			memcpy(q, p, had < n ? had : n);
		}
		return q;
	}
	realloc_fn f = NEXT(realloc);
	if (KVT_LIKELY(__atomic_load_n(&nr_live, __ATOMIC_RELAXED) == 0 && n < KVT_HEAP_MIN_BYTES))
		return f(p, n);
	uint64_t had = p ? heap_release(p, KVT_API_realloc) : 0;
	void *q = f(p, n);
	if (KVT_UNLIKELY(!q && had && n))          /* failed: p is still the block */
		heap_made(p, had, 0, KVT_API_realloc);
	else if (KVT_UNLIKELY(n >= KVT_HEAP_MIN_BYTES))
		heap_made(q, n, 0, KVT_API_realloc);
	return q;
}

KVT_HEAP_ENTRY void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, n);
}

KVT_HEAP_ENTRY int posix_memalign(void **out, size_t align, size_t n)
{
	if (KVT_UNLIKELY(resolving)) {
		void *p = arena_alloc(n, align);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	posix_memalign_fn f = NEXT(posix_memalign);
	if (KVT_LIKELY(n < KVT_HEAP_MIN_BYTES))
		return f(out, align, n);
	int r = f(out, align, n);
	if (r == 0)
		heap_made(*out, n, align, KVT_API_posix_memalign);
	return r;
}

/* aligned_alloc, memalign, valloc: ALIGN, N -> p */
#define ALIGNED_ENTRY(fn, type, api, args, align_of)                      \
	KVT_HEAP_ENTRY void *fn args                                       \
	{                                                                  \
		if (KVT_UNLIKELY(resolving))                               \
			return arena_alloc(n, align_of);                   \
		type f = NEXT(fn);                                         \
		if (KVT_LIKELY(n < KVT_HEAP_MIN_BYTES))                    \
			return ALIGNED_CALL_##fn;                          \
		void *p = ALIGNED_CALL_##fn;                               \
		heap_made(p, n, align_of, api);                            \
		return p;                                                  \
	}
#define ALIGNED_CALL_aligned_alloc f(align, n)
#define ALIGNED_CALL_memalign f(align, n)
#define ALIGNED_CALL_valloc f(n)
ALIGNED_ENTRY(aligned_alloc, memalign_fn, KVT_API_aligned_alloc, (size_t align, size_t n), align)
ALIGNED_ENTRY(memalign, memalign_fn, KVT_API_memalign, (size_t align, size_t n), align)
ALIGNED_ENTRY(valloc, valloc_fn, KVT_API_valloc, (size_t n), 4096)
