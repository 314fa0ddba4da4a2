// SPDX-License-Identifier: MIT
/* CUnit suite for the KV classifier on servers that keep more than one KV
 * pool (policy/classify.c "pool set", docs/policy.md "Pool sets"): each case
 * feeds the classifier directly and checks every answer and verdict. The
 * server-shaped sequences are in tests/replay (test_policy_replay). */
#include <stdint.h>
#include <string.h>

#include "kvt_test.h"
#include "kvtier/policy.h"

#define M (1ull << 20)
#define G (1ull << 30)

static struct kvt_policy_cls cls;
static struct kvt_policy_cls_verdicts out;
static uint64_t t_ns;

/* Weights in, then a query of `free_bytes` on a 140 GiB device: armed. */
static struct kvt_policy_cls_config tail_cfg;   /* late pools on (off by default) */

static void armed_cfg(uint64_t free_bytes, const struct kvt_policy_cls_config *cfg)
{
	kvt_policy_cls_init(&cls, cfg);
	t_ns = 1000;
	for (uint64_t i = 0; i < 10; i++)
		kvt_policy_cls_alloc(&cls, KVT_KIND_DEVICE, (100 + i) * M, t_ns += 1000,
				     900 + i, NULL);
	kvt_policy_cls_meminfo(&cls, free_bytes, 140 * G, t_ns += 1000, NULL);
}

static void armed(uint64_t free_bytes)
{
	armed_cfg(free_bytes, NULL);
}

static void armed_tail(uint64_t free_bytes)
{
	kvt_policy_cls_config_default(&tail_cfg);
	tail_cfg.tail_free_div = 64;
	tail_cfg.over_free = 0;      /* the late-pool rules alone (its cases overfill free) */
	armed_cfg(free_bytes, &tail_cfg);
}

static int alloc(uint64_t size, uint64_t id)
{
	memset(&out, 0, sizeof out);
	return kvt_policy_cls_alloc(&cls, KVT_KIND_DEVICE, size, t_ns += 100000, id, &out);
}

static void zero(uint64_t id, uint64_t size)
{
	memset(&out, 0, sizeof out);
	kvt_policy_cls_memset(&cls, id, 0, size, 0, t_ns += 10000, &out);
}

/* The verdict `out` holds for `id`, 0 if none. */
static uint8_t verdict(uint64_t id)
{
	for (unsigned i = 0; i < out.nr; i++)
		if (out.v[i].id == id)
			return out.v[i].verdict;
	return 0;
}

/*   free 100G:  [3G w1][60G w2]       two window pools, ascending
 *   w2 joins w1's burst; together 63% of free (>= 40%): both KV */
static void test_window_pools(void)
{
	armed(100 * G);
	CU_ASSERT_EQUAL(alloc(3 * G, 1), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(60 * G, 2), KVT_KV_YES);
	CU_ASSERT_EQUAL(out.nr, 1u);
	CU_ASSERT_EQUAL(verdict(1), KVT_VERDICT_CONFIRMED);
	/* 63% < pools_done_pct (80%): still armed for a further pool */
	CU_ASSERT(cls.arm_left > 0);
	CU_ASSERT_EQUAL(cls.kv_since_arm, 63 * G);
}

/*   [1G][5G][1G][5G][1G]   per layer an indexer and a latent cache
 *   no zero fill: the third 1G (3 of one size) confirms all five */
