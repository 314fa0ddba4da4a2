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

#define NCOMP     (DEV_LO + 0x50000)   /* num_computed_tokens (a device tensor) */
#define CUQ       (DEV_LO + 0x60000)   /* query_start_loc, uploaded each step */
#define SLOTS     (DEV_LO + 0x70000)   /* the slot mapping, computed on the GPU */
#define BLK       32768ull             /* bytes a block of K (or V): 16 tokens */
#define VOFF      (32ull << 20)        /* V's tensor, past K's in the KV range */

enum { F_APPLY = 0x100, F_GATHER = 0x200, F_OTHER = 0x300, F_APPLY5 = 0x400, F_PREP = 0x500,
       F_SLOTS = 0x600, F_CACHE = 0x700, F_CACHE8 = 0x800 };
#define CACHE16 "_Z30reshape_and_cache_flash_kernelI13__nv_bfloat16S0_L18Fp8KVCacheDataType0EEvPKT_S4_PT0_S6_PKllllllllPKfSA_i"
#define CACHE8  "_Z30reshape_and_cache_flash_kernelI13__nv_bfloat16hL18Fp8KVCacheDataType1EEvPKT_S4_PT0_S6_PKllllllllPKfSA_i"

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
	case F_PREP: *name = "_prepare_pos_seq_lens_kernel"; return 0;
	case F_SLOTS: *name = "_compute_slot_mapping_kernel"; return 0;
	case F_CACHE: *name = CACHE16; return 0;
	case F_CACHE8: *name = CACHE8; return 0;
	}
	return -1;
}

static int sizes(uint64_t f, unsigned i, size_t *size)
{
	unsigned n = f == F_APPLY ? 6 : f == F_GATHER ? 5 : f == F_APPLY5 ? 5 : f == F_PREP ? 6
		   : f == F_SLOTS ? 8 : f == F_CACHE || f == F_CACHE8 ? 15 : 3;
	uint32_t four = f == F_PREP ? 1u << 5 : f == F_SLOTS ? 1u << 0 | 1u << 1 | 1u << 6
		      : f == F_CACHE || f == F_CACHE8 ? 1u << 10 | 1u << 11 | 1u << 12 : 0;
	if (i >= n)
		return 1;
	*size = four >> i & 1 ? 4 : 8;
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

/* The step's apply_staged_writes into out (stride ids a row): the upload
 * of the ids, then the kernel (upload = 0: the upload is not seen).
 * Returns the launch's answer. */
static int apply_to(uint64_t func, uint64_t out, uint64_t stride, const struct wr *w, unsigned nw,
		    int upload)
{
	unsigned nid = 0;
	for (unsigned k = 0; k < nw; k++) {
		u_idx[k] = w[k].row;
		u_starts[k] = w[k].start;
		for (unsigned j = 0; j < w[k].n; j++)
			h_ids[nid++] = w[k].ids[j];
		u_cul[k] = (int32_t)nid;           /* each write's end, as vLLM stages them */
	}
	if (upload)
		kvt_decode_on_copy(CONTENTS, (uint64_t)(uintptr_t)h_ids, nid * 4);
	uint64_t p[6] = { out, stride, (uint64_t)(uintptr_t)u_idx, (uint64_t)(uintptr_t)u_starts,
			  CONTENTS, (uint64_t)(uintptr_t)u_cul };
	void *params[6] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5] };
	return kvt_decode_on_launch(func, params, nw, 0);
}

static int apply_with(uint64_t func, const struct wr *w, unsigned nw, int upload)
{
	return apply_to(func, TABLE, STRIDE, w, nw, upload);
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

/* ---- dead blocks (decode.h "Dead blocks") ---- */

static int32_t h_cuq[17];

/* The prep kernel for rows[0..n), q[i] tokens each (query_start_loc and
 * idx_mapping uploaded first, as the persona does). */
static int prep(const int32_t *rows, const int32_t *q, unsigned n)
{
	h_cuq[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		h_map[i] = rows[i];
		h_cuq[i + 1] = h_cuq[i] + q[i];
	}
	kvt_decode_on_copy(MAP, (uint64_t)(uintptr_t)h_map, n * 4);
	kvt_decode_on_copy(CUQ, (uint64_t)(uintptr_t)h_cuq, (n + 1) * 4);
	uint64_t p[6] = { DEV_LO + 0x80000, DEV_LO + 0x90000, MAP, CUQ, NCOMP, 64 };
	void *params[6] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5] };
	return kvt_decode_on_launch(F_PREP, params, n + 1, 0);
}

static void slots(uint64_t table, int32_t bs)
{
	uint64_t p[8] = { 4, 4, CUQ, DEV_LO + 0x80000, table, STRIDE, (uint32_t)bs, SLOTS };
	void *params[8] = { &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7] };
	CU_ASSERT_EQUAL(kvt_decode_on_launch(F_SLOTS, params, 3, 0), 0);
}

/* reshape_and_cache_flash of one layer: K at k, V at v, blocks of
 * block_stride elements (bf16) */
