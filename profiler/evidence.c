// SPDX-License-Identifier: MIT
/* Evidence sources (contract in evidence.h): the operations table, the
 * launch-parameter scan and the copy/memset ranges. Runs inside hooks: no
 * malloc, no locks, no stdio; every read of application memory whose
 * validity kvtier cannot know goes through process_vm_readv (a bad address
 * is an error return, never a fault).
 *
 * What the launch scan can see: kernelParams[i] points to argument i, and
 * without cuFuncGetParamInfo kvtier does not know how many there are, so it
 * reads up to KVT_LAUNCH_SLOTS slots and 8 bytes behind each (stopping at the
 * first unreadable one). A value inside a tracked range is allocation-level
 * evidence (the kernel was handed that tensor): KVT_LAUNCH_SPREAD of its
 * chunks are credited, round-robin. A value that is not tracked but looks
 * like a user-space pointer is followed once: a KVT_LAUNCH_WINDOW-byte window
 * behind it (rotating over KVT_LAUNCH_SPAN bytes) is scanned for 8-byte
 * values inside tracked ranges, each an exact chunk; a value followed by a
 * plausible length (pointer, size pairs) credits that span. It cannot see:
 * addresses computed inside the kernel (a block table's indices, offsets
 * from a base), device-side pointer arrays, arguments passed by value in
 * structs wider than the window, or `extra`-packed parameters. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "evidence.h"
#include "heat.h"

static unsigned enabled;
static uint64_t nr_events[KVT_SRC__COUNT];
static const char *state[KVT_SRC__COUNT];
static uint32_t window_turn;
static void (*kick_fn)(void);
static unsigned kick_every;
static uint32_t nr_launch_hits;

void kvt_prof_set_kick(void (*fn)(void), unsigned every)
{
	kick_every = every;
	__atomic_store_n(&kick_fn, fn, __ATOMIC_RELEASE);
}

/* ---- the launch scan ---- */

static size_t read_self(void *dst, uint64_t src, size_t len)
{
	struct iovec l = { dst, len }, r = { (void *)(uintptr_t)src, len };
	long n = syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L);
	return n > 0 ? (size_t)n : 0;
}

/* val[i] = the 8 bytes at slot[i], for the first n slots, in one system
 * call (one remote iovec each); the kernel stops at the first unreadable
 * one. Returns how many were read. */
static unsigned read_slots(uint64_t *val, const uint64_t *slot, unsigned n)
{
	struct iovec l = { val, (size_t)n * 8 }, r[KVT_LAUNCH_SLOTS];
	for (unsigned i = 0; i < n; i++)
		r[i] = (struct iovec){ (void *)(uintptr_t)slot[i], 8 };
	if (!n)
		return 0;
	long got = syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, r, (long)n, 0L);
	return got > 0 ? (unsigned)(got / 8) : 0;
}

static int user_pointer(uint64_t v)
{
	return v >= 65536 && v < (1ull << 47) && !(v & 7);
}

/* Exact-address evidence from a window of 8-byte words. */
static unsigned scan_window(const uint64_t *w, unsigned nr_words, unsigned budget, float weight)
{
	unsigned credited = 0;
	for (unsigned i = 0; i < nr_words && credited < budget; i++) {
		if (!kvt_heat_maybe(w[i]))
			continue;
		uint64_t len = i + 1 < nr_words && w[i + 1] && w[i + 1] < (1ull << 40) ? w[i + 1] : 1;
		unsigned n = kvt_heat_add(w[i], len, weight, budget - credited);
		if (!n && len > 1)
			n = kvt_heat_add(w[i], 1, weight, 1);
		credited += n;
		i += n && len > 1;         /* the length word is not a pointer */
	}
	return credited;
}

