// SPDX-License-Identifier: MIT
/* Unwinding for the trace's call sites and the placement's site rules
 * (contract in unwind.h): libunwind behind a fork gate, and on x86-64 a
 * per-thread cache of stacks filled by libgcc's unwinder. Runs inside
 * hooks: no malloc, no locks; the cache's pages come from the raw mmap. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <unwind.h>

#include "../base/kvt.h"
#include "trace.h"
#include "unwind.h"

/* ---- unwinding across fork() ----
 * libunwind holds a process-wide lock while it steps (its global cache of
 * register states). A fork() while another thread is inside it leaves the
 * child with that lock held by a thread that does not exist there, and the
 * child's first call site waits forever (seen with gdb in a fork child of
 * tests/progs/rt_migr_faults: pthread_mutex_lock inside _ULx86_64_step,
 * under kvt_trace_callsite from its first mmap). So every unwind passes a
 * gate: it counts itself in (a counter per tid shard, so threads do not
 * share a cache line), and fork_prepare closes the gate and waits until
 * no other thread is inside. The forking thread's own unwinds (a signal
 * handler that forks mid-unwind) are not waited for: it exists in the
 * child. Unwinds that arrive while the gate is closed wait for the fork,
 * as the registry's stripe locks already make every recording hook do. */
#define UNWIND_SHARDS 16
static struct { _Alignas(64) int n; } unwinding[UNWIND_SHARDS];
static int unwind_gate_closed;
static KVT_TLS int my_unwinds;

static int *unwind_shard(void)
{
	return &unwinding[(unsigned)kvt_gettid() % UNWIND_SHARDS].n;
}

static void unwind_enter(void)
{
	int *c = unwind_shard();
	my_unwinds++;
	for (;;) {
		__atomic_fetch_add(c, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&unwind_gate_closed, __ATOMIC_SEQ_CST))
			return;
		__atomic_fetch_sub(c, 1, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&unwind_gate_closed, __ATOMIC_ACQUIRE))
			sched_yield();
	}
}

static void unwind_exit(void)
{
	__atomic_fetch_sub(unwind_shard(), 1, __ATOMIC_RELEASE);
	my_unwinds--;
}

/* fork_prepare: close the gate, wait until only this thread's own unwinds
 * (if any) are inside libunwind. */
void kvt_unwind_gate_close(void)
{
	__atomic_store_n(&unwind_gate_closed, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		int inside = 0;
		for (unsigned i = 0; i < UNWIND_SHARDS; i++)
			inside += __atomic_load_n(&unwinding[i].n, __ATOMIC_SEQ_CST);
		if (inside <= my_unwinds)
			return;
		sched_yield();
	}
}

void kvt_unwind_gate_open(void)
{
	__atomic_store_n(&unwind_gate_closed, 0, __ATOMIC_RELEASE);
}

/* The stack, innermost first. libunwind's fast path keeps a per-thread
 * cache whose destructor runs after ThreadSanitizer has retired the thread
 * (TSan then crashes in its own bookkeeping), so TSan builds take the
 * step-by-step walk, which keeps no per-thread state. */
static int unwind_ips(void **ip, int max)
{
#if defined(__SANITIZE_THREAD__)
	unw_context_t uc;
	unw_cursor_t cur;
	int n = 0;
	if (unw_getcontext(&uc) || unw_init_local(&cur, &uc))
		return 0;
	while (n < max && unw_step(&cur) > 0) {
		unw_word_t pc;
		if (unw_get_reg(&cur, UNW_REG_IP, &pc))
			break;
		ip[n++] = (void *)(uintptr_t)pc;
	}
	return n;
#else
	return unw_backtrace(ip, max);
#endif
}

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define STACK_CACHE 1
/* ---- the stack cache (x86-64) ----
 * A hook called again from where it was called before finds its stack
 * here instead of unwinding it. An entry is the walker's frame address
 * (`base`), and for each frame the return address the unwind found and
 * the stack slot it was read from (on x86-64, 8 bytes below the callee's
 * CFA). It is used only when every one of those slots still holds its
 * return address: the walk from the same frame through the same return
 * addresses is the same walk, but for a frame whose size changes at one
 * address (alloca, realignment) and that left the old return address in
 * the old place (docs/trace-format.md, "Native frames"). A walk that
 * passes a frame whose return address is not in that slot (a signal
 * frame) is not kept. The slots lie between this frame and the outermost
 * one the entry's thread had on this same stack.
 *
 * Per thread, 4 entries, no locks, in a page of its own (mapped at the
 * thread's first call site, unmapped by a key destructor at its exit:
 * static TLS this size would keep libkvtier from being dlopen()ed). A
 * signal handler that arrives during a fill unwinds as before. Not under
 * ThreadSanitizer, which never sees these pages come and go. */
