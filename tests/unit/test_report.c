// SPDX-License-Identifier: MIT
/* `kvtier report` on real traces of the workloads and the driver test
 * program: text, JSON and HTML agree with each other and with the trace
 * recomputed here independently; symbolization names drvapi's main; the
 * HTML is well-formed; hostile traces exit 1 with a message, never a crash.
 * Also the libdwfl symbolizer on this very binary. (The C++ program, build
 * ids and their warnings: test_symbolize.c.) */
#include <inttypes.h>
#include <link.h>

#include "unit/kvt_test.h"
#include "unit/kvt_report_test.h"
#include "../profiler/trace_read.h"
#include "kvtier/api.h"
#include "../../tools/dwsym.c"
#include "../../tools/json.c"

static char tmpdir[] = "/tmp/kvt-report-XXXXXX";
static char vllm_trace[600], sglang_trace[600], drv_trace[600];

static const char *tmp_path(const char *name)
{
	return kvt_tmp_path(tmpdir, name);
}

/* compress: KVTIER_TRACE_COMPRESS. The tests that edit a trace's bytes
 * (fuzzed records, a module renamed, timestamps) use traces of records
 * only; the sglang trace has zstd frames (KVTIER_TRACE_COMPRESS=zstd). */
static int make_trace(char *out, const char *name, const char *prog, const char *mode,
		      const char *compress)
{
	char env_zstd[64];
	snprintf(env_zstd, sizeof env_zstd, "KVTIER_TRACE_COMPRESS=%s", compress);
	char env_trace[700], env_lib[600], env_pre[600];
	snprintf(out, 600, "%s", tmp_path(name));
	snprintf(env_trace, sizeof env_trace, "KVTIER_TRACE=%s", out);
	snprintf(env_lib, sizeof env_lib, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", kvt_path("libkvtier.so"));
	const char *argv[] = { kvt_path(prog), mode ? "--mode" : NULL, mode, NULL };
	/* migration off: these traces must not depend on the migrator's timing
	 * (the generated trace below covers migrations and chunk heat) */
	const char *env[] = { env_trace, env_lib, env_pre, "KVTIER_POLICY=", "KVTIER_MIGRATE=0",
			      env_zstd, NULL };
	static struct kvt_child c;
	if (kvt_run(&c, argv, env) || c.exit_code) {
		fprintf(stderr, "%s failed (%d): %s\n", prog, c.exit_code, c.err);
		return -1;
	}
	return 0;
}

static int suite_init(void)
{
	if (!mkdtemp(tmpdir))
		return -1;
	if (make_trace(vllm_trace, "vllm.trace", "workloads/vllm-like", "native", "none") ||
	    make_trace(sglang_trace, "sglang.trace", "workloads/sglang-like", "native", "zstd") ||
	    make_trace(drv_trace, "drv.trace", "tests/progs/drvapi", NULL, "none"))
		return -1;
	return 0;
}

static int suite_clean(void)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- independent recomputation from the trace ---- */

struct truth {
	uint64_t nr[KVT_KIND__COUNT], bytes[KVT_KIND__COUNT], failed[KVT_KIND__COUNT];
	uint64_t nr_events, top_site_bytes;
};

static int is_runtime(const char *path, size_t len)
{
	const char *base = path;
	for (size_t i = 0; i < len; i++)
		if (path[i] == '/')
			base = path + i + 1;
	return !strncmp(base, "libcuda", 7) || !strncmp(base, "libkvtier", 9) ||
	       !strncmp(base, "libc.so", 7) || !strncmp(base, "ld-linux", 8);
}

/* Sites keyed by (module index, offset) of the first non-runtime frame; one
 * trace file only (module indices are per file here). */
static void recompute(const char *path, struct truth *t)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	static struct { uint64_t start, end, bias; int rt; } mods[512];
	static struct { uint32_t id; int mod; uint64_t off; } stacks[4096];
	static struct { int mod; uint64_t off, bytes; } sites[4096];
	unsigned nm = 0, ns = 0, nsite = 0;
	memset(t, 0, sizeof *t);
	CU_ASSERT_FATAL(kvt_trace_reader_open(&r, path) == 0);
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.mod && nm < 512) {
			mods[nm].start = it.mod->start;
			mods[nm].end = it.mod->end;
			mods[nm].bias = it.mod->bias;
			mods[nm++].rt = is_runtime(it.text, it.text_len);
		} else if (it.stack && ns < 4096) {
			stacks[ns].id = it.stack->id;
			stacks[ns].mod = -1;
			for (uint32_t i = 0; i < it.stack->nr_frames && stacks[ns].mod < 0; i++)
				for (unsigned m = 0; m < nm; m++)
					if (it.ips[i] >= mods[m].start && it.ips[i] < mods[m].end && !mods[m].rt) {
						stacks[ns].mod = (int)m;
						stacks[ns].off = it.ips[i] - mods[m].bias;
					}
			ns++;
		} else if (it.ev) {
			const struct kvt_rec_event *e = it.ev;
			t->nr_events++;
			if (e->op != KVT_OP_ALLOC || e->kind >= KVT_KIND__COUNT)
				continue;
			if (e->result || !e->addr) {
				t->failed[e->kind]++;
				continue;
			}
			t->nr[e->kind]++;
			t->bytes[e->kind] += e->size;
			unsigned s = 0;
			while (s < ns && stacks[s].id != e->stack_id)
				s++;
			if (s == ns || stacks[s].mod < 0)
				continue;
			unsigned k = 0;
			while (k < nsite && (sites[k].mod != stacks[s].mod || sites[k].off != stacks[s].off))
				k++;
			if (k == nsite && nsite < 4096) {
				sites[k].mod = stacks[s].mod;
				sites[k].off = stacks[s].off;
				sites[k].bytes = 0;
				nsite++;
			}
			if (k < nsite)
				sites[k].bytes += e->size;
		}
	}
	kvt_trace_reader_close(&r);
	for (unsigned k = 0; k < nsite; k++)
		if (sites[k].bytes > t->top_site_bytes)
			t->top_site_bytes = sites[k].bytes;
}

