/* SPDX-License-Identifier: MIT */
/* The step prefetch (tier/step.c): stream-ordered placement of the KV one
 * step's kernels are about to read, where the block tables tell which.
 *
 * A server uploads each step's block table (and the rows' lengths) from a
 * pinned staging buffer with an async host-to-device copy, on the stream
 * its kernels then run on. The copy hook reads that staging buffer
 * (profiler/tables.c); once the table's layout is learned, the chunks the
 * step names are known before a kernel reads them. Here, right behind the
 * upload and on the upload's own stream (so ahead of the step's kernels in
 * stream order, as vLLM's offload connector and the oracle move their
 * blocks), the named blocks that are not in HBM are prefetched to HBM:
 * their 64 KiB pages only (a real driver keeps residency per page inside a
 * 2 MiB VA block, and a block of a page-sized table is 16-32 KiB), or the
 * whole chunk when more than half of its pages would then be held that
 * way. When the room the migrator left under the budget is used up,
 * victims are first prefetched back to the far tier on the same stream: a
 * CLOCK hand over the ranges steps name sends out the pages of chunks in
 * HBM (or held apart) that no step named since it last passed (a chunk
 * that no recent step named leaves whole when none of it was named; a
 * chunk that this step or the one before named keeps the pages named
 * lately and only its others leave). A driver seen (CUPTI's prefetch
 * records) to move a chunk's named pages with the unnamed ones it was
 * asked to, a 2 MiB residency unit, turns that last trimming off for good:
 * migrate.step_trim in the trace. The migration
 * thread leaves the chunks of those ranges to this, counts the pages held
 * apart against the budget (kvt_step_partial_pages) and publishes the room
 * each epoch.
 *
 * Runs in the copy hook, on the application's thread: no malloc, no locks
 * (a second thread finding a step under way skips its own), bounded work
 * (KVT_STEP_MAX_MOVES moves a step, a bounded hand). Nothing is done while
 * the stream is being captured into a graph. KVTIER_STEP_PREFETCH=0: off. */
#ifndef KVT_STEP_H
#define KVT_STEP_H

#include <stdint.h>

#include "../profiler/tables.h"

#define KVT_STEP_MAX_MOVES    256      /* chunks promoted per step at most (512 MiB) */
#define KVT_STEP_OWN_MS       2000     /* a range no step named for this long is the migrator's again */
#define KVT_STEP_PROTECT      1        /* a chunk this step or the one before named is never a victim */
#define KVT_STEP_PAGE_SHIFT   KVT_TABLES_PAGE_SHIFT   /* the unit of a partial move: 64 KiB */
#define KVT_STEP_PAGES        32       /* of them in a 2 MiB chunk */

/* From the copy hooks, after kvt_prof_on_copy: stream is the copy's (0 for
 * a synchronous copy). Nothing unless the copy completed a step's tables. */
void kvt_step_after_copy(uint64_t stream);

/* Whether a step named chunks of heat range slot in the last
 * KVT_STEP_OWN_MS: its chunks are the step's, the migrator leaves them. */
int kvt_step_owns(int slot);
/* Whether the step prefetch is on (option and tables source). */
int kvt_step_enabled(void);
/* Migration thread: it moved chunks [idx, idx + nr) of range r whole. A
 * trim or a page prefetch of them being watched is dropped (the driver's
 * records of that move name every page: no evidence of its unit). */
struct kvt_heat_range;
void kvt_step_moved_whole(const struct kvt_heat_range *r, uint32_t idx, uint32_t nr);
/* Migration thread, after each epoch: pages (KVT_STEP_PAGES a chunk) free
 * under the HBM budget's low watermark, with every chunk believed in HBM
 * and every page held apart counted; below 0, a debt the next steps pay
 * first by demoting victims (GPU faults brought chunks in past it), before
 * they promote anything. */
void kvt_step_set_room(int64_t pages);
/* Migration thread, with it: the chunks the budget holds for the steps (a
 * step naming more than fit is not charged whole chunks, see step.c). */
void kvt_step_set_cap(uint32_t chunks);
/* Migration thread, before each epoch's plan: the pages steps hold in HBM
 * of chunks believed far, in the ranges steps own that were placed for
 * device dev. Settles them first: a
 * chunk that came in whole since (a GPU fault, the planner) holds none
 * apart; one of a range no step owns any more is counted in HBM whole (the
 * planner's unit; it may demote it). Approximate while a step runs beside
 * it (a page or a chunk either way, never lost track of for long). */
uint64_t kvt_step_partial_pages(int dev);

struct kvt_step_info {
	uint64_t steps;          /* steps that named chunks */
	uint64_t named;          /* chunks named, each once a step */
	uint64_t promoted;       /* chunks prefetched to HBM whole on the step's stream */
	uint64_t pages;          /* pages prefetched to HBM apart (named blocks' pages) */
	uint64_t demoted;        /* victims (chunks) prefetched to the far tier whole first */
	uint64_t pages_out;      /* victims' pages no step named lately, prefetched out apart */
	uint64_t trims;          /* victims a recent step named whose other pages left */
	uint64_t trims_wide;     /* verdicts that the driver moved more than asked: trims whose
				  * kept pages it moved out too, prefetches apart it moved in whole */
	uint64_t asks_judged;    /* far chunks' pages prefetched apart, judged by the driver's records */
	uint64_t no_room;        /* named far chunks left where they were: no room, no victim */
	uint64_t over_cap;       /* named far chunks past KVT_STEP_MAX_MOVES */
	uint64_t busy;           /* steps skipped: another thread's was under way */
	uint64_t capturing;      /* steps skipped: the stream was being captured */
	uint64_t failed;         /* prefetch calls that failed */
	uint64_t over_budget;    /* steps whose named pages were more than the budget holds
				  * for the steps (kvt_step_set_cap), or that left a named far
				  * chunk for want of room (short_steps) */
	uint64_t short_steps;    /* steps that left a named far chunk for want of room */
	uint64_t peak_pages;     /* the most pages one step named (64 KiB each) */
};
void kvt_step_info(struct kvt_step_info *out);
/* INFO record migrate.step with the counters (at exit). */
void kvt_step_trace_counters(void);
/* Forget everything (fork child, tests). */
void kvt_step_reset(void);

#endif
