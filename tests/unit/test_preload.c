// SPDX-License-Identifier: MIT
/* The interposer end to end: small programs run under LD_PRELOAD with the
 * CUDA stand-ins; their own output is compared with the trace kvtier wrote
 * and with a run without kvtier. */
#include <glob.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "kvt_test.h"
#include "kvtier/api.h"
#include "../profiler/trace_read.h"
#include "../base/kvt.h"

static char lib[512], fakedir[512], ldpath[600], preload[600], tmpdir[256];

static int setup(void)
{
	if (kvt_preload_env(lib, fakedir, ldpath, preload))
		return 1;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/kvt-test-preload.%d", (int)getpid());
	return mkdir(tmpdir, 0700);
}

static int teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	return system(cmd) ? 1 : 0;
}

static const char *tmp(const char *name)
{
	static char bufs[4][400];
	static int i;
	char *b = bufs[i++ & 3];
	snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
	return b;
}

/* ---- reading traces ---- */

#define MAX_EV 4096
struct trace {
	int ok, ended;
	unsigned nr;
	struct kvt_rec_event ev[MAX_EV];
	unsigned nr_stacks;
	unsigned unresolved;      /* stack frames in no module described before them */
	unsigned nr_mods;
	struct { uint64_t start, end; } mods[512];   /* more are not kept */
	char info[4096];
};

static int load_trace(const char *path, struct trace *t)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	memset(t, 0, sizeof *t);
	if (kvt_trace_reader_open(&r, path)) {
		kvt_trace_reader_close(&r);
		return -1;
	}
	int ret;
	while ((ret = kvt_trace_next(&r, &it)) > 0) {
		if (it.ev && t->nr < MAX_EV)
			t->ev[t->nr++] = *it.ev;
		else if (it.stack) {
			t->nr_stacks++;
			for (uint32_t f = 0; f < it.stack->nr_frames; f++) {
				int in = 0;
				for (unsigned k = 0; k < t->nr_mods && !in; k++)
					in = it.ips[f] >= t->mods[k].start && it.ips[f] < t->mods[k].end;
				t->unresolved += !in;
			}
		} else if (it.mod && t->nr_mods < sizeof t->mods / sizeof t->mods[0]) {
			t->mods[t->nr_mods].start = it.mod->start;
			t->mods[t->nr_mods++].end = it.mod->end;
		} else if (it.type == KVT_REC_INFO) {
			size_t l = strlen(t->info);
			snprintf(t->info + l, sizeof t->info - l, "%.*s\n", (int)it.text_len, it.text);
		}
	}
	t->ended = r.saw_end;
	t->ok = ret == 0;
	kvt_trace_reader_close(&r);
	return ret;
}

/* Is there an event with this api name, result, address and size? */
static int has_event(const struct trace *t, const char *api, int rc, uint64_t addr, uint64_t size)
{
	for (unsigned i = 0; i < t->nr; i++) {
		const struct kvt_rec_event *e = &t->ev[i];
		if (!strcmp(kvt_api_name(e->api), api) && e->result == rc && e->addr == addr &&
		    e->size == size)
			return 1;
	}
	return 0;
}

static unsigned count_api(const struct trace *t, const char *api)
{
	unsigned n = 0;
	for (unsigned i = 0; i < t->nr; i++)
		n += !strcmp(kvt_api_name(t->ev[i].api), api);
	return n;
}

/* ---- drvapi: every hooked driver entry point, both flag settings ---- */

static void check_drvapi(int ptsz)
{
	static struct kvt_child c;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp(ptsz ? "drv-ptsz.trace" : "drv.trace"));
	const char *argv[] = { kvt_path("tests/progs/drvapi"), ptsz ? "--ptsz" : NULL, NULL };
	const char *env[] = { ldpath, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);
	CU_ASSERT_TRUE(t.ended);
	unsigned calls = 0, matched = 0;
	for (char *line = strtok(c.out, "\n"); line; line = strtok(NULL, "\n")) {
		char api[64];
		int rc;
		uint64_t addr, size;
		if (sscanf(line, "CALL %63s rc=%d addr=0x%" SCNx64 " size=%" SCNu64, api, &rc,
			   &addr, &size) != 4)
			continue;
		calls++;
		if (has_event(&t, api, rc, addr, size))
			matched++;
		else
			fprintf(stderr, "no trace event for: %s\n", line);
	}
	CU_ASSERT_TRUE(calls >= 40);
	CU_ASSERT_EQUAL(matched, calls);
	CU_ASSERT_TRUE(t.nr_stacks > 0);
}

