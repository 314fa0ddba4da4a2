// SPDX-License-Identifier: MIT
/* Evidence classes per KV range (profiler/evclass.c), driven by hand: marks
 * as the hooks set them, one kvt_evc_epoch per migrator epoch. What is
 * checked: a class settles only after it held KVT_EVC_HOLD epochs; the
 * strongest class seen in the window wins; a class not seen for
 * KVT_EVC_WINDOW epochs lapses to the next; a range that changes hands
 * starts over; the totals count live ranges and their bytes. */
#include "kvt_test.h"
#include "../profiler/evclass.h"
#include "../profiler/heat.h"
#include "../../tier/floor.c"    /* tier/ goes only into libkvtier.so */

#define KVT_SHIM_STUB_SUITE "the evclass suite"
#include "shim_stubs.h"

#define A 0x7f1000000000ull
#define B 0x7f2000000000ull
#define MIB (1ull << 20)

static int slot_a, slot_b;

static void setup(void)
{
	kvt_heat_reset();
	kvt_evc_reset();
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 64 * MIB, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(B, 32 * MIB, KVT_PLAN_TIER_FAR, 0, 0), 0);
	slot_a = kvt_heat_find(A);
	slot_b = kvt_heat_find(B + 5 * MIB);
	CU_ASSERT_FATAL(slot_a >= 0 && slot_b >= 0 && slot_a != slot_b);
}

/* n epochs, each marking slot with c (c < 0: no mark) */
static void epochs(unsigned n, int slot, int c)
{
	for (unsigned i = 0; i < n; i++) {
		if (c >= 0)
			kvt_evc_mark(slot, (enum kvt_evc)c);
		kvt_evc_epoch();
	}
}

static void test_settles_after_hold(void)
{
	setup();
	epochs(KVT_EVC_HOLD - 1, slot_a, KVT_EVC_ALLOCATION);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_NONE);     /* not held long enough */
	epochs(2, slot_a, KVT_EVC_ALLOCATION);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_ALLOCATION);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_NONE);     /* never marked */
	uint64_t nr[KVT_EVC__COUNT], bytes[KVT_EVC__COUNT];
	kvt_evc_totals(nr, bytes);
	CU_ASSERT_EQUAL(nr[KVT_EVC_ALLOCATION], 1);
	CU_ASSERT_EQUAL(bytes[KVT_EVC_ALLOCATION], 64 * MIB);
	CU_ASSERT_EQUAL(nr[KVT_EVC_NONE], 1);
	CU_ASSERT_EQUAL(bytes[KVT_EVC_NONE], 32 * MIB);
}

/* Faults and allocation marks together: the stronger one; faults alone
 * after the allocation marks stop: allocation holds for the window, then
 * lapses to faults (settling after its hold). Marks by address find the
 * range; an address outside every range is ignored. */
static void test_strongest_and_lapse(void)
{
	setup();
	for (unsigned i = 0; i < KVT_EVC_HOLD + 2; i++) {
		kvt_evc_mark_addr(B + 7 * MIB, KVT_EVC_FAULTS);
		kvt_evc_mark(slot_b, KVT_EVC_ALLOCATION);
		kvt_evc_mark_addr(0x1000, KVT_EVC_BLOCKS);
		kvt_evc_epoch();
	}
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_ALLOCATION);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_NONE);
	for (unsigned i = 0; i < KVT_EVC_WINDOW - 2; i++) {
		kvt_evc_mark_addr(B, KVT_EVC_FAULTS);
		kvt_evc_epoch();
	}
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_ALLOCATION);   /* still in the window */
	epochs(KVT_EVC_HOLD + 3, slot_b, KVT_EVC_FAULTS);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_FAULTS);
	/* nothing at all for a window and a hold: none */
	epochs(KVT_EVC_WINDOW + KVT_EVC_HOLD + 1, slot_b, -1);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_NONE);
}

/* A range untracked and another tracked in its slot starts with nothing. */
static void test_new_range_starts_over(void)
{
	setup();
	epochs(KVT_EVC_HOLD + 1, slot_a, KVT_EVC_FAULTS);
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_FAULTS);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	kvt_evc_epoch();
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_NONE);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 16 * MIB, KVT_PLAN_TIER_FAR, 0, 0), 0);
	int s = kvt_heat_find(A);
	kvt_evc_epoch();
	CU_ASSERT_EQUAL(kvt_evc_settled(s), KVT_EVC_NONE);
	uint64_t nr[KVT_EVC__COUNT], bytes[KVT_EVC__COUNT];
	kvt_evc_totals(nr, bytes);
	CU_ASSERT_EQUAL(nr[KVT_EVC_FAULTS], 0);
	CU_ASSERT_EQUAL(nr[KVT_EVC_NONE], 2);
	/* bad slots and classes are ignored */
	kvt_evc_mark(-1, KVT_EVC_FAULTS);
	kvt_evc_mark(KVT_HEAT_MAX_RANGES, KVT_EVC_FAULTS);
	kvt_evc_mark(s, KVT_EVC__COUNT);
	CU_ASSERT_STRING_EQUAL(kvt_evc_name(KVT_EVC_BLOCKS), "blocks");
	CU_ASSERT_STRING_EQUAL(kvt_evc_name(KVT_EVC__COUNT), "?");
}

/* The floor's notice (tier/floor.c): said only when every KV byte with a
 * settled class is coarser than blocks and there are more of them than
 * the HBM budget, for KVT_FLOOR_HOLD epochs in a row; a range with block
 * evidence, or a budget that holds the KV, keeps it quiet. */
