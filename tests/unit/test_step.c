// SPDX-License-Identifier: MIT
/* The step prefetch (tier/step.c), driven by hand the way the hooks drive
 * it: a block table the tables source has learned is uploaded, and the
 * copy hook's kvt_step_after_copy runs on the copy's stream. The driver's
 * prefetch is a recording stand-in. What is checked: the pages of the
 * blocks the table names that are not in HBM are prefetched to the device
 * on the copy's own stream, once per upload, page runs only unless more
 * than half a chunk is named (then the chunk whole); the pages held apart
 * are counted for the migrator; with no room, a chunk in HBM that no step
 * named is demoted first, a recently named one never, the pages of an
 * older one that no step named leave page by page, and what finds neither room
 * nor victim stays; a stream being captured, the option off and a failed
 * prefetch leave the beliefs as they were. */
#include <stdlib.h>
#include <string.h>

#include "kvt_test.h"
#include "../profiler/decode.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/tables.h"
#include "../../tier/step.c"
#include "../../tier/discard.c"

#define KVT_SHIM_STUB_SUITE "the step suite"
#include "shim_stubs.h"

/* The migration thread is not linked here: the step's asks for a poll are
 * counted. */
static unsigned nr_polls_asked;
void kvt_migrator_poll_soon(void)
{
	nr_polls_asked++;
}

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

static struct call {
	uint64_t addr, bytes;
	CUmemLocationType type;
	uint64_t stream;
} calls[4096];
static unsigned nr_calls;
static int capturing, fail;

CUresult kvt_cuda_prefetch(CUdeviceptr p, size_t bytes, CUmemLocationType type, int id,
			   CUstream s)
{
	(void)id;
	CU_ASSERT(bytes > 0 && bytes <= KVT_CHUNK_BYTES && bytes % (64u << 10) == 0);
	CU_ASSERT_EQUAL(p % (64u << 10), 0);
	CU_ASSERT_EQUAL(p >> KVT_CHUNK_SHIFT, (p + bytes - 1) >> KVT_CHUNK_SHIFT);   /* one chunk */
	if (nr_calls < 4096)
		calls[nr_calls++] = (struct call){ p, bytes, type, (uint64_t)(uintptr_t)s };
	return fail ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* cuMemDiscardBatchAsync: the ranges of each call, in order */
static struct call dcalls[256];
static unsigned nr_dcalls, nr_dbatches;
static int dcan = 1, dfail;

int kvt_cuda_can_discard(void)
{
	return dcan;
}

CUresult kvt_cuda_discard(const uint64_t *addr, const uint64_t *bytes, size_t n, CUstream s)
{
	nr_dbatches++;
	for (size_t i = 0; i < n && nr_dcalls < 256; i++)
		dcalls[nr_dcalls++] = (struct call){ addr[i], bytes[i], CU_MEM_LOCATION_TYPE_INVALID,
						     (uint64_t)(uintptr_t)s };
	return dfail ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
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

/* The 64 KiB pages of chunk c that the table's blocks cover. */
static uint32_t want_pages(unsigned c)
{
	uint32_t m = 0;
	for (unsigned i = 0; i < 40; i++)
		for (unsigned r = 0; r < 2; r++) {
			uint64_t off = ((uint64_t)r * NB + ids[i]) * S;
			if (off >> KVT_CHUNK_SHIFT == c)
				m |= 1u << ((off & (KVT_CHUNK_BYTES - 1)) >> 16);
		}
	return m;
}

static unsigned pages_of(unsigned c)
{
	return (unsigned)__builtin_popcount(want_pages(c));
}

/* The pages of chunk c that calls moved to type. */
static uint32_t moved(unsigned c, CUmemLocationType type)
{
	uint32_t m = 0;
	for (unsigned i = 0; i < nr_calls; i++) {
		if (calls[i].type != type || (calls[i].addr - KV) >> KVT_CHUNK_SHIFT != c)
			continue;
		unsigned p0 = (unsigned)((calls[i].addr & (KVT_CHUNK_BYTES - 1)) >> 16);
		unsigned np = (unsigned)(calls[i].bytes >> 16);
		m |= (np >= 32 ? ~0u : (1u << np) - 1) << p0;
	}
	return m;
}

/* The pages promoted calls moved into chunk c (device-bound calls). */
static uint32_t moved_in(unsigned c)
{
	return moved(c, CU_MEM_LOCATION_TYPE_DEVICE);
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

/* 40 blocks of 32 KiB over 20 chunks: a few pages of each, so the named
 * pages move, page runs only, and the chunks stay believed far with their
 * pages held apart (counted for the migrator). */
static void test_named_far_chunks_promoted(void)
{
	setup();
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	unsigned want = nr_named(), pages = 0;
	CU_ASSERT(want >= 10);
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		CU_ASSERT(in_table(c));
		CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_DEVICE);
		CU_ASSERT_EQUAL(calls[i].stream, STREAM);
		CU_ASSERT(calls[i].bytes < KVT_CHUNK_BYTES);
	}
	for (unsigned c = 0; c < NCHUNK; c++) {
		CU_ASSERT(pages_of(c) <= 16);               /* none goes whole */
		CU_ASSERT_EQUAL(moved_in(c), want_pages(c));   /* exactly the named pages */
		CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_FAR);
		pages += pages_of(c);
	}
	CU_ASSERT(pages > want);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), pages);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(1), 0);   /* another device's count */
	/* no new upload: nothing; the same upload again: nothing left to move */
	unsigned made = nr_calls;
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, made);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, made);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.promoted, 0);
	CU_ASSERT_EQUAL(si.pages, pages);
	CU_ASSERT_EQUAL(si.steps, 2);
	CU_ASSERT_EQUAL(si.named, 2 * want);
	CU_ASSERT(kvt_step_owns(kvt_heat_find(KV)));
	/* a chunk that came in whole since (a GPU fault) holds nothing apart */
	unsigned c0 = (unsigned)((ids[0] * S) >> KVT_CHUNK_SHIFT);
	set_tier(c0, KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), pages - pages_of(c0));
}