/* ---- reading the three formats ---- */

static struct kvt_child rc;

static char *report(const char *fmt, const char *t1, const char *t2)
{
	return kvt_report_run(&rc, tmpdir, fmt, t1, t2);
}


static uint64_t json_kind(const char *j, const char *kind, const char *field)
{
	char k[64], f[64];
	snprintf(k, sizeof k, "\"%s\":{", kind);
	snprintf(f, sizeof f, "\"%s\":", field);
	return kvt_num_after(j, (const char *const[]){ "\"kinds\":{", k, f, NULL });
}

/* text row "  device  N  BYTES ..." in "allocations by kind" */
static uint64_t text_kind(const char *t, const char *kind, int col)
{
	char k[64];
	snprintf(k, sizeof k, "\n  %s ", kind);
	const char *s = strstr(strstr(t, "allocations by kind"), k);
	if (!s)
		return UINT64_MAX;
	s += strlen(k);
	char *end;
	uint64_t v = strtoull(s, &end, 10);
	return col ? strtoull(end, NULL, 10) : v;
}

static uint64_t html_kind(const char *h, const char *kind, int col)
{
	char k[64];
	snprintf(k, sizeof k, "<tr id=\"kind-%s\"><td>%s</td><td>", kind, kind);
	const char *s = strstr(h, k);
	if (!s)
		return UINT64_MAX;
	s += strlen(k);
	if (col)
		s = strstr(s, "<td>") + 4;
	return strtoull(s, NULL, 10);
}

