// SPDX-License-Identifier: MIT
/* Python call sites on Debian's real CPython: tests/progs/py_alloc.py calls
 * the stand-in runtime's cudaMalloc through ctypes from named functions,
 * under LD_PRELOAD=libkvtier.so. With the GIL held (ctypes.PyDLL) the trace
 * carries a PYSTACK naming the function, file and line, `kvtier report`
 * labels the site with them, and a site~ rule on the function name places
 * the allocation; with the GIL released (ctypes.CDLL) nothing Python is
 * recorded and the fallback is counted. Also threads, atexit, fork, and
 * KVTIER_PYTHON=0. No timing: every check is on what was recorded. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>

#include "unit/kvt_test.h"
#include "../profiler/trace_read.h"
#include "kvtier/api.h"

#define PYTHON "/usr/bin/python3"
#define MAX_ALLOCS 16
#define MAX_PY 64

static char tmpdir[] = "/tmp/kvt-pyframes-XXXXXX";
static char script[PATH_MAX], rtlib[PATH_MAX];
static int have_python;

struct py_alloc {                 /* one cudaMalloc event of the trace */
	uint64_t size;
	uint8_t placement;
	uint32_t stack_id;
};

struct py_site {                  /* one PYSTACK record, innermost frame */
	uint32_t stack_id, nr_frames, line;
	char func[128], file[256];
};

struct py_trace {
	struct py_alloc a[MAX_ALLOCS];
	unsigned nr_allocs;
	struct py_site s[MAX_PY];
	unsigned nr_py;
	char infos[8192];             /* "\nkey=value" per INFO record */
	size_t infos_len;
};

static int suite_init(void)
{
	char src[PATH_MAX];
	snprintf(src, sizeof src, "%s", __FILE__);          /* tests/unit/test_pyframes.c */
	char *slash = strrchr(src, '/');
	if (!slash || !mkdtemp(tmpdir))
		return -1;
	snprintf(slash, sizeof src - (size_t)(slash - src), "/../progs/py_alloc.py");
	if (!realpath(src, script) || !realpath(kvt_path("fakecuda/libcudart.so.13"), rtlib))
		return -1;
	have_python = access(PYTHON, X_OK) == 0;
	return 0;
}

static int suite_clean(void)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- running the script and reading its trace ---- */

/* Python is not built with a sanitizer: under make tsan / make asan the
 * sanitizer's runtime must be preloaded before the instrumented libkvtier
 * (pulled in as libkvtier's dependency, TSan never sees the threads the
 * interpreter starts, and kvtier's instrumented hook crashed in the first
 * one). The runtime this suite itself runs on, found by one of its symbols. */
static void sanitizer_first(char *pre, size_t len)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#ifdef __SANITIZE_THREAD__
	void *sym = dlsym(RTLD_DEFAULT, "__tsan_init");
#else
	void *sym = dlsym(RTLD_DEFAULT, "__asan_init");
#endif
	Dl_info di;
	char lib[600];
	if (!sym || !dladdr(sym, &di) || !di.dli_fname ||
	    strncmp(pre, "LD_PRELOAD=", 11))
		return;
	size_t n = strlen(pre + 11);
	if (n >= sizeof lib || 11 + strlen(di.dli_fname) + 1 + n >= len)
		return;
	memcpy(lib, pre + 11, n + 1);
	snprintf(pre, len, "LD_PRELOAD=%s %.*s", di.dli_fname, (int)n, lib);
#else
	(void)pre;
	(void)len;
#endif
}

static struct kvt_child child;

/* py_alloc.py MODE under kvtier, tracing to <tmpdir>/<name>.%p.trace. */
static int run_py(const char *name, const char *mode, const char *policy, const char *extra)
{
	char lib[512], fake[512], ld[600], pre[600], tr[800], pol[600];
	if (kvt_preload_env(lib, fake, ld, pre))
		return -1;
	sanitizer_first(pre, sizeof pre);
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/%s.%%p.trace", tmpdir, name);
	snprintf(pol, sizeof pol, "KVTIER_POLICY=%s", policy ? policy : "");
	const char *argv[] = { PYTHON, script, rtlib, mode, NULL };
	const char *env[] = { ld, pre, tr, pol, "KVTIER_MIGRATE=0", "KVTIER_STATS=0",
			      extra ? extra : "KVTIER_LOG=warn",
#ifdef __SANITIZE_ADDRESS__
			      /* CPython leaves its objects to the exit by design: leak
			       * checking stays on for every other suite, off for the
			       * interpreter (LeakSanitizer failed every run on its own
			       * allocations, 126 KiB in 117 blocks, none of kvtier's) */
			      "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=0",
#endif
			      NULL };
	if (kvt_run_bounded(&child, argv, env, 120) || child.exit_code) {
		fprintf(stderr, "py_alloc.py %s: exit %d\n%s\n", mode, child.exit_code, child.err);
		return -1;
	}
	return 0;
}