/* Blocks 0..39 in a row: 20 of chunk 0's 32 pages (and of chunk 64's, the
 * V side), more than half: the chunk moves whole, believed in HBM. */
static void test_dense_chunk_whole(void)
{
	setup();
	kvt_step_set_room(1000);
	uint32_t row[40];
	for (unsigned i = 0; i < 40; i++)
		row[i] = i;
	upload(row, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 2);
	for (unsigned i = 0; i < nr_calls; i++) {
		CU_ASSERT_EQUAL(calls[i].bytes, KVT_CHUNK_BYTES);
		CU_ASSERT(calls[i].addr == KV || calls[i].addr == KV + NB * S);
	}
	CU_ASSERT_EQUAL(tier_of(0), KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(tier_of(64), KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), 0);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.promoted, 2);
	CU_ASSERT_EQUAL(si.pages, 0);
}

/* No room: 2 chunks in HBM that no table names (100, 101) are demoted
 * whole, the first before any promotion, each freeing 32 pages; named
 * pages come in while those last; the chunks after the first that does
 * not fit stay far. */
static void test_victims_first(void)
{
	setup();
	for (unsigned c = 100; c < 102; c++)
		set_tier(c, KVT_PLAN_TIER_HBM);
	kvt_step_set_room(0);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	unsigned total = 0, in = 0, victims = 0, chunks_in = 0;
	for (unsigned c = 0; c < NCHUNK; c++)
		total += pages_of(c);
	CU_ASSERT_FATAL(total > 64);                     /* more than two victims free */
	CU_ASSERT(nr_calls > 2);
	CU_ASSERT_EQUAL(calls[0].type, CU_MEM_LOCATION_TYPE_HOST);   /* a victim first */
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		if (calls[i].type == CU_MEM_LOCATION_TYPE_HOST) {
			CU_ASSERT(c == 100 || c == 101);        /* never a named chunk */
			CU_ASSERT_EQUAL(calls[i].bytes, KVT_CHUNK_BYTES);
			CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_FAR);
			victims++;
		} else {
			CU_ASSERT(in_table(c));
			in += (unsigned)(calls[i].bytes >> 16);
		}
	}
	for (unsigned c = 0; c < NCHUNK; c++) {
		uint32_t m = moved_in(c);
		CU_ASSERT(m == 0 || m == want_pages(c));         /* a chunk's pages all or none */
		chunks_in += m != 0;
	}
	CU_ASSERT_EQUAL(victims, 2);
	CU_ASSERT(in <= 64 && in + 16 > 64);               /* the room, less a chunk's need */
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.demoted, 2);
	CU_ASSERT_EQUAL(si.pages, in);
	CU_ASSERT_EQUAL(si.no_room, nr_named() - chunks_in);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), in);
	/* the next upload: what holds HBM is named now, none is a victim */
	unsigned before = nr_calls;
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, before);
}

