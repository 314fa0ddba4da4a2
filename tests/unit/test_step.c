// SPDX-License-Identifier: MIT
/* The step prefetch (tier/step.c), driven by hand the way the hooks drive
 * it: a block table the tables source has learned is uploaded, and the
 * copy hook's kvt_step_after_copy runs on the copy's stream. The driver's
 * prefetch is a recording stand-in. What is checked: the chunks the table
 * names that are not in HBM are prefetched to the device on the copy's own
 * stream, once per upload; with no room, a chunk in HBM that no step
 * named is demoted first, a named one never, and what finds neither room
 * nor victim stays; a stream being captured, the option off and a failed
 * prefetch leave the beliefs as they were. */
#include <stdlib.h>
#include <string.h>

#include "kvt_test.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/tables.h"
#include "../../tier/step.c"

#define KVT_SHIM_STUB_SUITE "the step suite"
#include "shim_stubs.h"

#define KV      0x7f1000000000ull      /* the KV range (never dereferenced) */
#define DEV_LO  0x7e0000000000ull
#define TABLE   (DEV_LO + 0x1000)
#define NB      4096u                  /* blocks per K (and V) region */
#define S       32768ull               /* bytes per block */
#define FUNC    0xabc0ull
#define STREAM  0x5150ull
#define NCHUNK  (2 * NB * S >> KVT_CHUNK_SHIFT)

static int32_t host_table[128];

/* ---- the driver stand-in ---- */

static struct call { uint64_t addr; CUmemLocationType type; uint64_t stream; } calls[4096];
static unsigned nr_calls;
static int capturing, fail;

CUresult kvt_cuda_prefetch(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id,
			   CUstream s)
{
	(void)id;
	CU_ASSERT_EQUAL(bytes, KVT_CHUNK_BYTES);
	if (nr_calls < 4096)
		calls[nr_calls++] = (struct call){ p, type, (uint64_t)(uintptr_t)s };
	return fail ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

int kvt_cuda_stream_capturing(CUstream s)
{
	CU_ASSERT_EQUAL((uint64_t)(uintptr_t)s, STREAM);
	return capturing;
}

static int on_device(uint64_t a)
{
	return a >= DEV_LO && a < DEV_LO + (1ull << 32);
}

/* ---- the table ---- */

/* 40 ids in blocks [0, 640): K chunks 0..9, V chunks 64..73 */
static uint32_t ids[40];

static void upload(const uint32_t *v, unsigned n)
{
	for (unsigned i = 0; i < 128; i++)
		host_table[i] = i < n ? (int32_t)v[i] : (int32_t)v[0];
	kvt_prof_on_copy(TABLE, (uint64_t)(uintptr_t)host_table, sizeof host_table);
}

static void launch(unsigned nd)
{
	uint64_t val[3] = { KV, KV + NB * S, TABLE };
	int slot[3] = { kvt_heat_find(KV), kvt_heat_find(KV + NB * S), -1 };
	uint64_t scal[3] = { 4ull << 32 | nd, 6ull << 32 | 16, 7ull << 32 | 2048 };
	kvt_tables_on_launch(FUNC, val, slot, 3, scal, 3);
}

static uint8_t tier_of(unsigned chunk)
{
	return kvt_heat_chunk_at(KV + ((uint64_t)chunk << KVT_CHUNK_SHIFT))->tier;
}

static void set_tier(unsigned chunk, uint8_t t)
{
	kvt_heat_chunk_at(KV + ((uint64_t)chunk << KVT_CHUNK_SHIFT))->tier = t;
}

/* Whether the table names chunk c (K: id * S, V: NB * S + id * S). */
static int in_table(unsigned c)
{
	for (unsigned i = 0; i < 40; i++)
		if ((ids[i] * S) >> KVT_CHUNK_SHIFT == c || ((NB + ids[i]) * S) >> KVT_CHUNK_SHIFT == c)
			return 1;
	return 0;
}

static unsigned nr_named(void)
{
	unsigned n = 0;
	for (unsigned c = 0; c < NCHUNK; c++)
		n += in_table(c);
	return n;
}

/* A learned table: uploads and launches with faults on the named rows,
 * one poll an epoch, until the layout is accepted. Then one more launch
 * (the table is stepped whole: no lengths beside it). */
static void setup(void)
{
	kvt_heat_reset();
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(KV, 2 * NB * S, KVT_PLAN_TIER_FAR, -1, 0), 0);
	kvt_prof_set_device_test(on_device);
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH | 1u << KVT_SRC_TABLES);
	kvt_tables_reset();
	kvt_step_reset();
	kvt_opt.step_prefetch = 1;
	capturing = fail = 0;
	CU_ASSERT_EQUAL_FATAL(kvt_src_tables.start(), 0);
	srand(11);
	for (unsigned i = 0; i < 40; i++)
		ids[i] = (uint32_t)(rand() % 640);
	struct kvt_tables_info in = { 0 };
	for (unsigned e = 0; e < 12 && !in.accepted; e++) {
		upload(ids, 40);
		launch(3 + e);
		for (unsigned i = 0; i < 40; i++) {
			kvt_src_tables.on_fault(KV + ids[i] * S + 64);
			kvt_src_tables.on_fault(KV + (NB + ids[i]) * S);
		}
		kvt_src_tables.poll();
		kvt_tables_info(&in);
	}
	CU_ASSERT_EQUAL_FATAL(in.accepted, 1);
	launch(40);
	kvt_step_after_copy(STREAM);           /* the learning uploads' steps: none yet */
	nr_calls = 0;
}

