// SPDX-License-Identifier: MIT
/* Offline symbolization of a C++ program (tests/progs/pool_grow.cc, g++ -g
 * -O0) traced under the preload: the report names the demangled
 * serve::Pool::grow(unsigned long) at pool_grow.cc:LINE and an inlined
 * frame; the trace carries the program's build id; after the program is
 * "rebuilt" (its file replaced by the variant with other code) the report
 * warns once about the build id and finds the original by build id in a
 * debuginfo path; a deleted file gives "?" and a warning; a trace without
 * build id records (an older writer) still symbolizes. */
#include <inttypes.h>

#include "unit/kvt_test.h"
#include "unit/kvt_report_test.h"
#include "../profiler/trace_read.h"

static char tmpdir[] = "/tmp/kvt-symbolize-XXXXXX";
static char prog[600], trace[600];
static unsigned grow_line, map_line, small_line;
static char id_v1[130], id_v2[130];
static struct kvt_child rc;

static const char *tmp_path(const char *name)
{
	return kvt_tmp_path(tmpdir, name);
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
	size_t n = 0;
	char *d = kvt_slurp(from, &n);
	if (!d)
		return -1;
	unlink(to);                     /* a new inode, as a linker writes one */
	FILE *f = fopen(to, "wb");
	int ok = f && fwrite(d, 1, n, f) == n;
	if (f)
		ok &= fclose(f) == 0;
	free(d);
	return ok && !chmod(to, mode) ? 0 : -1;
}

/* The line of the source holding marker (a comment in pool_grow.cc). */
static unsigned line_of(const char *marker)
{
	char *src = kvt_slurp("tests/progs/pool_grow.cc", NULL);
	unsigned line = 0;
	char *at = src ? strstr(src, marker) : NULL;
	if (at) {
		line = 1;
		for (char *p = src; p < at; p++)
			line += *p == '\n';
	}
	free(src);
	return line;
}

static void build_id_of(const char *path, char *hex, size_t len)
{
	const char *argv[] = { "/usr/bin/readelf", "-n", path, NULL };
	hex[0] = 0;
	if (kvt_run(&rc, argv, NULL) || rc.exit_code)
		return;
	const char *b = strstr(rc.out, "Build ID: ");
	if (b)
		sscanf(b + 10, "%128s", hex);
	(void)len;
}

static int suite_init(void)
{
	char lib[512], fake[512], ldpath[600], preload[600], env_trace[700];
	if (!mkdtemp(tmpdir) || kvt_preload_env(lib, fake, ldpath, preload))
		return -1;
	grow_line = line_of("// GROW_LINE");
	map_line = line_of("// MAP_REGION_LINE");
	small_line = line_of("// GROW_SMALL_LINE");
	snprintf(prog, sizeof prog, "%s", tmp_path("pool_grow"));
	snprintf(trace, sizeof trace, "%s", tmp_path("pool.trace"));
	if (!grow_line || !map_line || !small_line ||
	    copy_file(kvt_path("tests/progs/pool_grow"), prog, 0755))
		return -1;
	build_id_of(kvt_path("tests/progs/pool_grow"), id_v1, sizeof id_v1);
	build_id_of(kvt_path("tests/progs/pool_grow_v2"), id_v2, sizeof id_v2);
	snprintf(env_trace, sizeof env_trace, "KVTIER_TRACE=%s", trace);
	const char *argv[] = { prog, NULL };
	/* records only: a test drops the build id records from its bytes */
	const char *env[] = { env_trace, preload, "KVTIER_POLICY=", "KVTIER_MIGRATE=0",
			      "KVTIER_TRACE_COMPRESS=none", NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code) {
		fprintf(stderr, "pool_grow failed (%d): %s\n", rc.exit_code, rc.err);
		return -1;
	}
	return 0;
}

static int suite_clean(void)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* `kvtier report [--debuginfo-path D] --format fmt T`: its output (stderr in rc.err). */
static char *report(const char *fmt, const char *t, const char *debuginfo)
{
	const char *out = tmp_path(fmt);
	const char *argv[] = { kvt_path("kvtier"), "report", "--format", fmt, "-o", out, t,
			       debuginfo ? "--debuginfo-path" : NULL, debuginfo, NULL };
	unlink(out);
	if (kvt_run(&rc, argv, NULL) || rc.exit_code) {
		fprintf(stderr, "report %s: %d %s\n", fmt, rc.exit_code, rc.err);
		return NULL;
	}
	return kvt_slurp(out, NULL);
}

static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;
	for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* The site labels the fresh build must give (all three formats). */