/* No room, and the one chunk in HBM (c0) is one the first table named (a
 * GPU fault brought it in whole), on a driver that moves pages. Steps
 * later (no longer recent), a table names one far block elsewhere: c0's
 * pages that the first table did not name leave page by page (not a trim:
 * c0 is not recent), its named pages stay, c0 is believed far with those
 * held apart, and the block's pages come in. */
static void test_unnamed_pages_leave(void)
{
	setup();
	unsigned c0 = (unsigned)((ids[0] * S) >> KVT_CHUNK_SHIFT);
	set_tier(c0, KVT_PLAN_TIER_HBM);
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	uint64_t held = kvt_step_partial_pages(0);
	CU_ASSERT_FATAL(held > 0);
	uint32_t other[1] = { 2000 };              /* chunks 31 (K) and 95 (V) */
	CU_ASSERT_FATAL(!in_table(31) && !in_table(95));
	cur_seq += KVT_STEP_PROTECT;               /* steps that named none of c0 */
	kvt_step_set_room(0);
	nr_calls = 0;
	struct kvt_step_info si;
	upload(other, 1);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_FATAL(nr_calls > 2);
	CU_ASSERT_EQUAL(calls[0].type, CU_MEM_LOCATION_TYPE_HOST);   /* room first */
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		if (calls[i].type == CU_MEM_LOCATION_TYPE_HOST) {
			CU_ASSERT_EQUAL(c, c0);                /* the first table's pages stay */
		} else {
			CU_ASSERT(c == 31 || c == 95);
			CU_ASSERT_EQUAL(calls[i].bytes, 64u << 10);
		}
	}
	CU_ASSERT_EQUAL(moved(c0, CU_MEM_LOCATION_TYPE_HOST), ~want_pages(c0));
	CU_ASSERT_EQUAL(moved(31, CU_MEM_LOCATION_TYPE_DEVICE), 1u << ((2000 * S % KVT_CHUNK_BYTES) >> 16));
	CU_ASSERT_EQUAL(tier_of(c0), KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), held + pages_of(c0) + 2);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.pages_out, 32 - pages_of(c0));
	CU_ASSERT_EQUAL(si.demoted, 0);
	CU_ASSERT_EQUAL(si.trims, 0);
}

/* The chunk of the table's first block (c0; the range is the arena's
 * first, so its arena index too). */
static unsigned first_chunk(void)
{
	return (unsigned)((ids[0] * S) >> KVT_CHUNK_SHIFT);
}

/* c0 in HBM whole (a GPU fault brought it in), named by the table's step;
 * then, with no room, a step naming one far block elsewhere (chunks 31
 * and 95): c0 is the only victim there is, while recent. What the first
 * step left held apart is returned; calls[] has the second step's calls. */
static uint64_t c0_named_then_no_room(unsigned c0)
{
	static const uint32_t other[1] = { 2000 };
	set_tier(c0, KVT_PLAN_TIER_HBM);
	part[c0] = 0;
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	uint64_t held = kvt_step_partial_pages(0);
	kvt_step_set_room(0);
	nr_calls = 0;
	upload(other, 1);
	kvt_step_after_copy(STREAM);
	return held;
}

