// SPDX-License-Identifier: MIT
/* Issue 45's report views, each against numbers read here from the trace
 * itself: the moves into and out of HBM by cause (text, JSON, HTML and the
 * `kvtier run` summary equal kvtier's INFO counters; a made-up trace with
 * the operator review's counters shows them all), full call stacks (the
 * top site's callers down to _start, no libkvtier frame), the folded
 * flame-graph export (lines parse, root first, sum to the bytes and the
 * count of the allocations) and `--diff` (a run against itself is all
 * zeros; against another, the change is the difference of the totals).
 * Traces: serve-like under `kvtier run` with migration on the SIMULATED
 * device (fault-ins, evictions, step prefetches), vllm-like natively at
 * KV = 1x and 2x. */
#include <inttypes.h>
#include <stdint.h>
#include <dirent.h>

#include "unit/kvt_test.h"
#include "unit/kvt_report_test.h"
#include "unit/kvt_trace_test.h"
#include "../profiler/trace_read.h"
#include "kvtier/api.h"

static char tmpdir[] = "/tmp/kvt-views-XXXXXX";
static char serve_trace[600], v1_trace[600], v2_trace[600], synth_trace[600];
static char serve_counters[600];        /* the stand-in's own move counters at exit */
static char *run_summary;               /* kvtier run's stderr for serve_trace */
static struct kvt_child rc;

static const char *tmp_path(const char *name)
{
	return kvt_tmp_path(tmpdir, name);
}

/* ---- traces ---- */

static int find_file(const char *prefix, char *out, size_t len)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int found = -1;
	while (d && found && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			snprintf(out, len, "%s/%s", tmpdir, e->d_name);
			found = 0;
		}
	if (d)
		closedir(d);
	return found;
}

