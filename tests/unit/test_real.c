// SPDX-License-Identifier: MIT
/* Real programs, unmodified, under the preload (issue 8): python3 + numpy,
 * redis-server with redis-benchmark and a BGSAVE, and C programs that fork,
 * exec, spawn threads and posix_spawn, dlopen/dlclose the CUDA driver
 * stand-in 50 times, and use RTLD_DEEPBIND (tests/real/). For each: exit
 * status and output identical with and without kvtier, nothing from kvtier
 * on stderr at the default log level, and every trace reads back (with an
 * END record unless the process exec'd) with nothing lost.
 *
 * The packages (python3-numpy, redis-server, redis-tools) are installed by
 * tests/real/setup.sh when missing; when that is impossible the tests that
 * need them pass with a "skipped" note. Each program runs under a hard time
 * limit (SIGALRM armed across exec); the whole suite takes ~40 s on 2 cores. */
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>

#include "kvt_test.h"
#include "kvtier/api.h"
#include "../profiler/trace_read.h"

static char lib[512], fakecuda[600], preload[600], tmpdir[256];
static int have_numpy, have_redis;

static int setup(void)
{
	char fc[512];
	if (!realpath(kvt_path("libkvtier.so"), lib) || !realpath(kvt_path("fakecuda"), fc))
		return 1;
	snprintf(fakecuda, sizeof fakecuda, "%s/libcuda.so.1", fc);
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/kvt-test-real.%d", (int)getpid());
	if (mkdir(tmpdir, 0700))
		return 1;
	/* Installs what is missing (apt-get); its failure only skips tests. */
	if (system("timeout 300 tests/real/setup.sh") != 0)
		fprintf(stderr, "test_real: tests/real/setup.sh could not install everything\n");
	have_numpy = system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
	have_redis = system("(command -v redis-server && command -v redis-cli && "
			    "command -v redis-benchmark && command -v redis-check-rdb) >/dev/null 2>&1") == 0;
	return 0;
}

static int teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	return system(cmd) ? 1 : 0;
}

/* A subdirectory of tmpdir (created), in a rotating buffer. */
static const char *subdir(const char *name)
{
	static char bufs[4][400];
	static int i;
	char *b = bufs[i++ & 3];
	snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
	mkdir(b, 0700);
	return b;
}


/* Options that would change kvtier's default behaviour, removed from the
 * environment of every run (the suite may itself run under such settings). */
#define CLEAN_ENV "KVTIER_LOG=", "KVTIER_VERBOSE=", "KVTIER_POLICY=", "KVTIER_DISABLE=", \
	"KVTIER_TRACE=", "KVTIER_INHERIT=", "KVTIER_STRICT="

/* The same run natively and under kvtier: both exit 0 and print the same;
 * the native run's stderr is what the kvtier run's must be (nothing added). */
static void same_run(const struct kvt_child *native, const struct kvt_child *kvt, const char *what)
{
	CU_ASSERT_EQUAL(native->exit_code, 0);
	CU_ASSERT_EQUAL(kvt->exit_code, native->exit_code);
	CU_ASSERT_STRING_EQUAL(kvt->out, native->out);
	CU_ASSERT_STRING_EQUAL(kvt->err, native->err);
	if (native->exit_code || kvt->exit_code || strcmp(kvt->out, native->out) ||
	    strcmp(kvt->err, native->err))
		fprintf(stderr, "%s: native rc=%d, kvtier rc=%d\n--- native stdout:\n%s"
			"--- native stderr:\n%s--- kvtier stdout:\n%s--- kvtier stderr:\n%s---\n",
			what, native->exit_code, kvt->exit_code, native->out, native->err,
			kvt->out, kvt->err);
}

/* ---- reading every trace a run left in a directory ---- */

#define MAX_FILES 16
struct tfile {
	char name[256];
	uint32_t pid, ppid;
	char exe[17];
	int ret, ended;
	uint64_t dropped, events;
	unsigned long allocs[KVT_KIND__COUNT], frees[KVT_KIND__COUNT];
};
struct tdir {
	unsigned nr, nr_bad, nr_ended;
	struct tfile f[MAX_FILES];
};