static void on_pystack(struct py_trace *t, const struct kvt_trace_item *it)
{
	if (t->nr_py >= MAX_PY || !it->pystack->nr_frames)
		return;
	struct py_site *s = &t->s[t->nr_py++];
	const struct kvt_trace_pyframe *f = &it->pyframes[0];
	s->stack_id = it->pystack->stack_id;
	s->nr_frames = it->pystack->nr_frames;
	s->line = f->line;
	snprintf(s->func, sizeof s->func, "%.*s", (int)f->func_len, f->func);
	snprintf(s->file, sizeof s->file, "%.*s", (int)f->file_len, f->file);
}

static int read_trace(const char *path, struct py_trace *t)
{
	static struct kvt_trace_reader rd;
	struct kvt_trace_item it;
	memset(t, 0, sizeof *t);
	if (kvt_trace_reader_open(&rd, path))
		return -1;
	int r;
	while ((r = kvt_trace_next(&rd, &it)) > 0) {
		if (it.ev && it.ev->op == KVT_OP_ALLOC && it.ev->api == KVT_API_cudaMalloc &&
		    t->nr_allocs < MAX_ALLOCS)
			t->a[t->nr_allocs++] = (struct py_alloc){ it.ev->size, it.ev->placement,
								   it.ev->stack_id };
		else if (it.pystack)
			on_pystack(t, &it);
		else if (it.type == KVT_REC_INFO && t->infos_len + it.text_len + 2 < sizeof t->infos)
			t->infos_len += (size_t)snprintf(t->infos + t->infos_len,
							 sizeof t->infos - t->infos_len, "\n%.*s",
							 (int)it.text_len, it.text);
	}
	kvt_trace_reader_close(&rd);
	if (r < 0)
		fprintf(stderr, "%s: %s\n", path, rd.err);
	return r < 0 ? -1 : 0;
}

/* Paths of the traces <tmpdir>/<name>.<pid>.trace (up to max); how many. */
static int traces_of(const char *name, char out[][PATH_MAX], int max)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	size_t n = strlen(name);
	int got = 0;
	while (d && got < max && (e = readdir(d)))
		if (!strncmp(e->d_name, name, n) && e->d_name[n] == '.')
			snprintf(out[got++], PATH_MAX, "%s/%s", tmpdir, e->d_name);
	if (d)
		closedir(d);
	return got;
}

static int find_trace(const char *name, char *out)
{
	char paths[2][PATH_MAX];
	if (traces_of(name, paths, 2) != 1)
		return -1;
	memcpy(out, paths[0], PATH_MAX);
	return 0;
}

