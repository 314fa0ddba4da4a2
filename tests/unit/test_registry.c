// SPDX-License-Identifier: MIT
/* The allocation registry: exact and containing lookups on tables of ranges,
 * carving (partial munmap), replacement, and 16 threads hammering it. */
#include <inttypes.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>

#include "kvt_test.h"
#include "../base/kvt.h"
#include "../profiler/registry.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static struct kvt_registry *reg;

static int setup(void) { reg = kvt_reg_create(12); return reg ? 0 : 1; }
static int teardown(void) { kvt_reg_destroy(reg); return 0; }

static void put(uint64_t base, uint64_t size, uint8_t kind)
{
	struct kvt_alloc a = { .base = base, .size = size, .kind = kind, .node = -1 };
	CU_ASSERT_TRUE(kvt_reg_insert(reg, &a) >= 0);
}

/*   0x10000000        +1 MiB   +3 MiB (level 1)     0x40000000 (1 GiB, level 9)
 *   [A: 1 MiB]   [B: 3 MiB--------]   ...   [C: 1 GiB ............................]
 * Lookups: inside each, at each edge, and just outside. */
static void test_find_table(void)
{
	put(0x10000000, 1 * MiB, 1);                /* A */
	put(0x10100000, 3 * MiB, 2);                /* B, straddles a 2 MiB granule */
	put(0x40000000, 1 * GiB, 3);                /* C */
	static const struct { uint64_t addr; int found; uint64_t base; } cases[] = {
		{ 0x10000000, 1, 0x10000000 },          /* A first byte */
		{ 0x100fffff, 1, 0x10000000 },          /* A last byte */
		{ 0x10100000, 1, 0x10100000 },          /* B first byte */
		{ 0x10200000, 1, 0x10100000 },          /* B across the granule edge */
		{ 0x103fffff, 1, 0x10100000 },          /* B last byte */
		{ 0x10400000, 0, 0 },                   /* just past B */
		{ 0x0fffffff, 0, 0 },                   /* just before A */
		{ 0x40000000, 1, 0x40000000 },          /* C first */
		{ 0x5a5a5a5a, 1, 0x40000000 },          /* C middle */
		{ 0x7fffffff, 1, 0x40000000 },          /* C last */
		{ 0x80000000, 0, 0 },                   /* past C */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct kvt_alloc out;
		int r = kvt_reg_find(reg, cases[i].addr, &out);
		CU_ASSERT_EQUAL(r == 0, cases[i].found);
		if (!r && cases[i].found)
			CU_ASSERT_EQUAL(out.base, cases[i].base);
	}
	struct kvt_alloc out;
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x10100000, &out), 0);
	CU_ASSERT_EQUAL(out.size, 3 * MiB);
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x10100001, &out), -ENOENT);
	CU_ASSERT_EQUAL(kvt_reg_remove(reg, 0x10000000, &out), 0);
	CU_ASSERT_EQUAL(out.kind, 1);
	CU_ASSERT_EQUAL(kvt_reg_find(reg, 0x10000010, NULL), -ENOENT);
	CU_ASSERT_EQUAL(kvt_reg_remove(reg, 0x10000000, NULL), -ENOENT);
	kvt_reg_remove(reg, 0x10100000, NULL);
	kvt_reg_remove(reg, 0x40000000, NULL);
	struct kvt_reg_stats st;
	kvt_reg_stats(reg, &st);
	CU_ASSERT_EQUAL(st.nr_live, 0);
	CU_ASSERT_EQUAL(st.bytes_live, 0);
}

static int only_kind7(const struct kvt_alloc *a) { return a->kind == 7; }

/*  [M: 0x20000000, 10 MiB (kind 7)]    [N: 0x21000000, 4 MiB (kind 2)]
 *  carve [0x20200000, +2 MiB)  -> M splits into [0x20000000,2M) + [0x20400000,6M)
 *  carve [0x20500000, 64 MiB) of kind 7 only -> right part trimmed to 1 MiB, N kept */
static void test_carve(void)
{
	put(0x20000000, 10 * MiB, 7);
	put(0x21000000, 4 * MiB, 2);
	CU_ASSERT_EQUAL(kvt_reg_carve(reg, 0x20200000, 2 * MiB, only_kind7), (int64_t)(2 * MiB));
	struct kvt_alloc a;
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x20000000, &a), 0);
	CU_ASSERT_EQUAL(a.size, 2 * MiB);
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x20400000, &a), 0);
	CU_ASSERT_EQUAL(a.size, 6 * MiB);
	CU_ASSERT_EQUAL(a.kind, 7);
	CU_ASSERT_EQUAL(kvt_reg_find(reg, 0x20300000, NULL), -ENOENT);
	CU_ASSERT_EQUAL(kvt_reg_carve(reg, 0x20500000, 64 * MiB, only_kind7), (int64_t)(5 * MiB));
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x20400000, &a), 0);
	CU_ASSERT_EQUAL(a.size, 1 * MiB);
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x21000000, &a), 0);   /* other kind kept */
	CU_ASSERT_EQUAL(kvt_reg_carve(reg, 0x30000000, 4096, NULL), 0);
	/* exact whole-record fast path */
	CU_ASSERT_EQUAL(kvt_reg_carve(reg, 0x20000000, 2 * MiB, NULL), (int64_t)(2 * MiB));
	kvt_reg_carve(reg, 0x20000000, 256 * MiB, NULL);
	struct kvt_reg_stats st;
	kvt_reg_stats(reg, &st);
	CU_ASSERT_EQUAL(st.nr_live, 0);
}