/* ---- the cases ---- */

static void test_named_far_chunks_promoted(void)
{
	setup();
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	unsigned want = nr_named();
	CU_ASSERT(want >= 10);
	CU_ASSERT_EQUAL(nr_calls, want);
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		CU_ASSERT(in_table(c));
		CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_DEVICE);
		CU_ASSERT_EQUAL(calls[i].stream, STREAM);
	}
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(tier_of(c), in_table(c) ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR);
	/* no new upload: nothing; the same upload again: nothing left to move */
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, want);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, want);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.promoted, want);
	CU_ASSERT_EQUAL(si.steps, 2);
	CU_ASSERT_EQUAL(si.named, 2 * want);
	CU_ASSERT(kvt_step_owns(kvt_heat_find(KV)));
}

/* No room: 6 chunks in HBM that no table names (100..105) are demoted,
 * each before a promotion; the named ones still far after that stay. */
static void test_victims_first(void)
{
	setup();
	for (unsigned c = 100; c < 106; c++)
		set_tier(c, KVT_PLAN_TIER_HBM);
	kvt_step_set_room(0);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 12);
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		if (i % 2 == 0) {
			CU_ASSERT(c >= 100 && c < 106);      /* a victim, then ... */
			CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_HOST);
			CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_FAR);
		} else {
			CU_ASSERT(in_table(c));                 /* ... the promotion it made room for */
			CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_DEVICE);
			CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_HBM);
		}
	}
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.demoted, 6);
	CU_ASSERT_EQUAL(si.promoted, 6);
	CU_ASSERT_EQUAL(si.no_room, nr_named() - 6);
	/* the next upload: every chunk in HBM is named now, none is a victim */
	unsigned before = nr_calls;
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, before);
}

static void test_capturing_option_failure(void)
{
	setup();
	kvt_step_set_room(1000);
	capturing = 1;                           /* a graph would keep the moves */
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 0);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.capturing, 1);
	capturing = 0;
	kvt_opt.step_prefetch = 0;               /* KVTIER_STEP_PREFETCH=0 */
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 0);
	kvt_opt.step_prefetch = 1;
	fail = 1;                                /* the driver refuses: beliefs stay */
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, nr_named());
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_FAR);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.failed, nr_named());
	CU_ASSERT_EQUAL(si.promoted, 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "named far chunks go to HBM on the copy's stream, once per upload",
		  test_named_far_chunks_promoted },
		{ "no room: an unnamed chunk in HBM is demoted first, a named one never",
		  test_victims_first },
		{ "a captured stream, the option off, a failed prefetch: nothing moves",
		  test_capturing_option_failure },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "step", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