static void test_floor_notice(void)
{
	setup();
	kvt_floor_reset();
	unsigned i;
	for (i = 0; i < 3 * KVT_FLOOR_HOLD; i++) {       /* 96 MiB, a budget of 128 */
		kvt_evc_mark(slot_a, KVT_EVC_ALLOCATION);
		kvt_evc_mark(slot_b, KVT_EVC_FAULTS);
		kvt_evc_epoch();
		kvt_floor_epoch(128 * MIB, NULL);
	}
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_b), KVT_EVC_FAULTS);
	CU_ASSERT_FALSE(kvt_floor_said());
	for (i = 0; i < 3 * KVT_FLOOR_HOLD; i++) {       /* a budget of 64, blocks on A */
		kvt_evc_mark(slot_a, KVT_EVC_BLOCKS);
		kvt_evc_mark(slot_b, KVT_EVC_FAULTS);
		kvt_evc_epoch();
		kvt_floor_epoch(64 * MIB, NULL);
	}
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_BLOCKS);
	CU_ASSERT_FALSE(kvt_floor_said());
	/* A's blocks stop: blocks lapse after the window, allocation settles
	 * after its hold, and the notice comes KVT_FLOOR_HOLD epochs later */
	unsigned said_at = 0;
	for (i = 1; i <= KVT_EVC_WINDOW + KVT_EVC_HOLD + 2 * KVT_FLOOR_HOLD && !said_at; i++) {
		kvt_evc_mark(slot_a, KVT_EVC_ALLOCATION);
		kvt_evc_mark(slot_b, KVT_EVC_FAULTS);
		kvt_evc_epoch();
		kvt_floor_epoch(64 * MIB, NULL);
		if (kvt_floor_said())
			said_at = i;
	}
	CU_ASSERT_EQUAL(kvt_evc_settled(slot_a), KVT_EVC_ALLOCATION);
	CU_ASSERT_TRUE(said_at >= KVT_EVC_WINDOW + KVT_FLOOR_HOLD);
	CU_ASSERT_TRUE(said_at <= KVT_EVC_WINDOW + KVT_EVC_HOLD + KVT_FLOOR_HOLD + 1);
	kvt_floor_reset();
	CU_ASSERT_FALSE(kvt_floor_said());
	kvt_floor_epoch(0, NULL);                              /* no budget yet: nothing */
	CU_ASSERT_FALSE(kvt_floor_said());
}

/* The step notice (tier/floor.c): windows of KVT_FLOOR_WINDOW epochs,
 * said after KVT_FLOOR_OVER_WINDOWS windows in a row with at least
 * KVT_FLOOR_OVER_PCT % of their steps over the budget; a window under the
 * share, or with too few steps, starts the count again; said once. */
static void test_floor_steps_notice(void)
{
	kvt_floor_reset();
	struct kvt_floor_steps st = { 0, 0, 0 };
	/* 100 steps an epoch, 30 % over: never */
	unsigned i;
	for (i = 0; i < 10 * KVT_FLOOR_WINDOW; i++) {
		st.steps += 100;
		st.over += 30;
		st.peak_pages = 6000;
		kvt_floor_epoch(256 * MIB, &st);
	}
	CU_ASSERT_FALSE(kvt_floor_steps_said());
	CU_ASSERT_FALSE(kvt_floor_said());
	/* no budget, or no counters: nothing */
	for (i = 0; i < 10 * KVT_FLOOR_WINDOW; i++) {
		st.steps += 100;
		st.over += 50;
		kvt_floor_epoch(0, &st);
		kvt_floor_epoch(256 * MIB, NULL);
	}
	CU_ASSERT_FALSE(kvt_floor_steps_said());
	/* 40 % over, but one window in between at 1 %: the count starts over */
	kvt_floor_reset();
	unsigned said_at = 0;
	for (i = 1; i <= 10 * KVT_FLOOR_WINDOW && !said_at; i++) {
		unsigned w = (i - 1) / (KVT_FLOOR_WINDOW + 1);   /* a window spans WINDOW + 1 epochs */
		st.steps += 100;
		st.over += w == 1 ? 1 : 40;
		kvt_floor_epoch(256 * MIB, &st);
		if (kvt_floor_steps_said())
			said_at = i;
	}
	CU_ASSERT_TRUE(said_at > (2 + KVT_FLOOR_OVER_WINDOWS - 1) * KVT_FLOOR_WINDOW);
	CU_ASSERT_TRUE(said_at <= (2 + KVT_FLOOR_OVER_WINDOWS + 1) * (KVT_FLOOR_WINDOW + 1));
	/* too few steps a window: not judged */
	kvt_floor_reset();
	for (i = 0; i < 10 * KVT_FLOOR_WINDOW; i++) {
		st.steps += 1;
		st.over += 1;
		kvt_floor_epoch(256 * MIB, &st);
	}
	CU_ASSERT_FALSE(kvt_floor_steps_said());
	kvt_floor_reset();
	CU_ASSERT_FALSE(kvt_floor_steps_said());
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "a class settles after it held", test_settles_after_hold },
		{ "the strongest in the window; a lapse to the next", test_strongest_and_lapse },
		{ "a new range in the slot starts over", test_new_range_starts_over },
		{ "the floor's notice: coarse evidence on KV over the budget", test_floor_notice },
		{ "the floor's step notice: steps that name more than the budget", test_floor_steps_notice },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "evclass", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