static void cache(uint64_t func, uint64_t k, uint64_t v, int64_t block_stride)
{
	uint64_t p[15] = { DEV_LO + 0xa0000, DEV_LO + 0xb0000, k, v, SLOTS, (uint64_t)block_stride,
			   1024, 1024, 1024, 1024, 1, 1024, 16, 0, 0 };
	void *params[15];
	for (int i = 0; i < 15; i++)
		params[i] = &p[i];
	CU_ASSERT_EQUAL(kvt_decode_on_launch(func, params, 4, 0), 0);
}

static uint32_t dead(const uint64_t **a, const uint64_t **b)
{
	return kvt_decode_take_dead(a, b);
}

/* A server's first step names every kernel; its writes are not seen. */
static void first_step_all(void)
{
	first_step();
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(0), 0), 0);
	slots(INPUT, 16);
	cache(F_CACHE, KV, KV + VOFF, BLK / 2);
}

/* Step 1: requests in rows 0 and 1 start (row 0 with 32 tokens cached, 2
 * blocks; row 1 with none) and prefill; row 2 starts with 16 cached. */
static void step_one(void)
{
	struct wr nc[] = { { 0, 0, 1, { 32 } }, { 1, 0, 1, { 0 } }, { 2, 0, 1, { 16 } } };
	CU_ASSERT_EQUAL(apply_to(F_APPLY, NCOMP, 1, nc, 3, 1), 0);
	/* row 0: 60 tokens, blocks 10..13; row 1: 32, blocks 20 21; row 2: 64,
	 * blocks 30..33 */
	struct wr t[] = { { 0, 0, 4, { 10, 11, 12, 13 } }, { 1, 0, 2, { 20, 21 } },
			  { 2, 0, 4, { 30, 31, 32, 33 } } };
	CU_ASSERT_EQUAL(apply(t, 3), 0);
	CU_ASSERT_EQUAL(prep(IDS(0, 1, 2), IDS(28, 32, 48), 3), 0);
}

static void test_dead_blocks(void)
{
	setup();
	first_step_all();
	const int32_t *got;
	const uint64_t *a, *b;
	uint32_t n;
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	same(got, n, IDS(10, 11, 12, 13, 20, 21, 30, 31, 32, 33), 10);
	/* fresh: row 0's 12 13 (tokens 32..59), row 1's 20 21, row 2's 31..33;
	 * dead where whole 64 KiB pages are: blocks 12-13 (768..832 KiB), 20-21
	 * (1280..1344), 32-33 (1024..1088; 31 shares its page with 30) */
	n = dead(&a, &b);
	CU_ASSERT_EQUAL_FATAL(n, 6);
	uint64_t want[] = { 12 * BLK, 20 * BLK, 32 * BLK };
	for (unsigned t = 0; t < 2; t++)
		for (unsigned i = 0; i < 3; i++) {
			CU_ASSERT_EQUAL(a[3 * t + i], KV + t * VOFF + want[i]);
			CU_ASSERT_EQUAL(b[3 * t + i], 2 * BLK);
		}
	CU_ASSERT_EQUAL(dead(&a, &b), 0);                /* taken */
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 7);
	CU_ASSERT_EQUAL(di.kv_known, 2);
	CU_ASSERT_EQUAL(di.dead_bytes, 6 * 2 * BLK);
	/* step 2: decodes; row 1 (32 computed) writes token 32 into a new block
	 * 22 (appended), row 0 (60) and row 2 (64: block 34 appended) */
	struct wr t2[] = { { 1, 2, 1, { 22 } }, { 2, 4, 1, { 34 } } };
	CU_ASSERT_EQUAL(apply(t2, 2), 0);
	CU_ASSERT_EQUAL(prep(IDS(0, 1, 2), IDS(1, 1, 1), 3), 0);
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 3, 5), 3, &got, &n), 1);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 9);                    /* 22 and 34 */
	n = dead(&a, &b);                                /* 22 shares a page with 23, 34 with 35 */
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(di.mismatches, 0);
}

/* What must hold before anything is called dead: the block size (a slot
 * mapping linked to the table), a KV tensor written through it with a
 * stride, the row's computed count. Without one, nothing is. */
static void test_dead_needs_every_link(void)
{
	const int32_t *got;
	const uint64_t *a, *b;
	uint32_t n;
	/* no cache write seen: fresh blocks, but no tensor to drop them in */
	setup();
	first_step();
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(0), 0), 0);
	slots(INPUT, 16);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 7);
	/* no slot mapping linked: no block size, nothing fresh */
	setup();
	first_step();
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(0), 0), 0);
	cache(F_CACHE, KV, KV + VOFF, BLK / 2);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 0);
	/* the computed counts' writes not seen (not uploaded): nothing fresh */
	setup();
	first_step_all();
	struct wr nc[] = { { 0, 0, 1, { 32 } } };
	CU_ASSERT_EQUAL(apply_to(F_APPLY, NCOMP, 1, nc, 1, 0), 0);
	struct wr t[] = { { 0, 0, 4, { 10, 11, 12, 13 } } };
	CU_ASSERT_EQUAL(apply(t, 1), 0);
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(28), 1), 0);
	CU_ASSERT_EQUAL(gather(IDS(0), IDS(4), 1, &got, &n), 1);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 0);
	/* an fp8 cache (1-byte elements) is not read: no stride known */
	setup();
	first_step();
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(0), 0), 0);
	slots(INPUT, 16);
	cache(F_CACHE8, KV, KV + VOFF, BLK);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.kv_known, 0);
}

