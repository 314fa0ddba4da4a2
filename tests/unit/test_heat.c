// SPDX-License-Identifier: MIT
/* Chunk heat (profiler/heat.c): the decay math against the closed form,
 * incremental updates, reads that do not write, clock wrap, the chunk size
 * bound, and the range table (track/find/untrack, bounded evidence). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kvt_test.h"
#include "../cuda_shim/shim.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/params.h"

static void test_decay_closed_form(void)
{
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_decay(8, 1000, 1000), 8 * exp(-1.0), 1e-4);
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_decay(8, 0, 1000), 8, 0);
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_decay(8, 500, 0), 8, 0);          /* tau 0: none */
	CU_ASSERT_EQUAL(kvt_heat_decay(8, 1000000, 1000), 0);              /* far past */
	/* count x exp(-dt/tau) built incrementally equals the sum of the
	 * decayed events: events at t = 0, 100, 300; read at 600, tau 200 */
	struct kvt_heat_chunk c = { 0 };
	kvt_heat_touch(&c, 1, 1000, 200);
	kvt_heat_touch(&c, 1, 1100, 200);
	kvt_heat_touch(&c, 2, 1300, 200);
	double want = exp(-3.0) + exp(-2.5) + 2 * exp(-1.5);
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_read(&c, 1600, 200), want, 1e-4);
	/* reading writes nothing */
	uint64_t before = c.hv;
	kvt_heat_read(&c, 5000, 200);
	CU_ASSERT_EQUAL(c.hv, before);
	/* a touch stamped before the last update adds undecayed */
	kvt_heat_touch(&c, 1, 1200, 200);
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_read(&c, 1600, 200), want + exp(-1.5), 1e-4);
}

static void test_clock_wrap(void)
{
	struct kvt_heat_chunk c = { 0 };
	kvt_heat_touch(&c, 4, 0xfffffff0u, 100);
	CU_ASSERT_DOUBLE_EQUAL(kvt_heat_read(&c, 0x00000054u, 100), 4 * exp(-1.0), 1e-4);
}

static void test_chunk_is_small(void)
{
	CU_ASSERT_TRUE(sizeof(struct kvt_heat_chunk) <= 32);
	CU_ASSERT_EQUAL(sizeof(struct kvt_heat_chunk), 16);
}

/* Whether the VMA holding addr carries VmFlags flag (e.g. "hg"): -1 when
 * /proc/self/smaps has no such mapping or cannot be read. */
static int vma_has_flag(uintptr_t addr, const char *flag)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	int in = 0, r = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)    /* a mapping's first line */
			in = addr >= lo && addr < hi;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			char want[8];
			snprintf(want, sizeof want, " %s", flag);
			r = strstr(line, want) != NULL;
			break;
		}
	}
	fclose(f);
	return r;
}

/* The arena starts on a huge-page boundary and is advised for huge pages:
 * collect's reads and the touches are scattered over 16 MiB. */
static void test_arena_huge_pages(void)
{
	const uint64_t A = 0x40000000ull;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 8ull << 20, 0, 1, 0), 0);
	struct kvt_heat_range r;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_range_get(kvt_heat_find(A), &r), 0);
	uintptr_t base = (uintptr_t)(kvt_heat_chunks(&r) - r.first);
	CU_ASSERT_EQUAL(base % KVT_HEAT_ARENA_ALIGN, 0);
	char mode[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		if (!fgets(mode, sizeof mode, f))
			mode[0] = 0;
		fclose(f);
	}
	if (!mode[0] || strstr(mode, "[never]"))
		printf("\n    (transparent huge pages unavailable here: only the alignment checked) ");
	else
		CU_ASSERT_EQUAL(vma_has_flag(base, "hg"), 1);
	kvt_heat_reset();
}

/*  range A: [0x40000000, +10 MiB) = 5 chunks, range B: [0x80000000, +3 MiB) = 2 chunks
 *  addresses: A+0 -> A, A+10M-1 -> A, A+10M -> none, B+2M -> B chunk 1 */