static void test_drvapi_legacy(void) { check_drvapi(0); }
static void test_drvapi_ptsz(void) { check_drvapi(1); }

/* ---- KVTIER_DISABLE=1: nothing recorded, identical behaviour ---- */

static void mask_addrs(char *s)
{
	for (char *p = strstr(s, "addr=0x"); p; p = strstr(p + 1, "addr=0x"))
		for (char *q = p + 7; *q && *q != ' ' && *q != '\n'; q++)
			*q = 'X';
}

static void test_disable(void)
{
	static struct kvt_child a, b;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("disabled.trace"));
	const char *argv[] = { kvt_path("tests/progs/drvapi"), NULL };
	const char *env_off[] = { ldpath, preload, tr, "KVTIER_DISABLE=1", NULL };
	const char *env_none[] = { ldpath, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&a, argv, env_off), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&b, argv, env_none), 0);
	CU_ASSERT_EQUAL(a.exit_code, b.exit_code);
	mask_addrs(a.out);
	mask_addrs(b.out);
	CU_ASSERT_STRING_EQUAL(a.out, b.out);
	CU_ASSERT_EQUAL(a.err_len, 0);
	CU_ASSERT_NOT_EQUAL(access(tr + 13, F_OK), 0);    /* no trace file at all */
}

/* ---- runtime calls: same results with and without kvtier, one event each ---- */

static void test_runtime_fidelity(void)
{
	static struct kvt_child a, b;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("rt.trace"));
	const char *argv[] = { kvt_path("tests/progs/rt_calls"), NULL };
	const char *env_on[] = { ldpath, preload, tr, NULL };
	const char *env_none[] = { ldpath, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&a, argv, env_on), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&b, argv, env_none), 0);
	CU_ASSERT_EQUAL(a.exit_code, 0);
	CU_ASSERT_EQUAL(b.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(a.out, b.out);              /* rc, usability, OOM */
	CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "cudaMalloc-oom rc=2 ptr-written=0"));
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);
	/* cudaMalloc -> cuMemAlloc_v2 through kvtier's resolver: one event,
	 * attributed to the runtime call: 1 good + 1 out-of-memory. */
	CU_ASSERT_EQUAL(count_api(&t, "cudaMalloc"), 2);
	CU_ASSERT_EQUAL(count_api(&t, "cuMemAlloc_v2"), 0);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMallocHost"), 1);
	CU_ASSERT_EQUAL(count_api(&t, "cudaHostAlloc"), 1);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMallocManaged"), 1);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMallocAsync"), 1);
	CU_ASSERT_EQUAL(count_api(&t, "cudaFreeAsync"), 1);
	CU_ASSERT_EQUAL(count_api(&t, "cudaFreeHost"), 2);
	CU_ASSERT_EQUAL(count_api(&t, "cudaFree"), 3);     /* two frees + the bogus one */
	/* Every runtime address printed is in the trace with its size. */
	for (char *line = strtok(a.err, "\n"); line; line = strtok(NULL, "\n")) {
		char api[64];
		uint64_t addr;
		if (sscanf(line, "ADDR %63s 0x%" SCNx64, api, &addr) != 2)
			continue;
		int found = 0;
		for (unsigned i = 0; i < t.nr; i++)
			found |= t.ev[i].op == KVT_OP_ALLOC && t.ev[i].addr == addr &&
				 !strcmp(kvt_api_name(t.ev[i].api), api);
		CU_ASSERT_TRUE(found);
	}
}

/* ---- the toolkit's real libcudart.so.13: no driver -> 35; stand-in -> hooked ---- */

