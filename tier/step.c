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

static uint32_t *named;                /* per arena chunk: the step that last named it | REF */
static uint32_t cur_seq;               /* atomic: steps taken */
static int busy;                       /* atomic: a step is under way */
static int64_t room;                   /* atomic: chunks free under the budget */
static struct { int slot; uint32_t idx; } hand = { -1, 0 };   /* under busy */
static uint32_t owned_ms[KVT_HEAT_MAX_RANGES];   /* atomic: when a step last named the range */
static struct kvt_step_info st;        /* atomic */

#define ADD(f, v) __atomic_fetch_add(&st.f, (v), __ATOMIC_RELAXED)

struct far { uint64_t addr; int hs; };

struct step {
	uint32_t seq, now_ms;
	int hs;                             /* the range last looked up, cached */
	struct kvt_heat_range r;
	unsigned nr_named, nr_far, overflow;
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

void kvt_step_set_room(int64_t chunks)
{
	__atomic_store_n(&room, chunks, __ATOMIC_RELAXED);
}

static uint32_t *names(void)
{
	uint32_t *n = __atomic_load_n(&named, __ATOMIC_ACQUIRE);
	if (n)
		return n;
	size_t len = (size_t)KVT_HEAT_MAX_CHUNKS * sizeof *n;
	void *p = kvt_sys_mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint32_t *none = NULL;
	if (!__atomic_compare_exchange_n(&named, &none, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		kvt_sys_munmap(p, len);
		return none;
	}
	return p;
}

/* kvt_tables_step_each's callback: name the chunk for this step, and keep
 * it when it is not in HBM. */
static void note(void *arg, uint64_t chunk, int hs)
{
	struct step *x = arg;
	if (hs != x->hs) {
		if (kvt_heat_range_peek(hs, &x->r))
			return;
		x->hs = hs;
		if (__atomic_load_n(&owned_ms[hs], __ATOMIC_RELAXED) != x->now_ms)
			__atomic_store_n(&owned_ms[hs], x->now_ms, __ATOMIC_RELAXED);
	}
	uint64_t i = (chunk - x->r.base) >> KVT_CHUNK_SHIFT;
	if (i >= x->r.nr_chunks)
		return;
	uint32_t a = x->r.first + (uint32_t)i;
	if ((__atomic_load_n(&named[a], __ATOMIC_RELAXED) & ~REF) == x->seq)
		return;                             /* named twice this step */
	__atomic_store_n(&named[a], x->seq | REF, __ATOMIC_RELAXED);
	x->nr_named++;
	if (__atomic_load_n(&kvt_heat_chunks(&x->r)[i].tier, __ATOMIC_RELAXED) == KVT_PLAN_TIER_HBM)
		return;
	if (x->nr_far < KVT_STEP_MAX_MOVES)
		x->far[x->nr_far++] = (struct far){ .addr = chunk, .hs = hs };
	else
		x->overflow++;
}

/* The next chunk of a covered range that is in HBM and that no recent step
 * named (a named one loses its REF bit and is passed over once): *v and
 * its range, 0; -1 when the hand found none within its bound. */
static int victim(uint32_t seq, unsigned *budget, struct far *v, struct kvt_heat_range *vr)
{
	struct kvt_heat_range r;
	int have = hand.slot >= 0 && !kvt_heat_range_peek(hand.slot, &r) &&
		   kvt_step_owns(hand.slot);
	for (unsigned slots_seen = 0; *budget;) {
		if (!have || hand.idx >= r.nr_chunks) {
			if (++slots_seen > 2 * KVT_HEAT_MAX_RANGES)
				return -1;
			hand.slot = (hand.slot + 1) % KVT_HEAT_MAX_RANGES;
			hand.idx = 0;
			have = kvt_step_owns(hand.slot) && !kvt_heat_range_peek(hand.slot, &r);
			continue;
		}
		(*budget)--;
		uint32_t i = hand.idx++, a = r.first + i;
		struct kvt_heat_chunk *c = kvt_heat_chunks(&r) + i;
		if (__atomic_load_n(&c->tier, __ATOMIC_RELAXED) != KVT_PLAN_TIER_HBM)
			continue;
		uint32_t nm = __atomic_load_n(&named[a], __ATOMIC_RELAXED);
		if (nm && seq - (nm & ~REF) <= KVT_STEP_PROTECT)
			continue;
		if (nm & REF) {
			__atomic_store_n(&named[a], nm & ~REF, __ATOMIC_RELAXED);
			continue;
		}
		*v = (struct far){ .addr = r.base + ((uint64_t)i << KVT_CHUNK_SHIFT), .hs = hand.slot };
		*vr = r;
		return 0;
	}
	return -1;
}

/* Prefetch chunk f of range r to HBM (promote) or to its far tier on s;
 * the belief follows. 0, or -1 when the call failed. */
static int move(const struct far *f, const struct kvt_heat_range *r, int promote, uint64_t s)
{
	uint64_t off = f->addr - r->base, bytes = KVT_CHUNK_BYTES;
	if (off + bytes > r->size)
		bytes = r->size - off;
	CUmemLocationType type = promote ? CU_MEM_LOCATION_TYPE_DEVICE
				 : r->node >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
	int id = promote ? r->dev : r->node >= 0 ? r->node : 0;
	CUresult res = kvt_cuda_prefetch(f->addr, bytes, type, id, (CUstream)(uintptr_t)s);
	kvt_rec_event(KVT_OP_PREFETCH, KVT_KIND_DEVICE, KVT_API_none, f->addr, bytes, s,
		      ((uint64_t)(uint32_t)type << 32) | (uint32_t)id, res);
	if (res != CUDA_SUCCESS) {
		ADD(failed, 1);
		kvt_warn_once("step prefetch of %#llx (+%llu) failed with CUresult %d (counted; "
			      "further ones are not logged)", (unsigned long long)f->addr,
			      (unsigned long long)bytes, (int)res);
		return -1;
	}
	struct kvt_heat_chunk *c = kvt_heat_chunks(r) + (off >> KVT_CHUNK_SHIFT);
	__atomic_store_n(&c->tier, promote ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR, __ATOMIC_RELAXED);
	__atomic_store_n(&c->moved_ms, kvt_heat_now_ms(), __ATOMIC_RELAXED);
	return 0;
}

/* A unit of room: one the migrator left, else a victim demoted on s. */
static int make_room(uint32_t seq, unsigned *budget, uint64_t s)
{
	int64_t left = __atomic_load_n(&room, __ATOMIC_RELAXED);
	while (left > 0)
		if (__atomic_compare_exchange_n(&room, &left, left - 1, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return 0;
	struct far v;
	struct kvt_heat_range vr;
	if (victim(seq, budget, &v, &vr) || move(&v, &vr, 0, s))
		return -1;
	ADD(demoted, 1);
	return 0;
}

static void run_step(struct step *x, uint32_t mask, uint64_t s)
{
	for (int T = 0; mask; T++, mask >>= 1)
		if (mask & 1)
			kvt_tables_step_each(T, note, x);
	if (!x->nr_named)
		return;
	ADD(steps, 1);
	ADD(named, x->nr_named);
	if (!x->nr_far)
		return;
	if (kvt_cuda_stream_capturing((CUstream)(uintptr_t)s) != 0) {
		ADD(capturing, 1);                 /* a graph would keep the moves */
		return;
	}
	unsigned budget = HAND_MAX, done = 0;
	/* a debt first: GPU faults brought chunks in past the budget since the
	 * migrator's last count (never more than a step's moves at once) */
	for (unsigned paid = 0; paid < KVT_STEP_MAX_MOVES &&
	     __atomic_load_n(&room, __ATOMIC_RELAXED) < 0; paid++) {
		struct far v;
		struct kvt_heat_range vr;
		if (victim(x->seq, &budget, &v, &vr) || move(&v, &vr, 0, s))
			break;
		ADD(demoted, 1);
		__atomic_add_fetch(&room, 1, __ATOMIC_RELAXED);
	}
	for (; done < x->nr_far; done++) {
		const struct far *f = &x->far[done];
		struct kvt_heat_range r;
		if (kvt_heat_range_peek(f->hs, &r))
			continue;
		if (make_room(x->seq, &budget, s))
			break;
		if (!move(f, &r, 1, s))
			ADD(promoted, 1);
	}
	ADD(no_room, x->nr_far - done);
	ADD(over_cap, x->overflow);
}

void kvt_step_after_copy(uint64_t stream)
{
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

void kvt_step_info(struct kvt_step_info *out)
{
	out->steps = __atomic_load_n(&st.steps, __ATOMIC_RELAXED);
	out->named = __atomic_load_n(&st.named, __ATOMIC_RELAXED);
	out->promoted = __atomic_load_n(&st.promoted, __ATOMIC_RELAXED);
	out->demoted = __atomic_load_n(&st.demoted, __ATOMIC_RELAXED);
	out->no_room = __atomic_load_n(&st.no_room, __ATOMIC_RELAXED);
	out->over_cap = __atomic_load_n(&st.over_cap, __ATOMIC_RELAXED);
	out->busy = __atomic_load_n(&st.busy, __ATOMIC_RELAXED);
	out->capturing = __atomic_load_n(&st.capturing, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&st.failed, __ATOMIC_RELAXED);
}

void kvt_step_trace_counters(void)
{
	struct kvt_step_info i;
	kvt_step_info(&i);
	char val[256];
	snprintf(val, sizeof val, "steps=%llu named=%llu promoted=%llu demoted=%llu no_room=%llu "
		 "over_cap=%llu busy=%llu capturing=%llu failed=%llu", (unsigned long long)i.steps,
		 (unsigned long long)i.named, (unsigned long long)i.promoted,
		 (unsigned long long)i.demoted, (unsigned long long)i.no_room,
		 (unsigned long long)i.over_cap,
		 (unsigned long long)i.busy, (unsigned long long)i.capturing,
		 (unsigned long long)i.failed);
	kvt_trace_info("migrate.step", val);
}

void kvt_step_reset(void)
{
	uint32_t *n = named;
	if (n)
		kvt_sys_madvise(n, (size_t)KVT_HEAT_MAX_CHUNKS * sizeof *n, MADV_DONTNEED);
	memset(&st, 0, sizeof st);
	cur_seq = 0;
	busy = 0;
	room = 0;
	hand.slot = -1;
	hand.idx = 0;
	memset(owned_ms, 0, sizeof owned_ms);
}
