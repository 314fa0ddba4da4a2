/* SPDX-License-Identifier: MIT */
/* The live stats segment, version 5 (2 added the Python call-site counters, 3 room for 8 evidence sources, 4 the KV ranges by evidence class, 5 the per-device budget, HBM bytes, faults and link bytes, 6 the driver's own moves per device): what a process running under kvtier
 * publishes in /dev/shm/kvtier.<pid> (mode 0600) and `kvtier stat` reads.
 * Shared by the writer (place/stats.c) and the reader (tools/cmd_stat.c).
 * Fixed layout, no pointers; names travel with the counters. A reader
 * copies the struct between two reads of `seq` (even and equal: consistent). */
#ifndef KVTIER_STATS_FORMAT_H
#define KVTIER_STATS_FORMAT_H

#include <stdint.h>

#define KVT_STATS_MAGIC     0x3154415453544b56ull    /* "VKTSTAT1" little-endian */
#define KVT_STATS_VERSION   6u
#define KVT_STATS_DIR       "/dev/shm"
#define KVT_STATS_PREFIX    "kvtier."                /* then the decimal pid */

#define KVT_STATS_KINDS     8      /* enum kvt_kind (trace_format.h) */
#define KVT_STATS_PLACES    8      /* enum kvt_placement */
#define KVT_STATS_FALLBACKS 16     /* enum kvt_fallback (place/place.h) */
#define KVT_STATS_SOURCES   8      /* enum kvt_prof_src (profiler/evidence.h) */
#define KVT_STATS_PY_FALLBACKS 4   /* enum kvt_py_fallback (profiler/pyframes.h) */
#define KVT_STATS_EVC       8      /* enum kvt_evc (profiler/evclass.h) */
#define KVT_STATS_DEVICES   8      /* devices the migration thread serves (tier/migrator.h) */
#define KVT_STATS_NAME      24

enum kvt_stats_flag {
	KVT_STATS_F_MIGRATE = 1u << 0,      /* KVTIER_MIGRATE=1 */
	KVT_STATS_F_TRACE   = 1u << 1,      /* a trace is being written */
	KVT_STATS_F_PLACING = 1u << 2,      /* the rules parsed: placement is on */
	KVT_STATS_F_CUPTI   = 1u << 3,      /* the cupti source is active: faults and link
					     * bytes are measured */
};

/* One device the migration thread serves, as its last epoch left it
 * (budget, HBM bytes: published with the epoch that derived them), and
 * CUPTI's counts for its redirected ranges (read at each publish). */
struct kvt_stats_dev {
	int32_t  device;                /* CUdevice ordinal */
	uint32_t pad;
	uint64_t epoch;                 /* the migrator epoch that set budget and hbm (0: none) */
	uint64_t budget_bytes;          /* the HBM budget in force: that epoch planned against it */
	uint64_t hbm_bytes;             /* redirected bytes believed in HBM after its moves */
	uint64_t faults;                /* GPU page faults on its redirected ranges (cumulative) */
	uint64_t link_to_hbm_bytes;     /* migrated host to device over the link (cumulative) */
	uint64_t link_to_far_bytes;     /* migrated device to host (cumulative) */
	uint64_t fault_in_bytes;        /* of link_to_hbm: brought in on GPU faults, not by a
					 * prefetch (cumulative) */
	uint64_t evicted_bytes;         /* of link_to_far: evicted by the driver (cumulative) */
};

struct kvt_stats_kind {             /* one enum kvt_kind */
	uint64_t nr, bytes;             /* allocations that succeeded (cumulative) */
	uint64_t nr_free, bytes_free;   /* released through a free call (cumulative) */
};

struct kvt_stats_place {            /* one enum kvt_placement */
	uint64_t nr, bytes;             /* placed so (cumulative; the trace's place.*) */
	uint64_t nr_live, bytes_live;   /* allocated so and not yet freed */
};

struct kvt_stats_seg {
	uint64_t magic;                 /* KVT_STATS_MAGIC */
	uint32_t version;               /* KVT_STATS_VERSION */
	uint32_t size;                  /* sizeof(struct kvt_stats_seg) written */
	uint64_t seq;                   /* odd while the writer is inside */
	int32_t  pid;
	uint32_t uid;
	uint32_t flags;                 /* enum kvt_stats_flag */
	int32_t  far_node;              /* -1: no far tier */
	char     comm[16];              /* the process name */
	uint64_t start_unix_ns;         /* CLOCK_REALTIME when kvtier started */
	uint64_t update_unix_ns;        /* CLOCK_REALTIME of the last publish */
	uint64_t uptime_ns;             /* CLOCK_MONOTONIC since start, at the last publish */
	uint64_t nr_publish;
	uint64_t pidns_ino;              /* the pid namespace the pid belongs to */

	struct kvt_stats_kind kind[KVT_STATS_KINDS];
	struct kvt_stats_place place[KVT_STATS_PLACES];
	uint64_t reg_nr_live, reg_bytes_live;   /* the registries (exact; partial unmaps included) */

	uint32_t nr_fallbacks, nr_sources;
	char     fallback_name[KVT_STATS_FALLBACKS][KVT_STATS_NAME];
	uint64_t fallback[KVT_STATS_FALLBACKS];
	uint64_t rehomed, node_mismatch;
	uint64_t hbm_budget_bytes;      /* the budgets in force (devices' sum), else placement's */

	uint64_t epochs;                /* migration (0 when the thread never ran) */
	uint64_t nr_promoted, bytes_promoted, nr_demoted, bytes_demoted;
	uint64_t prefetch_issued, prefetch_failed;
	uint64_t ranges_tracked, track_failed;
	uint64_t chunks_hbm, chunks_far;        /* counted each epoch */

	char     source_name[KVT_STATS_SOURCES][KVT_STATS_NAME];
	uint64_t evidence[KVT_STATS_SOURCES];   /* chunks credited, per source */

	uint64_t trace_events, trace_dropped, trace_write_errors;

	/* Python call sites: captures that got frames, and those that fell
	 * back to native frames only, per reason (named). */
	uint64_t py_captured;
	uint32_t nr_py_fallbacks, py_version;   /* 0x030b = 3.11; 0 none seen */
	char     py_fallback_name[KVT_STATS_PY_FALLBACKS][KVT_STATS_NAME];
	uint64_t py_fallback[KVT_STATS_PY_FALLBACKS];

	/* Tracked KV ranges and their bytes by the class of evidence settled
	 * for each (named, strongest first in evc_name order of the writer). */
	uint32_t nr_evc, evc_pad;
	char     evc_name[KVT_STATS_EVC][KVT_STATS_NAME];
	uint64_t evc_ranges[KVT_STATS_EVC], evc_bytes[KVT_STATS_EVC];

	/* Per device (version 5): nr_devices entries of dev[] are set. */
	uint32_t nr_devices, dev_pad;
	struct kvt_stats_dev dev[KVT_STATS_DEVICES];
};

#endif
