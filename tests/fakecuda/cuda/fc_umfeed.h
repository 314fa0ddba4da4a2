/* SPDX-License-Identifier: MIT */
/* The unified-memory record feed between the SIMULATED driver (libcuda.so.1)
 * and the CUPTI stand-in (libcupti.so.13), which finds these two functions
 * with dlsym. Test-only; mirrors what CUPTI's UM counters report. */
#ifndef FC_UMFEED_H
#define FC_UMFEED_H

#include <stddef.h>
#include <stdint.h>

struct fakecuda_um_record {
	uint32_t counter_kind;   /* CUpti_ActivityUnifiedMemoryCounterKind */
	uint32_t flags;          /* fault access type, or migration cause */
	uint64_t address;        /* faulting page / first byte migrated */
	uint64_t value;          /* bytes, or number of fault groups */
	uint64_t start_ns, end_ns;  /* virtual clock */
	uint32_t src_id, dst_id; /* device ordinal or host node */
};

/* Start (1) or stop (0) recording; returns the previous state. */
typedef int (*fakecuda_um_feed_enable_fn)(int on);
/* Move up to max records into out; returns how many; *dropped (if non-NULL)
 * gets the records lost to overflow since the last call. With out NULL it
 * moves nothing and returns how many records are waiting. */
typedef size_t (*fakecuda_um_feed_read_fn)(struct fakecuda_um_record *out,
					   size_t max, uint64_t *dropped);

#endif