static void check_agree(const char *t1, const char *t2)
{
	struct truth a, b;
	recompute(t1, &a);
	if (t2) {
		recompute(t2, &b);
		for (unsigned k = 0; k < KVT_KIND__COUNT; k++) {
			a.nr[k] += b.nr[k];
			a.bytes[k] += b.bytes[k];
			a.failed[k] += b.failed[k];
		}
		a.nr_events += b.nr_events;
	}
	char *txt = report("text", t1, t2), *js = report("json", t1, t2), *html = report("html", t1, t2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT(a.nr[KVT_KIND_DEVICE] > 0);
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"events\":", NULL }), a.nr_events);
	CU_ASSERT_EQUAL(kvt_num_after(html, (const char *const[]){ "<span id=\"nr-events\">", NULL }),
			a.nr_events);
	for (unsigned k = 1; k < KVT_KIND__COUNT; k++) {
		const char *name = kvt_kind_name(k);
		CU_ASSERT_EQUAL(json_kind(js, name, "count"), a.nr[k]);
		CU_ASSERT_EQUAL(json_kind(js, name, "bytes"), a.bytes[k]);
		CU_ASSERT_EQUAL(json_kind(js, name, "failed"), a.failed[k]);
		if (!a.nr[k] && !a.failed[k])
			continue;
		CU_ASSERT_EQUAL(text_kind(txt, name, 0), a.nr[k]);
		CU_ASSERT_EQUAL(text_kind(txt, name, 1), a.bytes[k]);
		CU_ASSERT_EQUAL(html_kind(html, name, 0), a.nr[k]);
		CU_ASSERT_EQUAL(html_kind(html, name, 1), a.bytes[k]);
	}
	if (!t2) {                      /* top site by bytes, all three formats */
		uint64_t jt = kvt_num_after(js, (const char *const[]){ "\"top_sites_by_bytes\":[", "\"bytes\":", NULL });
		uint64_t tt = kvt_num_after(txt, (const char *const[]){ "top call sites by bytes", "\n    1 ", NULL });
		uint64_t ht = kvt_num_after(html, (const char *const[]){ "<table id=\"sites-bytes\">", "<tr><td>1</td><td>", NULL });
		CU_ASSERT(a.top_site_bytes > 0);
		CU_ASSERT_EQUAL(jt, a.top_site_bytes);
		CU_ASSERT_EQUAL(tt, a.top_site_bytes);
		CU_ASSERT_EQUAL(ht, a.top_site_bytes);
	}
	free(txt);
	free(js);
	free(html);
}

static void test_vllm_agree(void) { check_agree(vllm_trace, NULL); }
static void test_sglang_agree(void) { check_agree(sglang_trace, NULL); }
static void test_two_traces_aggregate(void) { check_agree(vllm_trace, sglang_trace); }

static void test_vllm_phases(void)
{
	char *txt = report("text", vllm_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	/* vllm-like: L identical per-layer KV tensors after the profiling meminfo */
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "  meminfo   t="));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "  KV burst  t="));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "no migrations recorded"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "size histogram"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "timeline: 100 buckets"));
	/* the workload's helper, not the runtime, is the call site */
	CU_ASSERT_PTR_NULL(strstr(strstr(txt, "top call sites by count"), "  cudaMalloc ("));
	free(txt);
}

static void test_drvapi_symbolized(void)
{
	char *js = report("json", drv_trace, NULL), *txt = report("text", drv_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	const char *top = strstr(js, "\"top_sites_by_bytes\":[{\"label\":\"");
	CU_ASSERT_PTR_NOT_NULL_FATAL(top);
	top += strlen("\"top_sites_by_bytes\":[{\"label\":\"");
	CU_ASSERT_EQUAL(strncmp(top, "main (drvapi+0x", 15), 0);
	/* drvapi is built with -g: the site has its source file and line */
	const char *site = strstr(js, "\"site\":{\"function\":\"main\",\"file\":\"");
	CU_ASSERT_PTR_NOT_NULL_FATAL(site);
	CU_ASSERT_PTR_NOT_NULL(strstr(site, "drvapi.c\",\"line\":"));
	CU_ASSERT(kvt_num_after(site, (const char *const[]){ "\"line\":", NULL }) > 0);
	const char *t = strstr(txt, "top call sites by count");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "  main (drvapi+0x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, ") at drvapi.c:"));
	CU_ASSERT_PTR_NULL(strstr(rc.err, "warning"));   /* the files match their build ids */
	free(js);
	free(txt);
}

