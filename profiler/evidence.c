// SPDX-License-Identifier: MIT
/* Evidence sources (contract in evidence.h): the operations table, the
 * launch-parameter scan and the copy/memset ranges. Runs inside hooks: no
 * malloc, no locks of its own (the device test it is handed looks in the
 * registry, whose striped locks are never held across a call), no stdio;
 * every read of application memory whose validity kvtier cannot know goes
 * through process_vm_readv (a bad address is an error return, never a
 * fault).
 *
 * What the launch scan can see: kernelParams[i] points to argument i. With
 * the function's layout (cuFuncGetParamInfo, asked once per function:
 * params.h) the scan knows how many there are and their sizes, and reads
 * every 8-byte word of each (up to KVT_PARAM_WORDS) with plain loads: the
 * driver has just read the same bytes. Without one (a driver before 12.4, a
 * handle it does not know) it reads up to KVT_LAUNCH_SLOTS slots and 8 bytes
 * behind each through process_vm_readv (stopping at the first unreadable
 * one). A launch naming nothing tracked and no host pointer to follow ends
 * there, with no driver call. A value inside a tracked range is allocation-level
 * evidence (the kernel was handed that tensor): KVT_LAUNCH_SPREAD of its
 * chunks are credited, round-robin. A value that is not tracked but looks
 * like a user-space pointer is followed once: a KVT_LAUNCH_WINDOW-byte window
 * behind it (rotating over KVT_LAUNCH_SPAN bytes) is scanned for 8-byte
 * values inside tracked ranges, each an exact chunk; a value followed by a
 * plausible length (pointer, size pairs) credits that span. A value inside
 * device memory the application allocated (kvt_prof_set_device_test) is
 * never followed: host code cannot read it on a discrete GPU, and where it
 * could (a coherent platform) the read would cross the link; it still
 * counts against KVT_LAUNCH_FOLLOW, so a launch costs at most that many
 * lookups. Managed memory (where redirected KV lives) is followed. It
 * cannot see: addresses computed inside the kernel (a block table's
 * indices, offsets from a base), device-side pointer arrays, arguments
 * passed by value in structs wider than the window, or `extra`-packed
 * parameters. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "decode.h"
#include "evclass.h"
#include "evidence.h"
#include "heat.h"
#include "params.h"
#include "tables.h"
#include "../base/kvt.h"

static unsigned enabled;
static uint64_t nr_events[KVT_SRC__COUNT];
static const char *state[KVT_SRC__COUNT];
static uint32_t window_turn;
static void (*kick_fn)(void);
static unsigned kick_every;
static uint32_t nr_launch_hits;
static int left;                 /* kvt_prof_leave(): no CUPTI or driver call from here on */
static int (*capturing_fn)(uint64_t stream);
static int (*device_fn)(uint64_t addr);

void kvt_prof_leave(void)
{
	__atomic_store_n(&left, 1, __ATOMIC_RELEASE);
}

int kvt_prof_left(void)
{
	return __atomic_load_n(&left, __ATOMIC_ACQUIRE);
}

void kvt_prof_set_capturing(int (*fn)(uint64_t stream))
{
	__atomic_store_n(&capturing_fn, fn, __ATOMIC_RELEASE);
}

void kvt_prof_set_device_test(int (*fn)(uint64_t addr))
{
	__atomic_store_n(&device_fn, fn, __ATOMIC_RELEASE);
}

void kvt_prof_set_kick(void (*fn)(void), unsigned every)
{
	kick_every = every;
	__atomic_store_n(&kick_fn, fn, __ATOMIC_RELEASE);
}

/* ---- the launch scan ---- */

size_t kvt_prof_read_self(void *dst, uint64_t src, size_t len)
{
	struct iovec l = { dst, len }, r = { (void *)(uintptr_t)src, len };
	ssize_t n = kvt_sys_process_vm_readv(getpid(), &l, 1, &r, 1);
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
	ssize_t got = kvt_sys_process_vm_readv(getpid(), &l, 1, r, n);
	return got > 0 ? (unsigned)(got / 8) : 0;
}

static int user_pointer(uint64_t v)
{
	return v >= 65536 && v < (1ull << 47) && !(v & 7);
}

