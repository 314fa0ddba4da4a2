/* SPDX-License-Identifier: MIT */
/* Live counters published for `kvtier stat` (place/stats.c): a 0600
 * segment /dev/shm/kvtier.<pid> (include/kvtier/stats_format.h), refreshed
 * each migration epoch and, from the hooks, at most every 100 ms.
 * The hook entry points are atomics and one clock read: no malloc, no
 * locks (publishing takes a try-lock and skips when busy). KVTIER_STATS=0:
 * nothing is created. Any failure: one warning, no segment, carry on. */
#ifndef KVT_STATS_H
#define KVT_STATS_H

#include <stdint.h>

#include "../tier/migrator.h"   /* struct kvt_stats_migr */

struct kvt_registry;

/* Life (preload/init.c, hook_exec.c): create and publish the first
 * snapshot; unlink and unmap at exit; a fork child drops the parent's
 * mapping and publishes nothing (it may _exit without a destructor);
 * before exec the segment is removed (the new image, same pid, creates its
 * own; a failed exec creates it again). mem_reg and host_reg: the hooks'
 * registries, whose live totals every snapshot reads. */
void kvt_stats_init(struct kvt_registry *mem_reg, struct kvt_registry *host_reg);
void kvt_stats_close(void);
void kvt_stats_after_fork(void);
void kvt_stats_before_exec(void);
void kvt_stats_exec_failed(void);
/* _exit: unlink only (async-signal-safe; a vfork child does nothing). */
void kvt_stats_at_exit(void);

/* Hooks (preload/record.c): an allocation succeeded / was released.
 * Placement's own counters (re-homes included) are pulled at publish
 * (kvt_place_counters): placement never calls in here. */
void kvt_stats_on_alloc(uint8_t kind, uint8_t placement, uint64_t bytes);
void kvt_stats_on_free(uint8_t kind, uint8_t placement, uint64_t bytes);

/* The migration thread, once per epoch (tier/migrator.c, through the
 * epoch_done callback preload/init.c hands it): its counters. */
void kvt_stats_publish_epoch(const struct kvt_stats_migr *m);

#endif