/* serve-like over a 4x pool under `kvtier run`, paced: every mover works. */
static int run_serve(void)
{
	char lib[700], tr[700], ctr[700];
	snprintf(lib, sizeof lib, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	snprintf(tr, sizeof tr, "%s", tmp_path("serve.%p.trace"));
	snprintf(serve_counters, sizeof serve_counters, "%s", tmp_path("device-counters"));
	snprintf(ctr, sizeof ctr, "FAKECUDA_COUNTERS_AT_EXIT=%s", serve_counters);
	const char *argv[] = { kvt_path("kvtier"), "run", "--trace", tr, "--",
			       kvt_path("workloads/serve-like"), "--alt", "kvtier", "--pool-over-hbm",
			       "4", "--requests", "30", "--quiet", NULL };
	const char *env[] = { lib, "FAKECUDA_PACE=2", ctr, NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code) {
		fprintf(stderr, "serve run failed (%d): %.2000s\n", rc.exit_code, rc.err);
		return -1;
	}
	run_summary = strdup(rc.err);
	return run_summary ? find_file("serve.", serve_trace, sizeof serve_trace) : -1;
}

static int run_vllm(char *out, const char *name, const char *kv)
{
	char tr[700], lib[700], pre[700];
	snprintf(out, 600, "%s", tmp_path(name));
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s", out);
	snprintf(lib, sizeof lib, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", kvt_path("libkvtier.so"));
	const char *argv[] = { kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			       kv, "--quiet", NULL };
	const char *env[] = { tr, lib, pre, "KVTIER_POLICY=", "KVTIER_MIGRATE=0", NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code) {
		fprintf(stderr, "vllm-like failed (%d): %.2000s\n", rc.exit_code, rc.err);
		return -1;
	}
	return 0;
}

/* The operator review's counters (E8) in a trace of INFO records only. */
static const char *const synth_info[] = {
	"kvtier.version=0.1.0",
	"migrate.enabled=1",
	"migrate.promoted=4 8388608",
	"migrate.demoted=590 1237319680",
	"migrate.step=steps=1092 named=104623 promoted=1026 pages=499 demoted=741 pages_out=12 "
	"trims=3 trims_wide=0 asks_judged=0 no_room=0 over_cap=0 busy=0 capturing=0 failed=0",
	"migrate.fault_ins=1015",
	"migrate.evicted_backs=33",
	"migrate.refaults=602",
	NULL,
};

static int make_synth(void)
{
	struct kvt_trace_header h;
	FILE *in = fopen(v1_trace, "rb");
	int ok = in && fread(&h, sizeof h, 1, in) == 1;
	if (in)
		fclose(in);
	snprintf(synth_trace, sizeof synth_trace, "%s", tmp_path("synth.trace"));
	FILE *f = ok ? fopen(synth_trace, "wb") : NULL;
	if (!f)
		return -1;
	fwrite(&h, sizeof h, 1, f);
	for (int i = 0; synth_info[i]; i++) {
		struct kvt_rec_head rh = { KVT_REC_INFO, (uint16_t)(sizeof rh + strlen(synth_info[i])) };
		fwrite(&rh, sizeof rh, 1, f);
		fwrite(synth_info[i], strlen(synth_info[i]), 1, f);
	}
	struct kvt_rec_end end = { { KVT_REC_END, sizeof end }, 0, 0, 0, 0 };
	fwrite(&end, sizeof end, 1, f);
	return fclose(f) ? -1 : 0;
}

static int suite_init(void)
{
	if (!mkdtemp(tmpdir))
		return -1;
	return run_serve() || run_vllm(v1_trace, "v1.trace", "1") ||
	       run_vllm(v2_trace, "v2.trace", "2") || make_synth() ? -1 : 0;
}

static int suite_clean(void)
{
	char cmd[700];
	free(run_summary);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- what the trace says, read here ---- */

struct moves {
	uint64_t mig_in, mig_in_bytes, mig_out, mig_out_bytes;
	uint64_t step_in, step_pages, step_out, step_pages_out;
	uint64_t fault_ins, evicted_backs;
	uint64_t fault_in_bytes, evicted_bytes;     /* UINT64_MAX: not in the trace */
};

/* "name=N" inside the value of key's INFO line. */
static uint64_t info_field(const char *infos, const char *key, const char *name)
{
	char k[128];
	snprintf(k, sizeof k, "\n%s=", key);
	const char *p = strstr(infos, k), *eol;
	if (!p)
		return UINT64_MAX;
	eol = strchr(p + 1, '\n');
	snprintf(k, sizeof k, " %s=", name);
	const char *q = strstr(p, k);
	if (!q && !strncmp(p + strlen(key) + 2, name, strlen(name)))
		q = p + strlen(key) + 1;        /* the first field */
	return q && (!eol || q < eol) ? strtoull(q + strlen(k), NULL, 10) : UINT64_MAX;
}

static int read_moves(const char *trace, struct moves *m)
{
	static char infos[1 << 16];
	if (kvt_trace_infos(trace, infos, sizeof infos))
		return -1;
	m->mig_in = kvt_out_u64(infos + 1, "migrate.promoted");
	m->mig_out = kvt_out_u64(infos + 1, "migrate.demoted");
	const char *p = strstr(infos, "\nmigrate.promoted=");
	m->mig_in_bytes = p ? strtoull(strchr(p, ' ') + 1, NULL, 10) : UINT64_MAX;
	p = strstr(infos, "\nmigrate.demoted=");
	m->mig_out_bytes = p ? strtoull(strchr(p, ' ') + 1, NULL, 10) : UINT64_MAX;
	m->step_in = info_field(infos, "migrate.step", "promoted");
	m->step_pages = info_field(infos, "migrate.step", "pages");
	m->step_out = info_field(infos, "migrate.step", "demoted");
	m->step_pages_out = info_field(infos, "migrate.step", "pages_out");
	m->fault_ins = kvt_out_u64(infos + 1, "migrate.fault_ins");
	m->evicted_backs = kvt_out_u64(infos + 1, "migrate.evicted_backs");
	m->fault_in_bytes = kvt_out_u64(infos + 1, "migrate.fault_in_bytes");
	m->evicted_bytes = kvt_out_u64(infos + 1, "migrate.evicted_bytes");
	return 0;
}

/* Successful allocations: count and bytes; per stack id, bytes. */
struct allocs {
	uint64_t nr, bytes;
	uint64_t stack_bytes[4096];     /* by stack id (the traces here have few) */
};

static void read_allocs(const char *trace, struct allocs *a)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	memset(a, 0, sizeof *a);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&rd, trace), 0);
	while (kvt_trace_next(&rd, &it) > 0)
		if (it.ev && it.ev->op == KVT_OP_ALLOC && !it.ev->result && it.ev->addr &&
		    it.ev->kind > 0 && it.ev->kind < KVT_KIND__COUNT) {
			a->nr++;
			a->bytes += it.ev->size;
			if (it.ev->stack_id < 4096)
				a->stack_bytes[it.ev->stack_id] += it.ev->size;
		}
	kvt_trace_reader_close(&rd);
}

/* ---- 1. moves into and out of HBM, by cause ---- */

/* The numbers of a text row after marker: chunks (past an optional ">="),
 * pages and bytes; "-" reads as UINT64_MAX. */
static void text_row(const char *sec, const char *marker, uint64_t v[3])
{
	const char *p = strstr(sec, marker);
	v[0] = v[1] = v[2] = UINT64_MAX - 1;
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p += strlen(marker);
	for (int i = 0; i < 3; i++) {
		while (*p == ' ' || *p == '>' || *p == '=')
			p++;
		if (*p == '-') {
			v[i] = UINT64_MAX;
			p++;
		} else {
			v[i] = strtoull(p, (char **)&p, 10);
		}
	}
}

static uint64_t json_move(const char *js, const char *dir, const char *cause, const char *field)
{
	char d[64], c[64], f[64];
	snprintf(d, sizeof d, "\"%s\":{", dir);
	snprintf(c, sizeof c, "\"%s\":{", cause);
	snprintf(f, sizeof f, "\"%s\":", field);
	return kvt_num_after(js, (const char *const[]){ "\"hbm_moves\":{", d, c, f, NULL });
}

/* Cell `cell` of an HTML row (3: chunks, after "&#8805; " for a lower
 * bound; 5: bytes); "-" reads as UINT64_MAX - 1. */
