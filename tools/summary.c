// SPDX-License-Identifier: MIT
/* The one-screen summary of trace files (see summary.h). */
#include <stdlib.h>
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

/* "key=N" or "key=N B" -> n (and b). 0 when it parses. */
static int info_nums(const char *v, uint64_t *n, uint64_t *b)
{
	unsigned long long x = 0, y = 0;
	int got = sscanf(v, "%llu %llu", &x, &y);
	*n = x;
	if (b)
		*b = y;
	return got >= 1 ? 0 : -1;
}

static void on_fallback(struct kvt_summary *s, const char *name, uint64_t n)
{
	unsigned i;
	for (i = 0; i < s->nr_fallback_names; i++)
		if (!strcmp(s->fallback_name[i], name))
			break;
	if (i == s->nr_fallback_names) {
		if (i == sizeof s->fallback / sizeof s->fallback[0])
			return;
		snprintf(s->fallback_name[i], sizeof s->fallback_name[i], "%.31s", name);
		s->nr_fallback_names++;
	}
	s->fallback[i] += n;
}

static void on_info(struct kvt_summary *s, const char *text, size_t len)
{
	char kv[1024], *v;                  /* migrate.step holds 17 counters */
	uint64_t n, b;
	if (len >= sizeof kv)
		return;
	memcpy(kv, text, len);
	kv[len] = 0;
	if (!(v = strchr(kv, '=')))
		return;
	*v++ = 0;
	kvt_moves_on_info(&s->moves, kv, v);
	if (!strncmp(kv, "place.", 6)) {
		for (unsigned p = 1; p < KVT_PLACE__COUNT; p++)
			if (!strcmp(kv + 6, kvt_placement_name(p)) && !info_nums(v, &n, &b)) {
				s->info_placed_nr[p] += n;
				s->info_placed_bytes[p] += b;
			}
		if (!strcmp(kv, "place.rehomed") && !info_nums(v, &n, NULL))
			s->rehomed += n;
	} else if (!strncmp(kv, "fallback.", 9) && !info_nums(v, &n, NULL)) {
		on_fallback(s, kv + 9, n);
	} else if (!strcmp(kv, "migrate.enabled")) {
		s->info_files++;
	} else if (!strcmp(kv, "migrate.epochs") && !info_nums(v, &n, NULL)) {
		s->epochs += n;
	} else if (!strcmp(kv, "migrate.late_epochs") && !info_nums(v, &n, NULL)) {
		s->late_epochs += n;
	} else if (!strcmp(kv, "migrate.promoted") && !info_nums(v, &n, &b)) {
		s->nr_promoted += n;
		s->bytes_promoted += b;
	} else if (!strcmp(kv, "migrate.demoted") && !info_nums(v, &n, &b)) {
		s->nr_demoted += n;
		s->bytes_demoted += b;
	} else if (!strcmp(kv, "migrate.chunks.hbm") && !info_nums(v, &n, NULL)) {
		s->chunks_hbm += n;
	} else if (!strcmp(kv, "migrate.chunks.far") && !info_nums(v, &n, NULL)) {
		s->chunks_far += n;
	} else if (!strcmp(kv, "migrate.stop") && !strncmp(v, "left", 4)) {
		if (!s->threads_left++)
			snprintf(s->left_note, sizeof s->left_note, "%s", v);
	} else if (!strcmp(kv, "evidence.floor")) {
		if (!s->floor_said++)
			snprintf(s->floor_note, sizeof s->floor_note, "%s", v);
	} else if (!strcmp(kv, "evidence.step_over_budget")) {
		if (!s->steps_said++)
			snprintf(s->steps_note, sizeof s->steps_note, "%s", v);
	} else if (!strcmp(kv, "migrate.devices")) {
		for (char *p = v, *e; *p; p = *e == ',' ? e + 1 : e) {      /* "0,1,3" */
			unsigned long d = strtoul(p, &e, 10);
			if (e == p)
				break;
			if (d < 64)
				s->devices |= 1ull << d;
		}
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
		else if (it.type == KVT_REC_INFO && it.text)
			on_info(s, it.text, it.text_len);
	}
	if (ret < 0)
		snprintf(err, errlen, "%s: %s", path, r.err);
	s->nr_files++;
	s->nr_unended += !r.saw_end;
	kvt_trace_reader_close(&r);
	return ret;
}