static void test_replace_and_zero(void)
{
	put(0x50000000, 4096, 1);
	struct kvt_alloc a = { .base = 0x50000000, .size = 8192, .kind = 4 };
	CU_ASSERT_EQUAL(kvt_reg_insert(reg, &a), 1);      /* replaced */
	struct kvt_alloc out;
	CU_ASSERT_EQUAL(kvt_reg_lookup(reg, 0x50000000, &out), 0);
	CU_ASSERT_EQUAL(out.size, 8192);
	CU_ASSERT_EQUAL(out.kind, 4);
	struct kvt_alloc z = { .base = 0x60000000, .size = 0 };
	CU_ASSERT_EQUAL(kvt_reg_insert(reg, &z), 0);      /* size 0 kept as 1 byte */
	CU_ASSERT_EQUAL(kvt_reg_find(reg, 0x60000000, NULL), 0);
	CU_ASSERT_EQUAL(kvt_reg_find(reg, 0x60000001, NULL), -ENOENT);
	kvt_reg_remove(reg, 0x50000000, NULL);
	kvt_reg_remove(reg, 0x60000000, NULL);
}

/* 16 threads x 10,000 random insert/find/remove on disjoint address slices;
 * afterwards every thread's own view must match the registry exactly. */
#define NR_THREADS 16
#define NR_OPS 10000
#define SLOTS 64

struct worker { int id; int errors; uint64_t live[SLOTS]; };

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
	uint64_t base0 = 0x100000000000ull + (uint64_t)w->id * 0x10000000000ull;
	for (int i = 0; i < NR_OPS; i++) {
		seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
		unsigned s = (unsigned)(seed % SLOTS);
		uint64_t base = base0 + (uint64_t)s * 0x40000000ull;
		if (w->live[s]) {
			struct kvt_alloc out;
			if (kvt_reg_find(reg, base + w->live[s] - 1, &out) || out.base != base)
				w->errors++;
			if (kvt_reg_remove(reg, base, &out) || out.size != w->live[s])
				w->errors++;
			w->live[s] = 0;
		} else {
			uint64_t size = 4096 + (seed >> 20) % (256 * MiB);
			struct kvt_alloc a = { .base = base, .size = size, .tid = (uint32_t)w->id };
			if (kvt_reg_insert(reg, &a) != 0)
				w->errors++;
			w->live[s] = size;
		}
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[NR_THREADS];
	static struct worker w[NR_THREADS];
	for (int i = 0; i < NR_THREADS; i++) {
		w[i].id = i;
		pthread_create(&t[i], NULL, worker_fn, &w[i]);
	}
	uint64_t want_nr = 0, want_bytes = 0;
	int errors = 0;
	for (int i = 0; i < NR_THREADS; i++) {
		pthread_join(t[i], NULL);
		errors += w[i].errors;
		for (int s = 0; s < SLOTS; s++) {
			want_nr += w[i].live[s] != 0;
			want_bytes += w[i].live[s];
		}
	}
	CU_ASSERT_EQUAL(errors, 0);
	struct kvt_reg_stats st;
	kvt_reg_stats(reg, &st);
	CU_ASSERT_EQUAL(st.nr_live, want_nr);
	CU_ASSERT_EQUAL(st.bytes_live, want_bytes);
	CU_ASSERT_EQUAL(st.nr_inserts - st.nr_removes - st.nr_replaced, want_nr);
}

/* kvtier's own maps (the registry here) live in an area of their own,
 * KVT_OWN_GAP below the library: the program's next anonymous map is not
 * beside them (beside them, the kernel's map tree made every mmap/munmap
 * pair of the program 4-5 % slower, docs/performance.md). Hints go down,
 * aligned, never overlap, and the kernel takes a free one as given. */
static void test_own_area(void)
{
	void *prog = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(prog != MAP_FAILED);
	uint64_t a = (uint64_t)(uintptr_t)reg, b = (uint64_t)(uintptr_t)prog;
	uint64_t apart = a > b ? a - b : b - a;
	if (apart < KVT_OWN_GAP / 2)
		fprintf(stderr, "registry at %#" PRIx64 ", the program's map at %#" PRIx64 "\n", a, b);
	CU_ASSERT_TRUE(apart >= KVT_OWN_GAP / 2);
	munmap(prog, 2 * MiB);

	uintptr_t big = (uintptr_t)kvt_own_hint(3 * MiB), small = (uintptr_t)kvt_own_hint(100);
	CU_ASSERT_FATAL(big && small);
	CU_ASSERT_EQUAL(big % (2 * MiB), 0);
	CU_ASSERT_EQUAL(small % (64 << 10), 0);
	CU_ASSERT_TRUE(small + 100 <= big);              /* downwards, no overlap */
	CU_ASSERT_PTR_NULL(kvt_own_hint(KVT_OWN_SPAN + 1));
	CU_ASSERT_PTR_NULL(kvt_own_hint(0));
	void *h = kvt_own_hint(2 * MiB);
	void *m = kvt_sys_mmap(h, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(m != MAP_FAILED);
	CU_ASSERT_PTR_EQUAL(m, h);
	kvt_sys_munmap(m, 2 * MiB);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "find on a table of ranges", test_find_table },
		{ "carve (partial munmap)", test_carve },
		{ "replace and zero size", test_replace_and_zero },
		{ "16 threads x 10000 ops", test_threads },
		{ "kvtier's own maps away from the program's", test_own_area },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "registry", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
