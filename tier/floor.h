/* SPDX-License-Identifier: MIT */
/* The floor's notice (tier/floor.c; docs/profiler.md "Evidence classes"):
 * kvtier says once, as a warning and in the trace (`evidence.floor`), when
 * the KV it tracks is larger than its HBM budget and none of it has
 * evidence finer than the allocation. There kvtier cannot tell which
 * blocks a step reads, and a pool larger than HBM runs below the same
 * server with the pool that fits (docs/performance.md, "Server
 * personas"): the operator is told to size the pool to fit. Migration
 * thread only. */
#ifndef KVT_FLOOR_H
#define KVT_FLOOR_H

#include <stdint.h>

/* Epochs the condition must hold before it is said: 3 s at the default
 * 50 ms epoch, time for a server's block tables to be learned first. */
#define KVT_FLOOR_HOLD 60

/* Once per migrator epoch, after the sources' poll settled the classes:
 * budget, the HBM budget summed over the devices served. */
void kvt_floor_epoch(uint64_t budget);

/* Whether the notice was given (tests). */
int kvt_floor_said(void);

/* Forget (fork child). */
void kvt_floor_reset(void);

#endif
