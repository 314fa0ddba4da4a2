// SPDX-License-Identifier: MIT
/* The tiering model of `kvtier report` (contract in report_tier.h): EPOCH
 * records folded into totals per (trace, device) and kept as points, then
 * rebinned onto the report's timeline for the printers. Values from the
 * trace are never trusted: sums saturate, indices are bounded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_tier.h"

_Static_assert(KVT_RPT_TIER_BUCKETS == KVT_RPT_BUCKETS,
	       "the tiering series share the report's timeline");

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* The pair's index, created at first sight; -1 past the limit. */
static int dev_index(struct kvt_rpt_tier *t, uint32_t file, int32_t device)
{
	for (uint32_t i = 0; i < t->nr_devs; i++)
		if (t->devs[i].file == file && t->devs[i].device == device)
			return (int)i;
	if (t->nr_devs == KVT_RPT_TIER_DEVS)
		return -1;
	struct kvt_rpt_tier_dev *d = &t->devs[t->nr_devs];
	memset(d, 0, sizeof *d);
	d->file = file;
	d->device = device;
	return (int)t->nr_devs++;
}

static void add_point(struct kvt_rpt_tier *t, uint32_t dev, uint64_t t_ns,
		      const struct kvt_rec_epoch *e)
{
	if (t->nr_pts == KVT_RPT_TIER_POINTS) {
		t->nr_points_dropped++;
		return;
	}
	if (t->nr_pts == t->cap_pts) {
		uint32_t cap = t->cap_pts ? t->cap_pts * 2 : 256;
		void *p = realloc(t->pts, (size_t)cap * sizeof *t->pts);
		if (!p) {
			t->nr_points_dropped++;
			return;
		}
		t->pts = p;
		t->cap_pts = cap;
	}
	t->pts[t->nr_pts++] = (struct kvt_rpt_tier_point){
		.t_ns = t_ns, .hbm_bytes = e->hbm_bytes, .budget_bytes = e->budget_bytes,
		.promoted = e->nr_promoted, .demoted = e->nr_demoted, .faults = e->nr_faults,
		.dev = dev,
	};
}

int kvt_rpt_tier_add(struct kvt_rpt_tier *t, uint32_t file, uint64_t t_ns,
		     const struct kvt_rec_epoch *e)
{
	t->nr_records++;
	int i = dev_index(t, file, e->device);
	if (i < 0) {
		t->nr_dev_dropped++;
		return 0;
	}
	struct kvt_rpt_tier_dev *d = &t->devs[i];
	if (!d->epochs || t_ns < d->t_first_ns)
		d->t_first_ns = t_ns;
	if (t_ns > d->t_last_ns)
		d->t_last_ns = t_ns;
	d->epochs++;
	d->promoted = sat_add(d->promoted, e->nr_promoted);
	d->demoted = sat_add(d->demoted, e->nr_demoted);
	d->faults = sat_add(d->faults, e->nr_faults);
	d->failed = sat_add(d->failed, e->nr_failed);
	d->hbm_sum += e->hbm_bytes;
	if (e->hbm_bytes > d->hbm_peak)
		d->hbm_peak = e->hbm_bytes;
	if (e->budget_bytes > d->budget_peak)
		d->budget_peak = e->budget_bytes;
	d->budget_last = e->budget_bytes;
	d->over_budget += e->hbm_bytes > e->budget_bytes;
	add_point(t, (uint32_t)i, t_ns, e);
	return 0;
}

void kvt_rpt_tier_free(struct kvt_rpt_tier *t)
{
	free(t->pts);
	t->pts = NULL;
	t->nr_pts = t->cap_pts = 0;
}

uint64_t kvt_rpt_tier_mean(const struct kvt_rpt_tier_dev *d)
{
	return d->epochs ? (uint64_t)(d->hbm_sum / d->epochs) : 0;
}

/* The bucket of report time t (the last one for times past the span). */
static uint32_t bucket_of(const struct kvt_rpt_timeline *tl, uint64_t t)
{
	uint64_t b = tl->bucket_ns ? t / tl->bucket_ns : 0;
	return b < tl->nr ? (uint32_t)b : tl->nr - 1;
}

void kvt_rpt_tier_series(const struct kvt_rpt_tier *t, uint32_t dev,
			 const struct kvt_rpt_timeline *tl, struct kvt_rpt_tier_series *s)
{
	memset(s, 0, sizeof *s);
	s->nr = tl->nr < KVT_RPT_TIER_BUCKETS ? tl->nr : KVT_RPT_TIER_BUCKETS;
	s->first = s->last = s->nr;
	if (!s->nr)
		return;
	uint64_t last_hbm[KVT_RPT_TIER_BUCKETS], last_t[KVT_RPT_TIER_BUCKETS];
	memset(last_t, 0, sizeof last_t);
	memset(last_hbm, 0, sizeof last_hbm);
	for (uint32_t i = 0; i < t->nr_pts; i++) {
		const struct kvt_rpt_tier_point *p = &t->pts[i];
		if (p->dev != dev)
			continue;
		uint32_t b = bucket_of(tl, p->t_ns);
		if (b >= s->nr)
			b = s->nr - 1;
		if (!s->epochs[b] || p->hbm_bytes > s->hbm_bytes[b])
			s->hbm_bytes[b] = p->hbm_bytes;
		if (!s->epochs[b] || p->t_ns >= last_t[b]) {
			last_t[b] = p->t_ns;
			last_hbm[b] = p->hbm_bytes;
			s->budget_bytes[b] = p->budget_bytes;
		}
		s->epochs[b]++;
		s->promoted[b] = sat_add(s->promoted[b], p->promoted);
		s->demoted[b] = sat_add(s->demoted[b], p->demoted);
		s->faults[b] = sat_add(s->faults[b], p->faults);
	}
	for (uint32_t b = 0; b < s->nr; b++) {
		if (!s->epochs[b])
			continue;
		s->first = s->first < s->nr ? s->first : b;
		s->last = b;
	}
	/* buckets without an epoch, between the first and the last, carry the
	 * last residency and budget */
	uint64_t hbm = 0, budget = 0;
	for (uint32_t b = s->first; b < s->nr && b <= s->last; b++) {
		if (s->epochs[b]) {
			hbm = last_hbm[b];
			budget = s->budget_bytes[b];
		} else {
			s->hbm_bytes[b] = hbm;
			s->budget_bytes[b] = budget;
		}
	}
}
