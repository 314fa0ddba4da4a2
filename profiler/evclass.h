/* SPDX-License-Identifier: MIT */
/* What kvtier knows of each KV range (profiler/evclass.c; docs/profiler.md
 * "Evidence classes"): the strongest class of evidence that reached it
 * lately, settled once it holds, said once in the log and the trace, and
 * counted in `kvtier stat`.
 *
 * The classes, strongest first:
 *  - blocks: an accepted block-table layout names the blocks each step
 *    reads (the tables source, or a server decoder feeding it);
 *  - extent: a launch names the range's read extent (reserved: no source
 *    gives it yet);
 *  - allocation: launches name the range, not which part of it;
 *  - faults: GPU page faults inside it are all kvtier sees;
 *  - none.
 * A class counts as seen for KVT_EVC_WINDOW epochs after its last mark; a
 * range's class settles when the strongest seen has held for
 * KVT_EVC_HOLD epochs. The hook side only sets bits (relaxed atomics); the
 * migrator folds them each epoch. */
#ifndef KVT_EVCLASS_H
#define KVT_EVCLASS_H

#include <stdint.h>

enum kvt_evc {
	KVT_EVC_NONE = 0,
	KVT_EVC_FAULTS,
	KVT_EVC_ALLOCATION,
	KVT_EVC_EXTENT,
	KVT_EVC_BLOCKS,
	KVT_EVC__COUNT
};

#define KVT_EVC_WINDOW  20      /* epochs a mark keeps its class seen */
#define KVT_EVC_HOLD    10      /* epochs a class holds before it settles */

const char *kvt_evc_name(enum kvt_evc c);

/* Hook side, any thread: range slot (kvt_heat_find) got evidence of class
 * c; the one at addr, when addr is in a tracked range. */
void kvt_evc_mark(int slot, enum kvt_evc c);
void kvt_evc_mark_addr(uint64_t addr, enum kvt_evc c);

/* The migrator, once per epoch: fold the marks, settle, and say each
 * change of a range's settled class once (log at info, trace INFO
 * `evidence.range`). */
void kvt_evc_epoch(void);

/* The settled class of range slot (KVT_EVC_NONE before it settles). */
enum kvt_evc kvt_evc_settled(int slot);

/* Live ranges and their bytes per settled class. */
void kvt_evc_totals(uint64_t nr[KVT_EVC__COUNT], uint64_t bytes[KVT_EVC__COUNT]);

/* Forget everything (fork child, tests). */
void kvt_evc_reset(void);

#endif
