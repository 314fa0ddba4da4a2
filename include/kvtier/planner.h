/* SPDX-License-Identifier: MIT */
/* The migration planner (policy/planner.c): pure arithmetic on a table of
 * 2 MiB chunks (decayed heat, tier, last move) -> promotion and demotion
 * ranges for one epoch. No CUDA, no syscalls, no allocation: the caller
 * passes every buffer. O(n) in chunks (a few passes + 64-bucket histograms). */
#ifndef KVTIER_PLANNER_H
#define KVTIER_PLANNER_H

#include <stdint.h>

enum kvt_plan_tier { KVT_PLAN_TIER_FAR = 0, KVT_PLAN_TIER_HBM = 1 };
enum kvt_plan_dir { KVT_PLAN_DEMOTE = 0, KVT_PLAN_PROMOTE = 1 };

#define KVT_PLAN_BUCKETS 64

/* One chunk as the planner sees it. Chunks of one range are consecutive in
 * the table and carry the same `range`; only neighbours in one range merge.
 * A table may leave out far chunks colder than `promote` (they can never be
 * chosen): the plan is the same, given KVT_PLAN_F_GAP where one was left out. */
struct kvt_plan_chunk {
	float heat;                 /* decayed to "now" by the caller */
	uint32_t moved_ms;          /* when it last moved (0 = never) */
	uint32_t range : 10;        /* moves carry it; only one range's chunks merge */
	uint32_t tier : 1;          /* enum kvt_plan_tier */
	uint32_t flags : 1;         /* KVT_PLAN_F_* */
	uint32_t tag : 20;          /* the caller's (the planner never reads it) */
};

/* The entry is not the chunk right after the previous entry in memory (a
 * table that leaves out chunks says where): moves never merge across it. */
#define KVT_PLAN_F_GAP 0x1

/* The migrator's watermarks (tier/migrator.c; here so that the profiler
 * benchmark plans with the same): demote when HBM holds more than 99 % of
 * the budget, down to 97 %. (95/90 left 17 of 175 budgeted chunks idle on
 * zipf-decode: 0.85x the tokens/s.) */
#define KVT_MIGRATE_HIGH_BP 9900
#define KVT_MIGRATE_LOW_BP 9700

struct kvt_plan_params {
	uint64_t budget_bytes;      /* HBM allowed to redirected chunks */
	uint32_t high_bp, low_bp;   /* watermarks, basis points of the budget */
	float promote, demote;      /* heat thresholds (promote > demote: hysteresis) */
	uint64_t rate_bytes_per_s;  /* cap on bytes moved (0 = none) */
	uint32_t epoch_ms;          /* nominal epoch: the rate cap's burst is 2 epochs */
	uint32_t min_residence_ms;  /* a moved chunk stays put at least this long */
	uint64_t chunk_bytes;       /* 2 MiB */
	uint64_t room_bytes;        /* HBM free on the device now: the budget is cut to
				     * what the chunks hold plus this, so that kvtier
				     * chooses what leaves HBM, not the driver's eviction
				     * (KVT_PLAN_ROOM_ANY: not known, no cut) */
};
#define KVT_PLAN_ROOM_ANY UINT64_MAX

/* Scratch of one epoch (performance only): the positions of the chunks that
 * can matter after the first pass (resident and movable, or far and at
 * least as hot as the promote threshold), then, over the same entries, the
 * candidates for each direction with their rank. When more than live_cap
 * are, the later passes walk the whole table instead; the plan is the same. */
#define KVT_PLAN_LIVE_MAX (1u << 17)

struct kvt_planner {
	struct kvt_plan_params p;
	uint64_t allowance_bytes;   /* rate-cap token bucket */
	uint32_t last_ms;
	int started;
	uint32_t live_cap;          /* entries of live[] used: KVT_PLAN_LIVE_MAX from
				     * kvt_planner_init(); a test may lower it */
	uint32_t live[KVT_PLAN_LIVE_MAX];
};

struct kvt_plan_move {
	uint32_t first, nr;         /* chunk positions in the table */
	uint16_t range;
	uint8_t dir;                /* enum kvt_plan_dir */
};

struct kvt_plan_out {
	struct kvt_plan_move *moves;   /* caller's array */
	uint32_t cap, nr;
	uint32_t nr_promote, nr_demote;        /* chunks */
	uint32_t hbm_before, hbm_after;        /* chunks believed in HBM */
	uint32_t budget_chunks;
};

void kvt_planner_init(struct kvt_planner *pl, const struct kvt_plan_params *p);
/* The heat bucket (0..63, 2 per octave) a value falls in. */
unsigned kvt_plan_bucket(float heat);
/* One epoch at time now_ms. Demotions are listed before promotions, and
 * applying the list in order never holds more than the budget in HBM. A
 * resident within its minimum residence is demoted only when the other
 * residents' demotions leave more than the budget in HBM (chunks the GPU
 * faulted in), coldest first, down to the budget (the rate cap still holds).
 * Returns the number of moves. */
uint32_t kvt_plan_epoch(struct kvt_planner *pl, const struct kvt_plan_chunk *c,
			uint32_t n, uint32_t now_ms, struct kvt_plan_out *out);

#endif