static void check_names(const char *txt, const char *js)
{
	char want[256];
	snprintf(want, sizeof want, "  serve::Pool::grow(unsigned long) (pool_grow+0x");
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, want));
	snprintf(want, sizeof want, ") at pool_grow.cc:%u\n", grow_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, want));
	snprintf(want, sizeof want, "\"function\":\"serve::Pool::grow(unsigned long)\","
		 "\"file\":\"tests/progs/pool_grow.cc\",\"line\":%u,", grow_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(js, want));
	CU_ASSERT_PTR_NULL(strstr(txt, "_ZN5serve"));                   /* nothing mangled */
}

static void test_demangled_with_line(void)
{
	char *txt = report("text", trace, NULL), *js = report("json", trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	check_names(txt, js);
	/* 64 MiB from grow is the top site by bytes */
	const char *top = strstr(txt, "top call sites by bytes");
	CU_ASSERT_PTR_NOT_NULL_FATAL(top);
	CU_ASSERT_PTR_NOT_NULL(strstr(top, "    1       67108864   64.0 MiB        1       0  "
				      "serve::Pool::grow(unsigned long) (pool_grow+0x"));
	CU_ASSERT_PTR_NULL(strstr(rc.err, "warning"));
	CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"notes\":[]}"));
	free(txt);
	free(js);
}

static void test_inline_frame(void)
{
	char *txt = report("text", trace, NULL), *js = report("json", trace, NULL), want[256];
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	snprintf(want, sizeof want, ") at pool_grow.cc:%u, inlined into serve::Pool::grow_small() "
		 "at pool_grow.cc:%u\n", map_line, small_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "  map_region (pool_grow+0x"));
	snprintf(want, sizeof want, "\"inlined_into\":[{\"function\":\"serve::Pool::grow_small()\","
		 "\"file\":\"tests/progs/pool_grow.cc\",\"line\":%u}]", small_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(js, want));
	free(txt);
	free(js);
}

/* The MODULE record of the program is followed by its build id, the one
 * readelf reads from the file; every BUILDID record pairs with a MODULE. */
