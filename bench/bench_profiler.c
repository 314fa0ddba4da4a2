// SPDX-License-Identifier: MIT
/* make bench: the profiler's and the planner's cost at 1 TiB tracked
 * (512 Ki chunks of 2 MiB), side by side in one run, median of trials.
 *
 *   profiler.bytes_per_chunk  metadata per tracked chunk, worst case: heat
 *                             arena entry (struct kvt_heat_chunk) + the two
 *                             bitmaps (dirty, working set: 2 bits) + the
 *                             migrator's table entry (struct kvt_plan_chunk)
 *                             if every chunk were in its working set
 *   profiler.planner_ms       CPU ms of one kvt_plan_epoch() over the WHOLE
 *                             512 Ki-chunk table (the planner figure)
 *   profiler.collect_ms       CPU ms of kvt_heat_collect(): the chunks in
 *                             HBM and the far ones hot enough to promote
 *   profiler.epoch_ms         CPU ms of one migrator epoch less its driver
 *                             calls: collect + plan over what it collected +
 *                             applying the plan's bookkeeping
 *   profiler.core_share       epoch_ms / KVTIER_EPOCH_MS (default 50)
 *
 * The epoch is the migrator's (tier/migrator.c epoch(): the same
 * kvt_heat_collect() and kvt_plan_epoch() calls with its parameters:
 * watermarks 99%/97%, residence 4 epochs, promote 4, demote 1, 8 GiB/s),
 * then apply()'s per-chunk tier/moved_ms stores. Not counted:
 * kvt_prof_sources_poll() (CUPTI buffer drain; 0 with the launch/copy
 * sources) and the cuMemPrefetchAsync/stream-sync calls.
 * Every epoch the plan over the collected subset is checked against a plan
 * over the whole table (a second planner fed a full snapshot): the same
 * chunks must move, or the program fails.
 *
 * Heat: 64 ranges of 16 GiB (per-layer KV tensors). Each epoch the
 * evidence (not timed: the application's threads pay it) is Zipf-like
 * over a fixed random ranking of all chunks: the hottest 40 Ki ranks
 * touched with weight 1/(1 + rank/4096) (flat head, 1/rank tail), the
 * ranking shifting by 64 ranks per epoch (a hot set that moves, 1.3 Ki
 * chunks a second). Budget 64 GiB of HBM (32 Ki chunks): in steady state
 * the hot set (heat >= 4, the default promote) about fills it.
 * CPU time: CLOCK_THREAD_CPUTIME_ID. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier/planner.h"
#include "../profiler/heat.h"

#define NR_CHUNKS (512u << 10)                 /* 1 TiB / 2 MiB */
#define NR_RANGES 64u
#define RANGE_CHUNKS (NR_CHUNKS / NR_RANGES)
#define BUDGET_CHUNKS (32u << 10)             /* 64 GiB of HBM */
#define HOT_RANKS (40u << 10)
#define SHIFT_PER_EPOCH 64u
#define EPOCH_MS 50u
#define WARM_EPOCHS 200                       /* the rate cap fills HBM in ~160 */
#define TRIALS 15
#define MAX_MOVES 1024                        /* as the migrator */

static struct kvt_plan_chunk table[NR_CHUNKS];          /* the whole table */
static struct kvt_plan_chunk sub[KVT_HEAT_MAX_CHUNKS];  /* what collect returns */
static uint32_t rstart[KVT_HEAT_MAX_RANGES];
static struct kvt_heat_range rng[KVT_HEAT_MAX_RANGES], rng_c[KVT_HEAT_MAX_RANGES];
static struct kvt_plan_move moves[MAX_MOVES], moves_full[MAX_MOVES];
static uint32_t perm[NR_CHUNKS];              /* rank -> global chunk */
static struct kvt_heat_chunk *chunk_ptr[NR_RANGES];

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rnd = 88172645463325252ull;
static uint32_t xr(void)
{
	rnd ^= rnd << 13;
	rnd ^= rnd >> 7;
	rnd ^= rnd << 17;
	return (uint32_t)(rnd >> 32);
}

/* The application's side: this epoch's evidence. */
static void evidence(uint32_t epoch, uint32_t now_ms, uint32_t tau)
{
	uint32_t shift = epoch * SHIFT_PER_EPOCH;
	for (uint32_t r = 0; r < HOT_RANKS; r++) {
		uint32_t g = perm[(r + shift) % NR_CHUNKS];
		float w = 1.0f / (1.0f + (float)r / 4096.0f);
		kvt_heat_touch(&chunk_ptr[g / RANGE_CHUNKS][g % RANGE_CHUNKS], w, now_ms, tau);
	}
}

