// SPDX-License-Identifier: MIT
/* Server decoders (profiler/decode.c, profiler/decode_vllm.c), driven by
 * hand the way the copy and launch hooks drive them: a driver that names
 * functions and gives their parameter sizes, host buffers standing for
 * pinned uploads and UVA arrays, device addresses that are never
 * dereferenced. What is checked: vLLM V2's GPU block table is kept right in
 * shadow across appends, a request's end and its row's reuse; a row whose
 * write was not seen gives only the part known; a function is a decoder's
 * only with the name and the layout; mismatches switch the decoder off for
 * good, and it feeds nothing after. */
#include <string.h>

#include "kvt_test.h"
#include "../profiler/decode.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/params.h"
#include "../profiler/tables.h"

#define KVT_SHIM_STUB_SUITE "the decode suite"
#include "shim_stubs.h"

#define KV        0x7f1000000000ull    /* a tracked KV range (never dereferenced) */
#define DEV_LO    0x7e0000000000ull    /* "device memory" */
#define TABLE     (DEV_LO + 0x10000)   /* the persistent GPU table */
#define INPUT     (DEV_LO + 0x20000)   /* input_block_tables: what attention names */
#define CONTENTS  (DEV_LO + 0x30000)   /* write_contents, uploaded each step */
#define MAP       (DEV_LO + 0x40000)   /* idx_mapping, uploaded each step */
#define STRIDE    8                    /* ids per row */

enum { F_APPLY = 0x100, F_GATHER = 0x200, F_OTHER = 0x300, F_APPLY5 = 0x400 };

static int on_device(uint64_t a)
{
	return a >= DEV_LO && a < DEV_LO + (1ull << 32);
}

static int names(uint64_t f, const char **name)
{
	switch (f) {
	case F_APPLY: case F_APPLY5: *name = "_apply_write_kernel"; return 0;
	case F_GATHER: *name = "_gather_block_tables_kernel"; return 0;
	case F_OTHER: *name = "flash_fwd_kernel"; return 0;
	}
	return -1;
}

static int sizes(uint64_t f, unsigned i, size_t *size)
{
	unsigned n = f == F_APPLY ? 6 : f == F_GATHER ? 5 : f == F_APPLY5 ? 5 : 3;
	if (i >= n)
		return 1;
	*size = 8;
	return 0;
}

/* UVA arrays (pinned host memory the kernels read in place) and the
 * pinned sources of the two uploads */
static int32_t u_idx[16], u_starts[16], u_cul[17], u_nblocks[16];
static int32_t h_ids[64], h_map[16];

static void setup(void)
{
	kvt_heat_reset();
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(KV, 64ull << 20, KVT_PLAN_TIER_FAR, 0, 0), 0);
	kvt_prof_set_device_test(on_device);
	kvt_prof_set_param_info(sizes);
	kvt_param_layouts_forget();
	kvt_decode_set_name_fn(names);
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH | 1u << KVT_SRC_TABLES);
	kvt_tables_reset();
	kvt_decode_reset();
}

/* One write: row gets ids[0..n) from column start. */
struct wr {
	int32_t row, start;
	unsigned n;
	int32_t ids[8];
};

/* The step's apply_staged_writes: the upload of the ids, then the kernel
 * (upload = 0: the upload is not seen). Returns the launch's answer. */
static int apply_with(uint64_t func, const struct wr *w, unsigned nw, int upload)
{
	unsigned nid = 0;
	u_cul[0] = 0;
	for (unsigned k = 0; k < nw; k++) {
		u_idx[k] = w[k].row;
		u_starts[k] = w[k].start;
		for (unsigned j = 0; j < w[k].n; j++)
			h_ids[nid++] = w[k].ids[j];
		u_cul[k + 1] = (int32_t)nid;
	}
	if (upload)
		kvt_decode_on_copy(CONTENTS, (uint64_t)(uintptr_t)h_ids, nid * 4);
	uint64_t p[6] = { TABLE, STRIDE, (uint64_t)(uintptr_t)u_idx, (uint64_t)(uintptr_t)u_starts,
			  CONTENTS, (uint64_t)(uintptr_t)u_cul };
	void *params[6] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5] };
	return kvt_decode_on_launch(func, params, nw, 0);
}

static int apply(const struct wr *w, unsigned nw)
{
	return apply_with(F_APPLY, w, nw, 1);
}

/* The step's gather over rows[0..n) with their block counts nb (set in the
 * UVA num_blocks): 1 when it fed a table, *got its ids. */