static void launch_scan(void **params)
{
	uint64_t slot[KVT_LAUNCH_SLOTS], val[KVT_LAUNCH_SLOTS];
	uint64_t win[KVT_LAUNCH_WINDOW / 8];
	/* nothing redirected yet: skip the parameter reads (system calls) that
	 * could only find nothing; most launches of most processes end here */
	if (!params || kvt_heat_empty())
		return;
	/* one launch in KVT_LAUNCH_SAMPLE per thread is scanned on average,
	 * its evidence weighing that many: the reads are system calls (~1 us
	 * each here), and a decode step makes hundreds of launches.  The gap
	 * to the next scanned launch is drawn from 0..2*SAMPLE-2 (mean
	 * SAMPLE-1), not fixed: a server's launches repeat with a period (the
	 * kernels of one layer, the layers of one step), and a fixed stride
	 * that divides it would scan the same kernel of the same layer every
	 * time and never see the others.  A thread's first launch is scanned. */
	static __thread uint32_t skip, rng;
	if (skip) {
		skip--;
		return;
	}
	if (!rng)
		rng = (uint32_t)(uintptr_t)&rng ^ 0x9e3779b9u;
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	skip = rng % (2 * KVT_LAUNCH_SAMPLE - 1);
	const float weight = (float)KVT_LAUNCH_SAMPLE;
	size_t got = read_self(slot, (uint64_t)(uintptr_t)params, sizeof slot) / 8;
	unsigned nr = 0, credited = 0, followed = 0;
	while (nr < got && user_pointer(slot[nr]))
		nr++;
	nr = read_slots(val, slot, nr);
	for (unsigned i = 0; i < nr && credited < KVT_LAUNCH_MAX_CHUNKS; i++) {
		int s = kvt_heat_maybe(val[i]) ? kvt_heat_find(val[i]) : -1;
		if (s >= 0) {
			credited += kvt_heat_spread(s, KVT_LAUNCH_SPREAD, weight);
			continue;
		}
		if (followed >= KVT_LAUNCH_FOLLOW || !user_pointer(val[i]))
			continue;
		followed++;
		uint32_t turn = __atomic_fetch_add(&window_turn, 1, __ATOMIC_RELAXED);
		uint64_t off = (uint64_t)(turn % (KVT_LAUNCH_SPAN / KVT_LAUNCH_WINDOW)) * KVT_LAUNCH_WINDOW;
		size_t n = read_self(win, val[i] + off, sizeof win);
		if (!n && off)
			n = read_self(win, val[i], sizeof win);
		credited += scan_window(win, (unsigned)(n / 8), KVT_LAUNCH_MAX_CHUNKS - credited, weight);
	}
	kvt_prof_count(KVT_SRC_LAUNCH, credited);
	void (*kick)(void) = __atomic_load_n(&kick_fn, __ATOMIC_ACQUIRE);
	if (credited && kick && kick_every &&
	    __atomic_add_fetch(&nr_launch_hits, KVT_LAUNCH_SAMPLE, __ATOMIC_RELAXED) % kick_every <
		    KVT_LAUNCH_SAMPLE)
		kick();
}

/* ---- copies and memsets: exact byte ranges ---- */

static void copy_ranges(uint64_t dst, uint64_t src, uint64_t bytes)
{
	unsigned n = kvt_heat_add(dst, bytes, 1.0f, KVT_COPY_MAX_CHUNKS);
	n += kvt_heat_add(src, bytes, 1.0f, KVT_COPY_MAX_CHUNKS);
	kvt_prof_count(KVT_SRC_COPY, n);
}

static void memset_range(uint64_t dst, uint64_t bytes)
{
	kvt_prof_count(KVT_SRC_COPY, kvt_heat_add(dst, bytes, 1.0f, KVT_COPY_MAX_CHUNKS));
}

/* ---- the table ---- */

static const struct kvt_prof_source_ops src_launch = {
	.name = "launch",
	.on_launch = launch_scan,
};

static const struct kvt_prof_source_ops src_copy = {
	.name = "copy",
	.on_copy = copy_ranges,
	.on_memset = memset_range,
};