/* The whole table, every chunk decayed (the reference plan's input). */
static uint32_t snapshot(uint32_t now_ms, uint32_t tau)
{
	uint32_t n = 0;
	for (int s = 0; s < KVT_HEAT_MAX_RANGES; s++) {
		rng[s].live = 0;
		if (kvt_heat_range_get(s, &rng[s]))
			continue;
		struct kvt_heat_chunk *c = kvt_heat_chunks(&rng[s]);
		rstart[s] = n;
		for (uint32_t i = 0; i < rng[s].nr_chunks && n < KVT_HEAT_MAX_CHUNKS; i++, n++) {
			table[n] = (struct kvt_plan_chunk){
				.heat = kvt_heat_read(&c[i], now_ms, tau),
				.moved_ms = __atomic_load_n(&c[i].moved_ms, __ATOMIC_RELAXED),
				.tier = __atomic_load_n(&c[i].tier, __ATOMIC_RELAXED),
				.range = (uint16_t)s,
			};
		}
	}
	return n;
}

/* migrator.c apply() less the driver call and the counters */
static void apply(const struct kvt_plan_out *o, uint32_t now_ms)
{
	for (uint32_t k = 0; k < o->nr; k++) {
		const struct kvt_plan_move *mv = &moves[k];
		struct kvt_heat_range cur;
		if (kvt_heat_range_get(mv->range, &cur) || cur.gen != rng_c[mv->range].gen)
			continue;
		struct kvt_heat_chunk *c = kvt_heat_chunks(&rng_c[mv->range]) + sub[mv->first].tag;
		int promote = mv->dir == KVT_PLAN_PROMOTE;
		for (uint32_t i = 0; i < mv->nr; i++) {
			__atomic_store_n(&c[i].tier, promote ? KVT_PLAN_TIER_HBM : KVT_PLAN_TIER_FAR,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&c[i].moved_ms, now_ms, __ATOMIC_RELAXED);
		}
	}
}

/* The subset plan moves exactly what the whole-table plan moves. */
static int same_plan(const struct kvt_plan_out *o, const struct kvt_plan_out *f)
{
	if (o->nr != f->nr || o->nr_promote != f->nr_promote || o->nr_demote != f->nr_demote)
		return 0;
	for (uint32_t k = 0; k < o->nr; k++) {
		const struct kvt_plan_move *a = &moves[k], *b = &moves_full[k];
		if (a->range != b->range || a->dir != b->dir || a->nr != b->nr ||
		    rstart[a->range] + sub[a->first].tag != b->first)
			return 0;
	}
	return 1;
}

