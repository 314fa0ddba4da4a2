// SPDX-License-Identifier: MIT
/* The step prefetch (contract in step.h). Runs in the copy hook on the
 * application's thread: atomics and a busy flag only (never waits), no
 * malloc (the per-chunk names are mapped once with the raw mmap), no
 * stdio; its driver calls are cuMemPrefetchAsync on the copy's stream and
 * one capture query. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "step.h"
#include "discard.h"
#include "migrator.h"
#include "kvtier/api.h"
#include "kvtier/planner.h"
#include "../base/kvt.h"
#include "../cuda_shim/shim.h"
#include "../profiler/evidence.h"
#include "../profiler/heat.h"
#include "../profiler/tables.h"
#include "../profiler/trace.h"

#define REF       0x80000000u          /* named since the hand last passed */
#define HAND_MAX  (1u << 16)           /* chunks the hand looks at per step */
#define PAGES     KVT_STEP_PAGES
#define WHOLE_AT  (PAGES / 2)          /* more pages than this wanted or held: the whole chunk */
_Static_assert(PAGES == KVT_CHUNK_BYTES >> KVT_STEP_PAGE_SHIFT, "a chunk's pages fill a mask");

static uint32_t *named;                /* per arena chunk: the step that last named it | REF */
static uint32_t *part;                 /* per arena chunk believed far: its pages put in HBM */
static uint32_t *used;                 /* per arena chunk: pages named since the hand last passed */
static uint32_t *trimmed;              /* per arena chunk: when a step trimmed it while recent (polls << 1 | 1), 0 */
static uint32_t *kept;                 /* per arena chunk: the pages that trim left held */
static uint32_t *asked;                /* per arena chunk: when a step prefetched pages of it apart (polls << 1 | 1), 0 */
static uint32_t *scratch;              /* kvt_tables_step_each's (under busy) */
static uint32_t cur_seq;               /* atomic: steps taken */
static int busy;                       /* atomic: a step is under way */
static int64_t room;                   /* atomic: pages free under the budget */
static uint32_t cap_chunks;            /* atomic: the chunks the budget holds (0: not known) */
static int fits = 1;                   /* atomic: the last step named no more than cap_chunks */
static struct { int slot; uint32_t idx; } hand = { -1, 0 };   /* under busy */
static uint32_t owned_ms[KVT_HEAT_MAX_RANGES];   /* atomic: when a step last named the range */
static uint32_t part_gen[KVT_HEAT_MAX_RANGES];   /* atomic: the range generation part[] is of */
static struct kvt_step_info st;        /* atomic */
/* Trimming recent chunks (victim): on until the driver is seen to move
 * more than the pages asked for (coarse), judged per TRIM_WINDOW trims. */
#define TRIM_WINDOW   64               /* recent chunks trimmed per verdict */
#define TRIM_EARLY    8                /* wide verdicts that decide early (judge()) */
#define TRIM_WATCH_POLLS 3u            /* CUPTI's records of a trim are in by then (a flush a poll) */
static int coarse;                     /* atomic: trimming recent chunks is off for good */
static int watching;                   /* atomic: a trim or an ask has been watched */
static uint32_t win_seen, win_wide;    /* atomic: this window's trims judged, and those of them
					* whose kept pages the driver moved out too */

#define ADD(f, v) __atomic_fetch_add(&st.f, (v), __ATOMIC_RELAXED)

/* Chunks are moved and charged whole: the driver moves whole chunks for a
 * page (coarse), and the last step's chunks fit in the budget. Charged by
 * page there, a step filled HBM up to 32 times faster than the budget said
 * and the driver evicted the hot chunks (zipf-decode 4x on the simulated
 * device: 250 evictions and 18k tokens/s; whole: none, 44.6k). A step that
 * names more chunks than the budget holds cannot be served either way; by
 * page, its chunks still come in and the driver makes the room, which
 * measured better than leaving them to fault or be read over the link
 * (vllm-like 2x: 6.8k tokens/s against 4.0k). */
static int whole_mode(void)
{
	return __atomic_load_n(&coarse, __ATOMIC_RELAXED) && __atomic_load_n(&fits, __ATOMIC_RELAXED);
}

struct far {
	uint64_t addr;
	int hs;
	uint32_t pages;                     /* wanted in HBM (a victim's: to leave) */
	int recent;                         /* a victim a recent step named (its unnamed pages leave) */
};

struct step {
	uint32_t seq, now_ms;
	int hs;                             /* the range last looked up, cached */
	struct kvt_heat_range r;
	unsigned nr_named, nr_far, overflow;
	uint32_t nr_pages;                  /* pages named (a chunk named twice: counted twice) */
	struct far far[KVT_STEP_MAX_MOVES];
};