static uint64_t html_cell(const char *h, const char *id, int cell)
{
	char k[96];
	snprintf(k, sizeof k, "<tr id=\"%s\">", id);
	const char *p = strstr(h, k);
	if (!p)
		return UINT64_MAX;
	for (int i = 0; i < cell && p; i++)
		if ((p = strstr(p + 1, "<td>")))
			p += 4;
	if (p && !strncmp(p, "&#8805; ", 8))
		p += 8;
	if (p && *p == '-')
		return UINT64_MAX - 1;
	return p ? strtoull(p, NULL, 10) : UINT64_MAX;
}

static uint64_t html_move(const char *h, const char *id)
{
	return html_cell(h, id, 3);
}

/* The report of a trace in the three formats, each checked present. */
struct views { char *txt, *js, *html; };

static void views_of(const char *trace, struct views *v)
{
	v->txt = kvt_report_run(&rc, tmpdir, "text", trace, NULL);
	v->js = kvt_report_run(&rc, tmpdir, "json", trace, NULL);
	v->html = kvt_report_run(&rc, tmpdir, "html", trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v->txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v->js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v->html);
}

static void views_free(struct views *v)
{
	free(v->txt);
	free(v->js);
	free(v->html);
}

static void check_moves(const char *trace, const struct moves *m)
{
	struct views vw;
	views_of(trace, &vw);
	char *txt = vw.txt, *js = vw.js, *html = vw.html;
	const char *sec = strstr(txt, "\nmoves into and out of HBM, by cause");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sec);
	uint64_t v[3];
	text_row(sec, "into HBM   migrator", v);
	CU_ASSERT_EQUAL(v[0], m->mig_in);
	CU_ASSERT_EQUAL(v[2], m->mig_in_bytes);
	text_row(sec, "into HBM   step prefetch", v);
	CU_ASSERT_EQUAL(v[0], m->step_in);
	CU_ASSERT_EQUAL(v[1], m->step_pages);
	CU_ASSERT_EQUAL(v[2], m->step_in * (2ull << 20) + m->step_pages * (64ull << 10));
	int drv = m->evicted_bytes != UINT64_MAX;       /* CUPTI counted the driver's moves */
	text_row(sec, "into HBM   fault-in", v);
	if (!drv || m->fault_ins)
		CU_ASSERT_EQUAL(v[0], m->fault_ins);
	CU_ASSERT_EQUAL(v[2], drv ? m->fault_in_bytes : UINT64_MAX);   /* bytes only from CUPTI */
	text_row(sec, "out of HBM migrator", v);
	CU_ASSERT_EQUAL(v[0], m->mig_out);
	CU_ASSERT_EQUAL(v[2], m->mig_out_bytes);
	text_row(sec, "out of HBM step prefetch", v);
	CU_ASSERT_EQUAL(v[0], m->step_out);
	CU_ASSERT_EQUAL(v[1], m->step_pages_out);
	text_row(sec, "out of HBM driver eviction", v);
	CU_ASSERT_EQUAL(v[0], drv ? UINT64_MAX : m->evicted_backs);   /* bytes, or a lower bound */
	CU_ASSERT_EQUAL(v[2], drv ? m->evicted_bytes : UINT64_MAX);

	CU_ASSERT_EQUAL(json_move(js, "into_hbm", "migrator", "chunks"), m->mig_in);
	CU_ASSERT_EQUAL(json_move(js, "into_hbm", "migrator", "bytes"), m->mig_in_bytes);
	CU_ASSERT_EQUAL(json_move(js, "into_hbm", "step_prefetch", "chunks"), m->step_in);
	CU_ASSERT_EQUAL(json_move(js, "into_hbm", "step_prefetch", "pages"), m->step_pages);
	CU_ASSERT_EQUAL(json_move(js, "into_hbm", "fault_in", "chunks"), m->fault_ins);
	CU_ASSERT_EQUAL(json_move(js, "out_of_hbm", "migrator", "chunks"), m->mig_out);
	CU_ASSERT_EQUAL(json_move(js, "out_of_hbm", "step_prefetch", "chunks"), m->step_out);
	CU_ASSERT_EQUAL(json_move(js, "out_of_hbm", "step_prefetch", "pages"), m->step_pages_out);
	if (drv) {
		CU_ASSERT_EQUAL(json_move(js, "out_of_hbm", "driver_eviction", "bytes"),
				m->evicted_bytes);
		CU_ASSERT_EQUAL(json_move(js, "into_hbm", "fault_in", "bytes"), m->fault_in_bytes);
		CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"driver_eviction\":{\"chunks\":null,"));
	} else {
		CU_ASSERT_EQUAL(json_move(js, "out_of_hbm", "driver_eviction", "chunks"),
				m->evicted_backs);
	}

	CU_ASSERT_EQUAL(html_move(html, "move-in-migrator"), m->mig_in);
	CU_ASSERT_EQUAL(html_move(html, "move-in-step_prefetch"), m->step_in);
	CU_ASSERT_EQUAL(html_move(html, "move-in-fault_in"), m->fault_ins);
	CU_ASSERT_EQUAL(html_move(html, "move-out-migrator"), m->mig_out);
	CU_ASSERT_EQUAL(html_move(html, "move-out-step_prefetch"), m->step_out);
	CU_ASSERT_EQUAL(html_move(html, "move-out-driver_eviction"),
			drv ? UINT64_MAX - 1 : m->evicted_backs);
	if (drv)
		CU_ASSERT_EQUAL(html_cell(html, "move-out-driver_eviction", 5), m->evicted_bytes);
	views_free(&vw);
}