/* What a per-page driver reports of calls[]' moves out: the pages asked,
 * run by run. */
static void report_host_calls(void)
{
	for (unsigned i = 0; i < nr_calls; i++)
		if (calls[i].type == CU_MEM_LOCATION_TYPE_HOST)
			kvt_heat_prefetched_out(calls[i].addr, calls[i].bytes);
}

/* The same start on a driver that moves only the pages asked for (the
 * default belief): c0's unnamed pages leave at once although the step
 * before named c0, its named pages stay held, and the far block comes in.
 * The trim is watched: TRIM_WATCH_POLLS polls later, naming c0 again finds the
 * driver's prefetch-out records (kvt_heat_prefetched_out) within the pages
 * asked, so trimming stays on. */
static void test_recent_trimmed(void)
{
	setup();
	unsigned c0 = first_chunk(), a = c0;
	uint64_t held = c0_named_then_no_room(c0);
	CU_ASSERT_FATAL(nr_calls > 2);
	CU_ASSERT_EQUAL(calls[0].type, CU_MEM_LOCATION_TYPE_HOST);   /* room first */
	for (unsigned i = 0; i < nr_calls; i++) {
		unsigned c = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
		if (calls[i].type == CU_MEM_LOCATION_TYPE_HOST)
			CU_ASSERT_EQUAL(c, c0);
	}
	CU_ASSERT_EQUAL(moved(c0, CU_MEM_LOCATION_TYPE_HOST), ~want_pages(c0));
	CU_ASSERT_EQUAL(tier_of(c0), KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), held + pages_of(c0) + 2);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims, 1);
	CU_ASSERT_EQUAL(si.pages_out, 32 - pages_of(c0));
	CU_ASSERT_EQUAL(si.no_room, 0);
	report_host_calls();
	CU_ASSERT_NOT_EQUAL_FATAL(trimmed[a], 0);
	trimmed[a] = ((kvt_prof_polls() - TRIM_WATCH_POLLS) << 1) | 1;   /* the watch is over */
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(trimmed[a], 0);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims_wide, 0);
	CU_ASSERT_EQUAL(win_seen, 1);
	CU_ASSERT_EQUAL(coarse, 0);
}

/* A driver whose residency unit is 2 MiB: each trim of c0 (back in HBM
 * whole, as the next kernels' faults bring it) is reported moved out
 * whole, its kept pages too (wide: every trim; wide == 2: every other
 * one). Once TRIM_EARLY trims say so and three in four of those judged,
 * or more than a quarter of a window, recent chunks are no longer
 * trimmed: c0 stays, the far blocks find no room. A window of trims
 * reported within the pages asked never turns it off, nor one whose
 * chunk the migrator moved whole meanwhile. */
static void run_trims(int wide, int migrator_moved)
{
	unsigned c0 = first_chunk(), a = c0;
	uint64_t base0 = KV + ((uint64_t)c0 << KVT_CHUNK_SHIFT);
	for (unsigned k = 0; k < TRIM_WINDOW && !coarse; k++) {
		(void)c0_named_then_no_room(c0);
		CU_ASSERT_FATAL(moved(c0, CU_MEM_LOCATION_TYPE_HOST) == ~want_pages(c0));
		if (migrator_moved) {                /* the migrator moved c0 whole meanwhile */
			struct kvt_heat_range r;
			CU_ASSERT_FATAL(kvt_heat_range_peek(kvt_heat_find(KV), &r) == 0);
			kvt_step_moved_whole(&r, c0, 1);
			CU_ASSERT_FATAL(trimmed[a] == 0);
		}
		if (wide == 1 || (wide == 2 && k % 2))
			kvt_heat_prefetched_out(base0, KVT_CHUNK_BYTES);
		else
			report_host_calls();
		if (!migrator_moved)
			trimmed[a] = ((kvt_prof_polls() - TRIM_WATCH_POLLS) << 1) | 1;
		upload(ids, 40);                         /* c0 named again: judged */
		kvt_step_after_copy(STREAM);
		CU_ASSERT_FATAL(trimmed[a] == 0);
		/* the far blocks' pages out again, for the next round's room */
		for (unsigned c = 0; c < NCHUNK; c++)
			if (c != c0) {
				set_tier(c, KVT_PLAN_TIER_FAR);
				part[c] = 0;
			}
	}
}