static int gather(const int32_t *rows, const int32_t *nb, unsigned n, const int32_t **got,
		  uint32_t *ngot)
{
	for (unsigned i = 0; i < n; i++) {
		h_map[i] = rows[i];
		u_nblocks[rows[i]] = nb[i];
	}
	kvt_decode_on_copy(MAP, (uint64_t)(uintptr_t)h_map, n * 4);
	uint64_t p[5] = { MAP, TABLE, INPUT, STRIDE, (uint64_t)(uintptr_t)u_nblocks };
	void *params[5] = { &p[0], &p[1], &p[2], &p[3], &p[4] };
	int r = kvt_decode_on_launch(F_GATHER, params, n, 0);
	uint64_t dst = 0;
	*ngot = kvt_decode_last_feed(&dst, got);
	if (r)
		CU_ASSERT_EQUAL(dst, INPUT);
	return r;
}

#define IDS(...) ((const int32_t[]){ __VA_ARGS__ })
static void same(const int32_t *got, uint32_t n, const int32_t *want, uint32_t nw)
{
	CU_ASSERT_EQUAL_FATAL(n, nw);
	CU_ASSERT_EQUAL(memcmp(got, want, 4ull * n), 0);
}

/* The functions are named at their first launch, and copies are kept only
 * once a decoder is live: a server's first step is never decoded. Stand
 * for it with a launch of each over no rows. */
static void first_step(void)
{
	uint64_t p[6] = { 0 };
	void *params[6] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5] };
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_APPLY, params, 0, 0), 0);
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_GATHER, params, 0, 0), 0);
}

static void test_shadow_appends_and_reuse(void)
{
	setup();
	first_step();
	const int32_t *got;
	uint32_t n;
	/* nothing written yet: nothing to feed */
	CU_ASSERT_EQUAL(gather(IDS(0), IDS(1), 1, &got, &n), 0);
	/* two requests start: row 0 with blocks 5 6, row 3 with 9 */
	struct wr a[] = { { 0, 0, 2, { 5, 6 } }, { 3, 0, 1, { 9 } } };
	CU_ASSERT_EQUAL(apply(a, 2), 0);
	CU_ASSERT_EQUAL(gather(IDS(0, 3), IDS(2, 1), 2, &got, &n), 1);
	same(got, n, IDS(5, 6, 9), 3);
	/* row 0 appends 7; the batch order changes */
	struct wr b[] = { { 0, 2, 1, { 7 } } };
	CU_ASSERT_EQUAL(apply(b, 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(3, 0), IDS(1, 3), 2, &got, &n), 1);
	same(got, n, IDS(9, 5, 6, 7), 4);
	/* row 0's request ends; a new one reuses the row with blocks 20 21:
	 * 7 is stale in the device row, and num_blocks says 2 */
	struct wr c[] = { { 0, 0, 2, { 20, 21 } } };
	CU_ASSERT_EQUAL(apply(c, 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(0), IDS(2), 1, &got, &n), 1);
	same(got, n, IDS(20, 21), 2);
	/* a gather reads a prefix: 2 of row 0's blocks */
	struct wr d[] = { { 0, 2, 2, { 22, 23 } } };
	CU_ASSERT_EQUAL(apply(d, 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(0, 3), IDS(2, 1), 2, &got, &n), 1);
	same(got, n, IDS(20, 21, 9), 3);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.matched, 2);
	CU_ASSERT_EQUAL(di.mismatches, 0);
	/* nothing kept in shadow before its kernels were named: the first
	 * step's writes are unknown, and nothing of them is fed */
	setup();
	CU_ASSERT_EQUAL(apply(a, 2), 0);
	CU_ASSERT_EQUAL(gather(IDS(0, 3), IDS(2, 1), 2, &got, &n), 0);
	CU_ASSERT_EQUAL(di.off, 0);
	CU_ASSERT(di.fed >= 4);
}

/* A write whose upload was not seen (the hook came up mid-step, or the
 * host rewrote its buffer): the row is known only up to that write, and
 * the gather never hands out what the shadow does not hold. */