static void test_moves_serve(void)
{
	struct moves m;
	CU_ASSERT_EQUAL_FATAL(read_moves(serve_trace, &m), 0);
	fprintf(stderr, "\n  serve-like: in: migrator %" PRIu64 ", step %" PRIu64 " + %" PRIu64
		" pages, fault-in %" PRIu64 "; out: migrator %" PRIu64 ", step %" PRIu64
		", evicted back %" PRIu64 "\n", m.mig_in, m.step_in, m.step_pages, m.fault_ins,
		m.mig_out, m.step_out, m.evicted_backs);
	/* the stand-in faults chunks in at 4x: a report without them is wrong */
	CU_ASSERT(m.fault_ins > 0 && m.fault_ins != UINT64_MAX);
	CU_ASSERT(m.step_in != UINT64_MAX && m.evicted_backs != UINT64_MAX);
	check_moves(serve_trace, &m);
	/* kvtier run's summary: the same counters */
	const char *in = strstr(run_summary, "\n  moves into HBM:");
	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	CU_ASSERT_EQUAL(kvt_num_after(in, (const char *const[]){ "migrator", NULL }), m.mig_in);
	CU_ASSERT_EQUAL(kvt_num_after(in, (const char *const[]){ "step prefetch", NULL }), m.step_in);
	CU_ASSERT_EQUAL(kvt_num_after(in, (const char *const[]){ "(+", NULL }), m.step_pages);
	CU_ASSERT_EQUAL(kvt_num_after(in, (const char *const[]){ "fault-in", NULL }), m.fault_ins);
	const char *out = strstr(run_summary, "\n  moves out of HBM:");
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_EQUAL(kvt_num_after(out, (const char *const[]){ "migrator", NULL }), m.mig_out);
	CU_ASSERT_EQUAL(kvt_num_after(out, (const char *const[]){ "step prefetch", NULL }), m.step_out);
	/* CUPTI was on: the driver's evictions and fault-ins in bytes, exactly
	 * what the stand-in moved for those causes over the whole run */
	CU_ASSERT_FATAL(m.evicted_bytes != UINT64_MAX && m.fault_in_bytes != UINT64_MAX);
	char *dev = kvt_slurp(serve_counters, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	uint64_t ev = kvt_out_u64(dev, "bytes_evicted"), fi = kvt_out_u64(dev, "bytes_fault_in");
	fprintf(stderr, "  driver: evicted %" PRIu64 " B (device %" PRIu64 "), fault-in %" PRIu64
		" B (device %" PRIu64 ")\n", m.evicted_bytes, ev, m.fault_in_bytes, fi);
	CU_ASSERT(ev > 0 && ev != UINT64_MAX);
	CU_ASSERT_EQUAL(m.evicted_bytes, ev);
	CU_ASSERT_EQUAL(m.fault_in_bytes, fi);
	free(dev);
	const char *de = strstr(out, "driver eviction ");     /* a size, not a lower bound */
	CU_ASSERT(de && de[16] >= '1' && de[16] <= '9');
}

static void test_moves_review_counters(void)
{
	struct moves m;
	CU_ASSERT_EQUAL_FATAL(read_moves(synth_trace, &m), 0);
	CU_ASSERT_EQUAL(m.step_in, 1026);               /* read here as the report must */
	CU_ASSERT_EQUAL(m.fault_ins, 1015);
	check_moves(synth_trace, &m);
	char *txt = kvt_report_run(&rc, tmpdir, "text", synth_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	/* 4 + 1026 + 1015 chunks in, 590 + 741 + 33 out */
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "total into HBM 2045 chunks + 499 pages; "
				      "out of HBM >= 1364 chunks + 12 pages"));
	free(txt);
	/* a trace without migration says so instead of a table of zeros */
	txt = kvt_report_run(&rc, tmpdir, "text", v1_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\n  no migration counters in the traces"));
	free(txt);
}

/* ---- 2. full stacks, kvtier's frames hidden ---- */

static int is_runtime(const char *path)
{
	static const char *const prefixes[] = {
		"libcudart", "libcuda.", "libcuda-", "libkvtier", "libc.so", "libc-",
		"libpthread", "libdl.", "libdl-", "ld-linux", "linux-vdso",
	};
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
		if (!strncmp(base, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

/* The heaviest stack of the top site by bytes, read from the trace: how
 * many callers it has past the site, leaving out libkvtier's frames, and
 * how many libkvtier frames it has in all. */
static void expected_callers(const char *trace, unsigned *nr_callers, unsigned *nr_kvtier)
{
	static struct kvt_trace_reader rd;
	static struct allocs a;
	static struct { uint32_t id, n; uint64_t ips[128]; } st[512];
	static struct { uint64_t start, end; char path[256]; } mods[512];
	unsigned nst = 0, nmods = 0;
	struct kvt_trace_item it;
	read_allocs(trace, &a);
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&rd, trace), 0);
	while (kvt_trace_next(&rd, &it) > 0) {
		if (it.stack && nst < 512) {
			st[nst].id = it.stack->id;
			st[nst].n = it.stack->nr_frames < 128 ? it.stack->nr_frames : 128;
			memcpy(st[nst].ips, it.ips, st[nst].n * 8);
			nst++;
		} else if (it.mod && nmods < 512) {
			mods[nmods].start = it.mod->start;
			mods[nmods].end = it.mod->end;
			snprintf(mods[nmods].path, sizeof mods[nmods].path, "%.*s", (int)it.text_len,
				 it.text);
			nmods++;
		}
	}
	kvt_trace_reader_close(&rd);
	/* each stack's site frame: the first outside the runtime libraries */
	uint64_t site_ip[512], site_bytes[512];
	unsigned site_at[512];
	for (unsigned i = 0; i < nst; i++) {
		site_at[i] = 0;
		for (unsigned j = 0; j < st[i].n; j++) {
			const char *path = "";
			for (unsigned k = 0; k < nmods; k++)
				if (st[i].ips[j] >= mods[k].start && st[i].ips[j] < mods[k].end)
					path = mods[k].path;
			if (!*path || !is_runtime(path)) {
				site_at[i] = j;
				break;
			}
		}
		site_ip[i] = st[i].ips[site_at[i]];
	}
	unsigned top = 0;
	for (unsigned i = 0; i < nst; i++) {    /* site bytes, then the heaviest stack of the top site */
		site_bytes[i] = 0;
		for (unsigned j = 0; j < nst; j++)
			if (site_ip[j] == site_ip[i] && st[j].id < 4096)
				site_bytes[i] += a.stack_bytes[st[j].id];
	}
	for (unsigned i = 1; i < nst; i++)
		if (site_bytes[i] > site_bytes[top] ||
		    (site_bytes[i] == site_bytes[top] && site_ip[i] == site_ip[top] &&
		     a.stack_bytes[st[i].id] > a.stack_bytes[st[top].id]))
			top = i;
	*nr_callers = *nr_kvtier = 0;
	for (unsigned j = 0; j < st[top].n; j++) {
		int kvt = 0;
		for (unsigned k = 0; k < nmods; k++)
			if (st[top].ips[j] >= mods[k].start && st[top].ips[j] < mods[k].end &&
			    strstr(mods[k].path, "/libkvtier"))
				kvt = 1;
		*nr_kvtier += kvt;
		*nr_callers += j > site_at[top] && !kvt;
	}
}

static void test_stacks(void)
{
	unsigned want, nr_kvtier;
	expected_callers(serve_trace, &want, &nr_kvtier);
	fprintf(stderr, "\n  top site: %u callers in the trace, %u libkvtier frames\n", want,
		nr_kvtier);
	CU_ASSERT(want >= 2);                   /* main and what started it */
	CU_ASSERT(nr_kvtier >= 1);              /* the hook's frame is in the trace ... */
	char *txt = kvt_report_run(&rc, tmpdir, "text", serve_trace, NULL);
	char *js = kvt_report_run(&rc, tmpdir, "json", serve_trace, NULL);
	char *html = kvt_report_run(&rc, tmpdir, "html", serve_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	char *sec = strstr(txt, "\ntop call sites by bytes");
	char *end = sec ? strstr(sec, "\ntop call sites by count") : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(end);
	*end = 0;
	CU_ASSERT_PTR_NULL(strstr(sec, "libkvtier"));       /* ... and shown nowhere */
	/* site 1's lines: its label, then one "from" line per caller */
	char *row = strstr(sec, "\n    1 ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(row);
	char *next = strstr(row, "\n    2 ");
	if (next)
		*next = 0;
	unsigned n = 0;
	for (char *p = row; (p = strstr(p, "   from ")); p++)
		n++;
	CU_ASSERT_EQUAL(n, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(row, "   from main (serve-like+"));
	CU_ASSERT_PTR_NOT_NULL(strstr(row, "   from _start ("));
	/* JSON: the first site's callers start at main; no libkvtier frame */
	const char *j = strstr(js, "\"top_sites_by_bytes\":[");
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"callers\":[{\"function\":\"main\""));
	const char *jend = strstr(j, "\"timeline\":");
	CU_ASSERT(!strstr(j, "libkvtier") || (jend && strstr(j, "libkvtier") > jend));
	/* HTML: the same callers, no libkvtier */
	const char *h = strstr(html, "<table id=\"sites-bytes\">");
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	const char *hend = strstr(h, "</table>");
	CU_ASSERT(!strstr(h, "libkvtier") || strstr(h, "libkvtier") > hend);
	CU_ASSERT(strstr(h, "from main (serve-like+") && strstr(h, "from main (serve-like+") < hend);
	free(txt);
	free(js);
	free(html);
}

/* ---- 3. folded stacks ---- */

/* Each line "f1;f2;...;fn VALUE": no empty frame, no libkvtier frame;
 * lines distinct; the values' sum. -1 on a bad line. */
static int64_t folded_sum(const char *s, const char **biggest)
{
	uint64_t sum = 0, max = 0;
	const char *prev = NULL;
	size_t prev_len = 0;
	for (const char *p = s; *p;) {
		const char *eol = strchr(p, '\n');
		const char *sp = NULL;
		if (!eol)
			return -1;
		for (const char *q = p; q < eol; q++)
			if (*q == ' ')
				sp = q;
		if (!sp || sp == p || sp[-1] == ';' || *p == ';')
			return -1;
		for (const char *q = p; q + 1 < sp; q++)
			if (q[0] == ';' && q[1] == ';')
				return -1;
		char *e;
		uint64_t v = strtoull(sp + 1, &e, 10);
		if (e != eol || !v)
			return -1;
		if (prev && prev_len == (size_t)(sp - p) && !memcmp(prev, p, prev_len))
			return -1;              /* the same stack twice */
		if (memmem(p, (size_t)(sp - p), "libkvtier", 9) ||
		    memmem(p, (size_t)(sp - p), "hook_", 5))
			return -1;
		if (v > max) {
			max = v;
			*biggest = p;
		}
		prev = p;
		prev_len = (size_t)(sp - p);
		sum += v;
		p = eol + 1;
	}
	return (int64_t)sum;
}

static void test_folded(void)
{
	static struct allocs a;
	const char *trace[] = { serve_trace, v2_trace };
	for (int t = 0; t < 2; t++) {
		read_allocs(trace[t], &a);
		char *fb = kvt_report_run(&rc, tmpdir, "folded", trace[t], NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
		const char *big = NULL;
		CU_ASSERT_EQUAL(folded_sum(fb, &big), (int64_t)a.bytes);
		CU_ASSERT_PTR_NOT_NULL_FATAL(big);
		/* root first: _start, libc's start, the program, the allocating call last */
		CU_ASSERT_EQUAL(strncmp(big, "_start;", 7), 0);
		const char *m = strstr(big, ";__libc_start_call_main;"), *eol = strchr(big, '\n');
		CU_ASSERT(m && m < eol);
		/* the biggest stack of both programs ends in the runtime's cudaMalloc */
		const char *sp = memrchr(big, ' ', (size_t)(eol - big));
		const char *leaf = sp ? memrchr(big, ';', (size_t)(sp - big)) : NULL;
		CU_ASSERT(leaf && sp - leaf == 11 && !memcmp(leaf, ";cudaMalloc", 11));
		/* kvtier's hook has the name of the call it wraps: hidden, it is
		 * not a second cudaMalloc above the runtime's */
		CU_ASSERT(leaf && (leaf - big < 11 || memcmp(leaf - 11, ";cudaMalloc", 11)));
		free(fb);
		/* --value count: the lines sum to the allocations */
		const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--format", "folded",
				       "--value", "count", trace[t], NULL };
		CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, argv, NULL), 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		CU_ASSERT_EQUAL(folded_sum(rc.out, &big), (int64_t)a.nr);
	}
	const char *bad[] = { kvt_path("kvtier"), "report", "--format", "folded", "--value", "pages",
			      v1_trace, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, bad, NULL), 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *help[] = { kvt_path("kvtier"), "report", "--help", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, help, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "folded"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "the bytes allocated"));
}