#define UC_WAYS 4
#define UC_FRAMES 48                 /* KVTIER_STACK_DEPTH 32 + kvtier's own */
struct uc_entry {
	uintptr_t base;
	uint16_t n, max;
	uint32_t off[UC_FRAMES];     /* slot of ip[k], from base */
	void *ip[UC_FRAMES];
	/* the stack id these frames got (no Python frames): valid while
	 * memo_gen is the trace's stack generation, for memo_depth frames */
	uint32_t memo_id, memo_gen, memo_depth;
};
/* Fills cost 10 to 30 unwinds (3 to 11 us for 40 frames here): a thread
 * starts with 8 and earns one per 256 stacks asked for, up to 8 kept, so
 * a thread whose stacks never repeat pays for a fill per 256 unwinds at
 * most (a few per cent). */
#define UC_CREDIT_MAX 8
#define UC_EARN 256
struct uc_cache {
	struct uc_entry ent[UC_WAYS];
	unsigned next, busy, earn;
	int credit;
	uint64_t hits, misses;
};
#define UC_BYTES ((sizeof(struct uc_cache) + 4095) & ~(size_t)4095)
#define UC_GONE ((struct uc_cache *)1)   /* this thread's key destructor ran */
static KVT_TLS struct uc_cache *uc_mine;
static pthread_key_t uc_key;

/* libgcc's unwinder, from libgcc_s itself: libunwind exports functions of
 * the same names, built on its slow step (0.7 us a frame here). */
static _Unwind_Reason_Code (*gcc_backtrace)(_Unwind_Trace_Fn, void *);
static _Unwind_Ptr (*gcc_get_ip)(struct _Unwind_Context *);
static _Unwind_Word (*gcc_get_cfa)(struct _Unwind_Context *);

static void uc_release(void *p)
{
	uc_mine = UC_GONE;
	kvt_sys_munmap(p, UC_BYTES);
}

void kvt_trace_stack_cache_setup(void)
{
	if (__atomic_load_n(&gcc_backtrace, __ATOMIC_ACQUIRE))
		return;
	void *h = kvt_dl_open("libgcc_s.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = kvt_dl_open("libgcc_s.so.1", RTLD_LAZY);
	if (!h || pthread_key_create(&uc_key, uc_release))
		return;                      /* no cache: every stack unwound */
	gcc_get_ip = (_Unwind_Ptr (*)(struct _Unwind_Context *))kvt_real_dlsym(h, "_Unwind_GetIP");
	gcc_get_cfa = (_Unwind_Word (*)(struct _Unwind_Context *))kvt_real_dlsym(h, "_Unwind_GetCFA");
	void *bt = kvt_real_dlsym(h, "_Unwind_Backtrace");
	if (gcc_get_ip && gcc_get_cfa && bt)
		__atomic_store_n(&gcc_backtrace, (_Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *))bt,
				 __ATOMIC_RELEASE);
}

/* This thread's cache, made at its first call site; NULL: none (no
 * libgcc, no memory, or the thread is exiting). */
static struct uc_cache *uc_get(void)
{
	struct uc_cache *c = uc_mine;
	if (KVT_LIKELY(c && c != UC_GONE))
		return c;
	if (c == UC_GONE || !__atomic_load_n(&gcc_backtrace, __ATOMIC_ACQUIRE))
		return NULL;
	c = kvt_sys_mmap(NULL, UC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		uc_mine = UC_GONE;
		return NULL;
	}
	c->credit = UC_CREDIT_MAX;
	if (pthread_setspecific(uc_key, c)) {
		kvt_sys_munmap(c, UC_BYTES);
		uc_mine = UC_GONE;
		return NULL;
	}
	uc_mine = c;
	return c;
}

/* A walk that also notes the slots, by libgcc's unwinder, which gives
 * each frame's CFA (libunwind's fast walk does not). Frames from the
 * caller of the walker whose frame is `base`. */
struct noting {
	void **ip;
	struct uc_entry *e;
	uintptr_t base;
	int n, max, keep;
};

static __attribute__((no_sanitize_address)) _Unwind_Reason_Code
note_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct noting *w = arg;
	uintptr_t pc = gcc_get_ip(ctx), slot = gcc_get_cfa(ctx) - 8;
	if (!pc || w->n >= w->max)           /* the outermost frame's caller: none */
		return _URC_END_OF_STACK;
	if (slot < w->base)                  /* the walker's own frames */
		return _URC_NO_REASON;
	/* the return address must be where the call put it (not so in a
	 * signal frame) */
	if (slot - w->base > UINT32_MAX || *(const uintptr_t *)slot != pc)
		w->keep = 0;
	else {
		w->e->off[w->n] = (uint32_t)(slot - w->base);
		w->e->ip[w->n] = (void *)pc;
	}
	w->ip[w->n++] = (void *)pc;
	return _URC_NO_REASON;
}