static void test_html_wellformed(void)
{
	char *html = report("html", vllm_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT(strstr(html, "<svg") != NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "Live bytes per kind"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "Size histogram"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "sites-bytes"));
	/* scripts: the charts' JSON data, and uPlot and the page's script where
	 * the tool has uPlot (test_report_html checks them) */
	CU_ASSERT_EQUAL(kvt_html_other_scripts(html, KVT_HAVE_UPLOT), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<div class=\"kvt-static\">\n<svg"));
	CU_ASSERT_PTR_NULL(strstr(html, "http://"));
	CU_ASSERT_PTR_NULL(strstr(html, "https://"));
	free(html);
	if (access("/usr/bin/xmllint", X_OK)) {
		fprintf(stderr, "\n  SKIP: xmllint not installed (apt-get install libxml2-utils)\n");
		CU_PASS("xmllint absent: well-formedness not checked");
		return;
	}
	/* the HTML 4 parser: exit 0, and no complaint but SVG's unknown tags */
	const char *argv[] = { "/usr/bin/xmllint", "--html", "--noout", tmp_path("html"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	/* stderr is captured up to 64 KiB: the last line may be cut short */
	char *last = strrchr(rc.err, '\n');
	if (last && rc.err_len == sizeof rc.err - 1)
		*last = 0;
	int others = 0;
	for (char *l = strtok(rc.err, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, "parser error") && !strstr(l, " invalid")) {
			fprintf(stderr, "\n  xmllint: %s", l);
			others++;
		}
	CU_ASSERT_EQUAL(others, 0);
	/* and the XML parser: the file is well-formed XML too (strict) */
	const char *xargv[] = { "/usr/bin/xmllint", "--noout", tmp_path("html"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, xargv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(rc.err_len, 0);
	if (access("/usr/bin/chromium", X_OK))
		fprintf(stderr, "\n  SKIP: chromium not installed: no screenshot check\n");
}

/* ---- heat and migrations on a generated trace ---- */

static void test_heat_generated(void)
{
	const char *gen = kvt_path("bench/gen_trace"), *out = tmp_path("gen.trace");
	if (access(gen, X_OK)) {
		CU_FAIL("gen_trace not built (make all builds it)");
		return;
	}
	const char *argv[] = { gen, out, "200000", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0 && rc.exit_code == 0);
	char *js = report("json", out, NULL), *txt = report("text", out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	uint64_t pf = kvt_num_after(js, (const char *const[]){ "\"ops\":{", "\"prefetch\":", NULL });
	CU_ASSERT(pf > 0 && pf < 200000);
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"migrations\":", NULL }), pf);
	CU_ASSERT(kvt_num_after(js, (const char *const[]){ "\"heat\":{", "\"events\":", NULL }) > pf);
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"chunks\":[{\"trace\":0,"));
	CU_ASSERT_PTR_NULL(strstr(txt, "no migrations recorded"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, " prefetch events"));
	/* gen_trace: 32 KV layers of 64 MiB, managed:far */
	CU_ASSERT_EQUAL(kvt_num_after(js, (const char *const[]){ "\"placements\":{", "\"managed:far\":{\"count\":", NULL }), 32);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "trace 0: 32 x 67108864 bytes"));
	free(js);
	free(txt);
}

/* ---- hostile input and usage ---- */

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fwrite(p, 1, n, f) == n);
	fclose(f);
}

static void run_report(const char *trace)
{
	const char *argv[] = { kvt_path("kvtier"), "report", trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
}

static void test_malformed(void)
{
	size_t n = 0;
	char *t = kvt_slurp(vllm_trace, &n);
	CU_ASSERT_FATAL(t != NULL && n > 1000);
	/* cut inside a record (a killed writer): a report of what came before,
	 * and one line each on stderr and in it saying where it stopped */
	write_file(tmp_path("trunc.trace"), t, n - 30);
	run_report(tmp_path("trunc.trace"));
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	const char *stop = strstr(rc.err, "trunc.trace: stopped at byte ");
	CU_ASSERT_PTR_NOT_NULL(stop);
	CU_ASSERT_TRUE(stop && !strstr(stop + 20, "stopped at byte"));
	stop = strstr(rc.out, "trunc.trace: stopped at byte ");
	CU_ASSERT_PTR_NOT_NULL(stop);
	CU_ASSERT_TRUE(stop && !strstr(stop + 20, "stopped at byte"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "note: 1 trace file without an end record"));
	write_file(tmp_path("junk.trace"), "hello world, not a trace at all......"
		   "...............................................", 80);
	run_report(tmp_path("junk.trace"));
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "not a kvtier trace"));
	struct kvt_trace_header h;
	memcpy(&h, t, sizeof h);
	h.version = 7;
	memcpy(t, &h, sizeof h);
	write_file(tmp_path("v7.trace"), t, n);
	run_report(tmp_path("v7.trace"));
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "version 7"));
	run_report(tmp_path("missing.trace"));
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	free(t);
}

