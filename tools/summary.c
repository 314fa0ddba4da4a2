// SPDX-License-Identifier: MIT
/* The one-screen summary of trace files (see summary.h). */
#include <string.h>

#include "summary.h"
#include "kvtier/units.h"
#include "../profiler/trace_read.h"

static void on_event(struct kvt_summary *s, const struct kvt_rec_event *ev)
{
	if (ev->op < KVT_OP__COUNT)
		s->by_op[ev->op]++;
	if (ev->api < KVT_API__COUNT)
		s->by_api[ev->api]++;
	if (ev->t_ns > s->duration_ns)
		s->duration_ns = ev->t_ns;
	if (ev->kind >= KVT_KIND__COUNT)
		return;
	if (ev->op == KVT_OP_ADVISE && ev->api != KVT_API_none)
		return;
	struct kvt_kind_sum *k = &s->kind[ev->kind];
	if (ev->op == KVT_OP_ALLOC) {
		if (ev->result != 0 || !ev->addr) {
			k->failed++;
			return;
		}
		k->nr++;
		k->bytes += ev->size;
		k->live += ev->size;
		if (k->live > k->peak_live)
			k->peak_live = k->live;
		if (ev->placement < KVT_PLACE__COUNT)
			s->placed_bytes[ev->placement] += ev->size;
	} else if (ev->op == KVT_OP_ADVISE && ev->api == KVT_API_none) {
		/* kvtier re-homed a provisional managed:hbm allocation to the far node */
		uint64_t moved = ev->size < s->placed_bytes[KVT_PLACE_MANAGED_HBM] ?
				 ev->size : s->placed_bytes[KVT_PLACE_MANAGED_HBM];
		s->placed_bytes[KVT_PLACE_MANAGED_HBM] -= moved;
		s->placed_bytes[KVT_PLACE_MANAGED_FAR] += moved;
	} else if (ev->op == KVT_OP_FREE && ev->result == 0) {
		k->nr_free++;
		k->live -= ev->size < k->live ? ev->size : k->live;
	}
}

int kvt_summary_add(struct kvt_summary *s, const char *path, char *err, size_t errlen)
{
	static struct kvt_trace_reader r;    /* 64 KiB record buffer: not on the stack */
	struct kvt_trace_item it;
	int ret = kvt_trace_reader_open(&r, path);
	if (ret) {
		snprintf(err, errlen, "%s", r.err);
		kvt_trace_reader_close(&r);
		return ret;
	}
	while ((ret = kvt_trace_next(&r, &it)) > 0) {
		if (it.ev)
			on_event(s, it.ev);
		else if (it.stack)
			s->nr_stacks++;
		else if (it.end)
			s->nr_dropped += it.end->nr_dropped;
	}
	if (ret < 0)
		snprintf(err, errlen, "%s: %s", path, r.err);
	s->nr_files++;
	s->nr_unended += !r.saw_end;
	kvt_trace_reader_close(&r);
	return ret;
}

void kvt_summary_print(const struct kvt_summary *s, FILE *f)
{
	char a[32], b[32], c[32];
	uint64_t nev = 0;
	for (unsigned i = 0; i < KVT_OP__COUNT; i++)
		nev += s->by_op[i];
	fprintf(f, "kvtier summary: %u trace file%s, %llu events, %llu distinct call stacks\n",
		s->nr_files, s->nr_files == 1 ? "" : "s", (unsigned long long)nev,
		(unsigned long long)s->nr_stacks);
	fprintf(f, "  %-9s %8s %12s %12s %8s %7s\n", "kind", "allocs", "bytes",
		"peak live", "frees", "failed");
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		const struct kvt_kind_sum *ks = &s->kind[k];
		if (!ks->nr && !ks->failed && !ks->nr_free)
			continue;
		fprintf(f, "  %-9s %8llu %12s %12s %8llu %7llu\n", kvt_kind_name(k),
			(unsigned long long)ks->nr, kvt_format_size(ks->bytes, a, sizeof a),
			kvt_format_size(ks->peak_live, b, sizeof b),
			(unsigned long long)ks->nr_free, (unsigned long long)ks->failed);
	}
	fprintf(f, "  placement:");
	for (unsigned p = 0; p < KVT_PLACE__COUNT; p++)
		if (s->placed_bytes[p] || p == KVT_PLACE_NATIVE)
			fprintf(f, " %s %s", kvt_placement_name(p),
				kvt_format_size(s->placed_bytes[p], c, sizeof c));
	fprintf(f, "\n  other events:");
	for (unsigned o = KVT_OP_MEMSET; o < KVT_OP__COUNT; o++)
		if (s->by_op[o] && o != KVT_OP_FREE)
			fprintf(f, " %s %llu", kvt_op_name(o), (unsigned long long)s->by_op[o]);
	fprintf(f, "\n");
	if (s->nr_dropped)
		fprintf(f, "  WARNING: %llu events were lost (trace write errors)\n",
			(unsigned long long)s->nr_dropped);
	if (s->nr_unended)
		fprintf(f, "  note: %u trace file%s without an end record (process exec'd, "
			"killed, or still running)\n", s->nr_unended, s->nr_unended == 1 ? "" : "s");
}
