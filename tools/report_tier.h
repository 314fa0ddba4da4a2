/* SPDX-License-Identifier: MIT */
/* The tiers over time in `kvtier report` (docs/report.md, "tiering"): the
 * EPOCH records of the migration thread, per (trace, device), kept as
 * totals and as points for the charts, rebinned onto the report's
 * 100-bucket timeline when printed. Tool-side only; every field of a record
 * may be hostile: sums saturate, devices and points are bounded. */
#ifndef KVT_TOOLS_REPORT_TIER_H
#define KVT_TOOLS_REPORT_TIER_H

#include <stdint.h>
#include <stdio.h>

#include "kvtier/trace_format.h"

#define KVT_RPT_TIER_DEVS   32u          /* (trace, device) pairs kept */
#define KVT_RPT_TIER_POINTS (1u << 18)   /* epoch points kept for the charts */
#define KVT_RPT_TIER_BUCKETS 100u        /* = KVT_RPT_BUCKETS (checked in report_tier.c) */

struct kvt_report;
struct kvt_rpt_timeline;

struct kvt_rpt_tier_dev {
	uint32_t file;                  /* the trace's index in the report */
	int32_t device;                 /* CUdevice ordinal */
	uint64_t epochs, promoted, demoted, faults, failed;   /* totals over its records */
	uint64_t hbm_peak, budget_peak, budget_last;
	unsigned __int128 hbm_sum;      /* for the mean */
	uint64_t over_budget;           /* epochs that ended with residency above their budget */
	uint64_t t_first_ns, t_last_ns; /* report time of its first and last record */
};

struct kvt_rpt_tier_point {
	uint64_t t_ns, hbm_bytes, budget_bytes;
	uint32_t promoted, demoted, faults;
	uint32_t dev;                   /* index in devs[] */
};

struct kvt_rpt_tier {
	struct kvt_rpt_tier_dev devs[KVT_RPT_TIER_DEVS];
	uint32_t nr_devs;
	uint64_t nr_records;            /* EPOCH records read */
	uint64_t nr_dev_dropped;        /* records of pairs past KVT_RPT_TIER_DEVS: not counted */
	uint64_t nr_points_dropped;     /* counted in the totals, not charted */
	struct kvt_rpt_tier_point *pts;
	uint32_t nr_pts, cap_pts;
};

/* One device's series on the report's timeline (tl->nr buckets of
 * tl->bucket_ns): per bucket, the epochs that ended in it, the peak
 * residency among them and the budget of the last of them (both carried
 * over buckets without an epoch between the device's first and last
 * bucket with one, 0 outside them), and the chunks promoted and demoted
 * and the faults, summed. */
struct kvt_rpt_tier_series {
	uint32_t nr;
	uint32_t first, last;           /* buckets of its first and last epoch (nr, nr: none) */
	uint64_t epochs[KVT_RPT_TIER_BUCKETS], hbm_bytes[KVT_RPT_TIER_BUCKETS];
	uint64_t budget_bytes[KVT_RPT_TIER_BUCKETS], promoted[KVT_RPT_TIER_BUCKETS];
	uint64_t demoted[KVT_RPT_TIER_BUCKETS], faults[KVT_RPT_TIER_BUCKETS];
};

/* Scan side: one record at report time t_ns of trace `file`. 0 or -ENOMEM. */
int kvt_rpt_tier_add(struct kvt_rpt_tier *t, uint32_t file, uint64_t t_ns,
		     const struct kvt_rec_epoch *e);
void kvt_rpt_tier_free(struct kvt_rpt_tier *t);
void kvt_rpt_tier_series(const struct kvt_rpt_tier *t, uint32_t dev,
			 const struct kvt_rpt_timeline *tl, struct kvt_rpt_tier_series *s);
uint64_t kvt_rpt_tier_mean(const struct kvt_rpt_tier_dev *d);

/* The printers' parts (tools/report_tier_out.c). */
void kvt_rpt_tier_text(const struct kvt_report *r, FILE *f);
void kvt_rpt_tier_json(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f);
void kvt_rpt_tier_html(const struct kvt_report *r, const struct kvt_rpt_timeline *tl, FILE *f);

#endif