static long out_value(const char *key)
{
	char k[64];
	snprintf(k, sizeof k, "%s=", key);
	const char *p = strstr(child.out, k);
	return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

static const struct py_site *site_of(const struct py_trace *t, uint32_t stack_id)
{
	for (unsigned i = 0; i < t->nr_py; i++)
		if (t->s[i].stack_id == stack_id)
			return &t->s[i];
	return NULL;
}

static const struct py_alloc *alloc_of_size(const struct py_trace *t, uint64_t size)
{
	for (unsigned i = 0; i < t->nr_allocs; i++)
		if (t->a[i].size == size)
			return &t->a[i];
	return NULL;
}

#define MiB (1ull << 20)

/* Run MODE and read the main process's trace; 0 when it ran. */
static int traced(const char *name, const char *mode, const char *policy, const char *extra,
		  struct py_trace *t)
{
	char path[PATH_MAX];
	if (run_py(name, mode, policy, extra) || find_trace(name, path))
		return -1;
	return read_trace(path, t);
}

/* ---- the tests ---- */

static struct py_trace tr;

/* GIL held: the 64 MiB cudaMalloc's stack id has a PYSTACK whose innermost
 * frame is allocate_kv_cache_tensors at the script's marked line. */
static void test_gil_held_records_frames(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(traced("gil", "gil", NULL, NULL, &tr) == 0);
	long kv_line = out_value("kv_line"), other_line = out_value("other_line");
	CU_ASSERT_FATAL(kv_line > 0 && other_line > 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB), *other = alloc_of_size(&tr, 32 * MiB);
	CU_ASSERT_FATAL(kv && other);
	const struct py_site *s = site_of(&tr, kv->stack_id), *o = site_of(&tr, other->stack_id);
	CU_ASSERT_FATAL(s && o);
	if (!s || !o)
		return;
	CU_ASSERT_STRING_EQUAL(s->func, "allocate_kv_cache_tensors");
	CU_ASSERT_EQUAL(s->line, (uint32_t)kv_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(s->file, "py_alloc.py"));
	CU_ASSERT(s->nr_frames >= 3);              /* allocate, main, <module> */
	CU_ASSERT_STRING_EQUAL(o->func, "other_alloc");
	CU_ASSERT_EQUAL(o->line, (uint32_t)other_line);
	CU_ASSERT(kv->stack_id != other->stack_id);
	CU_ASSERT(kvt_info_u64(tr.infos, "python.captured", 0) >= 2);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "python.fallback.no_gil", 99), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(tr.infos, "\npython.version=3."));
}

/* `kvtier report` names the function and its line, in text and JSON. */
static void test_report_names_function(void)
{
	char path[PATH_MAX], label[128];
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(run_py("rep", "gil", NULL, NULL) == 0);
	long kv_line = out_value("kv_line");
	CU_ASSERT_FATAL(find_trace("rep", path) == 0);
	snprintf(label, sizeof label, "allocate_kv_cache_tensors (py_alloc.py:%ld)", kv_line);
	const char *argv[] = { kvt_path("kvtier"), "report", "-q", path, NULL };
	static struct kvt_child rc;
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0 && rc.exit_code == 0);
	const char *at = strstr(rc.out, label);
	CU_ASSERT_PTR_NOT_NULL(at);
	/* the biggest site by bytes, with its callers and native frames below */
	const char *top = strstr(rc.out, "top call sites by bytes");
	CU_ASSERT(top && at && at > top);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "from main (py_alloc.py:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "via cudaMalloc (libcudart.so.13"));
	const char *jargv[] = { kvt_path("kvtier"), "report", "-q", "--format", "json", path, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, jargv, NULL) == 0 && rc.exit_code == 0);
	char jf[PATH_MAX + 200];
	snprintf(jf, sizeof jf, "{\"function\":\"allocate_kv_cache_tensors\",\"file\":\"%s\",\"line\":%ld}",
		 script, kv_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, jf));
	const char *dargv[] = { kvt_path("kvtier"), "dump", path, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, dargv, NULL) == 0 && rc.exit_code == 0);
	snprintf(jf, sizeof jf, " allocate_kv_cache_tensors@%s:%ld ", script, kv_line);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, jf));
}

/* site~*allocate_kv_cache* places the KV allocation far; the other stays. */
static void test_site_rule_places(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	const char *rules = "device,site~*allocate_kv_cache* => managed:cxl; * => native";
	CU_ASSERT_FATAL(traced("site", "gil", rules, NULL, &tr) == 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB), *other = alloc_of_size(&tr, 32 * MiB);
	CU_ASSERT_FATAL(kv && other);
	CU_ASSERT_EQUAL(kv->placement, KVT_PLACE_MANAGED_FAR);
	CU_ASSERT_EQUAL(other->placement, KVT_PLACE_NATIVE);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "place.managed:far", 0), 1);
	/* a rule naming the file matches too (its basename) */
	CU_ASSERT_FATAL(traced("file", "gil", "device,site~py_alloc.py => managed:cxl; * => native",
			       NULL, &tr) == 0);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "place.managed:far", 0), 2);
}

/* ctypes.CDLL releases the GIL around the call: no Python frames, the
 * fallback counted, and the site~ rule cannot see the function. */
