/* SPDX-License-Identifier: MIT */
/* Dead KV dropped (tier/discard.c; docs/profiler.md "Dead blocks"). The
 * server decoders name the byte ranges of KV blocks a step takes fresh
 * (profiler/decode.h, kvt_decode_take_dead): their old contents are dead.
 * Right after the launch that revealed them, and before the step's
 * kernels write those blocks, they are dropped with cuMemDiscardBatchAsync
 * on the launch's stream (for the legacy default stream, on a blocking
 * stream of the device, which orders the same way): the driver then
 * moves nothing for them, whichever way they next migrate (a prefetch
 * into HBM, a fault, an eviction). Nothing while the stream is being
 * captured, nothing when the driver has no such call (before CUDA 13) or
 * KVTIER_DISCARD=0. A call that fails stops it for the process, with one
 * warning. Runs in the launch hook: no malloc, no locks. */
#ifndef KVT_DISCARD_H
#define KVT_DISCARD_H

#include <stdint.h>

/* From the launch hooks after a decoder's launch (kvt_step_after_copy). */
void kvt_discard_step(uint64_t stream);

struct kvt_discard_info {
	uint64_t calls;             /* batches the driver took */
	uint64_t ranges, bytes;     /* dead ranges dropped, their bytes */
	uint64_t skipped;           /* ranges left (capturing, no driver call, off) */
	uint64_t failed;            /* batches the driver refused */
};
void kvt_discard_info(struct kvt_discard_info *out);
/* "migrate.discard" in the trace: the counters. */
void kvt_discard_trace_counters(void);
void kvt_discard_reset(void);

#endif