/* Calls fn on every event of every file too (may be NULL). */
static void read_traces(const char *dir, struct tdir *d,
			void (*fn)(struct tfile *, const struct kvt_rec_event *, void *), void *arg)
{
	static struct kvt_trace_reader r;
	memset(d, 0, sizeof *d);
	DIR *dp = opendir(dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
	struct dirent *de;
	while ((de = readdir(dp)) && d->nr < MAX_FILES) {
		if (!strstr(de->d_name, ".trace"))
			continue;
		struct tfile *f = &d->f[d->nr++];
		char path[700];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		snprintf(f->name, sizeof f->name, "%s", de->d_name);
		f->ret = kvt_trace_reader_open(&r, path);
		if (f->ret == 0) {
			struct kvt_trace_item it;
			f->pid = r.hdr.pid;
			f->ppid = r.hdr.ppid;
			memcpy(f->exe, r.hdr.exe, 16);
			while ((f->ret = kvt_trace_next(&r, &it)) > 0) {
				if (it.ev) {
					f->events++;
					if (it.ev->kind < KVT_KIND__COUNT && !it.ev->result) {
						f->allocs[it.ev->kind] += it.ev->op == KVT_OP_ALLOC;
						f->frees[it.ev->kind] += it.ev->op == KVT_OP_FREE;
					}
					if (fn)
						fn(f, it.ev, arg);
				}
				if (it.end)
					f->dropped = it.end->nr_dropped;
			}
			f->ended = r.saw_end;
		}
		if (f->ret < 0)
			fprintf(stderr, "%s: %s\n", path, r.err);
		kvt_trace_reader_close(&r);
		d->nr_bad += f->ret != 0;
		d->nr_ended += f->ended;
		CU_ASSERT_EQUAL(f->ret, 0);          /* reads back to a clean end */
		CU_ASSERT_EQUAL(f->dropped, 0);      /* nothing lost */
	}
	closedir(dp);
}

static void print_traces(const char *what, const struct tdir *d)
{
	for (unsigned i = 0; i < d->nr; i++)
		fprintf(stderr, "%s: %s pid=%u ppid=%u exe=%s events=%" PRIu64 " end=%d\n", what,
			d->f[i].name, d->f[i].pid, d->f[i].ppid, d->f[i].exe, d->f[i].events,
			d->f[i].ended);
}

/* ---- python3 + numpy ----
 * The policy binds anonymous maps of 64 MiB and more to the far node. Note:
 * glibc's malloc maps large blocks with internal mmap calls no preload sees,
 * so numpy's 1 GiB arrays themselves are not bound (nor traced); Python's own
 * arenas do use mmap through the PLT and are seen (traced, 1 MiB each: below
 * the rule's size, so native). The --mmap run's mmap.mmap(-1, 512 MiB) is
 * the map the rule binds: /proc/self/numa_maps shows "default" natively and
 * "prefer:N" (N = the far node; 0 on a one-node machine) under kvtier. */

#define NP_POLICY "KVTIER_POLICY=mmap,size>=64M => bind:cxl; * => native"

struct np_big { uint64_t addr; int allocs, frees, bound, heap_gib, heap_gib_bound; };

static void np_event(struct tfile *f, const struct kvt_rec_event *e, void *arg)
{
	(void)f;
	struct np_big *b = arg;
	/* numpy's 1 GiB arrays: heap blocks (malloc), which the rule binds */
	if (e->kind == KVT_KIND_MMAP && e->op == KVT_OP_ALLOC && e->api != KVT_API_mmap &&
	    e->size == (1u << 30) && !e->result) {
		b->heap_gib++;
		b->heap_gib_bound += e->placement == KVT_PLACE_BIND_FAR;
	}
	/* the program's own mmap (numpy's 512 MiB temporaries are heap blocks) */
	if (e->kind != KVT_KIND_MMAP || e->size != (512u << 20) || e->result ||
	    (e->api != KVT_API_mmap && e->api != KVT_API_munmap))
		return;
	if (e->op == KVT_OP_ALLOC) {
		b->allocs++;
		b->addr = e->addr;
		b->bound += e->placement == KVT_PLACE_BIND_FAR;
	} else if (e->op == KVT_OP_FREE && e->addr == b->addr) {
		b->frees++;
	}
}

static void check_numpy(int with_mmap)
{
	const char *san = getenv("SAN");
	if (san && !strcmp(san, "thread")) {
		/* python3 cannot host a TSan-built preload (the TSan runtime must
		 * be linked into the executable) */
		CU_PASS("skipped under ThreadSanitizer");
		return;
	}
	static struct kvt_child a, b;
	static struct tdir d;
	if (!have_numpy) {
		CU_PASS("python3-numpy not installed and not installable: skipped");
		return;
	}
	const char *dir = subdir(with_mmap ? "numpy-mmap" : "numpy");
	char tr[500];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/np.%%p.trace", dir);
	const char *argv[] = { "/usr/bin/python3", "tests/real/numpy_check.py",
			       with_mmap ? "--mmap" : NULL, NULL };
	const char *env_none[] = { CLEAN_ENV, "LD_PRELOAD=", NULL };
	const char *env_kvt[] = { CLEAN_ENV, preload, tr, NP_POLICY, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&a, argv, env_none, 60), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&b, argv, env_kvt, 60), 0);
	if (with_mmap) {
		/* The one line that must differ: the buffer's NUMA policy. */
		char *pa = strstr(a.out, "mmapbuf numa policy=");
		char *pb = strstr(b.out, "mmapbuf numa policy=");
		CU_ASSERT_PTR_NOT_NULL_FATAL(pa);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pb);
		pa += 20;
		pb += 20;
		CU_ASSERT_EQUAL(strncmp(pa, "default\n", 8), 0);
		CU_ASSERT_EQUAL(strncmp(pb, "prefer:", 7), 0);
		if (strncmp(pb, "prefer:", 7))
			fprintf(stderr, "numpy --mmap under kvtier: policy %.40s\n", pb);
		/* Blank the word out in both, then compare the rest. */
		for (char *p = pa; *p && *p != '\n'; p++)
			*p = '#';
		for (char *p = pb; *p && *p != '\n'; p++)
			*p = '#';
		char *ea = strchr(pa, '\n'), *eb = strchr(pb, '\n');
		if (ea && eb && ea - pa != eb - pb) {   /* same length for the compare */
			memmove(pb + (ea - pa), eb, strlen(eb) + 1);
		}
	}
	same_run(&a, &b, with_mmap ? "numpy --mmap" : "numpy");
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "done\n"));
	struct np_big big = { 0, 0, 0, 0, 0, 0 };
	read_traces(dir, &d, np_event, &big);
	CU_ASSERT_EQUAL(d.nr, 1);
	CU_ASSERT_EQUAL(d.nr_ended, d.nr);
	CU_ASSERT_TRUE(d.nr && d.f[0].allocs[KVT_KIND_MMAP] > 0);   /* Python's arenas */
	if (with_mmap) {
		CU_ASSERT_EQUAL(big.allocs, 1);
		CU_ASSERT_EQUAL(big.bound, 1);
		CU_ASSERT_EQUAL(big.frees, 1);
	} else {
		CU_ASSERT_EQUAL(big.allocs, 0);
	}
	/* the two 1 GiB arrays, bound by the size rule (preload/hook_heap.c) */
	CU_ASSERT_EQUAL(big.heap_gib, 2);
	CU_ASSERT_EQUAL(big.heap_gib_bound, 2);
}