/* ---- 4. --diff ---- */

static char *diff_json(const char *a, const char *b)
{
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--diff", a, b, "--format", "json",
			       "-o", tmp_path("diff.json"), NULL };
	if (kvt_run(&rc, argv, NULL) || rc.exit_code) {
		fprintf(stderr, "diff: %d %s\n", rc.exit_code, rc.err);
		return NULL;
	}
	return kvt_slurp(tmp_path("diff.json"), NULL);
}

/* Sum of every "key":N (signed) in s; their count into *n. */
static int64_t sum_key(const char *s, const char *key, unsigned *n)
{
	int64_t sum = 0;
	*n = 0;
	for (const char *p = s; (p = strstr(p, key)); (*n)++) {
		p += strlen(key);
		sum += strtoll(p, NULL, 10);
	}
	return sum;
}

static void test_diff_self(void)
{
	char *js = diff_json(serve_trace, serve_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	unsigned n, n2;
	int64_t bsum = 0, nsum = 0;
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"change\":{\"bytes\":0,\"count\":0}"));
	/* every row: zero change, and A equal to B */
	for (const char *p = js; (p = strstr(p, "\"bytes_change\":")); p++)
		bsum += llabs(strtoll(p + 15, NULL, 10));
	for (const char *p = js; (p = strstr(p, "\"count_change\":")); p++)
		nsum += llabs(strtoll(p + 15, NULL, 10));
	CU_ASSERT_EQUAL(bsum, 0);
	CU_ASSERT_EQUAL(nsum, 0);
	static struct allocs a;
	read_allocs(serve_trace, &a);
	CU_ASSERT_EQUAL(sum_key(js, "\"bytes_a\":", &n), (int64_t)a.bytes);
	CU_ASSERT_EQUAL(sum_key(js, "\"bytes_b\":", &n2), (int64_t)a.bytes);
	CU_ASSERT(n >= 2 && n == n2);
	free(js);
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--diff", serve_trace, serve_trace,
			       NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, argv, NULL), 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	char want[64];
	snprintf(want, sizeof want, "(%u sites, 0 changed)", n);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, want));
}

