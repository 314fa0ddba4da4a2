// SPDX-License-Identifier: MIT
/* Kernel parameter layouts (profiler/params.c): what the driver's answers
 * become, that it is asked once per function and generation, answers it
 * cannot give, a full table, and lookups from many threads at once. */
#include <pthread.h>
#include <string.h>

#include "kvt_test.h"
#include "../profiler/params.h"

/* A fake cuFuncGetParamInfo: function f has sizes[f & 7] (terminated by 0);
 * f & 8: the driver does not know the handle. */
static const size_t sizes[8][20] = {
	{ 8, 16, 4, 8, 72, 0 },            /* 5 parameters, one 72-byte struct */
	{ 4, 4, 0 },                       /* no readable word */
	{ 0 },                             /* no parameter at all */
	{ 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 0 },   /* 19 */
	{ 12, 0 },                         /* 12 bytes: one whole word */
	{ 528, 8, 4096, 0 },               /* FA2's params struct; a 4 KiB one: capped */
	{ 8, 0 }, { 8, 0 },
};
static unsigned nr_asked;

static int info(uint64_t f, unsigned i, size_t *size)
{
	__atomic_fetch_add(&nr_asked, 1, __ATOMIC_RELAXED);
	if (f & 8)
		return -1;
	const size_t *s = sizes[f & 7];
	for (unsigned k = 0; k <= i; k++)
		if (!s[k])
			return 1;
	*size = s[i];
	return 0;
}

static void setup(void)
{
	kvt_prof_set_param_info(info);
	kvt_param_layouts_forget();
	nr_asked = 0;
}

static void test_layout_decoded(void)
{
	struct kvt_param_layout l;
	setup();
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x1000, &l), 1);
	CU_ASSERT_EQUAL(l.nr, 5);
	const uint8_t want[5] = { 1, 2, 0, 1, 9 };              /* a 72-byte struct: whole */
	CU_ASSERT_EQUAL(memcmp(l.words, want, 5), 0);
	CU_ASSERT_EQUAL(l.words[5], 0);
	CU_ASSERT_EQUAL(l.four, 1u << 2);                       /* the 4-byte scalar */
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x1001, &l), 1);
	CU_ASSERT_EQUAL(l.nr, 2);
	CU_ASSERT_EQUAL(l.words[0] + l.words[1], 0);
	CU_ASSERT_EQUAL(l.four, 3);
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x1003, &l), 1);
	CU_ASSERT_EQUAL(l.nr, 19);                              /* past the 16th */
	CU_ASSERT_EQUAL(l.words[17], 1);
	CU_ASSERT_EQUAL(l.words[18], 0);
	CU_ASSERT_EQUAL(l.four, 1ull << 18);
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x1004, &l), 1);
	CU_ASSERT_EQUAL(l.words[0], 1);
	CU_ASSERT_EQUAL(l.four, 0);                             /* 12 bytes is not a scalar */
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x1005, &l), 1);
	CU_ASSERT_EQUAL(l.nr, 3);
	CU_ASSERT_EQUAL(l.words[0], 66);                        /* 528 bytes, all of them */
	CU_ASSERT_EQUAL(l.words[1], 1);
	CU_ASSERT_EQUAL(l.words[2], KVT_PARAM_WORDS);           /* 4 KiB: capped */
}

/* No layout: the driver does not know it, it has no parameter (a handle
 * the query may misread), no driver entry, a null handle. */
static void test_no_layout(void)
{
	struct kvt_param_layout l;
	setup();
	CU_ASSERT_EQUAL(kvt_param_layout(0x1008, &l), 0);
	CU_ASSERT_EQUAL(kvt_param_layout(0x1002, &l), 0);
	CU_ASSERT_EQUAL(kvt_param_layout(0, &l), 0);
	unsigned asked = nr_asked;
	CU_ASSERT(asked >= 2);
	/* a "none" is kept too: not asked again */
	CU_ASSERT_EQUAL(kvt_param_layout(0x1008, &l), 0);
	CU_ASSERT_EQUAL(kvt_param_layout(0x1002, &l), 0);
	CU_ASSERT_EQUAL(nr_asked, asked);
	kvt_prof_set_param_info(NULL);
	kvt_param_layouts_forget();
	CU_ASSERT_EQUAL(kvt_param_layout(0x2000, &l), 0);
	CU_ASSERT_EQUAL(nr_asked, asked);
}

/* Asked once per function; again after a module unload (forget). */
static void test_asked_once(void)
{
	struct kvt_param_layout l;
	setup();
	CU_ASSERT_EQUAL_FATAL(kvt_param_layout(0x3000, &l), 1);
	unsigned first = nr_asked;
	CU_ASSERT_EQUAL(first, 6);                              /* 5 sizes and the end */
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(kvt_param_layout(0x3000, &l), 1);
	CU_ASSERT_EQUAL(nr_asked, first);
	kvt_param_layouts_forget();
	CU_ASSERT_EQUAL(kvt_param_layout(0x3000, &l), 1);
	CU_ASSERT_EQUAL(nr_asked, 2 * first);
	CU_ASSERT_EQUAL(l.nr, 5);
}

/* More functions than slots: each lookup is right or says "none", never
 * another function's layout; the misses are counted. */
static void test_table_full(void)
{
	struct kvt_param_layout l;
	setup();
	uint64_t full0 = kvt_param_layouts_full(), kept0 = kvt_param_layouts_kept();
	unsigned found = 0;
	for (uint64_t f = 0x100000; f < 0x100000 + 3 * 4096 * 128ull; f += 128) {
		uint64_t h = f | 4;                                 /* one 12-byte parameter */
		int r = kvt_param_layout(h, &l);
		if (r) {
			found++;
			CU_ASSERT_EQUAL(l.nr, 1);
			CU_ASSERT_EQUAL(l.words[0], 1);
		}
	}
	CU_ASSERT(found > 0);
	CU_ASSERT(kvt_param_layouts_full() > full0);
	CU_ASSERT(kvt_param_layouts_kept() > kept0);
	CU_ASSERT(kvt_param_layouts_kept() <= 4096);
}

/* Many threads, a few functions, a forget now and then: every answer is
 * the function's own layout or "none" (a slot being written). */
static unsigned nr_wrong;

static void *lookups(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct kvt_param_layout l;
	for (unsigned i = 0; i < 20000; i++) {
		uint64_t f = 0x40000000ull + ((i * 7 + id) % 64) * 16 + (i & 1 ? 0 : 4);
		if (kvt_param_layout(f, &l)) {
			unsigned want_nr = f & 4 ? 1 : 5, want0 = 1;
			if (l.nr != want_nr || l.words[0] != want0)
				__atomic_fetch_add(&nr_wrong, 1, __ATOMIC_RELAXED);
		}
		if (id == 0 && i % 1000 == 999)
			kvt_param_layouts_forget();
	}
	return NULL;
}

static void test_concurrent(void)
{
	setup();
	pthread_t th[4];
	for (uintptr_t i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, lookups, (void *)i), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT_EQUAL(nr_wrong, 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "the driver's sizes become words per parameter", test_layout_decoded },
		{ "no layout where the driver cannot say", test_no_layout },
		{ "asked once per function and generation", test_asked_once },
		{ "a full table: right or none, never another's", test_table_full },
		{ "lookups from four threads, forgets between", test_concurrent },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "params", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
