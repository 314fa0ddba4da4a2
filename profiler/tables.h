/* SPDX-License-Identifier: MIT */
/* The block-table source (profiler/tables.c, docs/profiler.md "Block
 * tables"): chunk-level evidence for KV that kernels address through a
 * device-resident table of block ids, learned from what a real server
 * leaves where host code may read it.
 *
 * vLLM (and servers like it) fill each step's block table in a pinned host
 * buffer and upload it with an async host-to-device copy before the
 * kernels that use it; the attention kernel is then handed the KV tensor's
 * base, a device pointer to the table, and scalars (block and row strides).
 * kvtier cannot read the device table, but the copy hook sees the host
 * source at its host address:
 *  - copy: a host-to-device copy of at most KVT_TABLE_MAX_BYTES into device
 *    memory the application allocated, from host memory, is a candidate
 *    table keyed by its destination. Once a launch has named it beside a
 *    tracked KV base, its int32 values are read (process_vm_readv) and each
 *    id below KVT_TABLE_IDS gets the time in a stamp array; an id stamped
 *    in the last KVT_TABLE_LIVE_MS is live.
 *  - launch (from the launch scan): a scanned launch naming a tracked base
 *    and a kept table records the pair, and the launch's small scalars.
 *  - the layout: id i of a table used with base p touches
 *    [p + i*s, p + (i+1)*s). s is not known: the candidates are the
 *    launch's scalars and products of two of them, times 1, 2 or 4 (an
 *    element size). Each candidate is scored against the GPU page faults
 *    CUPTI reports inside the bases' ranges: a fault is explained when its
 *    chunk is one the candidate predicts from the ids live now. A candidate
 *    is accepted when it explains KVT_TABLE_MIN_HIT of at least
 *    KVT_TABLE_MIN_FAULTS faults and beats chance (its chunk coverage) by
 *    KVT_TABLE_MIN_Z standard deviations; of those, the one that explains
 *    the largest share of the faults chance does not (kappa) is taken,
 *    near ties to the stride richer in twos; it is dropped again when two
 *    windows in a row explain less than half (one slow epoch judges its
 *    faults against the ids of its last KVT_TABLE_LIVE_MS only, and can
 *    explain too few of them), and a re-learn prefers the stride dropped
 *    when it qualifies again (a near stride that explains most of the same
 *    chunks can score as well, and names the wrong pages); before that, a
 *    table takes the stride another table with an accepted layout uses on
 *    one of its bases, when it qualifies (one pool, one block stride).
 *  - credit: each epoch, every chunk an accepted layout predicts from the
 *    live ids is credited once; the launch scan's round-robin spread over
 *    such a range stops (kvt_tables_covers), since it would heat cold
 *    chunks as much as hot ones.
 * Not seen: tables built on the device (SGLang's req_to_token), tables
 * uploaded from device staging, layouts that are not base + id * stride,
 * kernels whose strides are not among their first parameters' scalars.
 * The hook side: no malloc, no locks, bounded work (a table's bytes). */
#ifndef KVT_TABLES_H
#define KVT_TABLES_H

#include <stdint.h>

#define KVT_TABLE_SLOTS       32          /* candidate tables (copy destinations) kept */
#define KVT_TABLE_MAX_BYTES   (8u << 20)  /* a larger host-to-device copy is not a table */
#define KVT_TABLE_IDS         (1u << 21)  /* ids stamped per table (larger ids are ignored) */
#define KVT_TABLE_SCALARS     8           /* scalar parameters kept per table */
#define KVT_TABLE_ASSOC       256         /* (base, table) pairs kept */
#define KVT_TABLE_LIVE_MS     100         /* an id copied this recently is live */
#define KVT_TABLE_MIN_FAULTS  32
#define KVT_TABLE_MIN_HIT     0.7
#define KVT_TABLE_MIN_Z       6.0

extern const struct kvt_prof_source_ops kvt_src_tables;

/* From the launch scan (inside the hook): val[0..nr) the launch's pointer
 * values, slot[i] the heat range holding val[i] or -1; scal[0..nscal) its
 * scalar parameters, each (param index << 32 | value). */