static void test_diff_runs(void)
{
	static struct allocs a, b;
	read_allocs(v1_trace, &a);
	read_allocs(v2_trace, &b);
	CU_ASSERT(b.bytes > a.bytes);           /* KV 2x against 1x */
	char *js = diff_json(v1_trace, v2_trace);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	unsigned n;
	int64_t want = (int64_t)(b.bytes - a.bytes);
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"change\":{\"bytes\":", NULL }),
			(uint64_t)want);
	CU_ASSERT_EQUAL(sum_key(js, "\"bytes_change\":", &n), want);
	CU_ASSERT_EQUAL(sum_key(js, "\"bytes_a\":", &n), (int64_t)a.bytes);
	CU_ASSERT_EQUAL(sum_key(js, "\"bytes_b\":", &n), (int64_t)b.bytes);
	CU_ASSERT_EQUAL(sum_key(js, "\"count_change\":", &n), (int64_t)(b.nr - a.nr));
	/* sorted by the absolute change, the biggest first and not zero */
	int64_t last = INT64_MAX, first = 0;
	int sorted = 1;
	for (const char *p = js; (p = strstr(p, "\"bytes_change\":")); p++) {
		int64_t v = llabs(strtoll(p + 15, NULL, 10));
		if (last == INT64_MAX)
			first = v;
		sorted &= v <= last;
		last = v;
	}
	CU_ASSERT(sorted);
	CU_ASSERT(first > 0);
	free(js);
	/* the text's first row is the JSON's first row */
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--diff", v1_trace, v2_trace, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, argv, NULL), 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	const char *row = strstr(rc.out, "\n    1 ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(row);
	uint64_t ba, bb;
	CU_ASSERT_EQUAL(sscanf(row, " %*u %" SCNu64 " %" SCNu64, &ba, &bb), 2);
	CU_ASSERT_EQUAL((int64_t)(bb - ba), first);
	/* usage: two runs, text or json */
	const char *one[] = { kvt_path("kvtier"), "report", "--diff", v1_trace, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, one, NULL), 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *html[] = { kvt_path("kvtier"), "report", "--diff", v1_trace, v2_trace, "--format",
			       "html", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, html, NULL), 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
}

