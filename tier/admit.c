// SPDX-License-Identifier: MIT
/* Admission (contract in admit.h): the mode, its one change back to remote,
 * and the fault/auto heuristics the migration thread runs on each epoch's
 * table. Driver calls only on the migration thread (and kvt_admit_remote on
 * the thread that starts CUPTI); the mode's reads are single atomic loads. */
#include <stdio.h>
#include <string.h>

#include "admit.h"
#include "../base/kvt.h"
#include "../cuda_shim/shim.h"
#include "../profiler/evidence.h"
#include "../profiler/trace.h"

/* KVTIER_ADMIT=auto maps a chunk for the GPU after this many quick
 * come-backs in a row from driver evictions (1 also mapped zipf-decode's
 * hot chunks: 0.6x its tokens/s; 2 now and then mapped some). */
#define AUTO_STRIKES 3
/* Under fault admission a chunk in HBM ranks by how recently it was used:
 * this heat when touched now, halving every tau ln 2 (below KVTIER_DEMOTE
 * after ~4 tau idle). Heat as a decayed count ranked a chunk that had just
 * come in below the incumbents, and the planner demoted it to come back. */
#define RECENCY_HEAT 64.0f
/* KVTIER_ADMIT=fault or auto gives way to remote when this many GPU faults
 * on far memory migrated none of it (the driver maps it instead). */
#define ADMIT_CHECK_FAULTS 64

/* KVTIER_ADMIT=fault or auto (enum kvt_admit; 0 = remote): far memory is
 * not mapped for the GPU (no accessed-by), so the GPU's first touch of a far
 * chunk faults and the driver migrates it to HBM, where the migrator counts
 * it (CUPTI's fault-driven migration records) and demotes the coldest chunks
 * to keep the budget; auto also maps remotely, chunk by chunk, what the
 * driver keeps evicting and faulting back (the migrator). Set at init;
 * cleared (and the accessed-by advice restored on every far range) when the
 * CUPTI source cannot run, since the migrator would not see the admissions,
 * or when GPU faults map far memory instead of migrating it. */
static int admit_fault;

static struct {
	uint64_t auto_mapped, auto_advices, advise_failed;
} ctr;

#define CTR_ADD(f, v) __atomic_fetch_add(&ctr.f, (v), __ATOMIC_RELAXED)
#define CTR_LD(f) __atomic_load_n(&ctr.f, __ATOMIC_RELAXED)

/* ---- the mode ---- */

void kvt_admit_set(enum kvt_admit mode)
{
	__atomic_store_n(&admit_fault, (int)mode, __ATOMIC_RELAXED);
}

int kvt_admit_fault(void)
{
	return __atomic_load_n(&admit_fault, __ATOMIC_RELAXED);
}

int kvt_admit_auto(void)
{
	return __atomic_load_n(&admit_fault, __ATOMIC_RELAXED) == KVT_ADMIT_AUTO;
}

int kvt_admit_fault_sc(void)
{
	return __atomic_fetch_or(&admit_fault, 0, __ATOMIC_SEQ_CST);
}

/* Back to remote admission: every far range tracked so far is mapped for the
 * GPU again (the migrator thread, once, when CUPTI turns out unusable or
 * GPU faults map far memory); one placed but not yet tracked is mapped by
 * kvt_place_commit, which reads the mode after tracking it. */
void kvt_admit_remote(const char *why)
{
	if (!__atomic_exchange_n(&admit_fault, 0, __ATOMIC_SEQ_CST))
		return;
	kvt_warn("KVTIER_ADMIT=%s gives way to remote admission (%s): far memory is "
		 "mapped for the GPU and read over the link until promoted", kvt_opt.admit, why);
	struct kvt_heat_range r;
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++)       /* each for its own device */
		if (!kvt_heat_range_get(s, &r))
			kvt_cuda_advise(r.base, r.size, CU_MEM_ADVISE_SET_ACCESSED_BY,
					CU_MEM_LOCATION_TYPE_DEVICE, r.dev);
}

/* ---- the epoch's heuristics ---- */

/* KVTIER_ADMIT=auto: a chunk that came back by fault quickly AUTO_STRIKES
 * times in a row after the driver had evicted it (HBM full: more HBM time
 * cannot help it) and has no mapping from kvtier yet. */
static int auto_wants(uint8_t f)
{
	return !(f & KVT_HEAT_F_MAPPED) && (f & KVT_HEAT_F_REFAULTS) >= AUTO_STRIKES;
}

/* Give the GPU accessed-by on chunks [i0, i1) of range r (pinned):
 * wherever the driver or the migrator puts them next, the GPU reads them
 * over the link instead of faulting them back in, and the planner promotes
 * them on their heat as under KVTIER_ADMIT=remote. For the life of the
 * allocation: each change would cost a fault and a 2 MiB migration. One
 * advice for the run: a thrashing cache strikes hundreds of neighbours in
 * one epoch, and each advice is a driver call that takes the address
 * space's lock and splits the driver's range at its ends. */
static void auto_map(const struct kvt_admit_epoch *e, const struct kvt_heat_range *r,
		     struct kvt_heat_chunk *c, uint32_t i0, uint32_t i1)
{
	uint64_t addr = r->base + ((uint64_t)i0 << KVT_CHUNK_SHIFT);
	uint64_t end = r->base + ((uint64_t)i1 << KVT_CHUNK_SHIFT);
	if (end > r->base + r->size)
		end = r->base + r->size;
	if (e->stopping())
		return;
	e->advising();
	CUresult res = kvt_cuda_advise(addr, end - addr, CU_MEM_ADVISE_SET_ACCESSED_BY,
				       CU_MEM_LOCATION_TYPE_DEVICE, r->dev);
	if (res != CUDA_SUCCESS) {
		CTR_ADD(advise_failed, 1);
		kvt_warn_once("accessed-by advice on %#llx (+%llu) failed with CUresult %d "
			      "(counted; further ones are not logged)", (unsigned long long)addr,
			      (unsigned long long)(end - addr), (int)res);
		return;
	}
	for (uint32_t k = i0; k < i1; k++)
		__atomic_fetch_or(&c[k].flags, KVT_HEAT_F_MAPPED, __ATOMIC_RELAXED);
	CTR_ADD(auto_mapped, i1 - i0);
	CTR_ADD(auto_advices, 1);
}