static void test_real_libcudart(void)
{
	static struct kvt_child a, b, c;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("real.trace"));
	const char *argv[] = { kvt_path("tests/progs/real_rt_calls"), NULL };
	const char *env_nodrv[] = { preload, NULL };
	const char *env_plain[] = { NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&a, argv, env_nodrv), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&b, argv, env_plain), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "CALL cudaMalloc rc=35"));
	CU_ASSERT_STRING_EQUAL(a.out, b.out);
	/* One binary, two runtimes: with the stand-in on the library path the
	 * same binary's runtime calls reach kvtier's hooks. */
	const char *env_fake[] = { ldpath, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env_fake), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMalloc"), 2);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMallocManaged"), 1);
}

/* ---- 16 threads x 10,000 operations ---- */

static void test_threads(void)
{
	static struct kvt_child c;
	static struct kvt_trace_reader r;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("stress.trace"));
	const char *argv[] = { kvt_path("tests/progs/rt_stress"), NULL };
	const char *env[] = { ldpath, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	unsigned long allocs = 0, frees = 0, launches = 0, errors = 1;
	CU_ASSERT_EQUAL(sscanf(c.out, "allocs=%lu frees=%lu launches=%lu errors=%lu", &allocs,
			       &frees, &launches, &errors), 4);
	CU_ASSERT_EQUAL(errors, 0);
	CU_ASSERT_TRUE(launches > 0);
	struct kvt_trace_item it;
	unsigned long ta = 0, tf = 0, tl = 0;
	char live[128] = "";
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, tr + 13), 0);
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.ev && it.ev->op == KVT_OP_ALLOC && it.ev->kind == KVT_KIND_DEVICE && !it.ev->result)
			ta++;
		if (it.ev && it.ev->op == KVT_OP_FREE && it.ev->kind == KVT_KIND_DEVICE && it.ev->addr)
			tf++;
		if (it.ev && it.ev->op == KVT_OP_LAUNCH)
			tl++;
		if (it.type == KVT_REC_INFO && it.text_len < sizeof live &&
		    !strncmp(it.text, "registry.live.device=", 21))
			snprintf(live, sizeof live, "%.*s", (int)it.text_len, it.text);
		if (it.end)
			CU_ASSERT_EQUAL(it.end->nr_dropped, 0);
	}
	CU_ASSERT_TRUE(r.saw_end);
	kvt_trace_reader_close(&r);
	CU_ASSERT_EQUAL(ta, allocs);
	CU_ASSERT_EQUAL(tf, frees);
	CU_ASSERT_EQUAL(tl, launches);
	CU_ASSERT_STRING_EQUAL(live, "registry.live.device=0 0");   /* all freed */
}

/* ---- a second interposer in front of and behind kvtier ---- */

static void check_second(int second_first)
{
	static struct kvt_child c;
	static struct trace t;
	char second[512], pre[1100], tr[420];
	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(kvt_path("tests/progs/libsecond.so"), second));
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s:%s", second_first ? second : lib,
		 second_first ? lib : second);
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp(second_first ? "second1.trace" : "second2.trace"));
	const char *argv[] = { kvt_path("tests/progs/rt_calls"), NULL };
	const char *env[] = { ldpath, pre, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "second: cudaMalloc=2 "));
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);
	CU_ASSERT_EQUAL(count_api(&t, "cudaMalloc"), 2);
}

static void test_second_before(void) { check_second(1); }
static void test_second_after(void) { check_second(0); }

/* ---- anonymous maps: partial munmap, mremap, file maps ignored ---- */

