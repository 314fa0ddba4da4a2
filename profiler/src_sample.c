// SPDX-License-Identifier: MIT
/* The region-sampling evidence source (docs/profiler.md): DAMON's adaptive
 * regions (profiler/regions.c) over the tracked ranges, one sampled chunk
 * per region per pass, made observable for one epoch by removing the
 * device's mapping of that chunk alone, so that the GPU's next access to it
 * is a page fault that CUPTI reports (the cupti source hands it here through
 * on_fault). Without the cupti source there is nothing to observe: one
 * message, and the source turns itself off.
 * The probe (measured on an H200, driver 580.159.04): UNSET_ACCESSED_BY
 * alone leaves the mapping in place (no fault); with SET_READ_MOSTLY +
 * UNSET_READ_MOSTLY after it the mapping goes, and the next GPU read
 * faults. On HOST_NUMA-preferred memory (managed:cxl) that fault migrates
 * the 2 MiB chunk to HBM: a hit is a promotion by fault. SET_ACCESSED_BY
 * at the next poll gives the chunk its mapping back.
 * start/poll/stop run on the migrator thread; on_fault wherever CUPTI
 * delivers (lock-free, O(1)). Static tables, no malloc. Per epoch: O(regions)
 * arithmetic and at most KVT_SAMPLE_PROBES probes of four cuMemAdvise each,
 * whatever the size of memory. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "evidence.h"
#include "heat.h"
#include "regions.h"
#include "kvtier/planner.h"
#include "../cuda_shim/shim.h"
#include "../base/kvt.h"

#define KVT_SAMPLE_MAX_REGIONS KVT_REGIONS_MAX
#define KVT_SAMPLE_PROBES     16     /* probes an epoch: ~70 us of driver time each on an H200 */
#define KVT_SAMPLE_AGGR       4      /* passes over all regions per aggregation */
#define KVT_SAMPLE_MAX_WEIGHT 8      /* heat of a hit: min(chunks of its region, this) */
#define KVT_SAMPLE_TRIES      3      /* picks per region to find a chunk on the far tier */
#define KVT_SAMPLE_RECHECK    64     /* epochs before an unprobeable range is asked again */
#define KVT_SAMPLE_MAX_FAILS  64     /* advice failures before probing stops */
#define KVT_SAMPLE_SEED       0x6b76746965727331ull

#define NR_PROBES  (2 * KVT_SAMPLE_PROBES)    /* this epoch's, and restores carried over */
#define HASH_BITS  8                           /* >= 4 slots per key (<= 2 keys a probe) */
#define HASH_SIZE  (1u << HASH_BITS)
#define NO_REGION  UINT32_MAX

enum slot_state { SLOT_NONE, SLOT_SAMPLED, SLOT_UNPROBED };

/* What the source knows of one heat-table slot. */
struct slot {
	uint64_t base, size;
	struct kvt_heat_chunk *chunks;   /* the arena's: never unmapped */
	uint32_t gen, nr_chunks;
	int32_t dev;                     /* the device it was placed for */
	uint32_t checked;                /* epoch of the last accessed-by query */
	uint8_t state;                   /* enum slot_state */
};

/* One chunk whose accessed-by mapping is removed until the next poll. */
struct probe {
	uint64_t addr, bytes;            /* read by on_fault: atomics */
	int32_t dev;                     /* the device whose mapping it removes */
	uint32_t region;                 /* index when armed; NO_REGION: only a restore is owed */
	uint32_t gen;
	uint16_t slot;
	uint8_t hit;                     /* set by on_fault */
	uint8_t weight;
};

static struct {
	int on, stopped;
	uint32_t epoch, cursor, passes;
	uint32_t nr_probes;
	struct probe probes[NR_PROBES];
	uint16_t hash[HASH_SIZE];        /* probe index + 1; 0 = empty */
	struct slot slots[KVT_HEAT_MAX_RANGES];
	struct kvt_region_set set;
} sm;

static struct {
	uint64_t armed, faulted, advise_failed, unobservable;
	uint32_t regions_max;            /* the most regions at once (a freed range's go) */
} ctr;

static char state_text[2][224];
static unsigned state_turn;

/* ---- the probes' lookup table (on_fault's side is lock-free) ---- */

static uint32_t frame_slot(uint64_t frame)
{
	return (uint32_t)((frame * 0x9e3779b97f4a7c15ull) >> (64 - HASH_BITS));
}