static void test_numpy(void) { check_numpy(0); }
static void test_numpy_mmap(void) { check_numpy(1); }

/* ---- redis-server + redis-benchmark + BGSAVE ---- */

static void test_redis(void)
{
	const char *san = getenv("SAN");
	if (san && !strcmp(san, "thread")) {
		/* ThreadSanitizer's runtime must be linked into the executable:
		 * python3, redis-server and /bin/true cannot host a TSan-built preload */
		CU_PASS("skipped under ThreadSanitizer");
		return;
	}
	static struct kvt_child a, b;
	static struct tdir d;
	if (!have_redis) {
		CU_PASS("redis-server/redis-tools not installed and not installable: skipped");
		return;
	}
	const char *dir0 = subdir("redis-native");
	const char *dir1 = subdir("redis-kvtier");
	const char *argv0[] = { "tests/real/redis_check.sh", dir0, NULL, NULL };
	const char *argv1[] = { "tests/real/redis_check.sh", dir1, lib, NULL };
	const char *env[] = { CLEAN_ENV, "LD_PRELOAD=", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&a, argv0, env, 150), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&b, argv1, env, 150), 0);
	same_run(&a, &b, "redis");
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "mget: 50000 own values compared, 0 differ"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "bgsave finished: 1, status: ok"));
	/* Nothing from kvtier in the server's own stderr. */
	char path[600];
	snprintf(path, sizeof path, "%s/server.err", dir1);
	size_t n = 1;
	char *err = kvt_slurp(path, &n);
	CU_ASSERT_PTR_NOT_NULL(err);
	CU_ASSERT_EQUAL(n, 0);
	if (err && n)
		fprintf(stderr, "redis-server stderr under kvtier:\n%s", err);
	free(err);
	/* The server's trace and its BGSAVE child's. */
	read_traces(dir1, &d, NULL, NULL);
	print_traces("redis", &d);
	CU_ASSERT_TRUE(d.nr >= 2);
	unsigned server = 0, children = 0;
	for (unsigned i = 0; i < d.nr; i++) {
		const struct tfile *f = &d.f[i];
		int is_child = 0;
		for (unsigned j = 0; j < d.nr; j++)
			is_child |= f->ppid == d.f[j].pid && j != i;
		if (is_child) {
			children++;
			/* Redis's fork child leaves with _exit(): the trace must
			 * still be complete (it neither exec'd nor crashed). */
			CU_ASSERT_TRUE(f->ended);
		} else {
			server++;
			CU_ASSERT_TRUE(f->ended);
			CU_ASSERT_TRUE(f->allocs[KVT_KIND_MMAP] > 0);   /* jemalloc's maps */
		}
	}
	CU_ASSERT_EQUAL(server, 1);
	CU_ASSERT_TRUE(children >= 1);                          /* the BGSAVE */
}