static void test_interleaved(void)
{
	armed(100 * G);
	static const uint64_t size[] = { 1 * G, 5 * G, 1 * G, 5 * G };
	for (unsigned i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(alloc(size[i], 10 + i), KVT_KV_MAYBE);
		CU_ASSERT_EQUAL(out.nr, 0u);
	}
	CU_ASSERT_EQUAL(alloc(1 * G, 14), KVT_KV_YES);
	CU_ASSERT_EQUAL(out.nr, 4u);
	for (unsigned i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(verdict(10 + i), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(alloc(5 * G, 15), KVT_KV_YES);      /* both sizes now KV */
	CU_ASSERT_EQUAL(alloc(1 * G, 16), KVT_KV_YES);
	CU_ASSERT_EQUAL(alloc(2 * G, 17), KVT_KV_MAYBE);    /* a new size: a new burst */
}

/*   [2G table, zeroed][4G K0, zeroed][4G K1, zeroed]
 *   the per-layer run confirms; the lone table before it is refuted */
static void test_lone_table_before_run(void)
{
	armed(100 * G);
	CU_ASSERT_EQUAL(alloc(2 * G, 20), KVT_KV_MAYBE);
	zero(20, 2 * G);
	CU_ASSERT_EQUAL(out.nr, 0u);                        /* 2% of free: no */
	CU_ASSERT_EQUAL(alloc(4 * G, 21), KVT_KV_MAYBE);
	zero(21, 4 * G);
	CU_ASSERT_EQUAL(out.nr, 0u);
	CU_ASSERT_EQUAL(alloc(4 * G, 22), KVT_KV_YES);      /* zeroed pair of 4G */
	CU_ASSERT_EQUAL(out.nr, 2u);
	CU_ASSERT_EQUAL(verdict(20), KVT_VERDICT_REFUTED);
	CU_ASSERT_EQUAL(verdict(21), KVT_VERDICT_CONFIRMED);
}

/*   [0.5G conv, zeroed][30G state, zeroed] | [2G K]x3 ...
 *   a zero-filled state pool of >= 10% of free confirms the set; the KV
 *   pool after it is armed still, until the pools take 80% of free */
static void test_state_then_kv(void)
{
	armed(100 * G);
	CU_ASSERT_EQUAL(alloc(512 * M, 30), KVT_KV_MAYBE);
	zero(30, 512 * M);
	CU_ASSERT_EQUAL(alloc(30 * G, 31), KVT_KV_MAYBE);
	zero(31, 30 * G);
	CU_ASSERT_EQUAL(out.nr, 2u);
	CU_ASSERT_EQUAL(verdict(30), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(verdict(31), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(alloc(2 * G, 32), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(2 * G, 33), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(2 * G, 34), KVT_KV_YES);
	for (uint64_t id = 35; id < 60; id++)               /* 30.5 + 50 = 80.5G */
		CU_ASSERT_EQUAL(alloc(2 * G, id), KVT_KV_YES);
	CU_ASSERT_EQUAL(cls.arm_left, 0u);                  /* the pools are done */
	CU_ASSERT_EQUAL(alloc(1 * G, 60), KVT_KV_NO);
	CU_ASSERT_EQUAL(alloc(1 * G, 61), KVT_KV_NO);
	CU_ASSERT_EQUAL(alloc(1 * G, 62), KVT_KV_NO);
}

/*   free 100G: the floor is free/512 = 200M; after a confirmed pool of
 *   1G members a further pool may be as small as 1G/8 = 128M */
static void test_pool_floor(void)
{
	armed(100 * G);
	CU_ASSERT_EQUAL(alloc(150 * M, 40), KVT_KV_NO);     /* under 200M: ignored */
	for (uint64_t id = 41; id < 44; id++)
		alloc(1 * G, id);
	CU_ASSERT_TRUE(cls.burst.confirmed);
	CU_ASSERT_EQUAL(alloc(150 * M, 44), KVT_KV_MAYBE);  /* a new, smaller pool */
	CU_ASSERT_EQUAL(alloc(100 * M, 45), KVT_KV_NO);     /* under 128M */
	CU_ASSERT_EQUAL(alloc(150 * M, 46), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(150 * M, 47), KVT_KV_YES);
	CU_ASSERT_EQUAL(verdict(44), KVT_VERDICT_CONFIRMED);
}

/* A free refutes the freed member's size only; a new query refutes the rest. */
static void test_free_and_requery(void)
{
	armed(100 * G);
	CU_ASSERT_EQUAL(alloc(3 * G, 50), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(1 * G, 51), KVT_KV_MAYBE);
	memset(&out, 0, sizeof out);
	kvt_policy_cls_free(&cls, 51, t_ns += 1000, &out);
	CU_ASSERT_EQUAL(out.nr, 1u);
	CU_ASSERT_EQUAL(verdict(51), KVT_VERDICT_REFUTED);
	CU_ASSERT_TRUE(cls.burst.open);                     /* 3G still pending */
	memset(&out, 0, sizeof out);
	kvt_policy_cls_meminfo(&cls, 90 * G, 140 * G, t_ns += 1000, &out);
	CU_ASSERT_EQUAL(out.nr, 1u);
	CU_ASSERT_EQUAL(verdict(50), KVT_VERDICT_REFUTED);
	CU_ASSERT_FALSE(cls.burst.open);
	CU_ASSERT_EQUAL(cls.kv_since_arm, 0u);
}

/* Distinct sizes once each (activations) never confirm, up to a fifth size. */
static void test_distinct_sizes(void)
{
	armed(100 * G);
	static const uint64_t size[] = { 768 * M, 384 * M, 1536 * M, 448 * M };
	for (unsigned i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(alloc(size[i], 70 + i), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(1002 * M, 74), KVT_KV_MAYBE);  /* 5th size: new burst */
	CU_ASSERT_EQUAL(out.nr, 4u);
	for (unsigned i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(verdict(70 + i), KVT_VERDICT_REFUTED);
}

/*   free 20G: [10G base, KV at birth][1G swa, zeroed][2G compute]
 *   the arming is spent by the first buffer; the next, within the burst
 *   gap and >= free/64, is a late pool: provisional, confirmed by its zero
 *   fill (placed, not just reported late); the one after it is not */
static void test_second_cache_tail(void)
{
	armed_tail(20 * G);
	CU_ASSERT_EQUAL(alloc(10 * G, 80), KVT_KV_YES);      /* 50% of free */
	CU_ASSERT_EQUAL(cls.arm_left, 0u);
	CU_ASSERT_TRUE(cls.tail_open);
	CU_ASSERT_EQUAL(alloc(1 * G, 81), KVT_KV_MAYBE);
	zero(81, 1 * G);
	CU_ASSERT_EQUAL(out.nr, 1u);
	CU_ASSERT_EQUAL(verdict(81), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_FALSE(cls.tail_open);                      /* one late pool */
	CU_ASSERT_EQUAL(alloc(2 * G, 82), KVT_KV_NO);        /* compute buffer */
	CU_ASSERT_EQUAL(alloc(3 * G, 83), KVT_KV_NO);
	zero(82, 2 * G);
	CU_ASSERT_EQUAL(out.nr, 0u);
	zero(83, 3 * G);
	CU_ASSERT_EQUAL(out.nr, 0u);
}

/*   free 100G: [2G K]x41 (82G: the pools are done) | 64M 1G ... | [8G draft]x3
 *   the late pool's members are >= free/64 and >= 1/12 of the pools before
 *   it (84G: 7G): smaller allocations are ignored and keep it open; a
 *   per-layer run of the late size confirms it, the first member included;
 *   then nothing more is armed */
static void test_late_pool_run(void)
{
	armed_tail(100 * G);
	for (uint64_t id = 100; id < 141; id++)
		alloc(2 * G, id);
	CU_ASSERT_EQUAL(cls.arm_left, 0u);
	CU_ASSERT_TRUE(cls.tail_open);
	CU_ASSERT_EQUAL(alloc(2 * G, 141), KVT_KV_YES);      /* the pool's last layers */
	CU_ASSERT_EQUAL(alloc(64 * M, 142), KVT_KV_NO);      /* under the floor */
	CU_ASSERT_EQUAL(alloc(4 * G, 143), KVT_KV_NO);       /* a compute buffer's share */
	CU_ASSERT_TRUE(cls.tail_open);
	CU_ASSERT_EQUAL(alloc(8 * G, 144), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(8 * G, 145), KVT_KV_MAYBE);
	CU_ASSERT_EQUAL(alloc(8 * G, 146), KVT_KV_YES);
	CU_ASSERT_EQUAL(verdict(144), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(verdict(145), KVT_VERDICT_CONFIRMED);
	CU_ASSERT_EQUAL(alloc(8 * G, 147), KVT_KV_YES);
	CU_ASSERT_EQUAL(alloc(9 * G, 148), KVT_KV_NO);       /* no second late pool */
}

/*   free 100G: [60G pool, KV at birth] | [6G workspace] [5G] ...
 *   a late pool is never confirmed by its share of free memory: a single
 *   workspace after the pools is refuted (here by a fifth size); a
 *   candidate more than burst_gap_ns after the pools is not armed (a
 *   zero-filled one is still reported late) */
static void test_late_pool_refuted(void)
{
	armed_tail(100 * G);
	CU_ASSERT_EQUAL(alloc(60 * G, 150), KVT_KV_YES);
	CU_ASSERT_EQUAL(alloc(6 * G, 151), KVT_KV_MAYBE);    /* a workspace? */
	CU_ASSERT_EQUAL(alloc(5 * G, 152), KVT_KV_MAYBE);    /* joins: a 2nd size */
	memset(&out, 0, sizeof out);
	kvt_policy_cls_free(&cls, 152, t_ns += 1000, &out);
	CU_ASSERT_EQUAL(verdict(152), KVT_VERDICT_REFUTED);
	for (unsigned i = 0; i < 3; i++)                     /* sizes 7, 8, 9 G */
		alloc((7 + i) * G, 153 + i);
	CU_ASSERT_EQUAL(alloc(10 * G, 156), KVT_KV_NO);      /* a 5th size ends it */
	CU_ASSERT_EQUAL(verdict(151), KVT_VERDICT_REFUTED);
	armed_tail(100 * G);
	CU_ASSERT_EQUAL(alloc(60 * G, 160), KVT_KV_YES);
	t_ns += 6000000000ull;                               /* 6 s later */
	CU_ASSERT_EQUAL(alloc(6 * G, 161), KVT_KV_NO);
	zero(161, 6 * G);                                    /* reported only */
	CU_ASSERT_EQUAL(verdict(161), KVT_VERDICT_LATE);
}

/*   free 390M: [193M window pool, KV at birth][1550M full pool]
 *   the full pool is larger than all the free memory: it can never fit
 *   the device, so it is KV at birth (over_free); one that fits the free
 *   memory is not, even past what the pools took (kvtier put them off the
 *   device: llama.cpp's compute buffer after its KV), nor one after the
 *   burst gap, nor with the rule off */
static void test_pool_past_free(void)
{
	armed(390 * M);
	CU_ASSERT_EQUAL(alloc(193 * M, 170), KVT_KV_YES);     /* 49 % of free: spent */
	CU_ASSERT_EQUAL(cls.arm_left, 0u);
	CU_ASSERT_EQUAL(alloc(1550 * M, 171), KVT_KV_YES);
	CU_ASSERT_EQUAL(cls.kv_since_arm, 1743 * M);
	/* a compute buffer that fits the free memory: native, even where it
	 * and the pool together do not */
	armed(390 * M);
	CU_ASSERT_EQUAL(alloc(193 * M, 172), KVT_KV_YES);
	CU_ASSERT_EQUAL(alloc(380 * M, 173), KVT_KV_NO);
	/* past the burst gap: not part of the pools' making */
	armed(390 * M);
	CU_ASSERT_EQUAL(alloc(193 * M, 174), KVT_KV_YES);
	t_ns += 6000000000ull;
	CU_ASSERT_EQUAL(alloc(1550 * M, 175), KVT_KV_NO);
	/* still armed (no pool spent the arming): the armed rules decide */
	armed(390 * M);
	CU_ASSERT_EQUAL(alloc(40 * M, 176), KVT_KV_MAYBE);
	/* off */
	struct kvt_policy_cls_config off;
	kvt_policy_cls_config_default(&off);
	off.over_free = 0;
	armed_cfg(390 * M, &off);
	CU_ASSERT_EQUAL(alloc(193 * M, 177), KVT_KV_YES);
	CU_ASSERT_EQUAL(alloc(1550 * M, 178), KVT_KV_NO);
}

static CU_TestInfo pool_tests[] = {
	{ "two window pools back to back", test_window_pools },
	{ "two sizes interleaved per layer", test_interleaved },
	{ "a lone zeroed table before a per-layer run is refuted", test_lone_table_before_run },
	{ "a state pool, then the KV pool, until the pools are done", test_state_then_kv },
	{ "a smaller pool after a confirmed one", test_pool_floor },
	{ "a free refutes its size, a new query the rest", test_free_and_requery },
	{ "distinct sizes once each never confirm", test_distinct_sizes },
	{ "a second cache after a pool KV at birth is a late pool", test_second_cache_tail },
	{ "a late pool after the pools are done: a per-layer run", test_late_pool_run },
	{ "a late pool is never confirmed by size; not after the gap", test_late_pool_refuted },
	{ "a pool larger than the free memory left is KV at birth", test_pool_past_free },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	CU_SuiteInfo suites[] = {
		{ "policy_pools", NULL, NULL, NULL, NULL, pool_tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