/* Random byte flips past the header: exit 0 or 1, never a signal. */
static void test_fuzzed(void)
{
	size_t n = 0;
	char *t = kvt_slurp(drv_trace, &n);
	CU_ASSERT_FATAL(t != NULL && n > 200);
	char *m = malloc(n);
	uint64_t seed = 12345;
	int crashes = 0, errors = 0;
	for (int round = 0; round < 150; round++) {
		memcpy(m, t, n);
		for (int k = 0; k < 1 + round % 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = 64 + (seed >> 33) % (n - 64);
			m[at] = (char)(seed >> 13);
		}
		write_file(tmp_path("fuzz.trace"), m, n - (round % 3 ? 0 : (seed >> 40) % 64));
		const char *argv[] = { kvt_path("kvtier"), "report", "--format",
				       round % 2 ? "html" : "json", tmp_path("fuzz.trace"), NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		crashes += (rc.exit_code != 0 && rc.exit_code != 1) ||
			   strstr(rc.err, "Sanitizer") != NULL;     /* ASan's exit status is 1 */
		errors += rc.exit_code == 1;
		if (rc.exit_code != 0 && rc.exit_code != 1)
			fprintf(stderr, "fuzz round %d: exit %d\n", round, rc.exit_code);
	}
	CU_ASSERT_EQUAL(crashes, 0);
	CU_ASSERT(errors > 0);          /* some mutations were caught as errors */
	/* a NUL inside a module's path (a damaged record): the report once
	 * copied the path up to the NUL and then cleaned `len` bytes of it,
	 * writing past the copy (heap corruption, abort; found by random
	 * flips, caught for sure by the ASan build) */
	memcpy(m, t, n);
	char *mod = memmem(m, n, "progs/drvapi", 12);  /* the module record, not the header's exe */
	CU_ASSERT_PTR_NOT_NULL_FATAL(mod);
	mod[8] = 0;
	write_file(tmp_path("nul-module.trace"), m, n);
	for (int f = 0; f < 3; f++) {
		const char *fmt[] = { "html", "json", "text" };
		const char *argv[] = { kvt_path("kvtier"), "report", "--format", fmt[f],
				       tmp_path("nul-module.trace"), NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		CU_ASSERT(rc.exit_code == 0 || rc.exit_code == 1);
		CU_ASSERT_PTR_NULL(strstr(rc.err, "Sanitizer"));   /* ASan exits 1 too */
	}
	free(m);
	free(t);
}

static void test_usage(void)
{
	const char *a1[] = { kvt_path("kvtier"), "report", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a1, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "usage: kvtier report"));
	const char *a2[] = { kvt_path("kvtier"), "report", "--help", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a2, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "--format"));
	const char *a3[] = { kvt_path("kvtier"), "report", "--format", "pdf", vllm_trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a3, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *a4[] = { kvt_path("kvtier"), "report", "--bogus", vllm_trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a4, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *a5[] = { kvt_path("kvtier"), "report", vllm_trace, "-o", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a5, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *d[] = { kvt_path("kvtier"), "dump", vllm_trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, d, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(strncmp(rc.out, "header version=1 ", 17), 0);   /* records only */
	const char *dz[] = { kvt_path("kvtier"), "dump", sglang_trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, dz, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(strncmp(rc.out, "header version=2 ", 17), 0);   /* zstd frames */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "\nevent t="));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "\nevent t="));
}

/* -o FILE.html / FILE.json choose the format unless --format is given. */
static void test_output_suffix(void)
{
	static const struct { const char *fmt, *out, *starts; } cases[] = {
		{ NULL, "r.html", "<!DOCTYPE html" },
		{ NULL, "r.HTM", "<!DOCTYPE html" },
		{ NULL, "r.json", "{\"kvtier_report\":1" },
		{ NULL, "r.Json", "{\"kvtier_report\":1" },
		{ NULL, "r.txt", "kvtier report: 1 trace file" },
		{ NULL, "json", "kvtier report: 1 trace file" },      /* a name, not a suffix */
		{ "text", "t.json", "kvtier report: 1 trace file" },  /* explicit wins */
		{ "html", "h.json", "<!DOCTYPE html" },
		{ "json", "j.html", "{\"kvtier_report\":1" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *out = tmp_path(cases[i].out);
		const char *argv[10] = { kvt_path("kvtier"), "report", "-q" };
		int n = 3;
		if (cases[i].fmt && i % 2) {            /* --format after -o, too */
			argv[n++] = "-o";
			argv[n++] = out;
			argv[n++] = "--format";
			argv[n++] = cases[i].fmt;
		} else {
			if (cases[i].fmt) {
				argv[n++] = "--format";
				argv[n++] = cases[i].fmt;
			}
			argv[n++] = "-o";
			argv[n++] = out;
		}
		argv[n++] = drv_trace;
		argv[n] = NULL;
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		char *got = kvt_slurp(out, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(got);
		if (strncmp(got, cases[i].starts, strlen(cases[i].starts)))
			fprintf(stderr, "\n  %s -o %s: starts '%.30s'", cases[i].fmt ? cases[i].fmt : "-",
				cases[i].out, got);
		CU_ASSERT_EQUAL(strncmp(got, cases[i].starts, strlen(cases[i].starts)), 0);
		free(got);
	}
	const char *help[] = { kvt_path("kvtier"), "report", "--help", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, help, NULL) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, ".html or .htm means html, .json means json"));
}

/* ---- JSON strings ---- */

static char *json_of(const char *s, size_t n)
{
	static char buf[256];
	FILE *f = fmemopen(buf, sizeof buf, "w");
	CU_ASSERT_FATAL(f != NULL);
	kvt_json_strn(f, s, n);
	fclose(f);
	return buf;
}

/* The one escaper (tools/json.c): UTF-8 through, controls and quotes
 * escaped, each byte of an invalid sequence one U+FFFD. */
static void test_json_escaper(void)
{
	static const struct { const char *in; size_t n; const char *out; } cases[] = {
		{ "mod\xc3\xa8le_kv.py", 0, "\"mod\xc3\xa8le_kv.py\"" },
		{ "\xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x98\x80", 0, "\"\xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x98\x80\"" },
		{ "a\"b\\c/d", 0, "\"a\\\"b\\\\c/d\"" },
		{ "\n\t\r\b\f\x01\x1f\x7f", 0, "\"\\n\\t\\r\\b\\f\\u0001\\u001f\x7f\"" },
		{ "x\0y", 3, "\"x\\u0000y\"" },
		{ "bad\xff", 0, "\"bad\\ufffd\"" },
		{ "\x80\xbf", 0, "\"\\ufffd\\ufffd\"" },                 /* lone continuations */
		{ "\xc0\xaf", 0, "\"\\ufffd\\ufffd\"" },                 /* overlong '/' */
		{ "\xe0\x80\xaf", 0, "\"\\ufffd\\ufffd\\ufffd\"" },      /* overlong, 3 bytes */
		{ "\xed\xa0\x80", 0, "\"\\ufffd\\ufffd\\ufffd\"" },      /* a surrogate */
		{ "\xf4\x90\x80\x80", 0, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },   /* past U+10FFFF */
		{ "cut \xc3", 0, "\"cut \\ufffd\"" },                    /* sequence cut short */
		{ "\xc3(", 0, "\"\\ufffd(\"" },
		{ "\xf4\x8f\xbf\xbf", 0, "\"\xf4\x8f\xbf\xbf\"" },       /* U+10FFFF itself */
		{ "", 0, "\"\"" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		size_t n = cases[i].n ? cases[i].n : strlen(cases[i].in);
		const char *got = json_of(cases[i].in, n);
		if (strcmp(got, cases[i].out))
			fprintf(stderr, "\n  case %zu: got %s", i, got);
		CU_ASSERT_STRING_EQUAL(got, cases[i].out);
	}
}

/* drvapi's trace with its program's path renamed in the MODULE record (same
 * length): the JSON shows the name as it is, or U+FFFD for a bad byte. */
static void check_json_module_name(const char *name6, const char *want)
{
	size_t n = 0;
	char *t = kvt_slurp(drv_trace, &n);
	CU_ASSERT_FATAL(t != NULL && n > 200);
	int renamed = 0;
	for (char *m = t; (m = memmem(m, n - (size_t)(m - t), "progs/drvapi", 12)); m += 12, renamed++)
		memcpy(m + 6, name6, 6);
	CU_ASSERT_FATAL(renamed > 0);
	write_file(tmp_path("renamed.trace"), t, n);
	free(t);
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--format", "json",
			       tmp_path("renamed.trace"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	char key[128];                  /* a frame's "module":"...",  "offset": */
	snprintf(key, sizeof key, "/tests/progs/%s,\"offset\":", want);
	const char *hit = strstr(rc.out, key);
	if (!hit)
		fprintf(stderr, "\n  no %s in the JSON", key);
	CU_ASSERT_PTR_NOT_NULL(hit);
}

static void test_json_utf8(void)
{
	check_json_module_name("mod\xc3\xa8l", "mod\xc3\xa8l\"");
	check_json_module_name("drv\xffpi", "drv\\ufffdpi\"");
	check_json_module_name("dr\"\\pi", "dr\\\"\\\\pi\"");
}

/* ---- damaged timestamps ---- */

/* The file offsets of the first nr events of a trace. */
static unsigned event_offsets(const char *path, uint64_t *off, unsigned nr)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	unsigned k = 0;
	CU_ASSERT_FATAL(kvt_trace_reader_open(&r, path) == 0);
	while (k < nr && kvt_trace_next(&r, &it) > 0)
		if (it.ev)
			off[k++] = r.offset - sizeof *it.ev;
	kvt_trace_reader_close(&r);
	return k;
}

/* 8 corrupt bytes in one event's time once gave a 584-year report, exit 0:
 * the event is left out, one warning names the file and the offset, and
 * the report's span is the trace's own. */
static void test_bad_timestamp(void)
{
	uint64_t off[8];
	CU_ASSERT_FATAL(event_offsets(vllm_trace, off, 8) == 8);
	char *good = report("json", vllm_trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(good);
	uint64_t dur = kvt_num_after(good, (const char *const[]){ "\"duration_ns\":", NULL });
	uint64_t nev = kvt_num_after(good, (const char *const[]){ "\"events\":", NULL });
	free(good);
	CU_ASSERT_FATAL(dur > 0 && dur < 3600ull * 1000000000 && nev > 8);
	size_t n = 0;
	char *t = kvt_slurp(vllm_trace, &n);
	CU_ASSERT_FATAL(t != NULL);
	const uint64_t bad[] = { 0xfedcba9876543210ull, 31ull * 86400 * 1000000000 };
	for (int round = 0; round < 2; round++) {
		/* round 0: one event, 8 random-looking bytes; round 1: events 3 and 6, 31 days */
		for (int k = 0; k <= round; k++)
			memcpy(t + off[3 + 3 * k] + offsetof(struct kvt_rec_event, t_ns), &bad[round], 8);
		write_file(tmp_path("badtime.trace"), t, n);
		for (int f = 0; f < 2; f++) {
			const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--format",
					       f ? "text" : "json", tmp_path("badtime.trace"), NULL };
			CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
			CU_ASSERT_EQUAL(rc.exit_code, 0);
			char want[700];
			snprintf(want, sizeof want, "kvtier report: warning: %s: %d record%s (events, "
				 "epochs) stamped more than 30 days after the trace's start left out "
				 "(damaged trace; the first at byte %" PRIu64 ")\n", tmp_path("badtime.trace"),
				 round + 1, round ? "s" : "", off[3]);
			CU_ASSERT_STRING_EQUAL(rc.err, want);      /* that one line, nothing else */
			if (f) {
				CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "left out (damaged trace"));
				continue;
			}
			CU_ASSERT_EQUAL(kvt_num_after(rc.out, (const char *const[]){ "\"duration_ns\":", NULL }), dur);
			CU_ASSERT_EQUAL(kvt_num_after(rc.out, (const char *const[]){ "\"events\":", NULL }),
					nev - 1 - (uint64_t)round);
			CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "\"notes\":[\""));
		}
	}
	/* 30 days to the ns is still a time (the bound itself) */
	uint64_t edge = 30ull * 86400 * 1000000000;
	free(t);
	t = kvt_slurp(vllm_trace, &n);
	CU_ASSERT_FATAL(t != NULL);
	memcpy(t + off[3] + offsetof(struct kvt_rec_event, t_ns), &edge, 8);
	write_file(tmp_path("edge.trace"), t, n);
	free(t);
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", "--format", "json",
			       tmp_path("edge.trace"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NULL(strstr(rc.err, "left out"));
	CU_ASSERT_EQUAL(kvt_num_after(rc.out, (const char *const[]){ "\"events\":", NULL }), nev);
}