/* ---- fork + threads + exec, posix_spawn, posix_spawnp ---- */

static void test_spawner(void)
{
	const char *san = getenv("SAN");
	if (san && !strcmp(san, "thread")) {
		/* ThreadSanitizer's runtime must be linked into the executable:
		 * python3, redis-server and /bin/true cannot host a TSan-built preload */
		CU_PASS("skipped under ThreadSanitizer");
		return;
	}
	static struct kvt_child a, b;
	static struct tdir d;
	const char *dir = subdir("spawner");
	char tr[500];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/sp.%%p.trace", dir);
	const char *argv[] = { kvt_path("tests/real/spawner"), NULL };
	const char *env_none[] = { CLEAN_ENV, "LD_PRELOAD=", NULL };
	const char *env_kvt[] = { CLEAN_ENV, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&a, argv, env_none, 30), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&b, argv, env_kvt, 30), 0);
	same_run(&a, &b, "spawner");
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "spawner ok\n"));
	read_traces(dir, &d, NULL, NULL);
	print_traces("spawner", &d);
	/* parent, forked child before exec, the leaf it exec'd (same pid),
	 * the posix_spawn'd leaf, `true`: five traces, four ended (the forked
	 * child's image exec'd: its trace is flushed without END). */
	CU_ASSERT_EQUAL(d.nr, 5);
	CU_ASSERT_EQUAL(d.nr_ended, 4);
	unsigned threaded = 0;
	for (unsigned i = 0; i < d.nr; i++) {
		const struct tfile *f = &d.f[i];
		if (f->ended)
			continue;
		threaded++;
		/* 4 threads x 100 x (mmap + munmap of 2 MiB): every one recorded. */
		CU_ASSERT_EQUAL(f->allocs[KVT_KIND_MMAP], 400);
		CU_ASSERT_EQUAL(f->frees[KVT_KIND_MMAP], 400);
		if (f->frees[KVT_KIND_MMAP] != 400)
			fprintf(stderr, "spawner: child trace %s: %lu mmap, %lu munmap recorded (400 each made)\n",
				f->name, f->allocs[KVT_KIND_MMAP], f->frees[KVT_KIND_MMAP]);
	}
	CU_ASSERT_EQUAL(threaded, 1);

	/* KVTIER_INHERIT=0: same output; only the parent and its forked child
	 * (before its exec) are traced, not the exec'd or spawned images. */
	static struct kvt_child c;
	const char *dir0 = subdir("spawner-noinherit");
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/sp.%%p.trace", dir0);
	const char *env_noinh[] = { CLEAN_ENV, preload, tr, "KVTIER_INHERIT=0", NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&c, argv, env_noinh, 30), 0);
	same_run(&a, &c, "spawner KVTIER_INHERIT=0");
	read_traces(dir0, &d, NULL, NULL);
	CU_ASSERT_EQUAL(d.nr, 2);
	CU_ASSERT_EQUAL(d.nr_ended, 1);
}

/* ---- the driver dlopen'ed and dlclose'd 50 times ---- */

struct dl_count { unsigned allocs, frees; };

static void dl_event(struct tfile *f, const struct kvt_rec_event *e, void *arg)
{
	(void)f;
	struct dl_count *c = arg;
	if (e->kind != KVT_KIND_DEVICE || e->result)
		return;
	c->allocs += e->op == KVT_OP_ALLOC && e->size == (1u << 20) &&
		     !strcmp(kvt_api_name(e->api), "cuMemAlloc_v2");
	c->frees += e->op == KVT_OP_FREE && !strcmp(kvt_api_name(e->api), "cuMemFree_v2");
}

