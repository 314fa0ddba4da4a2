/* SPDX-License-Identifier: MIT */
/* The model behind `kvtier report` (docs/report.md): one streaming pass over
 * one or more trace files fills it, then a printer writes text, JSON or
 * HTML. Memory grows with distinct call sites, stacks, modules and heat
 * chunks, never with the number of events. Tool-side only. */
#ifndef KVT_TOOLS_REPORT_H
#define KVT_TOOLS_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "report_tier.h"                /* struct kvt_rpt_tier */
#include "dwsym.h"
#include "moves.h"                 /* struct kvt_moves */
#include "summary.h"                    /* struct kvt_kind_sum */
#include "kvtier/api.h"
#include "kvtier/trace_format.h"

#define KVT_RPT_FINE      4096u         /* timeline buckets kept while streaming */
#define KVT_RPT_HEAT_COLS 64u           /* heat columns kept while streaming */
#define KVT_RPT_BUCKETS   100u          /* timeline buckets shown */
#define KVT_RPT_TOP       20u           /* call sites shown per table */
#define KVT_RPT_FRAMES    8u            /* frames kept per call site */
#define KVT_RPT_MAX_FAILS 64u           /* distinct (api, result) failure rows */
#define KVT_RPT_MAX_MARKS 64u           /* meminfo marks and bursts kept */
#define KVT_RPT_MAX_CHUNKS 4096u        /* heat rows kept */
#define KVT_RPT_CHUNK_SHIFT 21          /* 2 MiB heat chunks */
#define KVT_RPT_NO_MOD    UINT32_MAX
#define KVT_RPT_PY_FRAMES 8u            /* Python frames kept per call site */
#define KVT_RPT_CALLERS   128u          /* callers shown per call site (a stack's most) */

/* Timeline series: live bytes per kind, then per placement. */
#define KVT_RPT_SER_PLACE KVT_KIND__COUNT
#define KVT_RPT_NR_SER    (KVT_KIND__COUNT + KVT_PLACE__COUNT)

struct kvt_rpt_frame {
	uint32_t mod;                   /* index in modules[], or KVT_RPT_NO_MOD */
	uint64_t off;                   /* ip - bias (the raw ip without a module) */
};

struct kvt_rpt_pyframe {                /* a Python frame, names sanitized */
	char *func, *file;
	uint32_t line;
};

struct kvt_rpt_site {
	struct kvt_rpt_frame at;        /* the attributed frame: the key (native sites) */
	uint64_t nr, bytes, nr_failed;
	uint32_t nr_frames;             /* representative stack, innermost first, */
	struct kvt_rpt_frame frames[KVT_RPT_FRAMES];    /* ending at `at` */
	/* A Python site (nr_py > 0) is keyed by its innermost Python frame
	 * (function, file, line) instead; at/frames are the native frames of
	 * the first stack seen there. Innermost first. */
	uint32_t nr_py;
	struct kvt_rpt_pyframe py[KVT_RPT_PY_FRAMES];
};

/* A distinct full stack with allocations (report_stacks.c): its frames,
 * innermost first, as the trace has them (kvtier's own frames included;
 * printers hide them), and the site its allocations were counted at. Two
 * traces' identical stacks are one. */
struct kvt_rpt_stack {
	uint64_t first;                 /* index of its innermost frame in stk.frames */
	uint32_t nr_frames, site;
	uint64_t hash, nr, bytes;
};

struct kvt_rpt_stacks {
	struct kvt_rpt_stack *v;
	uint32_t nr, cap;
	struct kvt_rpt_frame *frames;   /* of every v[] */
	uint64_t nr_frames, cap_frames;
	uint32_t *hash, hash_cap;       /* (site, frames) -> index in v */
	uint64_t lost_nr, lost_bytes;   /* allocations whose stack could not be kept (no memory) */
	/* this trace: stack id -> its frames, and its v[] once it allocated */
	struct kvt_rpt_stack_id *ids;
	uint32_t ids_cap, nr_ids, ids_file;
	struct kvt_rpt_frame *id_frames;
	uint64_t nr_id_frames, cap_id_frames;
	/* for the printers (kvt_report_site_stack): per site, the heaviest */
	uint32_t *best, *count, nr_best;
};

struct kvt_rpt_module {
	char *path;
	int runtime;                    /* a runtime library: never the call site */
	int sym_state;                  /* 0 not tried, 1 loaded, -1 failed */
	struct kvt_dwsym *sym;
	uint64_t lo, hi;                /* mapped span in file addresses (first trace) */
	uint8_t build_id[KVT_TRACE_MAX_BUILD_ID];
	uint32_t build_id_len;          /* 0: none recorded (older trace, or no note) */
};

#define KVT_RPT_MAX_NOTES 64u

struct kvt_rpt_fail {
	uint16_t api;
	uint8_t kind;
	int32_t result;
	uint64_t nr, bytes;
};

struct kvt_rpt_bucket {
	int64_t delta[KVT_RPT_NR_SER];  /* change of live bytes in the bucket */
	uint64_t nr_events, nr_prefetch, alloc_bytes;
};