static const struct kvt_prof_source_ops *const sources[KVT_SRC__COUNT] = {
	[KVT_SRC_LAUNCH] = &src_launch,
	[KVT_SRC_COPY] = &src_copy,
	[KVT_SRC_CUPTI] = &kvt_src_cupti,
	[KVT_SRC_SAMPLE] = &kvt_src_sample,    /* after cupti: it needs cupti started */
};

int kvt_prof_sources_parse(const char *list, unsigned *mask, char *bad, unsigned bad_len)
{
	unsigned m = 0;
	const char *p = list;
	while (*p) {
		size_t n = strcspn(p, ",");
		unsigned s;
		for (s = 0; s < KVT_SRC__COUNT; s++)
			if (strlen(sources[s]->name) == n && !strncmp(p, sources[s]->name, n))
				break;
		if (s == KVT_SRC__COUNT && n) {
			if (bad && bad_len) {
				size_t k = n < bad_len - 1 ? n : bad_len - 1;
				memcpy(bad, p, k);
				bad[k] = 0;
			}
			return -EINVAL;
		}
		if (n)
			m |= 1u << s;
		p += n;
		if (*p == ',')
			p++;
	}
	*mask = m;
	return 0;
}

void kvt_prof_sources_enable(unsigned mask)
{
	__atomic_store_n(&enabled, mask, __ATOMIC_RELEASE);
}

unsigned kvt_prof_sources_enabled(void)
{
	return __atomic_load_n(&enabled, __ATOMIC_ACQUIRE);
}

#define EACH_ENABLED(s, op) \
	for (unsigned s = 0; s < KVT_SRC__COUNT; s++) \
		if ((kvt_prof_sources_enabled() & (1u << s)) && sources[s]->op)

void kvt_prof_on_launch(void **params)
{
	EACH_ENABLED(s, on_launch)
		sources[s]->on_launch(params);
}

void kvt_prof_on_copy(uint64_t dst, uint64_t src, uint64_t bytes)
{
	EACH_ENABLED(s, on_copy)
		sources[s]->on_copy(dst, src, bytes);
}

void kvt_prof_on_memset(uint64_t dst, uint64_t bytes)
{
	EACH_ENABLED(s, on_memset)
		sources[s]->on_memset(dst, bytes);
}

void kvt_prof_on_fault(uint64_t addr)
{
	EACH_ENABLED(s, on_fault)
		sources[s]->on_fault(addr);
}

void kvt_prof_sources_start(void)
{
	EACH_ENABLED(s, start) {
		if (sources[s]->start())
			__atomic_and_fetch(&enabled, ~(1u << s), __ATOMIC_ACQ_REL);
	}
	for (unsigned s = 0; s < KVT_SRC__COUNT; s++)
		if (!state[s])
			kvt_prof_set_state(s, (kvt_prof_sources_enabled() & (1u << s)) ? "active" : "off");
}

void kvt_prof_sources_poll(void)
{
	EACH_ENABLED(s, poll)
		sources[s]->poll();
}

void kvt_prof_sources_stop(void)
{
	EACH_ENABLED(s, stop)
		sources[s]->stop();
}

const char *kvt_prof_source_name(unsigned src)
{
	return src < KVT_SRC__COUNT ? sources[src]->name : "?";
}

uint64_t kvt_prof_events(unsigned src)
{
	return src < KVT_SRC__COUNT ? __atomic_load_n(&nr_events[src], __ATOMIC_RELAXED) : 0;
}

void kvt_prof_count(unsigned src, uint64_t n)
{
	if (n && src < KVT_SRC__COUNT)
		__atomic_fetch_add(&nr_events[src], n, __ATOMIC_RELAXED);
}

const char *kvt_prof_source_state(unsigned src)
{
	const char *s = src < KVT_SRC__COUNT ? __atomic_load_n(&state[src], __ATOMIC_ACQUIRE) : NULL;
	return s ? s : "off";
}

void kvt_prof_set_state(unsigned src, const char *st)
{
	if (src < KVT_SRC__COUNT)
		__atomic_store_n(&state[src], st, __ATOMIC_RELEASE);
}