static void test_trace_has_build_id(void)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	CU_ASSERT_FATAL(id_v1[0] && id_v2[0] && strcmp(id_v1, id_v2));
	CU_ASSERT_FATAL(kvt_trace_reader_open(&r, trace) == 0);
	uint64_t start = 0;
	int after_mod = 0, is_prog = 0, unpaired = 0, nr_ids = 0, prog_ok = 0;
	while (kvt_trace_next(&r, &it) > 0) {
		if (it.mod) {
			start = it.mod->start;
			is_prog = it.text_len == strlen(prog) && !memcmp(it.text, prog, it.text_len);
			after_mod = 1;
			continue;
		}
		if (it.build_id) {
			char hex[130] = "";
			for (uint32_t i = 0; i < it.build_id->id_bytes && i < 64; i++)
				snprintf(hex + 2 * i, 3, "%02x", it.id[i]);
			nr_ids++;
			unpaired += !after_mod || it.build_id->start != start;
			prog_ok += is_prog && !strcmp(hex, id_v1);
		}
		after_mod = 0;
	}
	kvt_trace_reader_close(&r);
	CU_ASSERT(nr_ids >= 3);         /* the program, libkvtier, libc at least */
	CU_ASSERT_EQUAL(unpaired, 0);
	CU_ASSERT_EQUAL(prog_ok, 1);
	const char *argv[] = { kvt_path("kvtier"), "dump", trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	char want[200];
	snprintf(want, sizeof want, " %s\n", id_v1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "\nbuild_id start=0x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, want));
}

/* A trace from a writer before build ids: the same trace without its
 * BUILDID records still symbolizes (nothing to check the file against). */
static void test_trace_without_build_ids(void)
{
	size_t n = 0, o = sizeof(struct kvt_trace_header), w = o;
	char *t = kvt_slurp(trace, &n);
	CU_ASSERT_FATAL(t != NULL && n > o);
	int dropped = 0;
	while (o + sizeof(struct kvt_rec_head) <= n) {
		struct kvt_rec_head h;
		memcpy(&h, t + o, sizeof h);
		if (h.bytes < sizeof h || o + h.bytes > n)
			break;
		if (h.type == KVT_REC_MODULE_BUILDID) {
			dropped++;
		} else {
			memmove(t + w, t + o, h.bytes);
			w += h.bytes;
		}
		o += h.bytes;
	}
	CU_ASSERT(dropped >= 3);
	FILE *f = fopen(tmp_path("old.trace"), "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fwrite(t, 1, w, f) == w);
	fclose(f);
	free(t);
	char *txt = report("text", tmp_path("old.trace"), NULL);
	char *js = report("json", tmp_path("old.trace"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	check_names(txt, js);
	CU_ASSERT_PTR_NULL(strstr(rc.err, "warning"));
	free(txt);
	free(js);
}

/* The program is rebuilt after the trace: one warning naming both ids,
 * on stderr and in every format's notes. */
static void test_rebuilt_warns(void)
{
	CU_ASSERT_FATAL(copy_file(kvt_path("tests/progs/pool_grow_v2"), prog, 0755) == 0);
	char want[1600];
	snprintf(want, sizeof want, "module %s: build id of the file on disk (%s) differs from "
		 "the trace's (%s)", prog, id_v2, id_v1);
	char *txt = report("text", trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "kvtier report: warning: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, want));
	CU_ASSERT_EQUAL(count(rc.err, "build id of the file on disk"), 1);   /* once per module */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "names may be wrong"));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "WARNING: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, want));
	char *js = report("json", trace, NULL), *html = report("html", trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL(strstr(strstr(js, "\"notes\":["), want));
	CU_ASSERT_PTR_NOT_NULL(strstr(strstr(html, "<ul id=\"notes\">"), want));
	free(txt);
	free(js);
	free(html);
}

/* The original, under <dir>/.build-id/xx/rest as debug packages lay it
 * out: found by the trace's build id, right names again, and a note. */
static void test_found_by_build_id(void)
{
	char dir[700], file[1000];
	snprintf(dir, sizeof dir, "%s", tmp_path("debug"));
	mkdir(dir, 0700);
	snprintf(file, sizeof file, "%s/.build-id", dir);
	mkdir(file, 0700);
	snprintf(file, sizeof file, "%s/.build-id/%.2s", dir, id_v1);
	mkdir(file, 0700);
	snprintf(file, sizeof file, "%s/.build-id/%.2s/%s", dir, id_v1, id_v1 + 2);
	CU_ASSERT_FATAL(copy_file(kvt_path("tests/progs/pool_grow"), file, 0755) == 0);
	char *txt = report("text", trace, dir), *js = report("json", trace, dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	check_names(txt, js);
	char want[2400];
	snprintf(want, sizeof want, "module %s: the file on disk has another build id; using %s, "
		 "found by the trace's build id %s", prog, file, id_v1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, want));
	CU_ASSERT_PTR_NULL(strstr(rc.err, "names may be wrong"));
	free(txt);
	free(js);
}

/* The program is gone: "?" for its frames and one warning; exit 0. */
static void test_missing_file(void)
{
	CU_ASSERT_FATAL(unlink(prog) == 0);
	char *txt = report("text", trace, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	CU_ASSERT_PTR_NOT_NULL(strstr(txt, "  ? (pool_grow+0x"));
	CU_ASSERT_PTR_NULL(strstr(txt, "serve::Pool"));
	CU_ASSERT_EQUAL(count(rc.err, "kvtier report: warning: module "), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "No such file or directory"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "shown as ?"));
	free(txt);
}

/* The preload library never links libdw or libelf; the tool does. */
static void test_preload_has_no_libdw(void)
{
	const char *a1[] = { "/usr/bin/readelf", "-d", kvt_path("libkvtier.so"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a1, NULL) == 0 && rc.exit_code == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "(NEEDED)"));
	CU_ASSERT_PTR_NULL(strstr(rc.out, "libdw"));
	CU_ASSERT_PTR_NULL(strstr(rc.out, "libelf"));
	CU_ASSERT_PTR_NULL(strstr(rc.out, "libstdc++"));
	const char *a2[] = { "/usr/bin/readelf", "-d", kvt_path("kvtier"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, a2, NULL) == 0 && rc.exit_code == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "[libdw.so"));
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "C++: demangled serve::Pool::grow(unsigned long) at pool_grow.cc:LINE", test_demangled_with_line },
		{ "C++: an inlined frame and the function it was inlined into", test_inline_frame },
		{ "trace: the program's build id right after its module", test_trace_has_build_id },
		{ "a trace without build id records still symbolizes", test_trace_without_build_ids },
		{ "rebuilt after the trace: one build id warning, every format", test_rebuilt_warns },
		{ "rebuilt: the original found by build id in --debuginfo-path", test_found_by_build_id },
		{ "file gone: ? and one warning", test_missing_file },
		{ "libkvtier.so links no libdw/libelf; kvtier does", test_preload_has_no_libdw },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "symbolize", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
