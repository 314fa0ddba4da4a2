/* SPDX-License-Identifier: MIT */
/* The tiering control loop (tier/migrator.c): every KVTIER_EPOCH_MS its
 * thread gathers evidence, decays chunk heat, asks the planner for promotions and
 * demotions and issues them with cuMemPrefetchAsync_v2 on its own
 * lowest-priority stream. Application threads only ever touch atomics and
 * the heat table; they never wait for it. It names nothing of preload/:
 * it reaches its host only through struct kvt_tier_host. */
#ifndef KVT_MIGRATOR_H
#define KVT_MIGRATOR_H

#include <stdint.h>

/* The migration counters, as handed to the host after each epoch; read
 * with atomic loads by KVT_STATS_MIGR(ctr). dev[]: each device the thread
 * serves, in the order first met, as its last epoch left it. */
#define KVT_MIGR_DEVICES 8
struct kvt_stats_migr {
	uint64_t epochs, nr_promoted, bytes_promoted, nr_demoted, bytes_demoted;
	uint64_t prefetch_issued, prefetch_failed, tracked, track_failed;
	uint32_t nr_dev;
	struct kvt_migr_dev {
		int32_t dev;                 /* CUdevice ordinal */
		uint64_t epoch;              /* the epoch that set these (0: none yet) */
		uint64_t budget_bytes;       /* the HBM budget that epoch planned against */
		uint64_t hbm_bytes;          /* redirected bytes believed in HBM after it */
	} dev[KVT_MIGR_DEVICES];
};
#define KVT_STATS_LD(c, f) __atomic_load_n(&(c).f, __ATOMIC_RELAXED)
#define KVT_STATS_MIGR(c) (&(const struct kvt_stats_migr){                        \
	.epochs = KVT_STATS_LD(c, epochs),                                        \
	.nr_promoted = KVT_STATS_LD(c, nr_promoted),                              \
	.bytes_promoted = KVT_STATS_LD(c, bytes_promoted),                        \
	.nr_demoted = KVT_STATS_LD(c, nr_demoted),                                \
	.bytes_demoted = KVT_STATS_LD(c, bytes_demoted),                          \
	.prefetch_issued = KVT_STATS_LD(c, prefetch_issued),                      \
	.prefetch_failed = KVT_STATS_LD(c, prefetch_failed),                      \
	.tracked = KVT_STATS_LD(c, tracked),                                      \
	.track_failed = KVT_STATS_LD(c, track_failed) })

/* What the loop needs from its host, and all it knows of it (DAMON's
 * struct damon_callback): the composition root (preload/init.c) fills it
 * and hands it to kvt_migrator_start, which keeps a copy. hbm_budget and
 * kv_start_free are required; epoch_done may be NULL. Called on the
 * migration thread only. */
struct kvt_tier_host {
	uint64_t (*hbm_budget)(void);        /* bytes of HBM for redirected memory (0: derive) */
	uint64_t (*kv_start_free)(void);     /* free HBM when the first KV was seen (0: not yet) */
	void (*epoch_done)(const struct kvt_stats_migr *m);   /* after each epoch */
};

/* From the constructor, after kvt_place_init(): read the options, map the
 * heat arena, start the thread (KVTIER_MIGRATE=0: nothing). */
void kvt_migrator_start(const struct kvt_tier_host *h);
/* From the destructor, before the trace closes: stop and join (bounded wait). */
void kvt_migrator_stop(void);
/* Ask the migration thread to poll its evidence sources soon (CUPTI's
 * flush) without an epoch: the step's verdicts wait for records that only
 * a poll delivers. No sooner than KICK_MIN_MS after the last poll; no
 * lock; nothing when the thread is not there. */
void kvt_migrator_poll_soon(void);
/* fork() child: no thread there; forget the parent's ranges, restart lazily
 * at the child's first redirected allocation. */
void kvt_migrator_after_fork(void);
/* Placement: a redirected managed range was made (node: its far node, the
 * one demotions go to; -1 for a plain host home) / is being released. */
void kvt_migrator_track(uint64_t base, uint64_t size, int32_t node);
void kvt_migrator_untrack(uint64_t base);
/* Placement re-homed a provisional managed:hbm range to the far tier
 * (advice only): the pages it touched are still in HBM and count against
 * the budget until the migrator demotes them. */
void kvt_migrator_rehomed(uint64_t base);
/* INFO records with the counters (at exit). */
void kvt_migrator_trace_counters(void);

#endif