int kvt_step_owns(int slot)
{
	if (slot < 0 || slot >= KVT_HEAT_MAX_RANGES)
		return 0;
	uint32_t t = __atomic_load_n(&owned_ms[slot], __ATOMIC_RELAXED);
	return t && kvt_heat_now_ms() - t < KVT_STEP_OWN_MS;
}

int kvt_step_enabled(void)
{
	return kvt_opt.step_prefetch && (kvt_prof_sources_enabled() & (1u << KVT_SRC_TABLES));
}

void kvt_step_set_room(int64_t pages)
{
	__atomic_store_n(&room, pages, __ATOMIC_RELAXED);
}

void kvt_step_set_cap(uint32_t chunks)
{
	__atomic_store_n(&cap_chunks, chunks, __ATOMIC_RELAXED);
}

#define ARENA_WORDS (6 * (size_t)KVT_HEAT_MAX_CHUNKS + KVT_TABLES_STEP_CHUNKS)

/* named[], part[], used[], trimmed[], kept[], asked[] and the scratch, mapped once (zero-filled, reserved
 * lazily); NULL when the map failed. */
static uint32_t *names(void)
{
	uint32_t *n = __atomic_load_n(&named, __ATOMIC_ACQUIRE);
	if (n)
		return n;
	size_t len = ARENA_WORDS * sizeof *n;
	uint32_t *p = kvt_sys_map_own(len, MAP_NORESERVE);
	if (p == MAP_FAILED)
		return NULL;
	part = p + KVT_HEAT_MAX_CHUNKS;
	used = p + 2 * (size_t)KVT_HEAT_MAX_CHUNKS;
	trimmed = p + 3 * (size_t)KVT_HEAT_MAX_CHUNKS;
	kept = p + 4 * (size_t)KVT_HEAT_MAX_CHUNKS;
	asked = p + 5 * (size_t)KVT_HEAT_MAX_CHUNKS;
	scratch = p + 6 * (size_t)KVT_HEAT_MAX_CHUNKS;
	uint32_t *none = NULL;
	if (!__atomic_compare_exchange_n(&named, &none, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		kvt_sys_munmap(p, len);
		return none;
	}
	return p;
}

/* part[] of range slot hs (as r describes it) belongs to its present
 * generation: a slot tracked anew starts with nothing held apart. */
static void fresh(int hs, const struct kvt_heat_range *r)
{
	if (__atomic_load_n(&part_gen[hs], __ATOMIC_RELAXED) == r->gen)
		return;
	for (uint32_t i = 0; i < r->cap_chunks; i++) {
		__atomic_store_n(&part[r->first + i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&used[r->first + i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&trimmed[r->first + i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&asked[r->first + i], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&part_gen[hs], r->gen, __ATOMIC_RELAXED);
}

/* The driver was just found to move 2 MiB for a page: the pages held
 * apart in far chunks are forgotten. Each was believed in HBM by itself,
 * but the chunk went wherever its last move by page sent it, whole; after
 * a victim's pages left, the ones it kept had left too, and the kernels
 * that read them faulted (zipf-decode 2x: every GPU fault of the timed
 * window). Believed far, a chunk a step names moves whole (a
 * move the driver finds done costs nothing on the link). */
static void forget_held(void)
{
	for (int sl = 0; sl < KVT_HEAT_MAX_RANGES; sl++) {
		struct kvt_heat_range r;
		if (kvt_heat_range_peek(sl, &r))
			continue;
		fresh(sl, &r);
		struct kvt_heat_chunk *c = kvt_heat_chunks(&r);
		for (uint32_t i = 0; i < r.nr_chunks; i++)
			if (__atomic_load_n(&part[r.first + i], __ATOMIC_RELAXED) &&
			    __atomic_load_n(&c[i].tier, __ATOMIC_RELAXED) != KVT_PLAN_TIER_HBM)
				__atomic_store_n(&part[r.first + i], 0, __ATOMIC_RELAXED);
	}
}

/* One verdict on the driver's residency unit: whether it moved more than
 * a step's page prefetch asked for. When over a quarter of a window's
 * verdicts say so, or TRIM_EARLY of them and three in four so far, the
 * step stops working by page for good (coarse: the unit is the driver's;
 * it does not change). The early rule: a workload that trims seldom gave
 * 17 wide verdicts only after ~330 steps, 8 of the first 8 after ~70, and
 * the chunks trimmed in between faulted back (zipf-decode 2x);
 * a per-page driver gives 0-30 wide verdicts of 600-2 100. */
static void judge(int wide)
{
	uint32_t seen = __atomic_add_fetch(&win_seen, 1, __ATOMIC_RELAXED);
	if (wide) {
		ADD(trims_wide, 1);
		uint32_t w = __atomic_add_fetch(&win_wide, 1, __ATOMIC_RELAXED);
		if ((4 * w > TRIM_WINDOW || (w >= TRIM_EARLY && 4 * w >= 3 * seen)) &&
		    !__atomic_exchange_n(&coarse, 1, __ATOMIC_RELAXED))   /* said at exit */
			forget_held();
	}
	if (seen < TRIM_WINDOW)
		return;
	__atomic_store_n(&win_wide, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&win_seen, 0, __ATOMIC_RELAXED);
}

/* Chunk a (heat chunk c), named again: the verdicts its earlier moves by
 * page allow, TRIM_WATCH_POLLS polls of the sources or more after them
 * (CUPTI's records are in by then: a flush a poll). Counted in polls, not
 * milliseconds, so that a device whose decode steps are short (a small
 * model, or the simulated device in virtual time) gets its verdicts within
 * a run. A recent chunk's trim: did the driver's
 * device-to-host records of cause PREFETCH name pages the trim kept? A
 * far chunk's pages prefetched apart: did the host-to-device records
 * cover the whole chunk (no record: nothing moved, no verdict)? A driver
 * that keeps residency per page moves only the pages asked for; one whose
 * unit is 2 MiB moves the rest too, and the next kernels fault the kept
 * pages back (a trim), or HBM fills faster than the pages charged (a
 * prefetch in). */
static void watch(uint32_t a, struct kvt_heat_chunk *c)
{
	uint32_t now = kvt_prof_polls() << 1;
	uint32_t t = __atomic_load_n(&trimmed[a], __ATOMIC_RELAXED);
	if (t && now - (t & ~1u) >= TRIM_WATCH_POLLS << 1) {
		__atomic_store_n(&trimmed[a], 0, __ATOMIC_RELAXED);
		judge(!!(kvt_heat_take_out(c) & __atomic_load_n(&kept[a], __ATOMIC_RELAXED)));
	}
	t = __atomic_load_n(&asked[a], __ATOMIC_RELAXED);
	if (t && now - (t & ~1u) >= TRIM_WATCH_POLLS << 1) {
		__atomic_store_n(&asked[a], 0, __ATOMIC_RELAXED);
		uint8_t in = kvt_heat_take_in(c);
		if (in & KVT_HEAT_F_IN_SEEN) {
			ADD(asks_judged, 1);
			judge(!!(in & KVT_HEAT_F_IN_WHOLE));
		}
	}
}

static unsigned pop(uint32_t m);

/* kvt_tables_step_each's callback: name the chunk for this step, and keep
 * the named pages of it that are not in HBM. */
static void note(void *arg, uint64_t chunk, int hs, uint32_t pages)
{
	struct step *x = arg;
	if (hs != x->hs) {
		if (kvt_heat_range_peek(hs, &x->r))
			return;
		x->hs = hs;
		fresh(hs, &x->r);
		if (__atomic_load_n(&owned_ms[hs], __ATOMIC_RELAXED) != x->now_ms)
			__atomic_store_n(&owned_ms[hs], x->now_ms, __ATOMIC_RELAXED);
	}
	uint64_t i = (chunk - x->r.base) >> KVT_CHUNK_SHIFT;
	if (i >= x->r.nr_chunks)
		return;
	uint32_t a = x->r.first + (uint32_t)i;
	int again = (__atomic_load_n(&named[a], __ATOMIC_RELAXED) & ~REF) == x->seq;
	if (!again) {
		__atomic_store_n(&named[a], x->seq | REF, __ATOMIC_RELAXED);
		x->nr_named++;
	}
	x->nr_pages += pop(pages);
	__atomic_fetch_or(&used[a], pages, __ATOMIC_RELAXED);   /* under busy: the hand's too */
	struct kvt_heat_chunk *c = kvt_heat_chunks(&x->r) + i;
	watch(a, c);
	if (__atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM)
		return;
	uint32_t want = pages & ~__atomic_load_n(&part[a], __ATOMIC_RELAXED);
	if (!want)
		return;
	if (again)                                  /* another base's blocks in it */
		for (unsigned k = 0; k < x->nr_far; k++)
			if (x->far[k].addr == chunk) {
				x->far[k].pages |= want;
				return;
			}
	if (x->nr_far < KVT_STEP_MAX_MOVES)
		x->far[x->nr_far++] = (struct far){ .addr = chunk, .hs = hs, .pages = want };
	else
		x->overflow++;
}

static unsigned pop(uint32_t m)
{
	return (unsigned)__builtin_popcount(m);
}

/* The next chunk of a covered range with pages in HBM that no step named
 * since the hand last passed (a CLOCK over pages): *v, v->pages those
 * pages, and its range, 0; -1 when the hand found none within its bound.
 * A chunk a recent step named keeps every page a step named since the
 * hand last passed, and only its other pages leave (marked recent, and
 * watched: see watch()); once the driver was seen to move whole 2 MiB
 * chunks for those pages (coarse), such a chunk is passed over whole, as
 * its named pages would leave with the rest and be faulted back (vllm-like
 * 2x on the stand-in's 2 MiB unit: 4x fewer tokens/s otherwise).
 * Passing an older chunk clears its named pages, which stay this pass
 * (in whole_mode(), the chunk stays whole). */
static int victim_one(uint32_t seq, unsigned *budget, struct far *v, struct kvt_heat_range *vr)
{
	struct kvt_heat_range r;
	int have = hand.slot >= 0 && !kvt_heat_range_peek(hand.slot, &r) &&
		   kvt_step_owns(hand.slot);
	if (have)
		fresh(hand.slot, &r);
	for (unsigned slots_seen = 0; *budget;) {
		if (!have || hand.idx >= r.nr_chunks) {
			if (++slots_seen > 2 * KVT_HEAT_MAX_RANGES)
				return -1;
			hand.slot = (hand.slot + 1) % KVT_HEAT_MAX_RANGES;
			hand.idx = 0;
			have = kvt_step_owns(hand.slot) && !kvt_heat_range_peek(hand.slot, &r);
			if (have)
				fresh(hand.slot, &r);
			continue;
		}
		(*budget)--;
		uint32_t i = hand.idx++, a = r.first + i;
		struct kvt_heat_chunk *c = kvt_heat_chunks(&r) + i;
		uint32_t held = __atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM
				? ~0u : __atomic_load_n(&part[a], __ATOMIC_RELAXED);
		if (!held)
			continue;
		uint32_t nm = __atomic_load_n(&named[a], __ATOMIC_RELAXED), cold;
		int recent = nm && seq - (nm & ~REF) <= KVT_STEP_PROTECT;
		if (recent) {
			/* a recent step's: the pages no step named since the hand
			 * last passed leave, unless that was seen to cost faults */
			if (__atomic_load_n(&coarse, __ATOMIC_RELAXED))
				continue;
			cold = held & ~__atomic_load_n(&used[a], __ATOMIC_RELAXED);
		} else if (whole_mode()) {
			/* the chunk is the driver's unit: it stays whole this pass
			 * when a page of it was named, else it leaves whole */
			cold = __atomic_exchange_n(&used[a], 0, __ATOMIC_RELAXED) ? 0 : held;
			if (nm & REF)
				__atomic_store_n(&named[a], nm & ~REF, __ATOMIC_RELAXED);
		} else {
			/* its named pages stay this pass (their second chance); the rest leave */
			cold = held & ~__atomic_exchange_n(&used[a], 0, __ATOMIC_RELAXED);
			if (nm & REF)
				__atomic_store_n(&named[a], nm & ~REF, __ATOMIC_RELAXED);
		}
		if (!cold)
			continue;
		*v = (struct far){ .addr = r.base + ((uint64_t)i << KVT_CHUNK_SHIFT), .hs = hand.slot,
				   .pages = cold, .recent = recent };
		*vr = r;
		return 0;
	}
	return -1;
}

/* The victim: the hand's next, or in whole_mode() the one of the hand's
 * next VICTIM_PICK whose last naming is oldest (never named: oldest of
 * all). The hand passes all of them; those not taken stay, a pass older.
 * The hand alone is a CLOCK in address order: of the chunks it finds,
 * the session that left last is as likely to go as the one that left
 * first, and under a Zipf popularity the last comes back soonest
 * (zipf-decode 4x: 189 of 333 chunk moves into HBM in the timed window
 * brought back a chunk the step had sent out in it; by oldest naming of
 * 8, 0.59 GB moves each way instead of 0.65). */
#define VICTIM_PICK 8
static int victim(uint32_t seq, unsigned *budget, struct far *v, struct kvt_heat_range *vr)
{
	if (!whole_mode())
		return victim_one(seq, budget, v, vr);
	uint32_t best_age = 0;
	int have = 0;
	for (int k = 0; k < VICTIM_PICK; k++) {
		struct far f;
		struct kvt_heat_range r;
		if (victim_one(seq, budget, &f, &r))
			break;
		uint32_t a = r.first + (uint32_t)((f.addr - r.base) >> KVT_CHUNK_SHIFT);
		uint32_t nm = __atomic_load_n(&named[a], __ATOMIC_RELAXED) & ~REF;
		uint32_t age = nm ? (seq - nm) & ~REF : REF;
		if (!have || age > best_age) {
			*v = f;
			*vr = r;
			best_age = age;
			have = 1;
		}
	}
	return have ? 0 : -1;
}

/* Prefetch pages [p0, p1) of chunk f of range r to HBM (promote) or to
 * its far tier on s. 0, or -1 when the call failed. */
static int prefetch(const struct far *f, const struct kvt_heat_range *r, int promote,
		    unsigned p0, unsigned p1, uint64_t s)
{
	uint64_t at = f->addr + ((uint64_t)p0 << KVT_STEP_PAGE_SHIFT), end = r->base + r->size;
	uint64_t bytes = (uint64_t)(p1 - p0) << KVT_STEP_PAGE_SHIFT;
	if (at >= end)
		return 0;                           /* past a range's partial last chunk */
	if (at + bytes > end)
		bytes = end - at;
	CUmemLocationType type = promote ? CU_MEM_LOCATION_TYPE_DEVICE
				 : r->node >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
	int id = promote ? r->dev : r->node >= 0 ? r->node : 0;
	CUresult res = kvt_cuda_prefetch(at, bytes, type, id, (CUstream)(uintptr_t)s);
	kvt_rec_event(KVT_OP_PREFETCH, KVT_KIND_DEVICE, KVT_API_none, at, bytes, s,
		      ((uint64_t)(uint32_t)type << 32) | (uint32_t)id, res);
	if (res != CUDA_SUCCESS) {
		ADD(failed, 1);
		kvt_warn_once("step prefetch of %#llx (+%llu) failed with CUresult %d (counted; "
			      "further ones are not logged)", (unsigned long long)at,
			      (unsigned long long)bytes, (int)res);
		return -1;
	}
	return 0;
}

/* Chunk f whole to HBM (promote) or to its far tier on s; the belief
 * follows (its pages held apart are folded in). 0, or -1. */
static int move(const struct far *f, const struct kvt_heat_range *r, int promote, uint64_t s)
{
	if (prefetch(f, r, promote, 0, PAGES, s))
		return -1;
	uint64_t i = (f->addr - r->base) >> KVT_CHUNK_SHIFT;
	struct kvt_heat_chunk *c = kvt_heat_chunks(r) + i;
	__atomic_store_n(&part[r->first + i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&trimmed[r->first + i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&asked[r->first + i], 0, __ATOMIC_RELAXED);   /* its records: whole */
	__atomic_store_n(&c->tier, promote ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR, __ATOMIC_RELAXED);
	__atomic_store_n(&c->moved_ms, kvt_heat_now_ms(), __ATOMIC_RELAXED);
	return 0;
}

/* The pages f's move to HBM takes from the budget, and whether it moves
 * the whole chunk: more than WHOLE_AT pages wanted or held with them, or
 * any page in whole_mode(). */
static unsigned cost(const struct far *f, const struct kvt_heat_range *r, int *whole)
{
	uint32_t held = __atomic_load_n(&part[r->first + ((f->addr - r->base) >> KVT_CHUNK_SHIFT)],
					__ATOMIC_RELAXED);
	*whole = pop(held | f->pages) > WHOLE_AT || whole_mode();
	return *whole ? PAGES - pop(held) : pop(f->pages);
}

/* f's pages to HBM (promote; held apart) or out to the far tier (no
 * longer held), run by run (a run per call); 0, or -1. */
static int move_pages(const struct far *f, const struct kvt_heat_range *r, int promote,
		      uint64_t s)
{
	uint64_t i = (f->addr - r->base) >> KVT_CHUNK_SHIFT;
	uint32_t *held = &part[r->first + i];
	if (promote && !__atomic_load_n(&coarse, __ATOMIC_RELAXED)) {
		/* watched: what the driver reports moving in from now */
		(void)kvt_heat_take_in(kvt_heat_chunks(r) + i);
		__atomic_store_n(&asked[r->first + i], kvt_prof_polls() << 1 | 1, __ATOMIC_RELAXED);
		__atomic_store_n(&watching, 1, __ATOMIC_RELAXED);
	}
	for (uint32_t m = f->pages; m;) {
		unsigned p0 = (unsigned)__builtin_ctz(m), p1 = p0;
		while (p1 < PAGES && (m >> p1 & 1))
			p1++;
		uint32_t run = kvt_tables_pages(p0, p1);
		if (prefetch(f, r, promote, p0, p1, s))
			return -1;
		if (promote) {
			__atomic_fetch_or(held, run, __ATOMIC_RELAXED);
			ADD(pages, pop(run));
		} else {
			__atomic_fetch_and(held, ~run, __ATOMIC_RELAXED);
			ADD(pages_out, pop(run));
		}
		m &= ~run;
	}
	return 0;
}

/* A victim out on s: the pages it freed, or -1 (none found, or the call
 * failed). All of a chunk's pages leave as one move of the chunk; some
 * leave page by page, the chunk believed far with the rest held apart. */
static int demote_one(uint32_t seq, unsigned *budget, uint64_t s)
{
	struct far v;
	struct kvt_heat_range vr;
	if (victim(seq, budget, &v, &vr))
		return -1;
	uint64_t i = (v.addr - vr.base) >> KVT_CHUNK_SHIFT;
	struct kvt_heat_chunk *c = kvt_heat_chunks(&vr) + i;
	uint32_t *held = &part[vr.first + i];
	int was_hbm = __atomic_load_n(&c->tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM;
	uint32_t all = was_hbm ? ~0u : __atomic_load_n(held, __ATOMIC_RELAXED);
	if (v.pages == all) {
		if (move(&v, &vr, 0, s))
			return -1;
		ADD(demoted, 1);
		return whole_mode() ? PAGES : pop(all);
	}
	if (was_hbm) {                        /* far now, but for the pages it keeps */
		__atomic_store_n(held, ~0u, __ATOMIC_RELAXED);
		__atomic_store_n(&c->tier, KVT_PLAN_TIER_FAR, __ATOMIC_RELAXED);
		__atomic_store_n(&c->moved_ms, kvt_heat_now_ms(), __ATOMIC_RELAXED);
	}
	uint32_t before = pop(__atomic_load_n(held, __ATOMIC_RELAXED));
	if (v.recent)                         /* what the driver reports moving from now */
		(void)kvt_heat_take_out(c);
	int rc = move_pages(&v, &vr, 0, s);
	uint32_t left = __atomic_load_n(held, __ATOMIC_RELAXED);
	int freed = (int)(before - pop(left));
	if (v.recent && freed && left) {
		__atomic_store_n(&kept[vr.first + i], left, __ATOMIC_RELAXED);
		__atomic_store_n(&trimmed[vr.first + i], kvt_prof_polls() << 1 | 1, __ATOMIC_RELAXED);
		__atomic_store_n(&watching, 1, __ATOMIC_RELAXED);
		ADD(trims, 1);
	}
	return rc && !freed ? -1 : freed;
}

/* need pages of room: the migrator's, topped up by victims demoted on s
 * (what a victim frees past the need stays as room). 0, or -1. */
static int make_room(uint32_t seq, unsigned *budget, unsigned need, uint64_t s)
{
	for (;;) {
		int64_t left = __atomic_load_n(&room, __ATOMIC_RELAXED);
		if (left >= (int64_t)need) {
			if (__atomic_compare_exchange_n(&room, &left, left - need, 0, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
				return 0;
			continue;
		}
		int freed = demote_one(seq, budget, s);
		if (freed < 0)
			return -1;
		__atomic_add_fetch(&room, freed, __ATOMIC_RELAXED);
	}
}

/* CPU time a step is charged in a simulator's virtual time
 * (kvt_clock_charge; nothing on a real GPU): a bound above what it was
 * measured to take, as thread CPU time less the driver's own calls, in
 * serve-like at a 4x pool: 15.7 us on average for 103 named chunks
 * (docs/simulated-device.md, "Virtual time"). */
#define STEP_CHARGE_NS       4000u
/* While the step watches a trim or an ask (whole-chunk mode undecided),
 * it asks the migrator for a poll of the sources every this many steps:
 * on a device that runs hundreds of steps per KVTIER_EPOCH_MS the
 * verdicts otherwise waited for epochs a run hardly had. */
#define POLL_STEPS           16u
#define STEP_CHARGE_CHUNK_NS 150u

static void run_step(struct step *x, uint32_t mask, uint64_t s)
{
	for (int T = 0; mask; T++, mask >>= 1)
		if (mask & 1)
			kvt_tables_step_each(T, note, x, scratch);
	/* the naming's CPU time, before any move (simulated time only) */
	kvt_clock_charge(STEP_CHARGE_NS + (uint64_t)x->nr_named * STEP_CHARGE_CHUNK_NS);
	if (!x->nr_named)
		return;
	/* verdicts wait for CUPTI's records, which only a poll brings: ask for
	 * one every POLL_STEPS steps while trims or asks are watched */
	if (ADD(steps, 1) % POLL_STEPS == 0 && !__atomic_load_n(&coarse, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&watching, __ATOMIC_RELAXED))
		kvt_migrator_poll_soon();
	ADD(named, x->nr_named);
	for (uint64_t peak = __atomic_load_n(&st.peak_pages, __ATOMIC_RELAXED);
	     x->nr_pages > peak && !__atomic_compare_exchange_n(&st.peak_pages, &peak, x->nr_pages, 0,
								 __ATOMIC_RELAXED, __ATOMIC_RELAXED);)
		;
	uint32_t cap = __atomic_load_n(&cap_chunks, __ATOMIC_RELAXED);
	int over = cap && x->nr_pages > (uint64_t)cap * PAGES;
	if (!x->nr_far) {
		ADD(over_budget, over);
		return;
	}
	if (kvt_cuda_stream_capturing((CUstream)(uintptr_t)s) != 0) {
		ADD(capturing, 1);                 /* a graph would keep the moves */
		return;
	}
	unsigned budget = HAND_MAX, done = 0;
	__atomic_store_n(&fits, !cap || x->nr_named <= cap, __ATOMIC_RELAXED);
	/* a debt first: GPU faults brought chunks in past the budget since the
	 * migrator's last count (never more than a step's moves at once) */
	for (unsigned paid = 0; paid < KVT_STEP_MAX_MOVES &&
	     __atomic_load_n(&room, __ATOMIC_RELAXED) < 0; paid++) {
		int freed = demote_one(x->seq, &budget, s);
		if (freed < 0)
			break;
		__atomic_add_fetch(&room, freed, __ATOMIC_RELAXED);
	}
	for (; done < x->nr_far; done++) {
		const struct far *f = &x->far[done];
		struct kvt_heat_range r;
		int whole;
		if (kvt_heat_range_peek(f->hs, &r))
			continue;
		unsigned need = cost(f, &r, &whole);
		if (make_room(x->seq, &budget, need, s))
			break;
		if (whole ? move(f, &r, 1, s) : move_pages(f, &r, 1, s))
			__atomic_add_fetch(&room, need, __ATOMIC_RELAXED);   /* not taken after all */
		else if (whole)
			ADD(promoted, 1);
	}
	ADD(no_room, x->nr_far - done);
	ADD(over_cap, x->overflow);
	/* a step that reads more than the budget holds, or whose named far
	 * chunks found no room: the floor's step notice counts them
	 * (tier/floor.c) */
	ADD(short_steps, done < x->nr_far);
	ADD(over_budget, over || done < x->nr_far);
}

void kvt_step_after_copy(uint64_t stream)
{
	kvt_discard_step(stream);       /* before the step's kernels, and its own prefetch */
	uint32_t mask = kvt_tables_step_take();
	if (!mask || !kvt_opt.step_prefetch || !names())
		return;
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) {
		ADD(busy, 1);
		return;
	}
	struct step x = { .seq = __atomic_add_fetch(&cur_seq, 1, __ATOMIC_RELAXED) & ~REF, .hs = -1,
			  .now_ms = kvt_heat_now_ms() };
	if (!x.seq)
		x.seq = __atomic_add_fetch(&cur_seq, 1, __ATOMIC_RELAXED) & ~REF;
	run_step(&x, mask, stream);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

void kvt_step_moved_whole(const struct kvt_heat_range *r, uint32_t idx, uint32_t nr)
{
	/* trimmed and asked are set before named is published (names()) */
	if (!__atomic_load_n(&named, __ATOMIC_ACQUIRE) ||
	    (!__atomic_load_n(&st.trims, __ATOMIC_RELAXED) && !__atomic_load_n(&st.pages, __ATOMIC_RELAXED)))
		return;                            /* nothing was ever watched */
	for (uint32_t i = 0; i < nr && idx + i < r->cap_chunks; i++) {
		uint32_t a = r->first + idx + i;
		if (__atomic_load_n(&trimmed[a], __ATOMIC_RELAXED))
			__atomic_store_n(&trimmed[a], 0, __ATOMIC_RELAXED);
		if (__atomic_load_n(&asked[a], __ATOMIC_RELAXED))
			__atomic_store_n(&asked[a], 0, __ATOMIC_RELAXED);
	}
}

uint64_t kvt_step_partial_pages(int dev)
{
	uint32_t *n = __atomic_load_n(&named, __ATOMIC_ACQUIRE);
	if (!n || !__atomic_load_n(&st.pages, __ATOMIC_RELAXED))
		return 0;                          /* no step ever held a page apart: nothing to walk */
	uint64_t sum = 0;
	int whole = whole_mode();
	for (int sl = 0; sl < KVT_HEAT_MAX_RANGES; sl++) {
		struct kvt_heat_range r;
		if (kvt_heat_range_peek(sl, &r))
			continue;
		fresh(sl, &r);
		int owned = kvt_step_owns(sl);
		struct kvt_heat_chunk *c = kvt_heat_chunks(&r);
		for (uint32_t i = 0; i < r.nr_chunks; i++) {
			uint32_t *p = &part[r.first + i], m = __atomic_load_n(p, __ATOMIC_RELAXED);
			if (!m)
				continue;
			if (__atomic_load_n(&c[i].tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM) {
				__atomic_store_n(p, 0, __ATOMIC_RELAXED);   /* all of it came in */
			} else if (!owned) {       /* the migrator's again: whole, as it counts */
				__atomic_store_n(&c[i].tier, KVT_PLAN_TIER_HBM, __ATOMIC_RELAXED);
				__atomic_store_n(p, 0, __ATOMIC_RELAXED);
			} else if (r.dev == dev) {
				sum += whole ? PAGES : pop(m);   /* the driver moved it whole */
			}
		}
	}
	return sum;
}

void kvt_step_info(struct kvt_step_info *out)
{
	out->steps = __atomic_load_n(&st.steps, __ATOMIC_RELAXED);
	out->named = __atomic_load_n(&st.named, __ATOMIC_RELAXED);
	out->promoted = __atomic_load_n(&st.promoted, __ATOMIC_RELAXED);
	out->pages = __atomic_load_n(&st.pages, __ATOMIC_RELAXED);
	out->demoted = __atomic_load_n(&st.demoted, __ATOMIC_RELAXED);
	out->pages_out = __atomic_load_n(&st.pages_out, __ATOMIC_RELAXED);
	out->trims = __atomic_load_n(&st.trims, __ATOMIC_RELAXED);
	out->trims_wide = __atomic_load_n(&st.trims_wide, __ATOMIC_RELAXED);
	out->asks_judged = __atomic_load_n(&st.asks_judged, __ATOMIC_RELAXED);
	out->no_room = __atomic_load_n(&st.no_room, __ATOMIC_RELAXED);
	out->over_cap = __atomic_load_n(&st.over_cap, __ATOMIC_RELAXED);
	out->busy = __atomic_load_n(&st.busy, __ATOMIC_RELAXED);
	out->capturing = __atomic_load_n(&st.capturing, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&st.failed, __ATOMIC_RELAXED);
	out->over_budget = __atomic_load_n(&st.over_budget, __ATOMIC_RELAXED);
	out->short_steps = __atomic_load_n(&st.short_steps, __ATOMIC_RELAXED);
	out->peak_pages = __atomic_load_n(&st.peak_pages, __ATOMIC_RELAXED);
}

void kvt_step_trace_counters(void)
{
	struct kvt_step_info i;
	kvt_step_info(&i);
	char val[704];                      /* 17 counters of up to 20 digits */
	snprintf(val, sizeof val, "steps=%llu named=%llu promoted=%llu pages=%llu demoted=%llu "
		 "pages_out=%llu trims=%llu trims_wide=%llu asks_judged=%llu no_room=%llu over_cap=%llu busy=%llu "
		 "capturing=%llu failed=%llu over_budget=%llu short_steps=%llu peak_pages=%llu",
		 (unsigned long long)i.steps, (unsigned long long)i.named,
		 (unsigned long long)i.promoted, (unsigned long long)i.pages,
		 (unsigned long long)i.demoted, (unsigned long long)i.pages_out,
		 (unsigned long long)i.trims, (unsigned long long)i.trims_wide,
		 (unsigned long long)i.asks_judged,
		 (unsigned long long)i.no_room,
		 (unsigned long long)i.over_cap,
		 (unsigned long long)i.busy, (unsigned long long)i.capturing,
		 (unsigned long long)i.failed, (unsigned long long)i.over_budget,
		 (unsigned long long)i.short_steps, (unsigned long long)i.peak_pages);
	kvt_trace_info("migrate.step", val);
	kvt_trace_info("migrate.step_trim",
		       __atomic_load_n(&coarse, __ATOMIC_RELAXED)
		       ? "off: the driver's prefetches moved whole chunks for some of their pages "
			 "(a 2 MiB residency unit): steps that fit move and charge whole chunks"
		       : "on");
}

void kvt_step_reset(void)
{
	uint32_t *n = named;
	if (n)
		kvt_sys_madvise(n, ARENA_WORDS * sizeof *n, MADV_DONTNEED);
	memset(&st, 0, sizeof st);
	cur_seq = 0;
	busy = 0;
	room = 0;
	cap_chunks = 0;
	fits = 1;
	coarse = 0;
	watching = 0;
	win_seen = win_wide = 0;
	hand.slot = -1;
	hand.idx = 0;
	memset(owned_ms, 0, sizeof owned_ms);
	memset(part_gen, 0, sizeof part_gen);
}