static void test_dlcycle(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {
		/* the programs are instrumented in sanitizer builds and the
		 * sanitizer reports the stand-in driver's state on dlclose
		 * natively too: this check is for plain builds */
		CU_PASS("skipped in sanitizer builds");
		return;
	}
	static struct kvt_child a, b;
	static struct tdir d;
	const char *dir = subdir("dlcycle");
	char tr[500];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/dl.%%p.trace", dir);
	const char *argv[] = { kvt_path("tests/real/dlcycle"), fakecuda, "50", NULL };
	const char *env_none[] = { CLEAN_ENV, "LD_PRELOAD=", NULL };
	const char *env_kvt[] = { CLEAN_ENV, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&a, argv, env_none, 30), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&b, argv, env_kvt, 30), 0);
	same_run(&a, &b, "dlcycle");
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "total: 50 cycles, 50 ok, 50 allocs, 50 frees\n"));
	struct dl_count c = { 0, 0 };
	read_traces(dir, &d, dl_event, &c);
	CU_ASSERT_EQUAL(d.nr, 1);
	CU_ASSERT_EQUAL(d.nr_ended, 1);
	CU_ASSERT_EQUAL(c.allocs, 50);
	CU_ASSERT_EQUAL(c.frees, 50);
}

/* ---- RTLD_DEEPBIND ----
 * A library opened with RTLD_DEEPBIND resolves its own references in its
 * own dependency chain (libc) before the global scope where the preload is:
 * its direct mmap/munmap calls bypass kvtier (like any LD_PRELOAD
 * interposer; printed, not asserted). The driver opened with RTLD_DEEPBIND
 * is still hooked: its entry points come through cuGetProcAddress_v2. */

struct deep_count { unsigned exe_map, lib_maps, dev_alloc, dev_free; };

static void deep_event(struct tfile *f, const struct kvt_rec_event *e, void *arg)
{
	(void)f;
	struct deep_count *c = arg;
	if (e->result || e->op != KVT_OP_ALLOC) {
		c->dev_free += e->op == KVT_OP_FREE && e->kind == KVT_KIND_DEVICE && !e->result;
		return;
	}
	c->exe_map += e->kind == KVT_KIND_MMAP && e->size == (4u << 20);
	c->lib_maps += e->kind == KVT_KIND_MMAP && (e->size == (6u << 20) || e->size == (10u << 20));
	c->dev_alloc += e->kind == KVT_KIND_DEVICE && e->size == (2u << 20);
}

static void test_deepbind(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {
		/* the programs are instrumented in sanitizer builds and the
		 * sanitizer reports the stand-in driver's state on dlclose
		 * natively too: this check is for plain builds */
		CU_PASS("skipped in sanitizer builds");
		return;
	}
	static struct kvt_child a, b;
	static struct tdir d;
	const char *dir = subdir("deepbind");
	char tr[500];
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/db.%%p.trace", dir);
	char deep[512];
	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(kvt_path("tests/real/libdeep.so"), deep));
	const char *argv[] = { kvt_path("tests/real/deepbind"), deep, fakecuda, NULL };
	const char *env_none[] = { CLEAN_ENV, "LD_PRELOAD=", NULL };
	const char *env_kvt[] = { CLEAN_ENV, preload, tr, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&a, argv, env_none, 30), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(&b, argv, env_kvt, 30), 0);
	same_run(&a, &b, "deepbind");
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "deep: whoami from inside the library: library\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.out, "deepbind ok\n"));
	struct deep_count c = { 0, 0, 0, 0 };
	read_traces(dir, &d, deep_event, &c);
	CU_ASSERT_EQUAL(d.nr, 1);
	CU_ASSERT_EQUAL(d.nr_ended, 1);
	CU_ASSERT_EQUAL(c.exe_map, 1);
	CU_ASSERT_EQUAL(c.dev_alloc, 1);
	CU_ASSERT_EQUAL(c.dev_free, 1);
	fprintf(stderr, "deepbind: the RTLD_DEEPBIND library's own maps seen by kvtier: %u of 2\n",
		c.lib_maps);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "numpy: 2 GiB arrays, 8 threads, bind policy: same output", test_numpy },
		{ "numpy: own 512 MiB mmap bound (numa_maps prefer:N)", test_numpy_mmap },
		{ "redis: 200k benchmark + 50k keys + BGSAVE, all read back", test_redis },
		{ "fork + threads + exec, posix_spawn, posix_spawnp", test_spawner },
		{ "driver dlopen/dlclose x50 with cuMemAlloc/cuMemFree", test_dlcycle },
		{ "RTLD_DEEPBIND library and driver", test_deepbind },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "real", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