/* auto: map the chunks of table entries [i, j) (one range) that
 * auto_wants(), one advice per run of neighbours. -1: the range was freed
 * meanwhile. */
static int auto_map_range(const struct kvt_admit_epoch *e, uint32_t i, uint32_t j)
{
	uint32_t slot = e->table[i].range;
	const struct kvt_heat_range *r = &e->r[slot];
	struct kvt_heat_chunk *c = kvt_heat_chunks(r);
	uint32_t run0 = 0, run1 = 0;    /* chunk indices [run0, run1): pending */
	int pinned = 0;
	for (uint32_t k = i; k <= j; k++) {
		uint32_t idx = k < j ? e->table[k].tag : 0;
		int want = k < j && auto_wants(__atomic_load_n(&c[idx].flags, __ATOMIC_RELAXED));
		if (want && run1 > run0 && idx == run1) {
			run1++;
			continue;
		}
		if (run1 > run0)
			auto_map(e, r, c, run0, run1);
		run0 = run1 = 0;
		if (!want)
			continue;
		if (!pinned && kvt_heat_pin((int)slot, r->gen))
			return -1;
		pinned = 1;
		run0 = idx;
		run1 = idx + 1;
	}
	if (pinned)
		kvt_heat_unpin();
	return 0;
}

/* KVTIER_ADMIT=fault or auto, on the epoch's table (the working set: every
 * chunk that faulted in is there). A far chunk the GPU has no mapping of
 * comes to HBM by fault when it is used, so the plan never promotes it (its
 * heat is left out of this epoch's table): such a promotion only makes room,
 * by demotion, for what the GPU may not touch (0.6-0.8x the tokens/s on
 * zipf-decode, simulated). Chunks in HBM rank by recency (RECENCY_HEAT),
 * except those auto mapped: with the far ones, they rank by heat as under
 * remote admission (a mapped far chunk's count outranked every recency
 * score, and the planner churned: vllm-like 4x 0.76x remote).
 * auto: map the chunks auto_wants(). */
static void admit_scan(const struct kvt_admit_epoch *e, int automatic)
{
	struct kvt_plan_chunk *t = e->table;
	uint32_t n = e->n, now_ms = e->now_ms;
	float d = e->demote, top = RECENCY_HEAT * (d > 1.0f ? d : 1.0f);
	uint32_t tau = kvt_heat_tau_ms();
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i + 1, slot = t[i].range;
		while (j < n && t[j].range == slot)
			j++;
		const struct kvt_heat_range *r = &e->r[slot];
		struct kvt_heat_chunk *c = kvt_heat_chunks(r);
		if (automatic && auto_map_range(e, i, j)) {
			i = j;                                   /* freed meanwhile */
			continue;
		}
		for (uint32_t k = i; k < j; k++) {
			uint32_t idx = t[k].tag;
			uint8_t f = __atomic_load_n(&c[idx].flags, __ATOMIC_RELAXED);
			if (t[k].tier == KVT_PLAN_TIER_FAR && !(f & KVT_HEAT_F_MAPPED)) {
				t[k].heat = 0.0f;
			} else if (!(f & KVT_HEAT_F_MAPPED)) {       /* in HBM, came by fault */
				t[k].heat = kvt_heat_recency(c + idx, top, now_ms, tau);
			}
		}
		i = j;
	}
}

/* Admission by fault needs faults that migrate. A driver may instead map
 * far memory for the GPU on a fault (CUDA documents that for a host
 * preferred location): then nothing would ever come in and, with
 * promotions left to faults, everything would be read over the link. */
void kvt_admit_epoch(const struct kvt_admit_epoch *e)
{
	uint64_t ff = kvt_cupti_far_faults();
	if (ff >= ADMIT_CHECK_FAULTS && !kvt_heat_fault_ins()) {
		char why[160];
		snprintf(why, sizeof why, "%llu GPU faults on far memory migrated none of it: "
			 "this driver maps it instead", (unsigned long long)ff);
		kvt_admit_remote(why);
		return;
	}
	admit_scan(e, kvt_admit_auto());
}

/* ---- counters ---- */

static void info_u64(const char *key, uint64_t v)
{
	char val[32];
	snprintf(val, sizeof val, "%llu", (unsigned long long)v);
	kvt_trace_info(key, val);
}

void kvt_admit_trace_counters(void)
{
	char val[64];
	if (kvt_admit_fault())
		kvt_trace_info("migrate.admit", kvt_admit_auto() ? "auto" : "fault");
	else if (!strcmp(kvt_opt.admit, "fault") || !strcmp(kvt_opt.admit, "auto")) {
		snprintf(val, sizeof val, "remote (%s gave way)", kvt_opt.admit);
		kvt_trace_info("migrate.admit", val);
	} else
		kvt_trace_info("migrate.admit", "remote");
	info_u64("migrate.auto_mapped", CTR_LD(auto_mapped));
	info_u64("migrate.auto_advices", CTR_LD(auto_advices));
	info_u64("migrate.advise_failed", CTR_LD(advise_failed));
}