/* ---- 5. the fault heat map ---- */

/* The FAULTS records of a trace, summed here: the GPU faults kvtier saw,
 * read without the report's code. */
static uint64_t trace_faults(const char *trace, uint64_t *records)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	uint64_t sum = 0;
	*records = 0;
	CU_ASSERT_EQUAL_FATAL(kvt_trace_reader_open(&rd, trace), 0);
	while (kvt_trace_next(&rd, &it) > 0) {
		if (!it.faults)
			continue;
		(*records)++;
		for (uint32_t k = 0; k < it.faults->nr; k++) {
			sum += it.fault_entries[k].nr;
			CU_ASSERT_EQUAL(it.fault_entries[k].chunk & ((2u << 20) - 1), 0);
		}
	}
	kvt_trace_reader_close(&rd);
	return sum;
}

static void test_fault_heat(void)
{
	uint64_t recs, sum = trace_faults(serve_trace, &recs);
	char *dev = kvt_slurp(serve_counters, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	uint64_t dev_faults = kvt_out_u64(dev, "faults");
	free(dev);
	fprintf(stderr, "\n  %" PRIu64 " faults in %" PRIu64 " FAULTS records; the device "
		"counted %" PRIu64 "\n", sum, recs, dev_faults);
	/* every fault of the run is on kvtier's KV, and each is in the trace */
	CU_ASSERT(sum > 0);
	CU_ASSERT_EQUAL(sum, dev_faults);
	struct views vw;
	views_of(serve_trace, &vw);
	char *txt = vw.txt, *js = vw.js, *html = vw.html;
	/* text: the total, and the top chunk named by its allocation's site */
	const char *t = strstr(txt, "GPU faults on redirected chunks: ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_EQUAL(strtoull(t + 33, NULL, 10), sum);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, " faults  in 0x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "serve_like.c"));
	/* JSON: the per-chunk faults add up to the total */
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"heat\":{", "\"faults\":", NULL }),
			sum);
	uint64_t per = 0;
	for (const char *p = strstr(js, "\"chunks\":["); p && (p = strstr(p, "\"faults\":")); p++)
		per += strtoull(p + 9, NULL, 10);
	CU_ASSERT_EQUAL(per, sum);
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"alloc_site\":\"sv_kv_alloc"));
	/* HTML: the fault map, its rows, a label naming the allocation */
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<svg id=\"heat-faults\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<svg id=\"heat-events\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "class=\"heat-alloc\"><title>0x"));
	const char *lab = strstr(html, "class=\"heat-alloc\"><title>");
	CU_ASSERT(lab && strstr(lab, "sv_kv_alloc") && strstr(lab, "sv_kv_alloc") < strstr(lab, "</title>"));
	CU_ASSERT_EQUAL(kvt_num_after(html, (const char *const[]){ "id=\"heat-faults-summary\">", NULL }),
			sum);
	views_free(&vw);
}