static void test_shadow_unseen_write(void)
{
	setup();
	first_step();
	const int32_t *got;
	uint32_t n;
	struct wr a[] = { { 1, 0, 2, { 40, 41 } } };
	CU_ASSERT_EQUAL(apply(a, 1), 0);
	struct wr b[] = { { 1, 2, 2, { 42, 43 } } };
	CU_ASSERT_EQUAL(apply_with(F_APPLY, b, 1, 0), 0);       /* not uploaded: unseen */
	CU_ASSERT_EQUAL(gather(IDS(1), IDS(4), 1, &got, &n), 1);
	same(got, n, IDS(40, 41), 2);
	/* a later append past the gap does not make the row whole */
	struct wr c[] = { { 1, 4, 1, { 44 } } };
	CU_ASSERT_EQUAL(apply(c, 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(1), IDS(5), 1, &got, &n), 1);
	same(got, n, IDS(40, 41), 2);
	/* the row reused from column 0 is whole again */
	struct wr d[] = { { 1, 0, 3, { 50, 51, 52 } } };
	CU_ASSERT_EQUAL(apply(d, 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(1), IDS(3), 1, &got, &n), 1);
	same(got, n, IDS(50, 51, 52), 3);
}

/* The name alone is not enough: the same name with another layout is not
 * the kernel; another kernel is nobody's; nothing is read while no KV is
 * tracked. */
static void test_name_and_layout(void)
{
	setup();
	struct wr a[] = { { 0, 0, 1, { 5 } } };
	CU_ASSERT_EQUAL(apply_with(F_APPLY5, a, 1, 1), 0);
	uint64_t p[3] = { 1, 2, 3 };
	void *params[3] = { &p[0], &p[1], &p[2] };
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_OTHER, params, 1, 0), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.functions, 2);
	CU_ASSERT_EQUAL(di.matched, 0);
	CU_ASSERT_EQUAL(di.launches, 0);
	kvt_heat_reset();                                /* no KV tracked */
	CU_ASSERT_EQUAL(apply(a, 1), 0);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.launches, 0);
}

/* Writes past their row (a layout the decoder does not follow): each is a
 * mismatch that forgets the shadow; KVT_DECODE_MISMATCHES switch the
 * decoder off, once, and it reads nothing more. */
static void test_mismatch_switches_off(void)
{
	setup();
	first_step();
	const int32_t *got;
	uint32_t n;
	struct wr ok[] = { { 2, 0, 2, { 60, 61 } } };
	CU_ASSERT_EQUAL(apply(ok, 1), 0);
	struct wr bad[] = { { 2, STRIDE - 1, 2, { 1, 2 } } };
	CU_ASSERT_EQUAL(apply(bad, 1), 0);
	/* the shadow was forgotten: nothing known of row 2 */
	CU_ASSERT_EQUAL(gather(IDS(2), IDS(2), 1, &got, &n), 0);
	for (unsigned i = 1; i < KVT_DECODE_MISMATCHES; i++)
		CU_ASSERT_EQUAL(apply(bad, 1), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.mismatches, KVT_DECODE_MISMATCHES);
	CU_ASSERT_EQUAL(di.off & 1, 1);                  /* decoder 0: the apply */
	CU_ASSERT_STRING_EQUAL(kvt_decoder_at(0)->kernel, "_apply_write_kernel");
	uint64_t launches = di.launches;
	CU_ASSERT_EQUAL(apply(ok, 1), 0);                /* off: not read */
	CU_ASSERT_EQUAL(gather(IDS(2), IDS(2), 1, &got, &n), 0);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.launches, launches + 1);      /* only the gather, feeding nothing */
	kvt_decode_poll();                               /* the one warning */
	kvt_decode_poll();
	CU_ASSERT_EQUAL(di.mismatches, KVT_DECODE_MISMATCHES);
}

/* Bad pointers anywhere (UVA arrays unmapped, a staged source gone) are
 * read through process_vm_readv: a mismatch or nothing, never a crash. */
static void test_bad_pointers_harmless(void)
{
	setup();
	uint64_t p[6] = { TABLE, STRIDE, 0x10000, 0x10000, CONTENTS, 0x10000 };
	void *params[6] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5] };
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_APPLY, params, 4, 0), 0);
	kvt_decode_on_copy(MAP, 0x10000, 64);
	uint64_t g[5] = { MAP, TABLE, INPUT, STRIDE, 0x10000 };
	void *gp[5] = { &g[0], &g[1], &g[2], &g[3], &g[4] };
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_GATHER, gp, 4, 0), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fed, 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "vLLM V2 shadow: appends, end, reuse", test_shadow_appends_and_reuse },
		{ "vLLM V2 shadow: an unseen write", test_shadow_unseen_write },
		{ "a decoder's kernel by name and layout", test_name_and_layout },
		{ "mismatches switch a decoder off", test_mismatch_switches_off },
		{ "bad pointers are harmless", test_bad_pointers_harmless },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "decode", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