static __attribute__((noinline)) int walk_noting(void **ip, int max, uintptr_t base,
						 struct uc_entry *e)
{
	struct noting w = { .ip = ip, .e = e, .base = base, .max = max, .keep = 1 };
	unwind_enter();
	gcc_backtrace(note_frame, &w);
	unwind_exit();
	if (w.keep && w.n > 0) {
		e->base = base;
		e->max = (uint16_t)max;
		e->memo_gen = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);   /* a handler sees it whole or not */
		e->n = (uint16_t)w.n;
	}
	return w.n;
}

static void uc_earn_one(struct uc_cache *c)
{
	if (++c->earn == UC_EARN) {
		c->earn = 0;
		if (c->credit < UC_CREDIT_MAX)
			c->credit++;
	}
}

static int plain_walk(void **ip, int max)
{
	unwind_enter();
	int n = unwind_ips(ip, max);
	unwind_exit();
	return n;
}

static __attribute__((noinline, no_sanitize_address)) int cached_walk(void **ip, int max,
									void **hit)
{
	uintptr_t base = (uintptr_t)__builtin_frame_address(0);
	struct uc_cache *c = uc_get();
	if (!c || c->busy || max <= 0 || max > UC_FRAMES)
		return plain_walk(ip, max);  /* no cache, inside a fill (a signal), deep */
	for (unsigned w = 0; w < UC_WAYS; w++) {
		const struct uc_entry *e = &c->ent[w];
		unsigned n = e->n, k = 0;
		if (!n || e->base != base || e->max != max)
			continue;
		for (; k < n; k++) {
			void *v = e->ip[k];
			if (*(void *const volatile *)(base + e->off[k]) != v)
				break;
			ip[k] = v;
		}
		if (k < n)
			continue;
		c->hits++;
		uc_earn_one(c);
		*hit = (void *)e;
		return (int)n;
	}
	c->misses++;
	if (c->credit <= 0) {
		uc_earn_one(c);
		return plain_walk(ip, max);
	}
	c->credit--;
	struct uc_entry *e = &c->ent[c->next++ % UC_WAYS];
	e->n = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	c->busy++;
	int n = walk_noting(ip, max, base, e);
	c->busy--;
	return n;
}

void kvt_trace_stack_cache_counts(uint64_t *hits, uint64_t *misses)
{
	struct uc_cache *c = uc_mine;
	int have = c && c != UC_GONE;
	*hits = have ? c->hits : 0;
	*misses = have ? c->misses : 0;
}
#else
void kvt_trace_stack_cache_setup(void)
{
}

void kvt_trace_stack_cache_counts(uint64_t *hits, uint64_t *misses)
{
	*hits = *misses = 0;
}
#endif

int kvt_unwind(void **ip, int max, void **hit)
{
	*hit = NULL;
#if STACK_CACHE
	return cached_walk(ip, max, hit);
#else
	unwind_enter();
	int n = unwind_ips(ip, max);
	unwind_exit();
	return n;
#endif
}

static int backtrace_ips(void **ip, int max)
{
	void *hit;
	return kvt_unwind(ip, max, &hit);
}

void kvt_unwind_init(void)
{
	void *ip[4];
	unwind_enter();
	unwind_ips(ip, 4);
	unwind_exit();
}

/* An entry's stack id for `depth` frames and no Python frames, in stack
 * generation gen (0: none kept), and keeping one. */
uint32_t kvt_unwind_memo(void *hit, int depth, uint32_t gen)
{
#if STACK_CACHE
	const struct uc_entry *e = hit;
	if (e && e->memo_gen == gen && e->memo_depth == (uint32_t)depth)
		return e->memo_id;
#endif
	(void)hit;
	(void)depth;
	(void)gen;
	return 0;
}

void kvt_unwind_memo_keep(void *hit, int depth, uint32_t gen, uint32_t id)
{
#if STACK_CACHE
	struct uc_entry *e = hit;
	if (e && id) {
		e->memo_id = id;
		e->memo_depth = (uint32_t)depth;
		e->memo_gen = gen;
	}
#endif
	(void)hit;
	(void)depth;
	(void)gen;
	(void)id;
}


int kvt_trace_stack_raw(void **ip, int max)
{
	return backtrace_ips(ip, max);
}

int kvt_backtrace(void **ip, int max)
{
	void *raw[KVT_TRACE_MAX_FRAMES + 8];
	if (max > (int)KVT_TRACE_MAX_FRAMES)
		max = KVT_TRACE_MAX_FRAMES;
	int n = backtrace_ips(raw, max + 8), skip = 0;
	while (skip < n && kvt_self_contains(raw[skip]))
		skip++;
	n -= skip;
	if (n > max)
		n = max;
	for (int i = 0; i < n; i++)
		ip[i] = raw[skip + i];
	return n > 0 ? n : 0;
}