static void test_ranges(void)
{
	const uint64_t A = 0x40000000ull, B = 0x80000000ull, M = 1ull << 20;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL(kvt_heat_track(A, 10 * M, 0, 1, 0), 0);
	CU_ASSERT_EQUAL(kvt_heat_track(B, 3 * M, 0, 1, 0), 0);
	CU_ASSERT_EQUAL(kvt_heat_track(A, 4 * M, 0, 1, 0), -EEXIST);
	int sa = kvt_heat_find(A), sb = kvt_heat_find(B + 2 * M);
	CU_ASSERT_TRUE(sa >= 0 && sb >= 0 && sa != sb);
	CU_ASSERT_EQUAL(kvt_heat_find(A + 10 * M - 1), sa);
	CU_ASSERT_EQUAL(kvt_heat_find(A + 10 * M), -1);
	CU_ASSERT_EQUAL(kvt_heat_find(A - 1), -1);
	struct kvt_heat_range r;
	CU_ASSERT_EQUAL(kvt_heat_range_get(sa, &r), 0);
	CU_ASSERT_EQUAL(r.nr_chunks, 5);
	CU_ASSERT_EQUAL(r.node, 1);
	/* exact evidence: [A+3M, A+5M) covers chunks 1 and 2 */
	CU_ASSERT_EQUAL(kvt_heat_add(A + 3 * M, 2 * M, 1, 64), 2);
	struct kvt_heat_chunk *c = kvt_heat_chunks(&r);
	uint32_t now = kvt_heat_now_ms();
	CU_ASSERT_TRUE(kvt_heat_read(&c[0], now, 1000) == 0);
	CU_ASSERT_TRUE(kvt_heat_read(&c[1], now, 1000) > 0.9f);
	CU_ASSERT_TRUE(kvt_heat_read(&c[2], now, 1000) > 0.9f);
	CU_ASSERT_TRUE(kvt_heat_read(&c[3], now, 1000) == 0);
	/* bounded: a 10 MiB copy credits at most max_chunks */
	CU_ASSERT_EQUAL(kvt_heat_add(A, 10 * M, 1, 3), 3);
	/* a length past the end stops at the end */
	CU_ASSERT_EQUAL(kvt_heat_add(A + 8 * M, 100 * M, 1, 64), 1);
	/* spread: round-robin over the range's chunks */
	CU_ASSERT_EQUAL(kvt_heat_spread(sb, 4, 1), 2);
	CU_ASSERT_EQUAL(kvt_heat_add(0x1000, 8, 1, 64), 0);        /* untracked */
	/* untrack: gone, and a later range of no more chunks reuses its slot */
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), -ENOENT);
	CU_ASSERT_EQUAL(kvt_heat_find(A), -1);
	CU_ASSERT_EQUAL(kvt_heat_add(A, M, 1, 64), 0);
	CU_ASSERT_EQUAL(kvt_heat_track(0xC0000000ull, 4 * M, 0, 2, 0), 0);
	int sc = kvt_heat_find(0xC0000000ull);
	CU_ASSERT_EQUAL(sc, sa);
	CU_ASSERT_EQUAL(kvt_heat_range_get(sc, &r), 0);
	CU_ASSERT_TRUE(kvt_heat_read(&kvt_heat_chunks(&r)[1], kvt_heat_now_ms(), 1000) == 0);
	CU_ASSERT_EQUAL(r.nr_chunks, 2);           /* its own count, not the slot's 5 */
	CU_ASSERT_EQUAL(r.cap_chunks, 5);
	kvt_heat_reset();
	CU_ASSERT_EQUAL(kvt_heat_find(B), -1);
}

/* The driver's prefetch-out records, kept per chunk by 64 KiB page: a
 * record across a chunk's end marks both chunks' pages, a partial page
 * counts, reading clears, untracked addresses are ignored. */
static void test_prefetched_out(void)
{
	const uint64_t A = 0x40000000ull, M = 1ull << 20, K = 1ull << 10;
	kvt_heat_reset();
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 6 * M, KVT_PLAN_TIER_HBM, 1, 0), 0);
	struct kvt_heat_chunk *c0 = kvt_heat_chunk_at(A), *c1 = kvt_heat_chunk_at(A + 2 * M);
	CU_ASSERT_FATAL(c0 && c1 && c1 == c0 + 1);
	CU_ASSERT_EQUAL(kvt_heat_take_out(c0), 0);
	kvt_heat_prefetched_out(A + 64 * K, 128 * K);              /* pages 1, 2 */
	kvt_heat_prefetched_out(A + 2 * M - 64 * K, 192 * K);      /* page 31, then c1's 0, 1 */
	kvt_heat_prefetched_out(A + 2 * M + 20 * 64 * K + 5, 1);   /* c1's page 20, a byte of it */
	kvt_heat_prefetched_out(0x1000, 2 * M);                    /* untracked: nothing */
	CU_ASSERT_EQUAL(kvt_heat_take_out(c0), 1u << 1 | 1u << 2 | 1u << 31);
	CU_ASSERT_EQUAL(kvt_heat_take_out(c0), 0);
	CU_ASSERT_EQUAL(kvt_heat_take_out(c1), 1u << 0 | 1u << 1 | 1u << 20);
	kvt_heat_prefetched_out(A + 4 * M, 2 * M);                 /* a whole chunk */
	CU_ASSERT_EQUAL(kvt_heat_take_out(c1 + 1), ~0u);
	CU_ASSERT_EQUAL(kvt_heat_take_out(NULL), 0);
	/* prefetched in: a record seen, and whether one covered a whole chunk;
	 * a record across c0's end covers neither whole; the other flags stay */
	const uint8_t SEEN = KVT_HEAT_F_IN_SEEN, WHOLE = KVT_HEAT_F_IN_WHOLE;
	CU_ASSERT_EQUAL(kvt_heat_take_in(c0), 0);
	__atomic_fetch_or(&c0->flags, KVT_HEAT_F_MAPPED, __ATOMIC_RELAXED);
	kvt_heat_prefetched_in(A + 2 * M - 64 * K, 128 * K);
	kvt_heat_prefetched_in(A + 4 * M, 2 * M);
	kvt_heat_prefetched_in(0x1000, 2 * M);                     /* untracked: nothing */
	CU_ASSERT_EQUAL(kvt_heat_take_in(c0), SEEN);
	CU_ASSERT_EQUAL(kvt_heat_take_in(c0), 0);
	CU_ASSERT_EQUAL(c0->flags, KVT_HEAT_F_MAPPED);
	CU_ASSERT_EQUAL(kvt_heat_take_in(c1), SEEN);
	CU_ASSERT_EQUAL(kvt_heat_take_in(c1 + 1), SEEN | WHOLE);
	kvt_heat_reset();
}

