/* SPDX-License-Identifier: MIT */
/* The migration thread (tier/migrator.c): every KVTIER_EPOCH_MS it
 * gathers evidence, decays chunk heat, asks the planner for promotions and
 * demotions and issues them with cuMemPrefetchAsync_v2 on its own
 * lowest-priority stream. Application threads only ever touch atomics and
 * the heat table; they never wait for it. */
#ifndef KVT_MIGRATOR_H
#define KVT_MIGRATOR_H

#include <stdint.h>

/* From the constructor, after kvt_place_init(): read the options, map the
 * heat arena, start the thread (KVTIER_MIGRATE=0: nothing). */
void kvt_migrator_start(void);
/* From the destructor, before the trace closes: stop and join (bounded wait). */
void kvt_migrator_stop(void);
/* fork() child: no thread there; forget the parent's ranges, restart lazily
 * at the child's first redirected allocation. */
void kvt_migrator_after_fork(void);
/* Placement: a redirected managed range was made / is being released. */
void kvt_migrator_track(uint64_t base, uint64_t size, int32_t node);
void kvt_migrator_untrack(uint64_t base);
/* Placement re-homed a provisional managed:hbm range to the far tier
 * (advice only): the pages it touched are still in HBM and count against
 * the budget until the migrator demotes them. */
void kvt_migrator_rehomed(uint64_t base);
/* INFO records with the counters (at exit). */
void kvt_migrator_trace_counters(void);

#endif