static void test_trims_watched(void)
{
	setup();
	run_trims(0, 0);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims, TRIM_WINDOW);
	CU_ASSERT_EQUAL(si.trims_wide, 0);
	CU_ASSERT_EQUAL(coarse, 0);

	/* the migrator's own whole moves are named in full by the driver's
	 * records: those trims are not judged */
	setup();
	run_trims(1, 1);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims_wide, 0);
	CU_ASSERT_EQUAL(win_seen, 0);
	CU_ASSERT_EQUAL(coarse, 0);

	/* every other trim wide: never three in four, decided once past the
	 * quarter of the window */
	setup();
	run_trims(2, 0);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims, 2 * (TRIM_WINDOW / 4 + 1));
	CU_ASSERT_EQUAL(si.trims_wide, TRIM_WINDOW / 4 + 1);
	CU_ASSERT_EQUAL(coarse, 1);

	/* every trim wide: decided after TRIM_EARLY of them */
	setup();
	run_trims(1, 0);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.trims, TRIM_EARLY);
	CU_ASSERT_EQUAL(si.trims_wide, TRIM_EARLY);
	CU_ASSERT_EQUAL(coarse, 1);
	/* from now on a recent chunk keeps its pages */
	unsigned c0 = first_chunk();
	(void)c0_named_then_no_room(c0);
	CU_ASSERT_EQUAL(nr_calls, 0);
	CU_ASSERT_EQUAL(tier_of(c0), KVT_PLAN_TIER_HBM);
}

/* Pages of far chunks prefetched apart are watched too: named again
 * TRIM_WATCH_POLLS polls later, the driver's host-to-device records of those
 * prefetches give a verdict. A per-page driver's records (the pages
 * asked) never turn whole-chunk mode on; a driver that reported every
 * chunk moved whole does, once more than a quarter of a window (16) said
 * so; a chunk with no record, or one the migrator moved whole since,
 * gets no verdict. */
static void run_asks(int whole, int records, int migrator_moved)
{
	setup();
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	unsigned want = nr_named();
	CU_ASSERT_FATAL(want > 16 && nr_calls > 0);
	for (unsigned i = 0; i < nr_calls && records; i++)
		kvt_heat_prefetched_in(whole ? calls[i].addr & ~(uint64_t)(KVT_CHUNK_BYTES - 1)
				       : calls[i].addr, whole ? KVT_CHUNK_BYTES : calls[i].bytes);
	for (unsigned c = 0; c < NCHUNK; c++)
		if (asked[c])
			asked[c] = ((kvt_prof_polls() - TRIM_WATCH_POLLS) << 1) | 1;
	if (migrator_moved) {                   /* whole, meanwhile: its records say nothing */
		struct kvt_heat_range r;
		CU_ASSERT_FATAL(kvt_heat_range_peek(kvt_heat_find(KV), &r) == 0);
		kvt_step_moved_whole(&r, 0, (uint32_t)NCHUNK);
		records = 0;
	}
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	struct kvt_step_info si;
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.asks_judged, records ? want : 0);
	CU_ASSERT_EQUAL(si.trims_wide, records && whole ? want : 0);
	CU_ASSERT_EQUAL(coarse, records && whole);
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(asked[c], 0);
}

static void test_asks_watched(void)
{
	run_asks(0, 1, 0);
	run_asks(1, 1, 0);
	run_asks(1, 0, 0);
	run_asks(1, 1, 1);
}

