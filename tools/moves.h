/* SPDX-License-Identifier: MIT */
/* Every move into and out of HBM, by cause, from the INFO counters kvtier
 * writes at exit (tier/migrator.c, tier/step.c): the migration thread's
 * epochs, the step prefetch on the application's stream, the driver's
 * fault-ins and its evictions. Read by the run summary and the report
 * (docs/report.md, "Moves into and out of HBM"). Tool-side only. */
#ifndef KVT_TOOLS_MOVES_H
#define KVT_TOOLS_MOVES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVT_MOVES_CHUNK_BYTES (2ull << 20)      /* a chunk (KVT_CHUNK_SHIFT) */
#define KVT_MOVES_PAGE_BYTES  (64ull << 10)     /* a step page (KVT_HEAT_PAGE_SHIFT) */

struct kvt_moves {
	unsigned nr_files;              /* traces with migrate.enabled=1 */
	unsigned nr_step_files;         /* of them, with a migrate.step record */
	unsigned nr_fault_files;        /* of them, with migrate.fault_ins */
	unsigned nr_driver_files;       /* of them, with migrate.evicted_bytes (CUPTI on) */
	/* migrate.promoted / migrate.demoted: "<chunks> <bytes>" */
	uint64_t mig_in, mig_in_bytes, mig_out, mig_out_bytes;
	/* migrate.step: promoted, pages (in); demoted, pages_out (out); steps */
	uint64_t step_in, step_in_pages, step_out, step_out_pages, steps;
	/* migrate.fault_ins, migrate.evicted_backs, migrate.refaults */
	uint64_t fault_ins, evicted_backs, refaults;
	/* migrate.fault_in_bytes, migrate.evicted_bytes: CUPTI's exact bytes */
	uint64_t fault_in_bytes, evicted_bytes;
};

/* One INFO record, key and value apart; 1 when it was one of the above. */
int kvt_moves_on_info(struct kvt_moves *m, const char *key, const char *val);
/* The same for an INFO record's text as the trace holds it ("key=value",
 * not NUL-terminated). */
int kvt_moves_on_record(struct kvt_moves *m, const char *text, size_t len);
/* The step prefetch's bytes each way (whole chunks plus pages apart). */
uint64_t kvt_moves_step_in_bytes(const struct kvt_moves *m);
uint64_t kvt_moves_step_out_bytes(const struct kvt_moves *m);

/* The report's table: a header line, one row per (direction, cause), totals. */
void kvt_moves_print_text(const struct kvt_moves *m, FILE *f);
/* The run summary's two lines ("  moves into HBM: ..."), nothing without counters. */
void kvt_moves_print_summary(const struct kvt_moves *m, FILE *f);
/* "hbm_moves":{...}, with no trailing comma. */
void kvt_moves_print_json(const struct kvt_moves *m, FILE *f);
/* <h2> and <table id="hbm-moves">. */
void kvt_moves_print_html(const struct kvt_moves *m, FILE *f);

#endif