static void test_table_bounded(void)
{
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	kvt_heat_reset();
	int ok = 0, full = 0;
	for (int i = 0; i < KVT_HEAT_MAX_RANGES + 10; i++) {
		int r = kvt_heat_track(0x100000000ull + (uint64_t)i * (64ull << 20), 2ull << 20, 0, 0, 0);
		ok += r == 0;
		full += r == -ENOSPC;
	}
	CU_ASSERT_EQUAL(ok, KVT_HEAT_MAX_RANGES);
	CU_ASSERT_EQUAL(full, 10);
	/* every slot retired with 1 chunk: a 10-chunk range still finds one */
	kvt_heat_reset();
	CU_ASSERT_EQUAL(kvt_heat_track(0x6000000000ull, 20ull << 20, 0, 0, 0), 0);
	/* more chunks than the arena holds: refused, nothing mapped */
	kvt_heat_reset();
	CU_ASSERT_EQUAL(kvt_heat_track(0x7000000000ull, (uint64_t)(KVT_HEAT_MAX_CHUNKS + 1) << 21,
				       0, 0, 0), -ENOSPC);
}

static struct kvt_plan_chunk t[KVT_HEAT_MAX_CHUNKS];

static uint32_t collect(float keep, struct kvt_heat_range *rg)
{
	kvt_heat_set_keep(keep);
	return kvt_heat_collect(t, KVT_HEAT_MAX_CHUNKS, kvt_heat_now_ms(), rg, -1);
}

/* The migrator's working set (kvt_heat_collect), promote threshold 4:
 *  range A, 200 chunks (crosses 64-chunk words), range B, 3 chunks:
 *    A: 5..7 touched x5 (hot), 9 touched once (cold), 70 in HBM (never
 *       touched), 130 touched x5;  B: 1 touched x5
 *  -> A5 A6 A7 | A70 | A130 | B1   ('|': KVT_PLAN_F_GAP), A9 left out;
 *  a second collect with nothing touched returns the same (working set kept
 *  across epochs); once A5..7 cool below 4 they leave, and come back when
 *  touched again; a re-tracked range starts empty. */