static void test_mmap(void)
{
	static struct kvt_child c;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("mmap.trace"));
	const char *argv[] = { kvt_path("tests/progs/mmap_ops"), NULL };
	const char *env[] = { preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);                  /* errno survived: EINVAL */
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);
	uint64_t base = 0;
	unsigned remaps = 0, frees = 0;
	for (unsigned i = 0; i < t.nr; i++) {
		const struct kvt_rec_event *e = &t.ev[i];
		if (e->op == KVT_OP_ALLOC && e->kind == KVT_KIND_MMAP && e->size == (8u << 20))
			base = e->addr;
		if (e->op == KVT_OP_FREE && e->kind == KVT_KIND_MMAP && base &&
		    (e->addr == base + (2u << 20) || e->addr == base + (4u << 20)))
			frees += (e->size == (2u << 20) && e->addr == base + (2u << 20)) ||
				 (e->size == (4u << 20) && e->addr == base + (4u << 20));
		if (e->op == KVT_OP_REMAP && e->aux == base && e->size == (3u << 20))
			remaps++;
	}
	CU_ASSERT_NOT_EQUAL(base, 0);
	CU_ASSERT_EQUAL(frees, 2);
	CU_ASSERT_EQUAL(remaps, 1);
	/* 3 MiB left mapped by the program (plus whatever libc mapped). */
	char *live = strstr(t.info, "registry.live.mmap=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(live);
	unsigned long long n = 0, bytes = 0;
	CU_ASSERT_EQUAL(sscanf(live, "registry.live.mmap=%llu %llu", &n, &bytes), 2);
	CU_ASSERT_TRUE(bytes >= (3ull << 20));
}

/* ---- large heap blocks (preload/hook_heap.c) ---- */

static const struct kvt_rec_event *heap_event(const struct trace *t, uint8_t op, uint16_t api,
					      uint64_t size)
{
	for (unsigned i = 0; i < t->nr; i++)
		if (t->ev[i].op == op && t->ev[i].api == api && t->ev[i].kind == KVT_KIND_MMAP &&
		    t->ev[i].size == size)
			return &t->ev[i];
	return NULL;
}

/* heap_ops makes blocks of 48 (posix_memalign, grown by realloc to 96), 40
 * (calloc), 36 (aligned_alloc) and 16 MiB (malloc), and 4 threads churn
 * small blocks with a 33 MiB one now and then. The rule binds maps of
 * 40 MiB or more: numa_maps names a policy for exactly those blocks, the
 * trace holds each block of 32 MiB or more with its call, and the 16 MiB
 * one passes untraced. Contents survive the realloc and the moves. */
static void test_heap(void)
{
	static struct kvt_child c;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("heap.trace"));
	const char *argv[] = { kvt_path("tests/progs/heap_ops"), NULL };
	const char *env[] = { preload, tr, "KVTIER_POLICY=mmap,size>=40M => bind:cxl; * => native",
			      NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c, argv, env, 120), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "contents intact"));
	static const struct { const char *call; unsigned mib; int bound; } want[] = {
		{ "posix_memalign", 48, 1 }, { "calloc", 40, 1 }, { "realloc", 96, 1 },
		{ "aligned_alloc", 36, 0 },
	};
	for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
		char key[64], pol[64] = "";
		snprintf(key, sizeof key, "block %s %u ", want[i].call, want[i].mib);
		const char *l = strstr(c.out, key);
		CU_ASSERT_PTR_NOT_NULL_FATAL(l);
		CU_ASSERT_EQUAL(sscanf(l + strlen(key), "%*s %63s", pol), 1);
		if (want[i].bound)
			CU_ASSERT_TRUE(!strncmp(pol, "prefer:", 7) || !strncmp(pol, "bind:", 5))
		else
			CU_ASSERT_STRING_EQUAL(pol, "default");
	}
	CU_ASSERT_EQUAL_FATAL(load_trace(tr + 13, &t), 0);
	const struct kvt_rec_event *e;
	CU_ASSERT_PTR_NOT_NULL((e = heap_event(&t, KVT_OP_ALLOC, KVT_API_posix_memalign, 48u << 20)));
	CU_ASSERT_TRUE(e && e->placement == KVT_PLACE_BIND_FAR && e->aux == 64);
	CU_ASSERT_PTR_NOT_NULL((e = heap_event(&t, KVT_OP_ALLOC, KVT_API_calloc, 40u << 20)));
	CU_ASSERT_TRUE(e && e->placement == KVT_PLACE_BIND_FAR);
	CU_ASSERT_PTR_NOT_NULL((e = heap_event(&t, KVT_OP_FREE, KVT_API_realloc, 48u << 20)));
	CU_ASSERT_PTR_NOT_NULL((e = heap_event(&t, KVT_OP_ALLOC, KVT_API_realloc, 96u << 20)));
	CU_ASSERT_TRUE(e && e->placement == KVT_PLACE_BIND_FAR);
	CU_ASSERT_PTR_NOT_NULL((e = heap_event(&t, KVT_OP_ALLOC, KVT_API_aligned_alloc, 36u << 20)));
	CU_ASSERT_TRUE(e && e->placement == KVT_PLACE_NATIVE);
	CU_ASSERT_PTR_NOT_NULL(heap_event(&t, KVT_OP_FREE, KVT_API_free, 40u << 20));
	CU_ASSERT_PTR_NULL(heap_event(&t, KVT_OP_ALLOC, KVT_API_malloc, 16u << 20));
	unsigned big = 0, big_freed = 0;
	for (unsigned i = 0; i < t.nr; i++) {
		big += t.ev[i].op == KVT_OP_ALLOC && t.ev[i].api == KVT_API_malloc &&
		       t.ev[i].size == (33u << 20);
		big_freed += t.ev[i].op == KVT_OP_FREE && t.ev[i].api == KVT_API_free &&
			     t.ev[i].size == (33u << 20);
	}
	CU_ASSERT_EQUAL(big, 24);                    /* 4 threads x 6 */
	CU_ASSERT_EQUAL(big_freed, 24);
	/* nothing of the heap is left registered at exit */
	char *live = strstr(t.info, "registry.live.mmap=");
	CU_ASSERT_PTR_NOT_NULL_FATAL(live);
	unsigned long long n = 0, bytes = 0;
	CU_ASSERT_EQUAL(sscanf(live, "registry.live.mmap=%llu %llu", &n, &bytes), 2);
	CU_ASSERT_TRUE(bytes < (32ull << 20));
}