/* A driver whose residency unit is 2 MiB (coarse, as the trim watch finds
 * it): a step's named pages of a far chunk move the chunk whole and are
 * charged whole; pages held apart from before count as their whole chunk
 * for the migrator; such a chunk leaves whole as a victim, freeing the
 * chunk, unless a step named a page of it since the hand last passed. Not
 * for a step that names more chunks than the budget holds. */
static void test_coarse_whole(void)
{
	setup();
	kvt_step_set_room(1000);
	upload(ids, 40);                            /* per page: held apart */
	kvt_step_after_copy(STREAM);
	unsigned want = nr_named(), held = 0;
	for (unsigned c = 0; c < NCHUNK; c++)
		held += part[c] != 0;
	CU_ASSERT_FATAL(held == want);
	coarse = 1;                                 /* the trim watch found the unit */
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), 32 * (uint64_t)want);
	/* a table naming far blocks elsewhere (chunks 10..19, 74..83): each
	 * chunk moves whole, charged 32 pages */
	uint32_t more[40];
	for (unsigned i = 0; i < 40; i++)
		more[i] = 640 + 16 * i;
	kvt_step_set_room(1000);
	nr_calls = 0;
	upload(more, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 20);              /* 4 blocks a chunk, K and V */
	for (unsigned i = 0; i < nr_calls; i++) {
		CU_ASSERT_EQUAL(calls[i].bytes, KVT_CHUNK_BYTES);
		CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_DEVICE);
	}
	for (unsigned c = 10; c < 20; c++)
		CU_ASSERT(tier_of(c) == KVT_PLAN_TIER_HBM && tier_of(64 + c) == KVT_PLAN_TIER_HBM);
	CU_ASSERT_EQUAL(room, 1000 - 32 * 20);
	/* no room, and the first table's chunks (pages held apart) are steps
	 * old: one of them (the first, a page of it named since the hand
	 * passed) gets its second chance, the next leaves whole and its 32
	 * pages make the room for a block of chunk 20 */
	unsigned c0 = first_chunk(), c1 = c0 + 1;
	while (c1 < NCHUNK && !part[c1])
		c1++;
	CU_ASSERT_FATAL(c1 < 10);
	for (unsigned c = 0; c < NCHUNK; c++)
		if (c != c0)
			used[c] = 0;
	CU_ASSERT_FATAL(used[c0] != 0);
	cur_seq += KVT_STEP_PROTECT;
	kvt_step_set_room(0);
	nr_calls = 0;
	uint32_t one[1] = { 1280 };                 /* chunk 20 (K) and 84 (V) */
	upload(one, 1);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(moved(c0, CU_MEM_LOCATION_TYPE_HOST), 0);
	CU_ASSERT_EQUAL(used[c0], 0);
	CU_ASSERT_EQUAL(moved(c1, CU_MEM_LOCATION_TYPE_HOST), ~0u);
	CU_ASSERT_EQUAL(part[c1], 0);
	CU_ASSERT_EQUAL(moved_in(20), ~0u);
	CU_ASSERT_EQUAL(tier_of(20), KVT_PLAN_TIER_HBM);

	/* a step naming more chunks than the budget holds (cap 5 against
	 * 20): its pages move apart, charged as pages, as on a per-page driver */
	setup();
	coarse = 1;
	kvt_step_set_cap(5);
	kvt_step_set_room(1000);
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT(nr_calls > 0);
	for (unsigned i = 0; i < nr_calls; i++)
		CU_ASSERT(calls[i].bytes < KVT_CHUNK_BYTES);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), 1000 - (uint64_t)room);
	kvt_step_set_cap(0);
}

/* When the watch finds that the driver moves 2 MiB for a page, beliefs
 * from before are forgotten: a far chunk whose named pages were held
 * apart (they may have left with a trim of its other pages) moves whole
 * when a step names it again (zipf-decode 2x: every GPU fault of the
 * timed window was on such a chunk). */