static void test_collect_working_set(void)
{
	const uint64_t A = 0x100000000ull, B = 0x200000000ull, M = 1ull << 20;
	static struct kvt_heat_range rg[KVT_HEAT_MAX_RANGES];
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(0), 0);         /* tau 0: no decay, exact */
	kvt_heat_reset();
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 400 * M, KVT_PLAN_TIER_FAR, 1, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(B, 6 * M, KVT_PLAN_TIER_FAR, 1, 0), 0);
	int sa = kvt_heat_find(A), sb = kvt_heat_find(B);
	/* chunks of earlier tests' ranges may have been left marked: start clean */
	(void)collect(4, rg);
	for (int k = 0; k < 5; k++) {
		CU_ASSERT_EQUAL(kvt_heat_add(A + 10 * M, 6 * M, 1, 64), 3);     /* 5, 6, 7 */
		CU_ASSERT_EQUAL(kvt_heat_add(A + 260 * M, 1, 1, 1), 1);         /* 130 */
		CU_ASSERT_EQUAL(kvt_heat_add(B + 2 * M, 1, 1, 1), 1);           /* B1 */
	}
	CU_ASSERT_EQUAL(kvt_heat_add(A + 18 * M, 1, 1, 1), 1);                  /* 9 */
	struct kvt_heat_range r;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_range_get(sa, &r), 0);
	kvt_heat_chunks(&r)[70].tier = KVT_PLAN_TIER_HBM;   /* as apply() would, after a collect */
	kvt_heat_mark(&kvt_heat_chunks(&r)[70]);
	const struct { int slot; uint32_t idx; uint8_t tier; uint8_t flags; } want[] = {
		{ sa, 5, 0, KVT_PLAN_F_GAP }, { sa, 6, 0, 0 }, { sa, 7, 0, 0 },
		{ sa, 70, 1, KVT_PLAN_F_GAP }, { sa, 130, 0, KVT_PLAN_F_GAP }, { sb, 1, 0, KVT_PLAN_F_GAP },
	};
	for (int pass = 0; pass < 2; pass++) {
		uint32_t n = collect(4, rg);
		CU_ASSERT_EQUAL(n, 6);
		/* slots in order: A's entries before B's iff sa < sb */
		for (uint32_t i = 0; i < n && i < 6; i++) {
			uint32_t w = sa < sb ? i : (i + 1) % 6;
			CU_ASSERT_EQUAL(t[i].range, want[w].slot);
			CU_ASSERT_EQUAL(t[i].tag, want[w].idx);
			CU_ASSERT_EQUAL(t[i].tier, want[w].tier);
			CU_ASSERT_EQUAL(t[i].flags, want[w].flags);
			CU_ASSERT_TRUE(t[i].tier == 1 || t[i].heat == 5.0f);
		}
		CU_ASSERT_TRUE(rg[sa].live && rg[sb].live && rg[sa].nr_chunks == 200);
	}
	/* keep 0: every chunk of both ranges, untouched or not */
	CU_ASSERT_EQUAL(collect(0, rg), 203);
	/* cooled (keep above their heat): the far ones leave, HBM stays */
	CU_ASSERT_EQUAL(collect(6, rg), 1);
	CU_ASSERT_EQUAL(t[0].tag, 70);
	CU_ASSERT_EQUAL(collect(4, rg), 1);     /* gone until touched */
	CU_ASSERT_EQUAL(kvt_heat_add(A + 12 * M, 1, 1, 1), 1);                  /* 6 again */
	CU_ASSERT_EQUAL(collect(4, rg), 2);
	CU_ASSERT_EQUAL(t[0].tag, 6);
	CU_ASSERT_TRUE(t[0].heat == 6.0f);
	/* re-tracked: the slot's old working set means nothing */
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	CU_ASSERT_EQUAL(collect(4, rg), 0);
	CU_ASSERT_EQUAL(kvt_heat_track(A, 400 * M, KVT_PLAN_TIER_FAR, 1, 0), 0);
	CU_ASSERT_EQUAL(collect(4, rg), 0);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	/* a range that starts in HBM is in the working set from the start */
	CU_ASSERT_EQUAL(kvt_heat_track(A, 4 * M, KVT_PLAN_TIER_HBM, 1, 0), 0);
	CU_ASSERT_EQUAL(collect(4, rg), 2);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* Re-homing: every chunk of the range becomes HBM and joins the working set
 * (HBM chunks are always collected, whatever their heat). */