struct kvt_rpt_chunk {
	uint32_t file;
	uint64_t addr;                  /* 2 MiB aligned */
	uint64_t total, by_op[4];       /* copy, memset, launch, prefetch */
	uint32_t cnt[KVT_RPT_HEAT_COLS];
	uint64_t faults;                /* GPU faults (the trace's FAULTS records) */
	uint32_t fcnt[KVT_RPT_HEAT_COLS];
	uint64_t range_start, range_bytes;   /* the redirected allocation holding it */
	uint32_t site;                  /* that allocation's call site (0: unknown) */
};

struct kvt_rpt_mark {                   /* a meminfo event or a KV burst */
	uint32_t file;
	uint64_t t0_ns, t1_ns;
	uint64_t a, b;                  /* meminfo: free, total; burst: count, size */
};

struct kvt_rpt_range { uint64_t start, end, bytes; uint32_t site; };

/* Per-file scratch, reset for each trace. */
struct kvt_rpt_file {
	uint64_t base_ns;               /* start_mono_ns - report origin */
	struct { uint64_t start, end, bias; uint32_t mod; } *mods;
	uint32_t nr_mods, cap_mods;
	int last_mod_new;               /* the last MODULE record made a new global module */
	uint32_t *stack_key, *stack_site;   /* open addressing: stack id -> site */
	uint32_t stack_cap, nr_stack;
	struct kvt_rpt_range *ranges;   /* live redirected ranges, sorted */
	uint32_t nr_ranges, cap_ranges;
	int in_segment;                 /* a meminfo was seen: look for a burst */
	struct kvt_rpt_mark run, best;  /* current and biggest same-size run */
	uint64_t nr_bad_time;           /* events and epochs stamped past KVT_RPT_MAX_T_NS: left out */
	uint64_t first_bad_off;         /* the file offset of the first of them */
};

struct kvt_report {
	unsigned nr_files, nr_unended;
	uint64_t nr_events, nr_stacks, nr_dropped, end_ns, origin_ns;
	uint64_t by_op[KVT_OP__COUNT];
	struct kvt_kind_sum kind[KVT_KIND__COUNT];
	uint64_t place_nr[KVT_PLACE__COUNT], place_bytes[KVT_PLACE__COUNT];
	uint64_t hist_nr[65], hist_bytes[65];           /* by floor(log2(size)) */
	struct kvt_rpt_fail fails[KVT_RPT_MAX_FAILS];
	uint32_t nr_fails;
	uint64_t nr_fail_other;
	struct kvt_rpt_module *mods;
	uint32_t nr_mods, cap_mods;
	struct kvt_rpt_site *sites;     /* sites[0]: allocations without a stack */
	uint32_t nr_sites, cap_sites;
	uint32_t *site_hash, site_hash_cap;         /* native sites */
	uint32_t *py_hash, py_hash_cap, nr_py_sites;   /* Python sites (report_py.c) */
	uint64_t width_ns;              /* of one fine bucket; doubles as needed */
	struct kvt_rpt_bucket fine[KVT_RPT_FINE];
	struct kvt_rpt_chunk *chunks;
	uint32_t nr_chunks, cap_chunks, *chunk_hash, chunk_hash_cap;
	uint64_t nr_heat_dropped, nr_heat_events;
	uint64_t nr_faults, nr_fault_chunks_lost;   /* FAULTS records: faults counted, and of
						     * them outside any live redirected range
						     * or past the row limit */
	struct kvt_rpt_mark meminfo[KVT_RPT_MAX_MARKS], bursts[KVT_RPT_MAX_MARKS];
	uint32_t nr_meminfo, nr_bursts;
	uint64_t nr_meminfo_total;
	int progress;                   /* print a progress line on stderr */
	int value_count;                /* --value count: folded values are allocations */
	struct kvt_rpt_tier tier;       /* EPOCH records: the tiers over time */
	struct kvt_moves moves;         /* INFO counters: moves into and out of HBM */
	struct kvt_rpt_stacks stk;      /* full stacks (report_stacks.c) */
	const char *debuginfo_path;     /* libdwfl's; NULL: its default */
	char *notes[KVT_RPT_MAX_NOTES]; /* warnings for the reader (symbolization) */
	uint32_t nr_notes;
	struct kvt_rpt_file cur;
};

/* Timeline rebinned for printing. */
struct kvt_rpt_timeline {
	uint64_t bucket_ns;
	uint32_t nr;
	int64_t live[KVT_RPT_BUCKETS][KVT_RPT_NR_SER];
	uint64_t nr_events[KVT_RPT_BUCKETS], nr_prefetch[KVT_RPT_BUCKETS];
	uint32_t heat_cols;             /* heat columns in use */
	uint64_t heat_col_ns;
};

int kvt_report_init(struct kvt_report *r, char *const *paths, int nr_paths,
		    char *err, size_t errlen);
/* Add one trace file: 0, or -errno with the reader's message in err. */
int kvt_report_add(struct kvt_report *r, const char *path, char *err, size_t errlen);
void kvt_report_free(struct kvt_report *r);