static void hash_clear(void)
{
	for (uint32_t i = 0; i < HASH_SIZE; i++)
		__atomic_store_n(&sm.hash[i], 0, __ATOMIC_RELAXED);
}

static void hash_put_frame(uint64_t frame, uint16_t val)
{
	uint32_t h = frame_slot(frame);
	for (uint32_t n = 0; n < HASH_SIZE; n++, h = (h + 1) & (HASH_SIZE - 1)) {
		if (!__atomic_load_n(&sm.hash[h], __ATOMIC_RELAXED)) {
			__atomic_store_n(&sm.hash[h], val, __ATOMIC_RELEASE);
			return;
		}
	}
}

/* A chunk need not be 2 MiB aligned: it is filed under each 2 MiB frame it
 * overlaps (one or two). */
static void hash_put(uint32_t i)
{
	const struct probe *p = &sm.probes[i];
	uint64_t f0 = p->addr >> KVT_CHUNK_SHIFT, f1 = (p->addr + p->bytes - 1) >> KVT_CHUNK_SHIFT;
	hash_put_frame(f0, (uint16_t)(i + 1));
	if (f1 != f0)
		hash_put_frame(f1, (uint16_t)(i + 1));
}

static void sample_on_fault(uint64_t addr)
{
	if (!__atomic_load_n(&sm.on, __ATOMIC_RELAXED))
		return;
	uint32_t h = frame_slot(addr >> KVT_CHUNK_SHIFT);
	for (uint32_t n = 0; n < HASH_SIZE; n++, h = (h + 1) & (HASH_SIZE - 1)) {
		uint16_t v = __atomic_load_n(&sm.hash[h], __ATOMIC_ACQUIRE);
		if (!v || v > NR_PROBES)
			return;
		struct probe *p = &sm.probes[v - 1];
		if (addr - __atomic_load_n(&p->addr, __ATOMIC_RELAXED) <
		    __atomic_load_n(&p->bytes, __ATOMIC_RELAXED)) {
			__atomic_store_n(&p->hit, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* ---- state and counters (trace INFO prof.source.sample) ---- */

static void publish_state(void)
{
	char *t = state_text[state_turn];
	state_turn ^= 1;
	if (sm.set.nr > ctr.regions_max)
		ctr.regions_max = sm.set.nr;
	snprintf(t, sizeof state_text[0],
		 "%s regions=%u regions_max=%u armed=%llu faulted=%llu advise_failed=%llu "
		 "unobservable=%llu",
		 sm.stopped ? "stopped (advice failing)" : "active", sm.set.nr, ctr.regions_max,
		 (unsigned long long)ctr.armed, (unsigned long long)ctr.faulted,
		 (unsigned long long)ctr.advise_failed, (unsigned long long)ctr.unobservable);
	kvt_prof_set_state(KVT_SRC_SAMPLE, t);
}

static void advise_failed(CUresult r)
{
	ctr.advise_failed++;
	kvt_warn_once("sample source: cuMemAdvise on a probe chunk failed (CUresult %d); "
		      "counted, further ones are not logged", (int)r);
	if (ctr.advise_failed >= KVT_SAMPLE_MAX_FAILS && !sm.stopped) {
		sm.stopped = 1;
		kvt_warn("sample source: %d advice failures; it stops probing (restores still owed "
			 "are retried)", KVT_SAMPLE_MAX_FAILS);
	}
}

/* Remove the device's mapping of one chunk: accessed-by off (the policy),
 * then read-mostly on and off (which is what unmaps). */
static CUresult probe_unmap(uint64_t addr, uint64_t bytes, CUdevice dev)
{
	static const CUmem_advise seq[] = { CU_MEM_ADVISE_UNSET_ACCESSED_BY,
		CU_MEM_ADVISE_SET_READ_MOSTLY, CU_MEM_ADVISE_UNSET_READ_MOSTLY };
	CUresult r = CUDA_SUCCESS;
	for (unsigned k = 0; k < sizeof seq / sizeof seq[0] && r == CUDA_SUCCESS; k++)
		r = kvt_cuda_advise(addr, bytes, seq[k], CU_MEM_LOCATION_TYPE_DEVICE, dev);
	return r;
}

static CUresult probe_restore(uint64_t addr, uint64_t bytes, CUdevice dev)
{
	return kvt_cuda_advise(addr, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY,
			       CU_MEM_LOCATION_TYPE_DEVICE, dev);
}


/* ---- one epoch: harvest the last probes, follow the ranges, arm new ones ---- */

/* Count and credit the probes armed at the last poll, and give each chunk
 * its accessed-by mapping back (a failed restore is retried next poll). */
static void harvest(void)
{
	uint32_t keep = 0;
	hash_clear();
	for (uint32_t i = 0; i < sm.nr_probes; i++) {
		int hit = __atomic_exchange_n(&sm.probes[i].hit, 0, __ATOMIC_RELAXED);
		struct probe p = {
			.addr = sm.probes[i].addr, .bytes = sm.probes[i].bytes,
			.region = sm.probes[i].region, .gen = sm.probes[i].gen,
			.slot = sm.probes[i].slot, .weight = sm.probes[i].weight,
			.dev = sm.probes[i].dev,
		};
		/* pinned, its free waits until the advice is given back: without
		 * the pin a free between the test and the advice made it fail
		 * (or, the address reused, advise another allocation) */
		int live = !kvt_heat_pin(p.slot, p.gen);
		if (p.region != NO_REGION) {
			kvt_regions_account(&sm.set, p.region, hit ? KVT_REGION_ACCESSED : KVT_REGION_IDLE);
			ctr.faulted += hit != 0;
			if (hit && live)
				kvt_prof_count(KVT_SRC_SAMPLE, kvt_heat_add(p.addr, 1, p.weight, 1));
		}
		if (!live)
			continue;                  /* freed: its advice went with it */
		CUresult r = probe_restore(p.addr, p.bytes, p.dev);
		kvt_heat_unpin();
		if (r != CUDA_SUCCESS) {
			advise_failed(r);
			p.region = NO_REGION;
			sm.probes[keep++] = p;
		}
	}
	sm.nr_probes = keep;
}

/* Is the whole range accessed-by the device (a probe can remove that, and
 * SET_ACCESSED_BY puts back what was there) and not read-mostly as a whole
 * (a probe clears read-mostly on its chunk)? */
static int slot_probeable(const struct slot *sl)
{
	int32_t rm = 1;
	return kvt_cuda_accessed_by(sl->base, sl->size, sl->dev) == 1 &&
	       kvt_cuda_range_attr(&rm, sizeof rm, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
				   sl->base, sl->size) == CUDA_SUCCESS && !rm;
}

static void slot_probe_check(struct slot *sl, uint16_t s)
{
	sl->checked = sm.epoch;
	if (slot_probeable(sl) && !kvt_regions_add(&sm.set, s, sl->nr_chunks))
		sl->state = SLOT_SAMPLED;
	else
		sl->state = SLOT_UNPROBED;
}

/* New ranges get regions, freed ones lose theirs. O(KVT_HEAT_MAX_RANGES). */
static void follow_ranges(void)
{
	for (uint16_t s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		struct slot *sl = &sm.slots[s];
		struct kvt_heat_range r;
		int live = !kvt_heat_range_get(s, &r);
		if (live && sl->state != SLOT_NONE && sl->gen == r.gen) {
			if (sl->state == SLOT_UNPROBED && sm.epoch - sl->checked >= KVT_SAMPLE_RECHECK)
				slot_probe_check(sl, s);
			continue;
		}
		if (sl->state == SLOT_SAMPLED)
			kvt_regions_drop(&sm.set, s);
		sl->state = SLOT_NONE;
		if (!live || !r.nr_chunks)
			continue;
		*sl = (struct slot){ .base = r.base, .size = r.size, .chunks = kvt_heat_chunks(&r),
				     .gen = r.gen, .nr_chunks = r.nr_chunks, .dev = r.dev };
		slot_probe_check(sl, s);
	}
}

/* A chunk of region i on the far tier, or UINT32_MAX (one in HBM is read
 * there without any fault: it cannot be observed). */
static uint32_t pick_far(uint32_t i, const struct slot *sl)
{
	for (int t = 0; t < KVT_SAMPLE_TRIES; t++) {
		uint32_t c = kvt_regions_pick(&sm.set, i);
		if (__atomic_load_n(&sl->chunks[c].tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_FAR)
			return c;
	}
	return UINT32_MAX;
}

static void arm_region(uint32_t i)
{
	const struct kvt_region *rg = &sm.set.r[i];
	const struct slot *sl = &sm.slots[rg->range];
	uint32_t c = pick_far(i, sl);
	if (c == UINT32_MAX) {
		kvt_regions_account(&sm.set, i, KVT_REGION_UNKNOWN);
		ctr.unobservable++;
		return;
	}
	uint64_t off = (uint64_t)c << KVT_CHUNK_SHIFT;
	struct probe *p = &sm.probes[sm.nr_probes];
	__atomic_store_n(&p->addr, sl->base + off, __ATOMIC_RELAXED);
	__atomic_store_n(&p->bytes, sl->size - off < KVT_CHUNK_BYTES ? sl->size - off : KVT_CHUNK_BYTES,
			 __ATOMIC_RELAXED);
	p->region = i;
	p->gen = sl->gen;
	p->slot = rg->range;
	p->dev = sl->dev;
	p->hit = 0;
	p->weight = (uint8_t)(rg->nr < KVT_SAMPLE_MAX_WEIGHT ? rg->nr : KVT_SAMPLE_MAX_WEIGHT);
	if (kvt_heat_pin(p->slot, p->gen)) {   /* freed since the last epoch's walk */
		kvt_regions_account(&sm.set, i, KVT_REGION_UNKNOWN);
		return;
	}
	hash_put(sm.nr_probes);            /* before the advice: no fault is missed */
	CUresult r = probe_unmap(p->addr, p->bytes, p->dev);
	if (r != CUDA_SUCCESS) {
		advise_failed(r);
		kvt_regions_account(&sm.set, i, KVT_REGION_UNKNOWN);
		p->region = NO_REGION;         /* no sample; a restore may still be owed */
		CUresult back = probe_restore(p->addr, p->bytes, p->dev);
		kvt_heat_unpin();
		if (back == CUDA_SUCCESS) {
			__atomic_store_n(&p->bytes, 0, __ATOMIC_RELAXED);   /* matches nothing */
			return;
		}
		sm.nr_probes++;
		return;
	}
	kvt_heat_unpin();
	sm.nr_probes++;
	ctr.armed++;
}

/* The next KVT_SAMPLE_PROBES regions, round-robin; a pass ends when the
 * cursor wraps. */
static void arm(void)
{
	uint32_t n = sm.set.nr < KVT_SAMPLE_PROBES ? sm.set.nr : KVT_SAMPLE_PROBES;
	if (sm.cursor >= sm.set.nr)
		sm.cursor = 0;
	for (uint32_t k = 0; k < n && sm.nr_probes < NR_PROBES; k++) {
		uint32_t i = sm.cursor;
		if (++sm.cursor >= sm.set.nr) {
			sm.cursor = 0;
			sm.passes++;
		}
		arm_region(i);
	}
}

static void sample_poll(void)
{
	if (!sm.on)
		return;
	sm.epoch++;
	harvest();
	follow_ranges();
	if (sm.passes >= KVT_SAMPLE_AGGR) {
		kvt_regions_aggregate(&sm.set, sm.passes);
		sm.passes = 0;
		sm.cursor = 0;
	}
	if (!sm.stopped)
		arm();
	publish_state();
}

/* ---- start and stop ---- */

static int sample_start(void)
{
	static char why[200];
	if (!(kvt_prof_sources_enabled() & (1u << KVT_SRC_CUPTI))) {
		const char *cupti = kvt_prof_source_state(KVT_SRC_CUPTI);
		snprintf(why, sizeof why, "off (no cupti source: %s)", cupti);
		kvt_prof_set_state(KVT_SRC_SAMPLE, why);
		kvt_warn_once("sample source off: it sees GPU accesses only as CUPTI page-fault "
			      "records, and the cupti source is %s; the other sources carry on", cupti);
		return -ENODEV;
	}
	memset(&sm, 0, offsetof(__typeof__(sm), set));
	kvt_regions_init(&sm.set, KVT_SAMPLE_MAX_REGIONS, KVT_SAMPLE_PROBES, KVT_SAMPLE_SEED);
	__atomic_store_n(&sm.on, 1, __ATOMIC_RELEASE);
	publish_state();
	return 0;
}

/* The final probes are harvested and every chunk gets its mapping back. */
static void sample_stop(int (*go_on)(void))
{
	(void)go_on;              /* one harvest: its calls are asked for before it */
	if (!sm.on)
		return;
	harvest();
	__atomic_store_n(&sm.on, 0, __ATOMIC_RELEASE);
	publish_state();
}

const struct kvt_prof_source_ops kvt_src_sample = {
	.name = "sample",
	.start = sample_start,
	.stop = sample_stop,
	.poll = sample_poll,
	.on_fault = sample_on_fault,
};