static void test_set_tier(void)
{
	const uint64_t A = 0x6100000000ull, M = 1ull << 20;
	struct kvt_plan_chunk t[16];
	static struct kvt_heat_range rg[KVT_HEAT_MAX_RANGES];
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL(kvt_heat_collect(t, 16, kvt_heat_now_ms(), rg, -1), 0);   /* cold, far */
	CU_ASSERT_EQUAL(kvt_heat_set_tier(A, KVT_PLAN_TIER_HBM), 0);
	CU_ASSERT_EQUAL(kvt_heat_set_tier(A + 2 * M, KVT_PLAN_TIER_HBM), -ENOENT);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_collect(t, 16, kvt_heat_now_ms(), rg, -1), 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(t[i].tier, KVT_PLAN_TIER_HBM);
	uint64_t hbm = 0, far = 0;
	kvt_heat_count_tiers(&hbm, &far);
	CU_ASSERT_EQUAL(hbm, 4);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* Ranges placed for different devices: each device's collect takes its own
 * ranges' chunks only, and leaves the others' marks for their own call;
 * kvt_heat_devices lists each device once, ascending, and counts past cap.
 *   A (device 2): chunks 0, 1 hot;  B (device 0): chunk 3 hot;  C (device 2) */
static void test_collect_per_device(void)
{
	const uint64_t A = 0x6300000000ull, B = 0x6400000000ull, C = 0x6500000000ull;
	const uint64_t M = 1ull << 20;
	static struct kvt_heat_range rg[KVT_HEAT_MAX_RANGES];
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 8 * M, KVT_PLAN_TIER_FAR, 0, 2), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(B, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(C, 8 * M, KVT_PLAN_TIER_FAR, 0, 2), 0);
	int32_t devs[4] = { -1, -1, -1, -1 }, one = -1;
	CU_ASSERT_EQUAL(kvt_heat_devices(devs, 4), 2);
	CU_ASSERT_EQUAL(devs[0], 0);
	CU_ASSERT_EQUAL(devs[1], 2);
	CU_ASSERT_EQUAL(devs[2], -1);
	CU_ASSERT_EQUAL(kvt_heat_devices(&one, 1), 2);     /* more than fit */
	CU_ASSERT_EQUAL(one, 0);
	CU_ASSERT_EQUAL(kvt_heat_devices(NULL, 0), 2);

	kvt_heat_set_keep(4);
	for (int k = 0; k < 5; k++) {
		kvt_heat_add(A, 1, 1, 1);
		kvt_heat_add(A + 2 * M, 1, 1, 1);
		kvt_heat_add(B + 6 * M, 1, 1, 1);
	}
	uint32_t n = kvt_heat_collect(t, KVT_HEAT_MAX_CHUNKS, kvt_heat_now_ms(), rg, 2);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	for (uint32_t i = 0; i < n; i++)
		CU_ASSERT_EQUAL(rg[t[i].range].base, A);
	CU_ASSERT_EQUAL(t[0].tag, 0);
	CU_ASSERT_EQUAL(t[1].tag, 1);
	n = kvt_heat_collect(t, KVT_HEAT_MAX_CHUNKS, kvt_heat_now_ms(), rg, 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);                        /* B's mark was kept for it */
	CU_ASSERT_EQUAL(rg[t[0].range].base, B);
	CU_ASSERT_EQUAL(rg[t[0].range].dev, 0);
	CU_ASSERT_EQUAL(t[0].tag, 3);
	CU_ASSERT_EQUAL(kvt_heat_collect(t, KVT_HEAT_MAX_CHUNKS, kvt_heat_now_ms(), rg, 1), 0);
	CU_ASSERT_EQUAL(kvt_heat_collect(t, KVT_HEAT_MAX_CHUNKS, kvt_heat_now_ms(), rg, -1), 3);

	CU_ASSERT_EQUAL(kvt_heat_untrack(B), 0);
	CU_ASSERT_EQUAL(kvt_heat_devices(devs, 4), 1);
	CU_ASSERT_EQUAL(devs[0], 2);
	kvt_heat_set_keep(0);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* CUDA graphs: what one instantiated graph's kernel nodes name is kept and
 * credited at its launches. Node 1 names tensor A (tracked), node 2 a host
 * "block table" holding an address in B, node 3 an untracked value. 1600
 * launches of the kept graph credit both, about one in KVT_LAUNCH_SAMPLE,
 * the table read as it is at each launch (its entry moved to B's chunk 3
 * half way); an unknown handle credits nothing; after forget, nothing. */
struct graph_case { uint64_t a, b; float ha, hb, hb3, after; };

static float heat_at(uint64_t addr)
{
	const struct kvt_heat_chunk *c = kvt_heat_chunk_at(addr);
	return c ? kvt_heat_read(c, kvt_heat_now_ms(), 0) : -1.0f;
}

static void *graph_thread(void *arg)         /* a fresh thread: its first launch is scanned */
{
	struct graph_case *gc = arg;
	const uint64_t M = 1ull << 20, exec = 0x7e57ull;
	static uint64_t table[8];                     /* host memory the kernel would read */
	table[0] = gc->b + M;                         /* B's chunk 0 */
	uint64_t tensor = gc->a + 3 * M, bt = (uint64_t)(uintptr_t)table, junk = 0x1234567000ull;
	void *n1[16] = { &tensor }, *n2[16] = { &bt }, *n3[16] = { &junk };
	static struct kvt_graph_ev ev;
	ev = (struct kvt_graph_ev){ .exec = exec };
	kvt_prof_graph_scan(&ev, 0, n1);
	kvt_prof_graph_scan(&ev, 0, n2);
	kvt_prof_graph_scan(&ev, 0, n3);
	kvt_prof_graph_publish(&ev);
	for (int n = 0; n < 1600; n++) {
		if (n == 800)
			table[0] = gc->b + 6 * M + 5;     /* B's chunk 3 from now on */
		kvt_prof_on_graph_launch(exec);
		kvt_prof_on_graph_launch(exec + 8);   /* never instantiated */
	}
	gc->ha = heat_at(gc->a);
	gc->hb = heat_at(gc->b);
	gc->hb3 = heat_at(gc->b + 6 * M);
	kvt_prof_graph_forget(exec);
	for (int n = 0; n < 64; n++)
		kvt_prof_on_graph_launch(exec);
	gc->after = heat_at(gc->b) + heat_at(gc->b + 6 * M);
	return NULL;
}

static void test_graph_evidence(void)
{
	const uint64_t M = 1ull << 20;
	struct graph_case gc = { .a = 0x6600000000ull, .b = 0x6700000000ull };
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(0), 0);          /* tau 0: exact sums */
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(gc.a, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(gc.b, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	unsigned was = kvt_prof_sources_enabled();
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH);
	uint64_t kept = kvt_prof_graphs_kept();
	pthread_t th;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, graph_thread, &gc), 0);
	pthread_join(th, NULL);
	kvt_prof_sources_enable(was);
	CU_ASSERT_EQUAL(kvt_prof_graphs_kept(), kept + 1);
	/* ~1600/8 = 200 launches scanned, each crediting KVT_LAUNCH_SAMPLE to
	 * KVT_LAUNCH_SPREAD (4) of A's 4 chunks: chunk 0 about 1600 */
	CU_ASSERT(gc.ha >= 800 && gc.ha <= 3200);
	/* the table behind the followed pointer, read at each scanned launch
	 * (its first 1 KiB one launch in four: the window rotates over 4 KiB):
	 * B0 in the first half, B3 in the second, each about 100 x 8 / 4 */
	CU_ASSERT(gc.hb >= 100 && gc.hb <= 400);
	CU_ASSERT(gc.hb3 >= 100 && gc.hb3 <= 400);
	CU_ASSERT_DOUBLE_EQUAL(gc.after, gc.hb + gc.hb3, 1e-3);   /* forgotten: no more */
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* KVTIER_ADMIT=fault: a chunk the driver migrated on a fault is in HBM and
 * just moved; one that comes back within tau of a demotion is a refault. */