/* What kvtier itself said at exit: placements, fallbacks, migrations. */
static void print_info(const struct kvt_summary *s, FILE *f)
{
	char a[32], b[32];
	if (!s->info_files)
		return;
	fprintf(f, "  kvtier placed:");
	unsigned any = 0;
	for (unsigned p = 1; p < KVT_PLACE__COUNT; p++)
		if (s->info_placed_nr[p]) {
			fprintf(f, "%s %s %llu (%s)", any++ ? "," : "", kvt_placement_name(p),
				(unsigned long long)s->info_placed_nr[p],
				kvt_format_size(s->info_placed_bytes[p], a, sizeof a));
		}
	fprintf(f, "%s; re-homed to the far node %llu\n", any ? "" : " nothing",
		(unsigned long long)s->rehomed);
	fprintf(f, "  fallbacks:");
	any = 0;
	for (unsigned i = 0; i < s->nr_fallback_names; i++)
		if (s->fallback[i])
			fprintf(f, "%s %s %llu", any++ ? "," : "", s->fallback_name[i],
				(unsigned long long)s->fallback[i]);
	fprintf(f, "%s\n", any ? "" : " none");
	fprintf(f, "  migration: %llu epochs, the migrator promoted %s (%llu chunks), demoted %s"
		" (%llu chunks); at exit %llu chunks in HBM, %llu far\n", (unsigned long long)s->epochs,
		kvt_format_size(s->bytes_promoted, a, sizeof a), (unsigned long long)s->nr_promoted,
		kvt_format_size(s->bytes_demoted, b, sizeof b), (unsigned long long)s->nr_demoted,
		(unsigned long long)s->chunks_hbm, (unsigned long long)s->chunks_far);
	if (s->late_epochs)
		fprintf(f, "  migration: %llu of the epochs started late (over 4 periods after the one "
			"before: the thread was starved of CPU or held in a slow driver call)\n",
			(unsigned long long)s->late_epochs);
	kvt_moves_print_summary(&s->moves, f);
	if (s->devices) {
		fprintf(f, "  migration served device%s", s->devices & (s->devices - 1) ? "s" : "");
		for (unsigned d = 0, k = 0; d < 64; d++)
			if (s->devices >> d & 1)
				fprintf(f, "%s%u", k++ ? "," : " ", d);
		fprintf(f, "\n");
	}
	if (s->threads_left)
		fprintf(f, "  migration thread left at exit: %u of %u process%s (%s)\n",
			s->threads_left, s->info_files, s->info_files == 1 ? "" : "es", s->left_note);
	/* the floor's notices (tier/floor.h), again at the end of the run */
	if (s->floor_said)
		fprintf(f, "  notice (%u of %u process%s): a KV pool larger than the HBM budget with no "
			"evidence finer than the allocation is expected to run below the same server "
			"with the pool that fits: size the pool to fit HBM (%s)\n", s->floor_said,
			s->info_files, s->info_files == 1 ? "" : "es", s->floor_note);
	if (s->steps_said)
		fprintf(f, "  notice (%u of %u process%s): steps needed more HBM than the budget leaves "
			"them, as when a larger pool lets the server run a larger batch: cap the "
			"server's running requests (%s)\n", s->steps_said, s->info_files,
			s->info_files == 1 ? "" : "es", s->steps_note);
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
	print_info(s, f);
	if (s->nr_dropped)
		fprintf(f, "  WARNING: %llu events were lost (trace write errors)\n",
			(unsigned long long)s->nr_dropped);
	if (s->nr_unended)
		fprintf(f, "  note: %u trace file%s without an end record (process exec'd, "
			"killed, or still running)\n", s->nr_unended, s->nr_unended == 1 ? "" : "s");
}