void kvt_tables_on_launch(uint64_t func, const uint64_t *val, const int *slot, unsigned nr,
			  const uint64_t *scal, unsigned nscal);
/* From a sampled graph launch (profiler/evidence.c), a graph's kept
 * evidence: its kernel nodes named the device pointers tab[0..ntab) (at
 * most 16) beside tracked tensors, val[i] one of them where with[i] has
 * bit j set for tab[j]. Each tab[j] the tables source reads is paired
 * again with its tensors, as an eager launch naming them pairs them:
 * steps that run from graphs keep their tables paired. The arrays are read
 * with atomic loads (another thread may republish the graph). */
void kvt_tables_pair(const uint64_t *tab, unsigned ntab, const uint64_t *val,
		     const uint16_t *with, unsigned nr);
/* A table a server decoder rebuilt (profiler/decode.h): ids[0..bytes/4)
 * are the block ids the kernels that name device address dst read this
 * step, taken as a host-to-device copy of them into dst would be (the
 * step prefetch included: the caller runs kvt_step_after_copy). */
void kvt_tables_feed(uint64_t dst, const int32_t *ids, uint32_t bytes);
/* Whether an accepted layout credits heat range slot (lock-free). */
int kvt_tables_covers(int slot);

/* The step (tier/step.c), from the copy hook right after kvt_prof_on_copy:
 * the trusted tables this thread's copies have just completed (a bit per
 * table slot: its own copy and its lengths' both newer than the ones last
 * handed out, at the copy of whichever of the two the application's steps
 * copy last, as launches showed; each copy pair is handed to one thread
 * once), cleared. */
uint32_t kvt_tables_step_take(void);
/* fn(arg, chunk, hs, pages) for each 2 MiB chunk (its address, its heat
 * range slot, and which of its 32 pages of 64 KiB the named blocks cover,
 * bit i = bytes [i * 64 KiB, (i + 1) * 64 KiB)) that table T's last copy
 * names, trimmed by its lengths, on each KV base a launch paired it with,
 * by the accepted stride (a block's extent is the stride). A chunk may
 * come twice (bases that share chunks). pm: the caller's scratch of
 * KVT_TABLES_STEP_CHUNKS words, all 0, left all 0. Bounded work (the
 * copy's ids, a 4 KiB bitmap per distinct in-chunk offset of the bases);
 * no malloc, no locks. Returns the calls made. */
#define KVT_TABLES_STEP_CHUNKS (1u << 15)   /* chunks past one base a step may name (64 GiB) */
#define KVT_TABLES_PAGE_SHIFT  16           /* the pages' 64 KiB: the GPU's big page */
/* The page bits [p0, p1) of a chunk's mask (p0 < p1 <= 32). */
static inline uint32_t kvt_tables_pages(unsigned p0, unsigned p1)
{
	return (p1 >= 32 ? ~0u : (1u << p1) - 1) & ~((1u << p0) - 1);
}
unsigned kvt_tables_step_each(int T, void (*fn)(void *arg, uint64_t chunk, int hs, uint32_t pages),
			      void *arg, uint32_t *pm);

/* For tests and the counters. */
struct kvt_tables_info {
	uint64_t copies_read;     /* table copies whose ids were stamped */
	uint64_t pairs;           /* (base, table) pairs recorded */
	uint64_t accepted;        /* layouts accepted (and dropped: dropped) */
	uint64_t dropped;
	uint64_t credited;        /* chunks credited */
	uint64_t stride;          /* the stride of the last layout accepted, 0 = none */
	uint64_t trimmed;         /* copies stamped row by row, to each row's length */
	uint64_t windows_against; /* recheck windows that explained less than half */
	uint64_t relearned;       /* re-learns that took the stride dropped before */
	uint64_t shared;          /* layouts that took the stride another table on the same
				   * bases uses */
	uint64_t duels;           /* choices judged again beside near strides
				   * (tables_choose.h) */
	uint64_t declared;        /* learned strides a server decoder's declared one (its
				   * cache-write kernel's block stride) replaced */
};
void kvt_tables_info(struct kvt_tables_info *out);
/* Forget everything (fork child, tests). */
void kvt_tables_reset(void);

#endif