static void test_fault_in(void)
{
	const uint64_t A = 0x6200000000ull, M = 1ull << 20;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	uint64_t f0 = kvt_heat_fault_ins(), r0 = kvt_heat_refaults();
	struct kvt_heat_chunk *c = kvt_heat_chunk_at(A + 3 * M);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	kvt_heat_fault_in(A + 3 * M);
	CU_ASSERT_EQUAL(c->tier, KVT_PLAN_TIER_HBM);
	CU_ASSERT_NOT_EQUAL(c->moved_ms, 0);
	CU_ASSERT_EQUAL(kvt_heat_fault_ins(), f0 + 1);
	CU_ASSERT_EQUAL(kvt_heat_refaults(), r0);            /* it had never moved */
	kvt_heat_fault_in(A + 3 * M);                        /* already in HBM: nothing */
	CU_ASSERT_EQUAL(kvt_heat_fault_ins(), f0 + 1);
	c->tier = KVT_PLAN_TIER_FAR;                         /* demoted just now */
	kvt_heat_fault_in(A + 2 * M);
	CU_ASSERT_EQUAL(kvt_heat_refaults(), r0 + 1);
	kvt_heat_fault_in(0x1000);                           /* not tracked: ignored */
	CU_ASSERT_EQUAL(kvt_heat_fault_ins(), f0 + 2);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* KVTIER_ADMIT=auto: only a chunk the driver evicted (HBM full) and that
 * came back within tau earns a strike; the count saturates at 3 and a
 * slower come-back clears it; a chunk the migrator demoted that comes back
 * is a refault but no strike. */
static void test_evicted_strikes(void)
{
	const uint64_t A = 0x6400000000ull, C = 2ull << 20;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(1000), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 4 * C, KVT_PLAN_TIER_FAR, 0, 0), 0);
	struct kvt_heat_chunk *c = kvt_heat_chunk_at(A + C), *d = kvt_heat_chunk_at(A + 2 * C);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(c->flags, 0);
	uint64_t b0 = kvt_heat_evicted_backs();
	kvt_heat_fault_in(A + C);                    /* first time in: no strike */
	CU_ASSERT_EQUAL(c->flags & KVT_HEAT_F_REFAULTS, 0);
	CU_ASSERT_EQUAL(kvt_heat_evicted_backs(), b0);   /* never evicted */
	for (unsigned i = 1; i <= 4; i++) {
		kvt_heat_evicted(A + C + 4096);
		CU_ASSERT_EQUAL(c->tier, KVT_PLAN_TIER_FAR);
		CU_ASSERT_TRUE(c->flags & KVT_HEAT_F_EVICTED);
		kvt_heat_fault_in(A + C);
		CU_ASSERT_EQUAL(c->tier, KVT_PLAN_TIER_HBM);
		CU_ASSERT_FALSE(c->flags & KVT_HEAT_F_EVICTED);
		CU_ASSERT_EQUAL(c->flags & KVT_HEAT_F_REFAULTS, i < 3 ? i : 3);
		CU_ASSERT_EQUAL(kvt_heat_evicted_backs(), b0 + i);   /* migrate.evicted_backs */
	}
	kvt_heat_evicted(A + C);
	c->moved_ms = kvt_heat_now_ms() - 2000;      /* came in 2 tau ago */
	kvt_heat_fault_in(A + C);
	CU_ASSERT_EQUAL(c->flags & KVT_HEAT_F_REFAULTS, 0);
	kvt_heat_fault_in(A + 2 * C);
	d->tier = KVT_PLAN_TIER_FAR;                 /* the migrator demoted it */
	uint64_t r0 = kvt_heat_refaults();
	kvt_heat_fault_in(A + 2 * C);
	CU_ASSERT_EQUAL(kvt_heat_refaults(), r0 + 1);
	CU_ASSERT_EQUAL(d->flags, 0);
	CU_ASSERT_EQUAL(kvt_heat_evicted_backs(), b0 + 5);   /* a demotion's come-back: not one */
	kvt_heat_evicted(0x1000);                    /* not tracked: ignored */
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	/* a new range in the same arena slots starts with no flags */
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(A, 4 * C, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL(kvt_heat_chunk_at(A + C)->flags, 0);
	CU_ASSERT_EQUAL(kvt_heat_untrack(A), 0);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

#define KVT_SHIM_STUB_SUITE "the heat suite"
#include "shim_stubs.h"

/* The launch scan samples about one launch in KVT_LAUNCH_SAMPLE per thread.
 * A server's launches repeat with a period (kernels per layer, layers per
 * step); a fixed stride dividing it would scan the same kernel every time.
 * Four tensors launched round-robin (period 4, which divides the mean gap
 * of 8): each must be seen, and the launches scanned must be about 1 in 8. */
static void test_launch_sampling_periodic(void)
{
	const uint64_t base = 0x5000000000ull, M = 1ull << 20;
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(0), 0);          /* tau 0: exact sums */
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(kvt_heat_track(base + (uint64_t)i * 64 * M, 2 * M,
						     KVT_PLAN_TIER_FAR, 0, 0), 0);
	unsigned was = kvt_prof_sources_enabled();
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH);
	const int launches = 1600;
	for (int n = 0; n < launches; n++) {
		uint64_t tensor = base + (uint64_t)(n % 4) * 64 * M;
		void *params[16] = { &tensor };
		kvt_prof_on_launch(0, params, 0);
	}
	kvt_prof_sources_enable(was);
	double sum = 0;
	uint32_t now = kvt_heat_now_ms();
	for (int i = 0; i < 4; i++) {
		const struct kvt_heat_chunk *c = kvt_heat_chunk_at(base + (uint64_t)i * 64 * M);
		CU_ASSERT_PTR_NOT_NULL_FATAL(c);
		float h = kvt_heat_read(c, now, 0);
		CU_ASSERT(h > 0);                                 /* every tensor seen */
		sum += h;
	}
	/* each scanned launch credits KVT_LAUNCH_SAMPLE to its one chunk */
	double scanned = sum / KVT_LAUNCH_SAMPLE;
	CU_ASSERT(scanned >= launches / KVT_LAUNCH_SAMPLE * 0.6);
	CU_ASSERT(scanned <= launches / KVT_LAUNCH_SAMPLE * 1.4);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* The launch scan never reads behind a device pointer. Two "tables" of
 * host memory, each holding addresses in a tracked range (A's, B's), four
 * in each 1 KiB window (a zero after each: no length; 8 chunks a launch,
 * under KVT_LAUNCH_MAX_CHUNKS): the device test calls B's
 * table device memory. A kernel handed both follows A's table (A is
 * credited) and never B's (B stays cold), and the test is asked at most
 * KVT_LAUNCH_FOLLOW times per launch; with no device test both are read.
 * A graph node naming B's table keeps nothing of it. */