/* ---- the symbolizer on this binary ---- */

static int first_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uint64_t *)arg = info->dlpi_addr;
	return 1;                       /* the main program comes first */
}

static void test_dwsym_self(void)
{
	struct kvt_dwsym *s = NULL;
	struct kvt_dwsym_loc loc;
	char note[512];
	uint64_t bias = 0;
	dl_iterate_phdr(first_bias, &bias);
	struct kvt_dwsym_args a = { .path = "/proc/self/exe" };
	CU_ASSERT_FATAL(kvt_dwsym_open(&s, &a, note, sizeof note) == 0);
	CU_ASSERT_STRING_EQUAL(note, "");
	uint64_t fn = (uint64_t)(uintptr_t)&test_dwsym_self - bias;
	CU_ASSERT_FATAL(kvt_dwsym_lookup(s, fn + 3, &loc) == 1);
	CU_ASSERT_STRING_EQUAL(loc.symbol, "test_dwsym_self");     /* a static: from .symtab */
	CU_ASSERT_EQUAL(loc.sym_off, 3);
	CU_ASSERT_EQUAL(loc.nr, 1);
	CU_ASSERT_STRING_EQUAL(loc.fr[0].func, "test_dwsym_self");
	CU_ASSERT_PTR_NOT_NULL(strstr(loc.fr[0].file, "test_report.c"));  /* built with -g */
	CU_ASSERT(loc.fr[0].line > 400);
	CU_ASSERT_EQUAL(kvt_dwsym_lookup(s, 1, &loc), 0);          /* below every symbol */
	kvt_dwsym_close(s);
	char buf[256];
	CU_ASSERT_STRING_EQUAL(kvt_dwsym_demangle("_ZN5serve4Pool4growEm", buf, sizeof buf),
			       "serve::Pool::grow(unsigned long)");
	CU_ASSERT_STRING_EQUAL(kvt_dwsym_demangle("main", buf, sizeof buf), "main");
	CU_ASSERT_STRING_EQUAL(kvt_dwsym_demangle("_Zbroken", buf, sizeof buf), "_Zbroken");
	/* bad files: one message each, no module */
	a.path = vllm_trace;
	CU_ASSERT_EQUAL(kvt_dwsym_open(&s, &a, note, sizeof note), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(note, "not a readable ELF file"));
	CU_ASSERT_PTR_NULL(s);
	a.path = tmp_path("no-such-file");
	CU_ASSERT_EQUAL(kvt_dwsym_open(&s, &a, note, sizeof note), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(note, "No such file"));
	/* a truncated ELF: opened or refused, never a crash; nothing found */
	size_t n = 0;
	char *self = kvt_slurp("/proc/self/exe", &n);
	CU_ASSERT_FATAL(self != NULL);
	write_file(tmp_path("cut.elf"), self, 4096);
	a.path = tmp_path("cut.elf");
	if (kvt_dwsym_open(&s, &a, note, sizeof note) == 0) {
		CU_ASSERT_EQUAL(kvt_dwsym_lookup(s, fn + 3, &loc), 0);
		kvt_dwsym_close(s);
	}
	free(self);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "vllm-like: text, JSON, HTML agree with the trace", test_vllm_agree },
		{ "sglang-like: text, JSON, HTML agree with the trace", test_sglang_agree },
		{ "two traces aggregate into one report", test_two_traces_aggregate },
		{ "vllm-like: meminfo, KV burst, no migrations", test_vllm_phases },
		{ "drvapi: call sites symbolized to main in drvapi", test_drvapi_symbolized },
		{ "HTML: self-contained, SVG, well-formed (xmllint)", test_html_wellformed },
		{ "generated trace: migrations and chunk heat", test_heat_generated },
		{ "malformed, newer version: exit 1; cut short: read to the cut", test_malformed },
		{ "150 fuzzed traces: never a crash", test_fuzzed },
		{ "usage errors exit 2, --help 0, dump still works", test_usage },
		{ "-o FILE.html/.json imply the format; --format wins", test_output_suffix },
		{ "JSON strings: one escaper, UTF-8 kept, bad bytes U+FFFD", test_json_escaper },
		{ "JSON: a non-ASCII and an invalid module name", test_json_utf8 },
		{ "timestamps past 30 days: left out, one warning with the offset", test_bad_timestamp },
		{ "libdwfl symbolizer: own symbols and lines, demangling, bad files", test_dwsym_self },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "report", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