int main(void)
{
	const uint32_t tau = 1000;                 /* KVTIER_DECAY_MS default */
	if (kvt_heat_init(tau)) {
		fprintf(stderr, "bench_profiler: kvt_heat_init failed\n");
		return 1;
	}
	const uint64_t range_bytes = (uint64_t)RANGE_CHUNKS * KVT_CHUNK_BYTES;
	for (uint32_t s = 0; s < NR_RANGES; s++) {
		uint64_t base = (1ull << 44) + s * (range_bytes + KVT_CHUNK_BYTES);
		if (kvt_heat_track(base, range_bytes, KVT_PLAN_TIER_FAR, 1, 0)) {
			fprintf(stderr, "bench_profiler: kvt_heat_track failed\n");
			return 1;
		}
		chunk_ptr[s] = kvt_heat_chunk_at(base);
	}
	for (uint32_t i = 0; i < NR_CHUNKS; i++)
		perm[i] = i;
	for (uint32_t i = NR_CHUNKS - 1; i > 0; i--) {
		uint32_t j = xr() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}

	struct kvt_plan_params p = {
		.budget_bytes = (uint64_t)BUDGET_CHUNKS * KVT_CHUNK_BYTES,
		.high_bp = KVT_MIGRATE_HIGH_BP, .low_bp = KVT_MIGRATE_LOW_BP, .promote = 4, .demote = 1,
		.rate_bytes_per_s = 8ull << 30, .epoch_ms = EPOCH_MS,
		.min_residence_ms = 4 * EPOCH_MS, .chunk_bytes = KVT_CHUNK_BYTES,
		.room_bytes = KVT_PLAN_ROOM_ANY,
	};
	struct kvt_planner pl, pl_full;
	kvt_planner_init(&pl, &p);
	kvt_planner_init(&pl_full, &p);
	kvt_heat_set_keep(pl.p.promote);                /* as the migrator */

	double t_coll[TRIALS], t_plan[TRIALS], t_plan_full[TRIALS], t_apply[TRIALS], t_epoch[TRIALS];
	uint64_t moved = 0, hbm = 0, nmoves = 0, hot = 0, warm = 0, ws = 0;
	uint32_t now = 100000;
	for (int e = 0; e < WARM_EPOCHS + TRIALS; e++, now += EPOCH_MS) {
		evidence((uint32_t)e, now, tau);
		/* the reference first (it reads, never writes, the heat table) */
		uint32_t nf = snapshot(now, tau);
		struct kvt_plan_out f = { .moves = moves_full, .cap = MAX_MOVES };
		double z = cpu_ms();
		kvt_plan_epoch(&pl_full, table, nf, now, &f);
		double y = cpu_ms();
		/* the migrator's epoch */
		struct kvt_plan_out o = { .moves = moves, .cap = MAX_MOVES };
		double a = cpu_ms();
		uint32_t n = kvt_heat_collect(sub, KVT_HEAT_MAX_CHUNKS, now, rng_c, -1);
		double b = cpu_ms();
		kvt_plan_epoch(&pl, sub, n, now, &o);
		double c = cpu_ms();
		apply(&o, now);
		double d = cpu_ms();
		if (nf != NR_CHUNKS) {
			fprintf(stderr, "bench_profiler: snapshot saw %u chunks\n", nf);
			return 1;
		}
		if (!same_plan(&o, &f)) {
			fprintf(stderr, "bench_profiler: epoch %d: the plan over the %u collected chunks "
				"differs from the plan over all %u\n", e, n, nf);
			return 1;
		}
		if (e >= WARM_EPOCHS) {
			int t = e - WARM_EPOCHS;
			t_coll[t] = b - a;
			t_plan[t] = c - b;
			t_plan_full[t] = y - z;
			t_apply[t] = d - c;
			t_epoch[t] = d - a;
			moved += o.nr_promote + o.nr_demote;
			nmoves += o.nr;
			hbm += o.hbm_after;
			ws += n;
			for (uint32_t i = 0; i < nf; i++) {
				hot += table[i].heat >= p.promote;
				warm += table[i].heat > 0.0f;
			}
		}
	}
	double lo_e = t_epoch[0], hi_e = t_epoch[0], lo_p = t_plan_full[0], hi_p = t_plan_full[0];
	for (int t = 1; t < TRIALS; t++) {
		lo_e = t_epoch[t] < lo_e ? t_epoch[t] : lo_e;
		hi_e = t_epoch[t] > hi_e ? t_epoch[t] : hi_e;
		lo_p = t_plan_full[t] < lo_p ? t_plan_full[t] : lo_p;
		hi_p = t_plan_full[t] > hi_p ? t_plan_full[t] : hi_p;
	}
	double coll = median(t_coll, TRIALS), plan = median(t_plan, TRIALS);
	double plan_full = median(t_plan_full, TRIALS);
	double app = median(t_apply, TRIALS), ep = median(t_epoch, TRIALS);
	double per = (double)sizeof(struct kvt_heat_chunk) + 2.0 / 8 + (double)sizeof(struct kvt_plan_chunk);
	double ws_avg = (double)ws / TRIALS;
	double resident = (double)sizeof(struct kvt_heat_chunk) + 2.0 / 8 +
			  ws_avg * sizeof(struct kvt_plan_chunk) / NR_CHUNKS;

	printf("bench_profiler: %u chunks (%llu GiB tracked) in %u ranges, budget %u chunks, "
	       "epoch %u ms, tau %u ms; median of %d epochs after %d warm-up\n",
	       NR_CHUNKS, (unsigned long long)((uint64_t)NR_CHUNKS * KVT_CHUNK_BYTES >> 30),
	       NR_RANGES, BUDGET_CHUNKS, EPOCH_MS, tau, TRIALS, WARM_EPOCHS);
	printf("bench_profiler: metadata per chunk: struct kvt_heat_chunk %zu B + 2 bitmap bits + "
	       "struct kvt_plan_chunk %zu B (only for chunks in the working set) = %.2f B at worst, "
	       "%.2f B resident here; fixed at any size: struct kvt_planner %zu B (its scratch "
	       "list), moves %zu B\n", sizeof(struct kvt_heat_chunk), sizeof(struct kvt_plan_chunk),
	       per, resident, sizeof(struct kvt_planner), sizeof moves);
	printf("bench_profiler: the migrator's epoch: kvt_heat_collect + kvt_plan_epoch + apply's "
	       "stores; driver calls and source polling not counted; every epoch's plan checked "
	       "equal to the plan over the whole table\n");
	printf("bench_profiler: per epoch: %.1f chunks moved in %.1f moves, %.0f chunks in HBM, "
	       "%.0f collected (working set), %.0f with heat >= promote, %.0f with any heat\n",
	       (double)moved / TRIALS, (double)nmoves / TRIALS, (double)hbm / TRIALS, ws_avg,
	       (double)hot / TRIALS, (double)warm / TRIALS);
	printf("profiler.bytes_per_chunk=%.2f\n", per);
	printf("profiler.bytes_per_chunk_resident=%.2f\n", resident);
	printf("profiler.working_set_chunks=%.0f\n", ws_avg);
	printf("profiler.collect_ms=%.3f\n", coll);
	printf("profiler.plan_ms=%.3f\n", plan);
	printf("profiler.planner_ms=%.3f spread=[%.3f..%.3f]\n", plan_full, lo_p, hi_p);
	printf("profiler.apply_ms=%.3f\n", app);
	printf("profiler.epoch_ms=%.3f spread=[%.3f..%.3f]\n", ep, lo_e, hi_e);
	printf("profiler.core_share=%.5f epoch_ms=%.3f/%u\n", ep / EPOCH_MS, ep, EPOCH_MS);
	return 0;
}