static uint64_t dev_lo, dev_hi;
static unsigned nr_device_asked;

static int fake_device(uint64_t addr)
{
	__atomic_fetch_add(&nr_device_asked, 1, __ATOMIC_RELAXED);
	return addr >= dev_lo && addr < dev_hi;
}

struct device_case { uint64_t a, b; float ha, hb; unsigned launches; uint32_t graph_nr; };

static uint64_t host_table[512] __attribute__((aligned(4096)));
static uint64_t device_table[512] __attribute__((aligned(4096)));

static void *device_thread(void *arg)        /* a fresh thread: its first launch is scanned */
{
	struct device_case *dc = arg;
	for (int i = 0; i < 512; i += 128)           /* 4 in each 1 KiB window */
		for (int k = 0; k < 8; k += 2) {
			host_table[i + k] = dc->a + (uint64_t)k * (1ull << 20);
			device_table[i + k] = dc->b + (uint64_t)k * (1ull << 20);
		}
	uint64_t dv = (uint64_t)(uintptr_t)device_table, hv = (uint64_t)(uintptr_t)host_table;
	void *params[16] = { &dv, &hv };
	for (unsigned n = 0; n < dc->launches; n++)
		kvt_prof_on_launch(0, params, 0);
	dc->ha = heat_at(dc->a);
	dc->hb = heat_at(dc->b);
	void *node[16] = { &dv };
	static struct kvt_graph_ev ev;
	ev = (struct kvt_graph_ev){ .exec = 0xde71ceull };
	kvt_prof_graph_scan(&ev, 0, node);
	dc->graph_nr = ev.nr;
	return NULL;
}

static void run_device_case(struct device_case *dc)
{
	pthread_t th;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, device_thread, dc), 0);
	pthread_join(th, NULL);
}