int kvt_prof_device_memory(uint64_t addr)
{
	int (*on_device)(uint64_t) = __atomic_load_n(&device_fn, __ATOMIC_ACQUIRE);
	return on_device ? on_device(addr) != 0 : -1;
}

/* Whether the bytes behind v may be read: not device memory. */
static int host_readable(uint64_t v)
{
	return kvt_prof_device_memory(v) != 1;
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

/* Count a scanned launch's evidence; every kick_every launches with some,
 * end the migrator's epoch early. */
static void launch_credited(unsigned credited)
{
	kvt_prof_count(KVT_SRC_LAUNCH, credited);
	void (*kick)(void) = __atomic_load_n(&kick_fn, __ATOMIC_ACQUIRE);
	if (credited && kick && kick_every &&
	    __atomic_add_fetch(&nr_launch_hits, KVT_LAUNCH_SAMPLE, __ATOMIC_RELAXED) % kick_every <
		    KVT_LAUNCH_SAMPLE)
		kick();
}

/* Whether this thread scans the launch it is in: one in KVT_LAUNCH_SAMPLE
 * on average, the gap to the next drawn from 0..2*SAMPLE-2 (mean SAMPLE-1),
 * not fixed: a server's launches repeat with a period (the kernels of one
 * layer, the layers of one step), and a fixed stride that divides it would
 * scan the same kernel of the same layer every time and never see the
 * others. A thread's first launch is scanned. */
static uint32_t sample_seeds;   /* atomic: threads that seeded their sampler */

static int launch_sampled(void)
{
	static __thread uint32_t skip, rng;
	if (skip) {
		skip--;
		return 0;
	}
	if (!rng)   /* seeded by the order threads first launch, not by where their
		     * TLS lies (that moves with the environment's size, and with
		     * it which launches a simulated run samples) */
		rng = __atomic_add_fetch(&sample_seeds, 1, __ATOMIC_RELAXED) * 0x9e3779b9u | 1;
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	skip = rng % (2 * KVT_LAUNCH_SAMPLE - 1);
	return 1;
}

/* The values of a launch's first parameters that look like pointers
 * (stopping at the first slot that does not), read behind kernelParams
 * through process_vm_readv: without a layout kvtier does not know how many
 * slots there are, nor how many bytes are behind each. */
static unsigned param_values(void **params, uint64_t val[KVT_LAUNCH_VALUES])
{
	uint64_t slot[KVT_LAUNCH_SLOTS];
	size_t got = kvt_prof_read_self(slot, (uint64_t)(uintptr_t)params, sizeof slot) / 8;
	unsigned nr = 0;
	while (nr < got && user_pointer(slot[nr]))
		nr++;
	return read_slots(val, slot, nr);
}

/* The same with the function's layout: kernelParams[i] and the words behind
 * it are the bytes the driver read for this launch, so plain loads (no
 * system call); every 8-byte word of a parameter up to KVT_PARAM_WORDS (a
 * struct passed by value, an array of tensor pointers, is seen whole). */
static unsigned layout_values(void **params, const struct kvt_param_layout *lay,
			      uint64_t val[KVT_LAUNCH_VALUES], uint64_t scal[KVT_TABLE_SCALARS],
			      unsigned *nscal)
{
	unsigned nr = 0, ns = 0;
	for (unsigned i = 0; i < lay->nr && nr < KVT_LAUNCH_VALUES; i++) {
		const char *arg = params[i];
		if (!arg)
			break;
		if (lay->four & (1ull << i)) { /* a scalar: a stride the block tables may need */
			uint32_t v;
			memcpy(&v, arg, 4);
			if (v >= 2 && v <= KVT_SCALAR_MAX && ns < KVT_TABLE_SCALARS)
				scal[ns++] = (uint64_t)i << 32 | v;
			continue;
		}
		for (unsigned k = 0; k < lay->words[i] && nr < KVT_LAUNCH_VALUES; k++) {
			uint64_t v;
			memcpy(&v, arg + 8 * k, 8);
			if (user_pointer(v))
				val[nr++] = v;
			else if (v >= 2 && v <= KVT_SCALAR_MAX && ns < KVT_TABLE_SCALARS)
				/* keyed by where it sits: parameter and word */
				scal[ns++] = (uint64_t)((i * 67 + k) & 0xff) << 32 | v;
		}
	}
	*nscal = ns;
	return nr;
}

/* Whether any of the values could give evidence: one inside a tracked
 * range, or a host pointer to follow (the first KVT_LAUNCH_FOLLOW
 * candidates, as the scan takes them; bit i of *readable: value i may be
 * read behind, so the scan asks the device test no second time). */
static int worth_crediting(const uint64_t *val, unsigned nr, uint32_t *readable,
			   int slot[KVT_LAUNCH_VALUES])
{
	int worth = 0;
	*readable = 0;
	for (unsigned i = 0, tests = 0; i < nr; i++) {
		slot[i] = kvt_heat_maybe(val[i]) ? kvt_heat_find(val[i]) : -1;
		if (slot[i] >= 0) {        /* the scan below credits it: not looked up again */
			worth = 1;
			continue;
		}
		if (tests >= KVT_LAUNCH_FOLLOW || !user_pointer(val[i]))
			continue;
		tests++;
		if (host_readable(val[i])) {
			*readable |= 1u << i;
			worth = 1;
		}
	}
	return worth;
}

/* The window behind host pointer v (rotating over KVT_LAUNCH_SPAN bytes,
 * else its start): bytes read into win. v is not device memory. */
static size_t follow(uint64_t v, uint64_t win[KVT_LAUNCH_WINDOW / 8])
{
	uint32_t turn = __atomic_fetch_add(&window_turn, 1, __ATOMIC_RELAXED);
	uint64_t off = (uint64_t)(turn % (KVT_LAUNCH_SPAN / KVT_LAUNCH_WINDOW)) * KVT_LAUNCH_WINDOW;
	size_t n = kvt_prof_read_self(win, v + off, KVT_LAUNCH_WINDOW);
	if (!n && off)
		n = kvt_prof_read_self(win, v, KVT_LAUNCH_WINDOW);
	return n;
}

static void launch_scan(uint64_t func, void **params, uint64_t stream)
{
	uint64_t val[KVT_LAUNCH_VALUES];
	uint64_t win[KVT_LAUNCH_WINDOW / 8];
	struct kvt_param_layout lay;
	/* nothing redirected yet: skip the parameter reads that could only find
	 * nothing; most launches of most processes end here */
	if (!params || kvt_heat_empty())
		return;
	/* a decode step makes hundreds of launches: a sample is scanned, its
	 * evidence weighing KVT_LAUNCH_SAMPLE */
	if (!launch_sampled())
		return;
	uint64_t scal[KVT_TABLE_SCALARS];
	unsigned nscal = 0;
	unsigned nr = kvt_param_layout(func, &lay) ? layout_values(params, &lay, val, scal, &nscal)
						   : param_values(params, val);
	uint32_t readable;
	int slot[KVT_LAUNCH_VALUES];
	if (!worth_crediting(val, nr, &readable, slot))
		return;                    /* no driver call for a launch naming nothing tracked */
	int (*capturing)(uint64_t) = __atomic_load_n(&capturing_fn, __ATOMIC_ACQUIRE);
	if (capturing && capturing(stream) == 1)
		return;
	if (kvt_prof_sources_enabled() & (1u << KVT_SRC_TABLES))
		kvt_tables_on_launch(func, val, slot, nr, scal, nscal);
	const float weight = (float)KVT_LAUNCH_SAMPLE;
	unsigned credited = 0, followed = 0;
	for (unsigned i = 0; i < nr && credited < KVT_LAUNCH_MAX_CHUNKS; i++) {
		if (slot[i] >= 0) {
			kvt_evc_mark(slot[i], KVT_EVC_ALLOCATION);
			/* a range whose block tables are read gets chunk-level
			 * credit there: the spread would heat its cold chunks too */
			if (!kvt_tables_covers(slot[i]))
				credited += kvt_heat_spread(slot[i], KVT_LAUNCH_SPREAD, weight);
			continue;
		}
		if (followed >= KVT_LAUNCH_FOLLOW || !user_pointer(val[i]))
			continue;
		followed++;
		if (!(readable & (1u << i)))
			continue;
		size_t n = follow(val[i], win);
		credited += scan_window(win, (unsigned)(n / 8), KVT_LAUNCH_MAX_CHUNKS - credited, weight);
	}
	launch_credited(credited);
}

/* ---- CUDA graphs ----
 * A graph launch runs kernels whose parameters no hook sees: they were
 * copied into the graph when it was captured or built. So when a graph is
 * instantiated each kernel node's parameters are read once
 * (kvt_prof_graph_scan), and what they name is kept with the executable
 * graph (kvt_prof_graph_publish): tensors inside tracked ranges, credited
 * as a launch naming them would be, and host pointers behind which tracked
 * addresses were found, followed again whenever a launch is credited
 * (what they point to, a block table, changes between launches). Each
 * cuGraphLaunch is sampled like a kernel launch; cuGraphExecUpdate reads the
 * new graph as an instantiation would. Not seen: kernel nodes changed one
 * by one (cuGraphExecKernelNodeSetParams), child graphs, device-side
 * launches. */

#define GRAPH_SLOTS   512               /* executable graphs with evidence (power of 2) */
#define GRAPH_PROBES  32                /* slots looked at from a handle's hash: a launch of
					 * a graph without evidence costs at most this many loads */
#define GRAPH_FOLLOW  (1ull << 63)      /* value tag: a host pointer to follow */
#define GRAPH_BUSY    UINT64_MAX        /* key of a slot being written */
#define GRAPH_GONE    (UINT64_MAX - 1)  /* key of a slot whose graph was destroyed */

struct graph_slot {
	uint64_t exec;                  /* key: the CUgraphExec; 0 = never used */
	uint32_t nr, ntab;
	uint64_t val[KVT_GRAPH_VALUES];
	uint16_t with[KVT_GRAPH_VALUES];
	uint64_t tab[KVT_GRAPH_TABLES];
};
static struct graph_slot *graphs;       /* mmap'd at the first graph with evidence */
static uint64_t nr_graphs_kept, nr_graphs_full;

static uint32_t graph_hash(uint64_t exec)
{
	return (uint32_t)((exec * 0x9e3779b97f4a7c15ull) >> 40) & (GRAPH_SLOTS - 1);
}

/* v's index in g->val, or -1. */
static int graph_at(const struct kvt_graph_ev *g, uint64_t v)
{
	for (uint32_t i = 0; i < g->nr; i++)
		if (g->val[i] == v)
			return (int)i;
	return -1;
}

/* v kept in g->val: its index, or -1 when there is no room. */
static int graph_keep(struct kvt_graph_ev *g, uint64_t v)
{
	int i = graph_at(g, v);
	if (i < 0 && g->nr < KVT_GRAPH_VALUES) {
		i = (int)g->nr++;
		g->val[i] = v;
		g->with[i] = 0;
	}
	return i;
}

/* The bit of table candidate v in g->tab (kept there), 0 when full. */
static uint16_t graph_tab(struct kvt_graph_ev *g, uint64_t v)
{
	for (uint32_t j = 0; j < g->ntab; j++)
		if (g->tab[j] == v)
			return (uint16_t)(1u << j);
	if (g->ntab >= KVT_GRAPH_TABLES)
		return 0;
	g->tab[g->ntab] = v;
	return (uint16_t)(1u << g->ntab++);
}

int kvt_prof_graphs_wanted(void)
{
	return (kvt_prof_sources_enabled() & (1u << KVT_SRC_LAUNCH)) && !kvt_heat_empty();
}

void kvt_prof_graph_scan(struct kvt_graph_ev *g, uint64_t func, void **params)
{
	uint64_t val[KVT_LAUNCH_VALUES], win[KVT_LAUNCH_WINDOW / 8], scal[KVT_TABLE_SCALARS];
	struct kvt_param_layout lay;
	if (!params)
		return;
	unsigned nscal = 0;
	unsigned nr = func && kvt_param_layout(func, &lay) ? layout_values(params, &lay, val, scal, &nscal)
							   : param_values(params, val);
	unsigned followed = 0;
	int kept[KVT_LAUNCH_VALUES], named = 0;    /* -1: not tracked; -2: no room */
	for (unsigned i = 0; i < nr; i++) {
		kept[i] = -1;
		if (kvt_heat_maybe(val[i]) && kvt_heat_find(val[i]) >= 0) {
			kept[i] = graph_keep(g, val[i]);
			named |= kept[i] >= 0;
			kept[i] = kept[i] >= 0 ? kept[i] : -2;
			continue;
		}
		if (followed >= KVT_LAUNCH_FOLLOW || !user_pointer(val[i]) ||
		    graph_at(g, val[i] | GRAPH_FOLLOW) >= 0)
			continue;
		followed++;
		size_t n = host_readable(val[i]) ? kvt_prof_read_self(win, val[i], sizeof win) / 8 : 0;
		for (size_t k = 0; k < n; k++)
			if (kvt_heat_maybe(win[k]) && kvt_heat_find(win[k]) >= 0) {
				graph_keep(g, val[i] | GRAPH_FOLLOW);
				break;
			}
	}
	if (!named)
		return;
	/* the node's other device pointers (a followed host pointer is not
	 * one): table candidates, with the tensors named beside them */
	uint16_t m = 0;
	for (unsigned i = 0; i < nr; i++)
		if (kept[i] == -1 && user_pointer(val[i]) && val[i] < (1ull << 56) &&
		    kvt_prof_device_memory(val[i]) != 0)
			m |= graph_tab(g, val[i]);
	for (unsigned i = 0; i < nr; i++)
		if (kept[i] >= 0)
			g->with[kept[i]] |= m;
}

/* The slot holding exec's evidence, or NULL. */
static struct graph_slot *graph_find(uint64_t exec)
{
	struct graph_slot *t = __atomic_load_n(&graphs, __ATOMIC_ACQUIRE);
	if (!t || !exec || exec >= GRAPH_GONE)
		return NULL;
	for (uint32_t n = 0, h = graph_hash(exec); n < GRAPH_PROBES; n++, h = (h + 1) & (GRAPH_SLOTS - 1)) {
		uint64_t k = __atomic_load_n(&t[h].exec, __ATOMIC_ACQUIRE);
		if (k == exec)
			return &t[h];
		if (!k)
			return NULL;
	}
	return NULL;
}

void kvt_prof_graph_forget(uint64_t exec)
{
	struct graph_slot *s = graph_find(exec);
	if (s)
		__atomic_compare_exchange_n(&s->exec, &exec, GRAPH_GONE, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
}

void kvt_prof_graph_publish(const struct kvt_graph_ev *g)
{
	kvt_prof_graph_forget(g->exec);        /* a handle reused: its old evidence goes */
	if (!g->nr || !g->exec || g->exec >= GRAPH_GONE)
		return;
	struct graph_slot *t = __atomic_load_n(&graphs, __ATOMIC_ACQUIRE);
	if (!t) {
		void *p = kvt_sys_map_own(GRAPH_SLOTS * sizeof *t, MAP_NORESERVE);
		if (p == MAP_FAILED)
			return;
		struct graph_slot *none = NULL;
		if (!__atomic_compare_exchange_n(&graphs, &none, p, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			kvt_sys_munmap(p, GRAPH_SLOTS * sizeof *t);        /* another thread's won */
		t = __atomic_load_n(&graphs, __ATOMIC_ACQUIRE);
	}
	for (uint32_t n = 0, h = graph_hash(g->exec); n < GRAPH_PROBES; n++, h = (h + 1) & (GRAPH_SLOTS - 1)) {
		uint64_t k = __atomic_load_n(&t[h].exec, __ATOMIC_ACQUIRE);
		if ((k && k != GRAPH_GONE) ||
		    !__atomic_compare_exchange_n(&t[h].exec, &k, GRAPH_BUSY, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		for (uint32_t i = 0; i < g->nr; i++) {
			__atomic_store_n(&t[h].val[i], g->val[i], __ATOMIC_RELAXED);
			__atomic_store_n(&t[h].with[i], g->with[i], __ATOMIC_RELAXED);
		}
		for (uint32_t j = 0; j < g->ntab; j++)
			__atomic_store_n(&t[h].tab[j], g->tab[j], __ATOMIC_RELAXED);
		__atomic_store_n(&t[h].nr, g->nr, __ATOMIC_RELAXED);
		__atomic_store_n(&t[h].ntab, g->ntab, __ATOMIC_RELAXED);
		__atomic_store_n(&t[h].exec, g->exec, __ATOMIC_RELEASE);
		__atomic_fetch_add(&nr_graphs_kept, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!__atomic_fetch_add(&nr_graphs_full, 1, __ATOMIC_RELAXED))
		kvt_warn("launch source: no room to keep an instantiated CUDA graph's evidence "
			 "(%d graphs naming tracked memory at most); launches of such graphs give "
			 "none (counted, said once)", GRAPH_SLOTS);
}

void kvt_prof_on_graph_launch(uint64_t exec)
{
	uint64_t win[KVT_LAUNCH_WINDOW / 8];
	if (!kvt_prof_graphs_wanted())
		return;
	struct graph_slot *s = graph_find(exec);
	if (!s || !launch_sampled())
		return;
	const float weight = (float)KVT_LAUNCH_SAMPLE;
	uint32_t nr = __atomic_load_n(&s->nr, __ATOMIC_RELAXED);
	if (kvt_prof_sources_enabled() & (1u << KVT_SRC_TABLES))
		kvt_tables_pair(s->tab, __atomic_load_n(&s->ntab, __ATOMIC_RELAXED), s->val, s->with,
				nr < KVT_GRAPH_VALUES ? nr : KVT_GRAPH_VALUES);
	unsigned credited = 0, followed = 0;
	for (uint32_t i = 0; i < nr && i < KVT_GRAPH_VALUES; i++) {
		uint64_t v = __atomic_load_n(&s->val[i], __ATOMIC_RELAXED);
		if (!(v & GRAPH_FOLLOW)) {
			int r = kvt_heat_find(v);
			if (r >= 0) {
				kvt_evc_mark(r, KVT_EVC_ALLOCATION);
				/* as for an eager launch: no spread where block tables
				 * name the chunks */
				if (!kvt_tables_covers(r))
					credited += kvt_heat_spread(r, KVT_LAUNCH_SPREAD, weight);
			}
			continue;
		}
		if (followed++ >= KVT_GRAPH_FOLLOW || credited >= KVT_GRAPH_MAX_CHUNKS)
			continue;
		uint64_t table = v & ~GRAPH_FOLLOW;
		size_t n = host_readable(table) ? follow(table, win) : 0;
		credited += scan_window(win, (unsigned)(n / 8), KVT_GRAPH_MAX_CHUNKS - credited, weight);
	}
	launch_credited(credited);
}

uint64_t kvt_prof_graphs_kept(void)
{
	return __atomic_load_n(&nr_graphs_kept, __ATOMIC_RELAXED);
}

uint64_t kvt_prof_graphs_dropped(void)
{
	return __atomic_load_n(&nr_graphs_full, __ATOMIC_RELAXED);
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
	[KVT_SRC_TABLES] = &kvt_src_tables,    /* after cupti: its poll reads the faults */
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

void kvt_prof_on_launch(uint64_t func, void **params, uint64_t stream)
{
	EACH_ENABLED(s, on_launch)
		sources[s]->on_launch(func, params, stream);
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

static uint32_t polls;   /* atomic */

void kvt_prof_sources_poll(void)
{
	EACH_ENABLED(s, poll)
		sources[s]->poll();
	__atomic_add_fetch(&polls, 1, __ATOMIC_RELEASE);
	kvt_decode_poll();          /* a decoder switched off says so from here */
	kvt_evc_epoch();            /* each KV range's class of evidence */
}

uint32_t kvt_prof_polls(void)
{
	return __atomic_load_n(&polls, __ATOMIC_ACQUIRE);
}

void kvt_prof_sources_stop(int (*go_on)(void))
{
	EACH_ENABLED(s, stop) {
		if (!go_on())
			return;
		sources[s]->stop(go_on);
	}
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