/* ---- call sites: two of the same shape in turns (the stack cache) ---- */

static void test_two_sites(void)
{
	static struct kvt_child c;
	static struct kvt_trace_reader r;
	static struct { uint32_t id, n; uint64_t ip[64]; } st[64];
	static uint64_t want[240];
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("sites.trace"));
	const char *argv[] = { kvt_path("tests/progs/two_sites"), NULL };
	const char *env[] = { preload, tr, "KVTIER_STACK_DEPTH=16", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL_FATAL(c.exit_code, 0);
	unsigned nw = 0;
	for (const char *p = c.out; (p = strstr(p, "map ")) && nw < 240; p++) {
		unsigned long long a, ra;
		if (sscanf(p, "map %llx %llx", &a, &ra) == 2)
			want[nw++] = ra;
	}
	CU_ASSERT_EQUAL_FATAL(nw, 240);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&r, tr + 13), 0);
	struct kvt_trace_item it;
	unsigned ns = 0, ne = 0, right = 0, sites_seen = 0;
	uint32_t ids[2] = { 0, 0 };
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.stack && ns < 64) {
			st[ns].id = it.stack->id;
			st[ns].n = it.stack->nr_frames < 64 ? it.stack->nr_frames : 64;
			for (uint32_t i = 0; i < st[ns].n; i++)
				st[ns].ip[i] = it.ips[i];
			ns++;
		}
		if (!it.ev || it.ev->op != KVT_OP_ALLOC || it.ev->kind != KVT_KIND_MMAP ||
		    it.ev->size != (2u << 20) || ne >= 240)
			continue;
		unsigned s = 0, hit = 0;
		while (s < ns && st[s].id != it.ev->stack_id)
			s++;
		for (uint32_t i = 0; s < ns && i < st[s].n; i++)
			hit |= st[s].ip[i] == want[ne];
		right += hit;
		unsigned k = ne / 3 % 2;             /* which site made it */
		if (!ids[k])
			ids[k] = it.ev->stack_id, sites_seen++;
		else if (ids[k] != it.ev->stack_id)
			right--;                         /* one site, one stack id */
		ne++;
	}
	kvt_trace_reader_close(&r);
	CU_ASSERT_EQUAL(ne, 240);
	CU_ASSERT_EQUAL(right, 240);
	CU_ASSERT_EQUAL(sites_seen, 2);
	CU_ASSERT_NOT_EQUAL(ids[0], ids[1]);
	if (right != 240)
		fprintf(stderr, "two sites: %u of %u maps with their own site's stack\n", right, ne);
}