static void test_launch_skips_device(void)
{
	const uint64_t M = 1ull << 20;
	struct device_case dc = { .a = 0x6800000000ull, .b = 0x6900000000ull, .launches = 800 };
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(0), 0);          /* tau 0: exact sums */
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(dc.a, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(dc.b, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	unsigned was = kvt_prof_sources_enabled();
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH);
	dev_lo = (uint64_t)(uintptr_t)device_table;
	dev_hi = dev_lo + sizeof device_table;
	kvt_prof_set_device_test(fake_device);
	run_device_case(&dc);
	unsigned asked = __atomic_load_n(&nr_device_asked, __ATOMIC_RELAXED);
	CU_ASSERT(dc.ha > 0);                                 /* the host table: followed */
	CU_ASSERT_EQUAL(dc.hb, 0);                            /* the device one: never read */
	CU_ASSERT_EQUAL(dc.graph_nr, 0);
	CU_ASSERT(asked > 0);
	CU_ASSERT(asked <= KVT_LAUNCH_FOLLOW * dc.launches + KVT_LAUNCH_FOLLOW);
	/* without the test, both tables are read (what the skip prevents) */
	kvt_prof_set_device_test(NULL);
	float ha_before = dc.ha;
	run_device_case(&dc);
	CU_ASSERT(dc.ha > ha_before);
	CU_ASSERT(dc.hb > 0);
	CU_ASSERT_EQUAL(dc.graph_nr, 1);
	CU_ASSERT_EQUAL(__atomic_load_n(&nr_device_asked, __ATOMIC_RELAXED), asked);
	kvt_prof_sources_enable(was);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

/* With the function's parameter layout (profiler/params.h) the scan reads
 * every word of a struct passed by value: here (int64 n, two tensor
 * pointers), 24 bytes, as PyTorch passes an array of data pointers. Without
 * one it reads 8 bytes behind each slot (the count, no pointer) and sees
 * neither tensor. The slots after the struct hold garbage pointers the
 * layout says are not parameters: never read. */
#define LAYOUT_FUNC 0x7e57f00dull

static int layout_info(uint64_t func, unsigned i, size_t *size)
{
	if (func != LAYOUT_FUNC)
		return -1;
	if (i > 0)
		return 1;
	*size = 24;
	return 0;
}

struct by_value { int64_t n; uint64_t a, b; };
struct layout_case { uint64_t func, a, b; float ha, hb; };

static void *layout_thread(void *arg)        /* a fresh thread: its first launch is scanned */
{
	struct layout_case *lc = arg;
	struct by_value bv = { 3, lc->a, lc->b };
	void *params[16] = { &bv, (void *)8, (void *)16, (void *)24 };   /* past the last: bad */
	if (lc->func)
		kvt_prof_on_launch(lc->func, params, 0);
	else
		kvt_prof_on_launch(0, (void *[16]){ &bv }, 0);
	lc->ha = heat_at(lc->a);
	lc->hb = heat_at(lc->b);
	return NULL;
}

static void test_launch_layout(void)
{
	const uint64_t M = 1ull << 20;
	struct layout_case lc = { .a = 0x6a00000000ull, .b = 0x6b00000000ull };
	CU_ASSERT_EQUAL_FATAL(kvt_heat_init(0), 0);          /* tau 0: exact sums */
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(lc.a, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_heat_track(lc.b, 8 * M, KVT_PLAN_TIER_FAR, 0, 0), 0);
	unsigned was = kvt_prof_sources_enabled();
	kvt_prof_sources_enable(1u << KVT_SRC_LAUNCH);
	kvt_prof_set_param_info(layout_info);
	pthread_t th;
	lc.func = 0;                                          /* no layout: the old reads */
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, layout_thread, &lc), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(lc.ha, 0);
	CU_ASSERT_EQUAL(lc.hb, 0);
	lc.func = LAYOUT_FUNC;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, layout_thread, &lc), 0);
	pthread_join(th, NULL);
	CU_ASSERT(lc.ha > 0);
	CU_ASSERT(lc.hb > 0);
	kvt_prof_set_param_info(NULL);
	kvt_param_layouts_forget();
	kvt_prof_sources_enable(was);
	kvt_heat_reset();
	kvt_heat_init(1000);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "decay: incremental equals the closed form", test_decay_closed_form },
		{ "decay across the 32-bit clock wrap", test_clock_wrap },
		{ "a chunk costs 16 bytes", test_chunk_is_small },
		{ "ranges: track, find, evidence, untrack, reuse", test_ranges },
		{ "the arena is huge-page aligned and advised", test_arena_huge_pages },
		{ "the tables are bounded", test_table_bounded },
		{ "prefetched out and in: the driver's records kept by page", test_prefetched_out },
		{ "collect: the migrator's working set", test_collect_working_set },
		{ "launch sampling: no aliasing with periodic launches", test_launch_sampling_periodic },
		{ "set_tier: a re-homed range is in HBM", test_set_tier },
		{ "collect and devices: ranges of several devices", test_collect_per_device },
		{ "graphs: instantiated kernels' evidence credited at launch", test_graph_evidence },
		{ "launch scan: never reads behind a device pointer", test_launch_skips_device },
		{ "launch scan: a layout shows a struct's words, and no slot past it", test_launch_layout },
		{ "fault_in: tier, residence, refaults", test_fault_in },
		{ "evicted: strikes for driver evictions only", test_evicted_strikes },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "heat", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