static void test_coarse_beliefs(void)
{
	setup();
	kvt_step_set_room(1000);
	upload(ids, 40);                            /* per page: held apart */
	kvt_step_after_copy(STREAM);
	unsigned want = nr_named();
	CU_ASSERT_FATAL(want > 2);
	for (unsigned k = 0; k + 1 < TRIM_EARLY; k++)
		judge(1);
	CU_ASSERT_EQUAL_FATAL(coarse, 0);
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(part[c] != 0, in_table(c));   /* still believed */
	judge(1);                                   /* the watch decides */
	CU_ASSERT_EQUAL_FATAL(coarse, 1);
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(part[c], 0);
	nr_calls = 0;
	upload(ids, 40);                            /* the same blocks again */
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, want);
	for (unsigned i = 0; i < nr_calls; i++) {
		CU_ASSERT_EQUAL(calls[i].bytes, KVT_CHUNK_BYTES);
		CU_ASSERT_EQUAL(calls[i].type, CU_MEM_LOCATION_TYPE_DEVICE);
	}
	for (unsigned c = 0; c < NCHUNK; c++) {
		CU_ASSERT_EQUAL(part[c], 0);
		CU_ASSERT_EQUAL(tier_of(c), in_table(c) ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR);
	}
	/* named once more, all in HBM: nothing moves */
	nr_calls = 0;
	upload(ids, 40);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_calls, 0);
}

/* On a driver that moves 2 MiB (whole chunks), the victim is the chunk
 * whose last naming is oldest of the next VICTIM_PICK the hand finds, not
 * the first: HBM holds chunks 100..109, none named since the hand last
 * passed; 103 was named longest ago of 100..107 and 109 longest ago of
 * all. A table naming two far chunks makes room for both: 103 leaves
 * first, then 109 (of 108, 109 and, the hand come round, 100..102 and
 * 104..106). */
static void test_victim_oldest(void)
{
	setup();
	coarse = 1;
	cur_seq = 1000;
	for (unsigned c = 100; c < 110; c++) {
		set_tier(c, KVT_PLAN_TIER_HBM);
		named[c] = 900 + 5 * (c - 100);
	}
	named[103] = 800;
	named[109] = 700;
	kvt_step_set_room(0);
	uint32_t one[1] = { 1280 };                 /* chunk 20 (K) and 84 (V) */
	upload(one, 1);
	kvt_step_after_copy(STREAM);
	unsigned out[4], nout = 0;
	for (unsigned i = 0; i < nr_calls; i++)
		if (calls[i].type == CU_MEM_LOCATION_TYPE_HOST && nout < 4)
			out[nout++] = (unsigned)((calls[i].addr - KV) >> KVT_CHUNK_SHIFT);
	CU_ASSERT_EQUAL_FATAL(nout, 2);
	CU_ASSERT_EQUAL(out[0], 103);
	CU_ASSERT_EQUAL(out[1], 109);
	for (unsigned c = 100; c < 110; c++)
		CU_ASSERT_EQUAL(tier_of(c), c == 103 || c == 109 ? KVT_PLAN_TIER_FAR : KVT_PLAN_TIER_HBM);
	CU_ASSERT(tier_of(20) == KVT_PLAN_TIER_HBM && tier_of(84) == KVT_PLAN_TIER_HBM);
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
	CU_ASSERT_EQUAL(nr_calls, nr_named());   /* each chunk's first run, then the next chunk */
	for (unsigned c = 0; c < NCHUNK; c++)
		CU_ASSERT_EQUAL(tier_of(c), KVT_PLAN_TIER_FAR);
	CU_ASSERT_EQUAL(kvt_step_partial_pages(0), 0);
	kvt_step_info(&si);
	CU_ASSERT_EQUAL(si.failed, nr_named());
	CU_ASSERT_EQUAL(si.promoted, 0);
	CU_ASSERT_EQUAL(si.pages, 0);
}

/* Dead ranges a decoder found (profiler/decode_fresh.c) are dropped on the
 * step's stream before anything else, once each; never while capturing,
 * without the driver call, or with KVTIER_DISCARD=0 (counted as skipped);
 * a failed call stops it for good. */