/* Facts that change or contradict are never used again: a tensor seen with
 * another stride, a slot mapping linked to another table, K and V
 * interleaved (V's base half a block from K's: a block's stride from V
 * would reach into the next block's K). */
static void test_dead_uncertain_never(void)
{
	const int32_t *got;
	const uint64_t *a, *b;
	uint32_t n;
	setup();
	first_step_all();
	cache(F_CACHE, KV, KV + VOFF, BLK);             /* a second stride */
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	setup();
	first_step_all();
	slots(TABLE, 16);                                /* linked to another table too */
	slots(INPUT, 16);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	setup();
	first_step();
	CU_ASSERT_EQUAL(prep(IDS(0), IDS(0), 0), 0);
	slots(INPUT, 16);
	cache(F_CACHE, KV, KV + BLK / 2, BLK / 2);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 7);                    /* fresh, but nowhere certain */
}

/* A row that cannot hold the tokens its step computes (num_blocks says
 * fewer than c + q need) contradicts the reasoning: nothing is fresh that
 * step, and KVT_DECODE_MISMATCHES of them stop it for good, with one
 * warning; the table feed goes on. */
static void test_dead_mismatch_stops(void)
{
	setup();
	first_step_all();
	const int32_t *got;
	const uint64_t *a, *b;
	uint32_t n;
	struct wr nc[] = { { 0, 0, 1, { 32 } } };
	CU_ASSERT_EQUAL(apply_to(F_APPLY, NCOMP, 1, nc, 1, 1), 0);
	struct wr t[] = { { 0, 0, 4, { 10, 11, 12, 13 } } };
	CU_ASSERT_EQUAL(apply(t, 1), 0);
	for (unsigned i = 0; i < KVT_DECODE_MISMATCHES; i++) {
		CU_ASSERT_EQUAL(kvt_decode_fresh_stopped(), 0);
		CU_ASSERT_EQUAL(prep(IDS(0), IDS(100), 1), 0);   /* 132 tokens in 4 blocks */
		CU_ASSERT_EQUAL(gather(IDS(0), IDS(4), 1, &got, &n), 1);
		same(got, n, IDS(10, 11, 12, 13), 4);
		CU_ASSERT_EQUAL(dead(&a, &b), 0);
	}
	CU_ASSERT_EQUAL(kvt_decode_fresh_stopped(), 1);     /* once */
	CU_ASSERT_EQUAL(kvt_decode_fresh_stopped(), 0);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.fresh, 0);
	CU_ASSERT_EQUAL(di.off, 0);                      /* no decoder switched off */
}

/* A KV range freed and tracked again (a server's sleep and wake, another
 * allocation at the address): its tensor's stride is not used until a
 * cache write names it again. */
static void test_dead_range_tracked_anew(void)
{
	setup();
	first_step_all();
	const int32_t *got;
	const uint64_t *a, *b;
	uint32_t n;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_untrack(KV), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(KV, 64ull << 20, KVT_PLAN_TIER_FAR, 0, 0), 0);
	step_one();
	CU_ASSERT_EQUAL(gather(IDS(0, 1, 2), IDS(4, 2, 4), 3, &got, &n), 1);
	CU_ASSERT_EQUAL(dead(&a, &b), 0);
	cache(F_CACHE, KV, KV + VOFF, BLK / 2);          /* named again: certain again */
	struct wr t2[] = { { 1, 2, 2, { 22, 23 } } };
	CU_ASSERT_EQUAL(apply(t2, 1), 0);
	CU_ASSERT_EQUAL(prep(IDS(1), IDS(32), 1), 0);    /* tokens 32..63: blocks 22 23 */
	CU_ASSERT_EQUAL(gather(IDS(1), IDS(4), 1, &got, &n), 1);
	n = dead(&a, &b);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(a[0], KV + 22 * BLK);
	CU_ASSERT_EQUAL(a[1], KV + VOFF + 22 * BLK);
	struct kvt_decode_info di;
	kvt_decode_info(&di);
	CU_ASSERT_EQUAL(di.mismatches, 0);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "vLLM V2 shadow: appends, end, reuse", test_shadow_appends_and_reuse },
		{ "vLLM V2 shadow: an unseen write", test_shadow_unseen_write },
		{ "a decoder's kernel by name and layout", test_name_and_layout },
		{ "mismatches switch a decoder off", test_mismatch_switches_off },
		{ "bad pointers are harmless", test_bad_pointers_harmless },
		{ "dead blocks: fresh ids to whole pages of K and V", test_dead_blocks },
		{ "dead blocks need every link", test_dead_needs_every_link },
		{ "dead blocks: nothing uncertain is used", test_dead_uncertain_never },
		{ "dead blocks: a mismatch stops them", test_dead_mismatch_stops },
		{ "dead blocks: a range tracked anew waits for a cache write", test_dead_range_tracked_anew },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "decode", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