/* A made-up trace with known answers: an 8 MiB redirected allocation,
 * FAULTS records on its first two chunks and on memory no range holds,
 * then, after its free, on its first chunk again (CUPTI delivering faults
 * late). And a record whose entry count does not match its size. */
static void put_rec(FILE *f, const void *p, size_t n)
{
	CU_ASSERT_FATAL(fwrite(p, 1, n, f) == n);
}

static void put_faults(FILE *f, uint64_t t, const uint64_t *chunk, const uint32_t *nr, uint32_t n,
		       uint16_t bytes)
{
	struct kvt_rec_faults h = { { KVT_REC_FAULTS, bytes }, n, t };
	put_rec(f, &h, sizeof h);
	for (uint32_t k = 0; k < n; k++) {
		struct kvt_rec_fault_entry e = { chunk[k], nr[k], 0 };
		put_rec(f, &e, sizeof e);
	}
}

static const char *made_up_faults(const char *name, int bad)
{
	const char *path = tmp_path(name);
	struct kvt_trace_header h = { .magic = "KVTTRACE", .version = KVT_TRACE_VERSION,
				      .header_bytes = sizeof h };
	FILE *f = fopen(path, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	put_rec(f, &h, sizeof h);
	uint64_t base = 0x7f0000000000ull;
	struct kvt_rec_event ev = { .head = { KVT_REC_EVENT, sizeof ev }, .op = KVT_OP_ALLOC,
				    .t_ns = 1000, .addr = base, .size = 8u << 20,
				    .kind = KVT_KIND_DEVICE, .placement = KVT_PLACE_MANAGED_FAR };
	put_rec(f, &ev, sizeof ev);
	uint64_t c1[] = { base, base + (2u << 20), 0x10000000 };
	uint32_t n1[] = { 3, 5, 2 };
	put_faults(f, 2000000, c1, n1, 3, (uint16_t)(16 + 3 * 16));
	if (bad)
		put_faults(f, 2500000, c1, n1, 2, (uint16_t)(16 + 3 * 16));   /* 2 named, 3 there */
	ev.op = KVT_OP_FREE;
	ev.t_ns = 3000000;
	put_rec(f, &ev, sizeof ev);
	uint32_t n2[] = { 4 };
	put_faults(f, 4000000, c1, n2, 1, 32);
	struct kvt_rec_end end = { { KVT_REC_END, sizeof end }, 0, 1, 0, 0 };
	put_rec(f, &end, sizeof end);
	CU_ASSERT_EQUAL(fclose(f), 0);
	return path;
}

static void test_fault_heat_made_up(void)
{
	char path[600];
	snprintf(path, sizeof path, "%s", made_up_faults("faults.trace", 0));
	char *js = kvt_report_run(&rc, tmpdir, "json", path, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	/* 3 + 5 + 2 + 4 faults; 2 on no range, 4 on a freed one */
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"heat\":{", "\"faults\":", NULL }),
			14);
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"heat\":{", "\"faults_outside\":",
							     NULL }), 6);
	/* the chunks, by address: the first has 3, the second 5, each named */
	const char *c0 = strstr(js, "\"chunks\":[");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c0);
	CU_ASSERT_EQUAL(kvt_num_after(c0, (const char *const[]){ "\"faults\":", NULL }), 3);
	const char *c1 = strstr(c0, "},{");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c1);
	CU_ASSERT_EQUAL(kvt_num_after(c1, (const char *const[]){ "\"faults\":", NULL }), 5);
	CU_ASSERT_EQUAL(kvt_num_after(c1, (const char *const[]){ "\"alloc_bytes\":", NULL }),
			8u << 20);
	CU_ASSERT_EQUAL(kvt_num_after(c1, (const char *const[]){ "\"alloc_addr\":", NULL }),
			0x7f0000000000ull);
	free(js);
	char *txt = kvt_report_run(&rc, tmpdir, "text", path, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "GPU faults on redirected chunks: 14 (6 outside the "
					   "live redirected ranges)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "0:0x7f0000200000        5 faults  in 0x7f0000000000 "
					   "(8.0 MiB)"));
	free(txt);
	/* an entry count that does not match the record's size: one error */
	snprintf(path, sizeof path, "%s", made_up_faults("faults-bad.trace", 1));
	const char *argv[] = { kvt_path("kvtier"), "report", path, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&rc, argv, NULL), 0);
	CU_ASSERT_NOT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "faults record with a bad entry count"));
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "moves by cause = the trace's INFO counters (text, JSON, HTML, run summary)",
		  test_moves_serve },
		{ "moves: the review's counters (1026 step, 1015 fault-ins) all shown",
		  test_moves_review_counters },
		{ "stacks: the top site's callers to _start, no libkvtier frame", test_stacks },
		{ "folded: lines parse, root first, sum to bytes and counts", test_folded },
		{ "diff: a run against itself is all zeros", test_diff_self },
		{ "diff: 2x KV against 1x: the change is the difference, sorted", test_diff_runs },
		{ "fault heat: every GPU fault of the run, per chunk, rows named by allocation",
		  test_fault_heat },
		{ "fault heat on a made-up trace: per chunk, freed and unknown ranges, a bad record",
		  test_fault_heat_made_up },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "report_views", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