static void test_no_gil_falls_back(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	const char *rules = "device,site~*allocate_kv_cache* => managed:cxl; * => native";
	CU_ASSERT_FATAL(traced("nogil", "nogil", rules, NULL, &tr) == 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB);
	CU_ASSERT_FATAL(kv != NULL);
	CU_ASSERT_PTR_NULL(site_of(&tr, kv->stack_id));
	CU_ASSERT_NOT_EQUAL(kv->stack_id, 0);       /* the native stack is still there */
	CU_ASSERT_EQUAL(kv->placement, KVT_PLACE_NATIVE);
	/* both allocations, each for the rule and for the trace */
	CU_ASSERT(kvt_info_u64(tr.infos, "python.fallback.no_gil", 0) >= 2);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "python.captured", 99), 0);
}

/* A thread started by threading.Thread holds the GIL in its own call. */
static void test_thread(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(traced("thr", "thread", NULL, NULL, &tr) == 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB);
	CU_ASSERT_FATAL(kv != NULL);
	const struct py_site *s = site_of(&tr, kv->stack_id);
	CU_ASSERT_FATAL(s != NULL);
	if (!s)
		return;
	CU_ASSERT_STRING_EQUAL(s->func, "allocate_kv_cache_tensors");
	CU_ASSERT(s->nr_frames >= 2);               /* under threading's run() */
}

/* An atexit handler runs while the interpreter ends: still recorded, no crash. */
static void test_atexit(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(traced("ate", "atexit", NULL, NULL, &tr) == 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB);
	CU_ASSERT_FATAL(kv != NULL);
	const struct py_site *s = site_of(&tr, kv->stack_id);
	CU_ASSERT_FATAL(s != NULL);
	if (!s)
		return;
	CU_ASSERT_STRING_EQUAL(s->func, "allocate_kv_cache_tensors");
}

/* A forked child records its own Python frames in its own trace. */
static void test_fork(void)
{
	static char paths[4][PATH_MAX];
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(run_py("fork", "fork", NULL, NULL) == 0);
	int n = traces_of("fork", paths, 4), seen_child = 0, seen_parent = 0;
	CU_ASSERT_EQUAL_FATAL(n, 2);
	for (int i = 0; i < n; i++) {
		CU_ASSERT_FATAL(read_trace(paths[i], &tr) == 0);
		const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB);
		const struct py_alloc *other = alloc_of_size(&tr, 32 * MiB);
		CU_ASSERT(!kv != !other);           /* one each: the child's, the parent's */
		const struct py_alloc *a = kv ? kv : other;
		if (!a)
			continue;
		const struct py_site *s = site_of(&tr, a->stack_id);
		CU_ASSERT_FATAL(s != NULL);
		if (!s)
			return;
		CU_ASSERT_STRING_EQUAL(s->func, kv ? "allocate_kv_cache_tensors" : "other_alloc");
		if (other)     /* the child leaves by os._exit: no counters at exit */
			CU_ASSERT(kvt_info_u64(tr.infos, "python.captured", 0) >= 1);
		seen_child += kv != NULL;
		seen_parent += other != NULL;
	}
	CU_ASSERT(seen_child == 1 && seen_parent == 1);
}

/* KVTIER_PYTHON=0: native frames only, nothing counted. */
static void test_off(void)
{
	if (!have_python) {
		CU_PASS("no " PYTHON ": skipped");
		return;
	}
	CU_ASSERT_FATAL(traced("off", "gil", NULL, "KVTIER_PYTHON=0", &tr) == 0);
	const struct py_alloc *kv = alloc_of_size(&tr, 64 * MiB);
	CU_ASSERT_FATAL(kv != NULL);
	CU_ASSERT_NOT_EQUAL(kv->stack_id, 0);
	CU_ASSERT_EQUAL(tr.nr_py, 0);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "python.captured", 99), 0);
	CU_ASSERT_EQUAL(kvt_info_u64(tr.infos, "python.fallback.no_gil", 99), 0);
}

static CU_TestInfo tests[] = {
	{ "GIL held: frames recorded", test_gil_held_records_frames },
	{ "report names the function and line", test_report_names_function },
	{ "site~ rule on a Python function places", test_site_rule_places },
	{ "GIL released: fallback counted", test_no_gil_falls_back },
	{ "threading.Thread", test_thread },
	{ "atexit handler", test_atexit },
	{ "fork child", test_fork },
	{ "KVTIER_PYTHON=0", test_off },
	CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
	{ "pyframes", suite_init, suite_clean, NULL, NULL, tests },
	CU_SUITE_INFO_NULL,
};

int main(void)
{
	return kvt_test_main(suites);
}
