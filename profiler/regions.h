/* SPDX-License-Identifier: MIT */
/* Adaptive regions in the DAMON manner (profiler/regions.c), for the sample
 * source (profiler/src_sample.c): pure arithmetic on a caller-owned table of
 * regions over the 2 MiB chunks of tracked ranges. No CUDA, no system calls,
 * no allocation; every operation is O(regions), never O(chunks).
 *
 * The table is sorted by (range, first chunk), and the regions of one range
 * cover its chunks exactly once, in order. One region stands for chunks
 * assumed to be used alike; one chunk per region is sampled per pass, and at
 * each aggregation adjacent regions whose access counts are close merge and
 * (while the table is at most half full) every region splits in two at a
 * random chunk, so the regions follow where accesses differ. */
#ifndef KVT_REGIONS_H
#define KVT_REGIONS_H

#include <stdint.h>

#define KVT_REGIONS_MAX  1024      /* the table's size: the cost bound */
#define KVT_REGIONS_INIT 4         /* regions a newly tracked range starts with */

struct kvt_region {
	uint32_t first, nr;        /* chunks [first, first + nr) of its range */
	uint16_t range;            /* the range's heat-table slot */
	uint8_t nr_accesses;       /* samples found accessed, this aggregation */
	uint8_t nr_unknown;        /* samples that could not be taken, this aggregation */
	uint8_t last;              /* the previous aggregation's (estimated) count */
	uint8_t pad[3];
};

struct kvt_region_set {
	uint32_t nr, max;          /* regions in use; max <= KVT_REGIONS_MAX */
	uint32_t min;              /* merges keep regions <= all chunks / min */
	uint64_t rng;              /* xorshift state: same seed, same regions */
	struct kvt_region r[KVT_REGIONS_MAX];
};

/* What one sample showed. */
enum kvt_region_seen { KVT_REGION_IDLE, KVT_REGION_ACCESSED, KVT_REGION_UNKNOWN };

/* Empty set of at most max regions (clamped to 1..KVT_REGIONS_MAX); merges
 * stop at all chunks / min chunks a region (min >= 1), so that at least
 * about min regions are sampled. */
void kvt_regions_init(struct kvt_region_set *s, uint32_t max, uint32_t min, uint64_t seed);

/* A range of nr_chunks chunks joins as up to KVT_REGIONS_INIT equal
 * regions; when the table is full, the closest neighbours are merged to
 * make room. 0, -EEXIST (range already has regions), -EINVAL (no chunks),
 * -ENOSPC (every range already down to one region). */
int kvt_regions_add(struct kvt_region_set *s, uint16_t range, uint32_t nr_chunks);
/* Forget the regions of a range (it was untracked). Returns how many. */
uint32_t kvt_regions_drop(struct kvt_region_set *s, uint16_t range);
/* Does the set hold regions of this range? */
int kvt_regions_has(const struct kvt_region_set *s, uint16_t range);

/* A chunk of region i chosen uniformly at random (its index in the range). */
uint32_t kvt_regions_pick(struct kvt_region_set *s, uint32_t i);
/* Count one sample of region i. */
void kvt_regions_account(struct kvt_region_set *s, uint32_t i, enum kvt_region_seen seen);

/* End of an aggregation of nr_passes samples per region: each region's
 * count (samples that could not be taken are estimated from the previous
 * aggregation) becomes `last`; adjacent regions of one range whose counts
 * differ by at most a tenth of the largest merge (size-weighted count, no
 * bigger than all chunks / min); then, while at most half the
 * table is used, every region of two or more chunks splits in two at a
 * random chunk. The counts restart from 0. */
void kvt_regions_aggregate(struct kvt_region_set *s, uint32_t nr_passes);

/* The invariants: sorted, no region empty, each range's regions contiguous
 * from chunk 0; with nr_chunks (indexed by range, may be NULL) also that
 * they end exactly at the range's last chunk. 0, or -EINVAL. */
int kvt_regions_check(const struct kvt_region_set *s, const uint32_t *nr_chunks);

/* The region holding chunk `chunk` of `range`, or -1 (binary search). */
int kvt_regions_find(const struct kvt_region_set *s, uint16_t range, uint32_t chunk);

#endif