/* ---- fork and exec ---- */

static void check_fork(int inherit)
{
	static struct kvt_child c;
	char tr[420], inh[32];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp(inherit ? "fork1.%p.trace" : "fork0.%p.trace"));
	snprintf(inh, sizeof inh, "KVTIER_INHERIT=%d", inherit);
	const char *argv[] = { kvt_path("tests/progs/forker"), NULL };
	const char *env[] = { preload, tr, inh, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	int child = 0;
	char *p = strstr(c.out, "child ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	sscanf(p, "child %d", &child);
	/* The exec'd `cat` shows its own maps: kvtier there only if inherited. */
	CU_ASSERT_EQUAL(strstr(c.out, "libkvtier.so") != NULL, inherit);
	/* The forked child wrote its own trace with its 5 MiB map in it. */
	char path[420];
	snprintf(path, sizeof path, "%s/%s.%d.trace", tmpdir, inherit ? "fork1" : "fork0", child);
	static struct trace t;
	CU_ASSERT_EQUAL_FATAL(load_trace(path, &t), 0);
	int found = 0;
	for (unsigned i = 0; i < t.nr; i++)
		found |= t.ev[i].op == KVT_OP_ALLOC && t.ev[i].size == (5u << 20);
	CU_ASSERT_TRUE(found);
	/* its call stacks can be symbolized from its own file: every frame
	 * lies in a module the file described before the stack */
	CU_ASSERT_TRUE(t.nr_stacks > 0);
	CU_ASSERT_EQUAL(t.unresolved, 0);
}

/* The trace in tmpdir whose name matches pattern (glob), loaded into t;
 * how many matched. */
static unsigned load_matching(const char *pattern, struct trace *t)
{
	char g[420];
	glob_t gl;
	snprintf(g, sizeof g, "%s/%s", tmpdir, pattern);
	if (glob(g, 0, NULL, &gl))
		return 0;
	unsigned n = (unsigned)gl.gl_pathc;
	if (n == 1)
		CU_ASSERT_EQUAL(load_trace(gl.gl_pathv[0], t), 0);
	globfree(&gl);
	return n;
}

static int has_map(const struct trace *t, uint64_t size)
{
	for (unsigned i = 0; i < t->nr; i++)
		if (t->ev[i].op == KVT_OP_ALLOC && t->ev[i].kind == KVT_KIND_MMAP &&
		    t->ev[i].size == size)
			return 1;
	return 0;
}

/* A server started through a launcher (a shell, timeout, a Python
 * wrapper) under the preload, with a trace path without %p: the launcher
 * writes the path, and its forked child, which only execs, must leave the
 * name "<path>.<pid>" to the exec'd server (it used to take it, empty, and
 * the server's trace was off). */
static void test_trace_launcher(void)
{
	static struct kvt_child c;
	static struct trace t;
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("launch.trace"));
	const char *argv[] = { "/usr/bin/timeout", "60", kvt_path("tests/progs/mmap_ops"), NULL };
	const char *env[] = { preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NULL(strstr(c.err, "tracing is off"));
	CU_ASSERT_EQUAL(load_trace(tr + 13, &t), 0);          /* the launcher's */
	CU_ASSERT_FALSE(has_map(&t, 8u << 20));
	CU_ASSERT_EQUAL_FATAL(load_matching("launch.trace.*", &t), 1);
	CU_ASSERT_TRUE(t.ended);
	CU_ASSERT_TRUE(has_map(&t, 8u << 20));                 /* the server's own */
}

/* One pid, three images (sh execs sh, which execs the program): each gets
 * a file of its own, the third "<path>.<pid>.2". */
static void test_trace_exec_chain(void)
{
	static struct kvt_child c;
	static struct trace t;
	char tr[420], cmd[600];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", tmp("chain.trace"));
	snprintf(cmd, sizeof cmd, "exec /bin/sh -c 'exec %s'", kvt_path("tests/progs/mmap_ops"));
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *env[] = { preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_PTR_NULL(strstr(c.err, "tracing is off"));
	CU_ASSERT_EQUAL(load_matching("chain.trace.*", &t) , 2);
	CU_ASSERT_EQUAL_FATAL(load_matching("chain.trace.*.2", &t), 1);
	CU_ASSERT_TRUE(t.ended);
	CU_ASSERT_TRUE(has_map(&t, 8u << 20));
}

static void test_fork_inherit(void) { check_fork(1); }
static void test_fork_no_inherit(void) { check_fork(0); }

/* ---- bad settings and hostile paths ---- */

static void test_bad_option(void)
{
	static struct kvt_child c;
	const char *argv[] = { kvt_path("tests/progs/mmap_ops"), NULL };
	const char *env[] = { preload, "KVTIER_STACK_DEPTH=lots", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	int pid = 0, n = 0;
	CU_ASSERT_EQUAL(sscanf(c.err, "kvtier[%d]: %n", &pid, &n), 1);
	CU_ASSERT(pid > 0 && n > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err + n,
		"KVTIER_STACK_DEPTH='lots' is not understood (expected frames); using the default '32'"));
	CU_ASSERT_EQUAL(strchr(c.err, '\n'), c.err + c.err_len - 1);   /* exactly one line */
}

/* ---- the pid in every log line ---- */

/* A process and the program its forked child execs (KVTIER_INHERIT=1): each
 * one's warning carries its own pid, the verbose option table too. */
static void test_log_pid_exec(void)
{
	static struct kvt_child c;
	const char *argv[] = { kvt_path("tests/progs/forker"), NULL };
	const char *env[] = { preload, "KVTIER_STACK_DEPTH=lots", "KVTIER_INHERIT=1",
			      "KVTIER_VERBOSE=1", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	int parent = 0, child = 0;
	const char *p = strstr(c.out, "parent ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL_FATAL(sscanf(p, "parent %d child %d", &parent, &child), 2);
	CU_ASSERT_NOT_EQUAL(parent, child);
	char want[200];
	for (int i = 0; i < 2; i++) {
		int pid = i ? child : parent;
		snprintf(want, sizeof want, "kvtier[%d]: KVTIER_STACK_DEPTH='lots' is not understood", pid);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.err, want));
		snprintf(want, sizeof want, "kvtier[%d]: KVTIER_STACK_DEPTH ", pid);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.err, want));    /* the verbose table */
	}
	/* no line of kvtier's without a pid */
	for (const char *l = c.err; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		CU_ASSERT_NOT_EQUAL(strncmp(l, "kvtier: ", 8), 0);
}

/* The pid is read when the line is written, never cached: a line in the
 * forked child (after the parent logged) carries the child's pid. */
static void test_log_pid_fork(void)
{
	int fds[2], saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(saved >= 0 && pipe(fds) == 0);
	dup2(fds[1], STDERR_FILENO);
	kvt_log(KVT_LOG_ERROR, "from the parent");
	pid_t pid = fork();
	if (pid == 0) {
		kvt_log(KVT_LOG_ERROR, "from the child");
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	char buf[512] = "", want[128];
	ssize_t n = read(fds[0], buf, sizeof buf - 1);
	close(fds[0]);
	buf[n > 0 ? n : 0] = 0;
	CU_ASSERT_TRUE(WIFEXITED(st));
	snprintf(want, sizeof want, "kvtier[%d]: from the parent\nkvtier[%d]: from the child\n",
		 (int)getpid(), (int)pid);
	CU_ASSERT_STRING_EQUAL(buf, want);
}

static void test_trace_never_follows_symlink(void)
{
	static struct kvt_child c;
	const char *target = tmp("victim");
	const char *link = tmp("link.trace");
	FILE *f = fopen(target, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("precious\n", f);
	fclose(f);
	CU_ASSERT_EQUAL_FATAL(symlink(target, link), 0);
	char tr[420];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", link);
	const char *argv[] = { kvt_path("tests/progs/mmap_ops"), NULL };
	const char *env[] = { preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	size_t n = 0;
	char *s = kvt_slurp(target, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_STRING_EQUAL(s, "precious\n");             /* untouched */
	free(s);
	struct stat st;
	CU_ASSERT_EQUAL(lstat(link, &st), 0);
	CU_ASSERT_TRUE(S_ISLNK(st.st_mode));                  /* still the planted link */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "never overwritten"));
}

/* ---- the exported symbol list ---- */

static void test_exports(void)
{
	static struct kvt_child c;
	const char *argv[] = { "/usr/bin/nm", "-D", "--defined-only", lib, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(c.exit_code, 0);
	size_t n = 0;
	char *want = kvt_slurp("tests/exported_symbols.txt", &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(want);
	unsigned nr_have = 0, nr_want = 0;
	for (char *line = strtok(c.out, "\n"); line; line = strtok(NULL, "\n")) {
		char *name = strrchr(line, ' ');
		name = name ? name + 1 : line;
		char key[160];
		snprintf(key, sizeof key, "\n%s\n", name);
		char *w = malloc(n + 2);
		w[0] = '\n';
		memcpy(w + 1, want, n + 1);
		if (!strstr(w, key))
			fprintf(stderr, "unexpected export: %s\n", name);
		else
			nr_have++;
		free(w);
		nr_want += 0;
	}
	for (char *p = want; *p; p++)
		nr_want += *p == '\n';
	CU_ASSERT_EQUAL(nr_have, nr_want);
	free(want);
}

/* The offline trace reader (profiler/trace_read.c, trace_replay.c) is for
 * the tool and the tests: the full symbol table of libkvtier.so names none of
 * its functions, and does name the constructor's kvt_ready (the table is
 * there and was read whole). */
static void test_no_reader_inside(void)
{
	static struct kvt_child c;
	const char *argv[] = { "/usr/bin/nm", "--defined-only", lib, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(c.exit_code, 0);
	CU_ASSERT_FATAL(c.out_len < sizeof c.out - 1);       /* not cut short */
	static const char *const reader[] = {
		" kvt_trace_reader_open\n", " kvt_trace_next\n", " kvt_trace_replay\n",
		" kvt_trace_replay_event\n", " kvt_trace_stop_line\n",
	};
	for (size_t i = 0; i < sizeof reader / sizeof reader[0]; i++)
		if (strstr(c.out, reader[i])) {
			fprintf(stderr, "offline reader in libkvtier.so:%s", reader[i]);
			CU_FAIL("offline reader symbol in libkvtier.so");
		}
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out, " kvt_ready\n"));
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "exported symbols are exactly the hooks", test_exports },
		{ "libkvtier.so holds no offline trace reader", test_no_reader_inside },
		{ "driver API via cuGetProcAddress_v2 (legacy stream)", test_drvapi_legacy },
		{ "driver API via cuGetProcAddress_v2 (per-thread stream)", test_drvapi_ptsz },
		{ "KVTIER_DISABLE=1 records nothing, changes nothing", test_disable },
		{ "runtime calls: identical results, one event each", test_runtime_fidelity },
		{ "real libcudart.so.13: 35 without driver, hooked with stand-in", test_real_libcudart },
		{ "16 threads x 10000 alloc/free/launch", test_threads },
		{ "second preload in front of kvtier", test_second_before },
		{ "second preload behind kvtier", test_second_after },
		{ "anonymous mmap, partial munmap, mremap", test_mmap },
		{ "heap blocks of 32 MiB or more: placed by the map rules, traced, released", test_heap },
		{ "two call sites of one shape in turns: each map its own site's stack", test_two_sites },
		{ "fork + exec with KVTIER_INHERIT=1", test_fork_inherit },
		{ "fork + exec with KVTIER_INHERIT=0", test_fork_no_inherit },
		{ "trace: a launcher's forked child leaves the name to the server", test_trace_launcher },
		{ "trace: one pid exec'd twice writes three files", test_trace_exec_chain },
		{ "bad option value: one line, default kept", test_bad_option },
		{ "log lines: kvtier[PID], parent and exec'd child", test_log_pid_exec },
		{ "log lines: kvtier[PID] read at write time, right after fork", test_log_pid_fork },
		{ "trace path: a planted symlink is never followed", test_trace_never_follows_symlink },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "preload", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