/* report_py.c: a PYSTACK record re-attributes its stack id (already mapped
 * to a native site by its STACK record) to the Python site of its innermost
 * frame. An id without a STACK is ignored. 0 or -ENOMEM. */
struct kvt_trace_pyframe;
int kvt_rpt_on_pystack(struct kvt_report *r, const struct kvt_rec_pystack *ps,
		       const struct kvt_trace_pyframe *fr);
void kvt_rpt_py_free(struct kvt_report *r);
/* report_scan.c: this file's site slot of stack id, or NULL when unknown. */
uint32_t *kvt_rpt_stack_slot(struct kvt_report *r, uint32_t id);
/* report_scan.c: the frame of ip in the current trace's modules. */
struct kvt_rpt_frame kvt_rpt_frame_of(const struct kvt_rpt_file *f, uint64_t ip);
/* report_stacks.c: a STACK record's frames (ips: n u64, 4-byte aligned), and
 * a successful allocation of that stack id counted at site. 0 or -ENOMEM
 * (an allocation whose stack could not be kept is counted as lost). */
int kvt_rpt_stacks_on_stack(struct kvt_report *r, uint32_t id, const void *ips, uint32_t n);
void kvt_rpt_stacks_on_alloc(struct kvt_report *r, uint32_t id, uint32_t site, uint64_t size);
void kvt_rpt_stacks_free(struct kvt_report *r);
/* report_scan.c: room for one more site (sites may move). 0 or -ENOMEM. */
int kvt_rpt_grow_sites(struct kvt_report *r);

/* Queries used by the printers (report_out.c). */
void kvt_report_timeline(const struct kvt_report *r, struct kvt_rpt_timeline *tl);
/* Indices of the top n sites by bytes (by_count = 0) or count; returns how many. */
uint32_t kvt_report_top(const struct kvt_report *r, int by_count, uint32_t *idx, uint32_t n);
/* "function" of a frame (symbolized on first use, demangled; the innermost
 * inlined one) or NULL; module basename. */
const char *kvt_report_func(struct kvt_report *r, const struct kvt_rpt_frame *f,
			    uint64_t *sym_off);
/* Everything known about a frame (NULL: nothing). Valid until the next
 * call with another frame. */
const struct kvt_dwsym_loc *kvt_report_loc(struct kvt_report *r, const struct kvt_rpt_frame *f);
/* Open the modules of every site the printers show, before printing, so
 * that their notes are known first. */
void kvt_report_symbolize(struct kvt_report *r);
/* Add a note (also printed on stderr as "kvtier report: warning: ..."). */
void kvt_report_note(struct kvt_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *kvt_report_mod_name(const struct kvt_report *r, uint32_t mod);
/* Chunk rows sorted by (file, addr) into idx; returns nr_chunks. */
uint32_t kvt_report_chunk_order(const struct kvt_report *r, uint32_t *idx);

/* report_stacks.c: the heaviest stack (by bytes) counted at site, or NULL;
 * *nr_stacks: how many distinct stacks the site has. */
const struct kvt_rpt_stack *kvt_report_site_stack(struct kvt_report *r, uint32_t site,
						  uint32_t *nr_stacks);
/* kvtier's own frame (module libkvtier*): hidden in every printed stack. */
int kvt_report_frame_hidden(const struct kvt_report *r, const struct kvt_rpt_frame *f);
/* The callers of site in stack st, outward from the site's frame, kvtier's
 * frames left out, into out (at most max); returns how many. */
uint32_t kvt_report_callers(const struct kvt_report *r, const struct kvt_rpt_stack *st,
			    uint32_t site, const struct kvt_rpt_frame **out, uint32_t max);
/* Flame-graph input ("root;...;leaf VALUE" per stack; report_stacks.c). */
int kvt_report_print_folded(struct kvt_report *r, FILE *f, int by_count);
/* The same lines, unprinted: frames root first, separated by ';' (none in a
 * name), sorted (strcmp), each distinct once with its bytes or count (no
 * line of value 0). *v malloc'd (free with kvt_report_folded_free); 0 or
 * -ENOMEM. */
struct kvt_rpt_folded { char *line; uint64_t v; };
int kvt_report_folded(struct kvt_report *r, int by_count, struct kvt_rpt_folded **v,
		      uint32_t *nr);
void kvt_report_folded_free(struct kvt_rpt_folded *v, uint32_t nr);

/* report_diff.c: `--diff A B`, run a against run b, text or JSON. */
int kvt_report_print_diff(struct kvt_report *a, struct kvt_report *b, const char *name_a,
			  const char *name_b, int json, FILE *f);
/* The whole of `kvtier report --diff A B`: each of A and B a trace, a run's
 * directory or a run id (tools/runs.h); the exit status. */
int kvt_report_diff_cmd(const char *a, const char *b, const char *fmt, const char *out,
			int quiet, const char *debuginfo);

int kvt_report_print_text(struct kvt_report *r, FILE *f);
int kvt_report_print_json(struct kvt_report *r, FILE *f);
int kvt_report_print_html(struct kvt_report *r, FILE *f);

#endif
