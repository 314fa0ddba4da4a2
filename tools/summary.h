/* SPDX-License-Identifier: MIT */
/* Aggregates one or more trace files into the numbers of the one-screen
 * summary (kvtier run / report). Streaming: memory does not grow with the
 * number of events. */
#ifndef KVT_TOOLS_SUMMARY_H
#define KVT_TOOLS_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "moves.h"
#include "kvtier/api.h"
#include "kvtier/trace_format.h"

struct kvt_kind_sum {
	uint64_t nr, bytes, failed;        /* allocations that succeeded / failed */
	uint64_t nr_free, live, peak_live; /* bytes live now and at the peak */
};

struct kvt_summary {
	unsigned nr_files, nr_unended;
	uint64_t nr_events, nr_stacks, nr_dropped, duration_ns;
	uint64_t by_op[KVT_OP__COUNT];
	uint64_t by_api[KVT_API__COUNT];
	uint64_t placed_bytes[KVT_PLACE__COUNT];
	struct kvt_kind_sum kind[KVT_KIND__COUNT];
	/* From the INFO records kvtier writes at exit (place.*, fallback.*,
	 * migrate.*), summed over the files; info_files counts those that had them. */
	unsigned info_files, nr_fallback_names;
	uint64_t info_placed_nr[KVT_PLACE__COUNT], info_placed_bytes[KVT_PLACE__COUNT];
	uint64_t rehomed;
	char fallback_name[16][32];
	uint64_t fallback[16];
	uint64_t epochs, late_epochs, nr_promoted, bytes_promoted, nr_demoted, bytes_demoted;
	uint64_t chunks_hbm, chunks_far;
	uint64_t devices;       /* bit d: a process served device d (migrate.devices; d < 64) */
	/* processes whose migration thread did not stop at exit (migrate.stop
	 * "left ..."), and the first one's note */
	unsigned threads_left;
	char left_note[160];
	/* kvtier's floor notices (evidence.floor, evidence.step_over_budget;
	 * tier/floor.h): the processes that gave each, and the first one's
	 * values */
	unsigned floor_said, steps_said;
	char floor_note[160], steps_note[160];
	struct kvt_moves moves;         /* every move into and out of HBM, by cause */
};

/* Add one trace file; 0, or -errno with a message in err. */
int kvt_summary_add(struct kvt_summary *s, const char *path, char *err, size_t errlen);
void kvt_summary_print(const struct kvt_summary *s, FILE *f);

#endif
