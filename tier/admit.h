/* SPDX-License-Identifier: MIT */
/* Admission (tier/admit.c): how far memory first reaches HBM. KVTIER_ADMIT
 * remote maps far memory for the GPU (read over the link until the planner
 * promotes it); fault leaves it unmapped, so the GPU's first touch faults and
 * the driver migrates it; auto also maps, chunk by chunk, what the driver
 * keeps evicting and faulting back. Placement sets the mode once and reads
 * it when it homes memory; the migration thread reads it each epoch and
 * may give way to remote, once. Every access to the mode is here, with its
 * memory order. */
#ifndef KVT_ADMIT_H
#define KVT_ADMIT_H

#include <stdint.h>

#include "kvtier/planner.h"
#include "../profiler/heat.h"

enum kvt_admit { KVT_ADMIT_REMOTE, KVT_ADMIT_FAULT, KVT_ADMIT_AUTO };

/* Once, from placement's init, before any far memory is placed. */
void kvt_admit_set(enum kvt_admit mode);
/* The mode in effect: fault or auto (nonzero) / auto only. Relaxed loads. */
int kvt_admit_fault(void);
int kvt_admit_auto(void);
/* The same as kvt_admit_fault(), as a sequentially consistent
 * read-modify-write: placement's read after tracking a range placed for
 * fault admission, ordered with kvt_admit_remote()'s exchange (either it
 * sees remote, or the exchange comes after and sees the range tracked). */
int kvt_admit_fault_sc(void);
/* Back to remote admission (why: one line for the warning): every far range
 * tracked so far is mapped for the GPU again. Once; later calls do nothing.
 * From the migration thread, or the allocating thread that starts CUPTI. */
void kvt_admit_remote(const char *why);

/* One epoch's admission work, under fault or auto, on the migration thread:
 * a far chunk the GPU has no mapping of is left out of the plan (heat 0),
 * chunks in HBM that came by fault rank by recency; auto maps the chunks
 * that keep coming back. Gives way to remote when faults migrate nothing. */
struct kvt_admit_epoch {
	struct kvt_plan_chunk *table;       /* the epoch's table, grouped by range */
	uint32_t n;
	const struct kvt_heat_range *r;     /* the ranges its entries name */
	float demote;                       /* the planner's demotion heat */
	uint32_t now_ms;
	int (*stopping)(void);              /* a stop was asked: no more driver calls */
	void (*advising)(void);             /* about to make an advice call */
};
void kvt_admit_epoch(const struct kvt_admit_epoch *e);

/* INFO records at exit: migrate.admit and the auto counters. */
void kvt_admit_trace_counters(void);

#endif