static void dead_pages(const int32_t *ids, uint32_t n)
{
	int32_t v[8];
	memcpy(v, ids, 4ull * n);
	kvt_decode_link_slots(DEV_LO + 0x9000, DEV_LO + 0xa000, 16);
	kvt_decode_kv_write(KV, S, DEV_LO + 0x9000, 16);
	kvt_decode_fresh(DEV_LO + 0xa000, v, n);
}

static void test_dead_discarded(void)
{
	setup();
	kvt_decode_reset();
	kvt_discard_reset();
	nr_dcalls = nr_dbatches = 0;
	dcan = 1;
	dfail = 0;
	kvt_opt.discard = 1;
	dead_pages((const int32_t[]){ 5, 2, 3 }, 3);       /* blocks 2-3: one 64 KiB page */
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL_FATAL(nr_dcalls, 1);
	CU_ASSERT_EQUAL(dcalls[0].addr, KV + 2 * S);
	CU_ASSERT_EQUAL(dcalls[0].bytes, 2 * S);
	CU_ASSERT_EQUAL(dcalls[0].stream, STREAM);
	kvt_step_after_copy(STREAM);                       /* taken: not again */
	CU_ASSERT_EQUAL(nr_dcalls, 1);
	struct kvt_discard_info di;
	kvt_discard_info(&di);
	CU_ASSERT_EQUAL(di.calls, 1);
	CU_ASSERT_EQUAL(di.ranges, 1);
	CU_ASSERT_EQUAL(di.bytes, 2 * S);
	/* capturing, no driver call, the option off: left */
	capturing = 1;
	dead_pages((const int32_t[]){ 8, 9 }, 2);
	kvt_step_after_copy(STREAM);
	capturing = 0;
	dcan = 0;
	dead_pages((const int32_t[]){ 8, 9 }, 2);
	kvt_step_after_copy(STREAM);
	dcan = 1;
	kvt_opt.discard = 0;
	dead_pages((const int32_t[]){ 8, 9 }, 2);
	kvt_step_after_copy(STREAM);
	kvt_opt.discard = 1;
	CU_ASSERT_EQUAL(nr_dcalls, 1);
	kvt_discard_info(&di);
	CU_ASSERT_EQUAL(di.skipped, 3);
	/* a failure stops it */
	dfail = 1;
	dead_pages((const int32_t[]){ 8, 9 }, 2);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_dbatches, 2);
	dfail = 0;
	dead_pages((const int32_t[]){ 10, 11 }, 2);
	kvt_step_after_copy(STREAM);
	CU_ASSERT_EQUAL(nr_dbatches, 2);                   /* stopped */
	kvt_discard_info(&di);
	CU_ASSERT_EQUAL(di.failed, 1);
	CU_ASSERT_EQUAL(di.skipped, 5);
	kvt_discard_reset();
	kvt_decode_reset();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "dead ranges are dropped on the step's stream, first", test_dead_discarded },
		{ "named far chunks go to HBM on the copy's stream, once per upload",
		  test_named_far_chunks_promoted },
		{ "a chunk more than half named moves whole", test_dense_chunk_whole },
		{ "no room: an unnamed chunk in HBM is demoted first, a named one never",
		  test_victims_first },
		{ "no room: a chunk's pages no step named lately leave, its named pages stay",
		  test_unnamed_pages_leave },
		{ "no room: a recent chunk's unnamed pages leave where the driver moves pages",
		  test_recent_trimmed },
		{ "trims watched: a driver that moves 2 MiB for a page turns them off",
		  test_trims_watched },
		{ "prefetches apart watched: whole-chunk records turn whole chunks on",
		  test_asks_watched },
		{ "a driver that moves 2 MiB for a page: named chunks move and are charged whole",
		  test_coarse_whole },
		{ "the driver found to move 2 MiB for a page: pages held apart are forgotten",
		  test_coarse_beliefs },
		{ "whole chunks: of the hand's next few, the one named longest ago leaves",
		  test_victim_oldest },
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
