/* SPDX-License-Identifier: MIT */
/* The floor's notices (tier/floor.c; docs/profiler.md "Evidence classes"):
 * kvtier says once, as a warning and in the trace, when it can see that a
 * KV pool larger than HBM will run below the same server with the pool
 * that fits, and what the operator can change.
 *  - evidence.floor: the KV it tracks is larger than its HBM budget and
 *    none of it has evidence finer than the allocation. kvtier cannot tell
 *    which blocks a step reads: size the pool to fit.
 *  - evidence.step_over_budget: block tables name each step's KV, but a
 *    share of the steps name more than the budget holds (a server whose
 *    larger pool lets it run a larger batch): what does not fit is read
 *    over the link or moved every step. Cap the server's running batch.
 * Migration thread only. */
#ifndef KVT_FLOOR_H
#define KVT_FLOOR_H

#include <stdint.h>

/* Epochs the condition must hold before it is said: 3 s at the default
 * 50 ms epoch, time for a server's block tables to be learned first. */
#define KVT_FLOOR_HOLD 60

/* The step notice judges windows of this many epochs (1 s at the
 * default), each with at least KVT_FLOOR_STEPS_MIN steps; it is said when
 * KVT_FLOOR_OVER_WINDOWS windows in a row had at least
 * KVT_FLOOR_OVER_PCT % of their steps over the budget. */
#define KVT_FLOOR_WINDOW       20
#define KVT_FLOOR_STEPS_MIN    32
#define KVT_FLOOR_OVER_WINDOWS 3
#define KVT_FLOOR_OVER_PCT     33

/* The step prefetch's counters so far (tier/step.h: steps, over_budget,
 * peak_pages), as the migrator reads them. */
struct kvt_floor_steps {
	uint64_t steps, over, peak_pages;
};

/* Once per migrator epoch, after the sources' poll settled the classes:
 * budget, the HBM budget summed over the devices served; st, the step
 * counters (NULL: no step notice). */
void kvt_floor_epoch(uint64_t budget, const struct kvt_floor_steps *st);

/* Whether each notice was given (tests). */
int kvt_floor_said(void);
int kvt_floor_steps_said(void);

/* Forget (fork child). */
void kvt_floor_reset(void);

#endif
