// SPDX-License-Identifier: MIT
/* AT_SECURE: in a set-user-ID process kvtier is inert and reads no variable,
 * and nothing makes it load a library from a planted path. A set-user-ID
 * root copy of tests/progs/secure_probe, run as nobody, dlopen()s libkvtier
 * (glibc ignores LD_PRELOAD paths there) with a trace, debug logging, the
 * verbose table, a policy, KVTIER_INHERIT=0, an unknown KVTIER_ name and
 * LD_LIBRARY_PATH at a directory holding a planted libcupti.so.13 and
 * libcxl.so.1. The same program without the set-user-ID bit is the control:
 * it does every one of those things, so each check can fail (and it checks
 * that a CUPTI which fails after running stays loaded). Needs root
 * (chown, switching to nobody); skipped with a note otherwise. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include "kvt_test.h"
#include "kvtier/api.h"
#include "../profiler/trace_read.h"

#define NOBODY "65534"

static char dir[128], out_dir[200], planted[200];
static char probe[300], probe_suid[300], lib[300], cuda[300];
static char trace_env[600], ldpath_env[600], unknown_env[600];
static const char *skip_why;          /* set: every test passes with this note */

/* ---- setup: copies in a scratch directory nobody can read ------------- */

static int copy_file(const char *from, const char *to, mode_t mode)
{
	size_t len = 0;
	char *buf = kvt_slurp(from, &len);
	if (!buf)
		return -1;
	int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len &&
		 fchown(fd, 0, 0) == 0 && fchmod(fd, mode) == 0;
	if (fd >= 0)
		close(fd);
	free(buf);
	return ok ? 0 : -1;
}

static int no_new_privs(void)
{
	char *s = kvt_slurp("/proc/self/status", NULL);
	int set = s && strstr(s, "NoNewPrivs:\t1");
	free(s);
	return set;
}

static int mkdir_mode(const char *path, mode_t mode)
{
	return mkdir(path, mode) || chmod(path, mode) ? -1 : 0;   /* past the umask */
}

static int setup(void)
{
	struct statvfs vfs;
	if (geteuid() != 0) {
		skip_why = "skipped: not root (cannot make a set-user-ID root copy)";
		return 0;
	}
	if (access("/usr/bin/setpriv", X_OK)) {
		skip_why = "skipped: /usr/bin/setpriv (util-linux) missing";
		return 0;
	}
	if (no_new_privs()) {
		skip_why = "skipped: no_new_privs is set here, set-user-ID has no effect";
		return 0;
	}
	snprintf(dir, sizeof dir, "/tmp/kvt-test-secure.XXXXXX");
	if (!mkdtemp(dir) || chmod(dir, 0755))
		return 1;
	if (statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) {
		skip_why = "skipped: /tmp is mounted nosuid";
		return 0;
	}
	snprintf(out_dir, sizeof out_dir, "%s/out", dir);
	snprintf(planted, sizeof planted, "%s/planted", dir);
	snprintf(probe, sizeof probe, "%s/secure_probe", dir);
	snprintf(probe_suid, sizeof probe_suid, "%s/secure_probe.suid", dir);
	snprintf(lib, sizeof lib, "%s/libkvtier.so", dir);
	snprintf(cuda, sizeof cuda, "%s/libcuda.so.1", dir);
	char cupti[300], cxl[300];
	snprintf(cupti, sizeof cupti, "%s/libcupti.so.13", planted);
	snprintf(cxl, sizeof cxl, "%s/libcxl.so.1", planted);
	const char *planted_so = kvt_path("tests/progs/libsecure_planted.so");
	if (mkdir_mode(out_dir, 0777) || mkdir_mode(planted, 0777) ||
	    copy_file(kvt_path("tests/progs/secure_probe"), probe, 0755) ||
	    copy_file(kvt_path("tests/progs/secure_probe"), probe_suid, 04755) ||
	    copy_file(kvt_path("libkvtier.so"), lib, 0755) ||
	    copy_file(kvt_path("fakecuda/libcuda.so.1"), cuda, 0755) ||
	    copy_file(planted_so, cupti, 0755) || copy_file(planted_so, cxl, 0755))
		return 1;
	snprintf(trace_env, sizeof trace_env, "KVTIER_TRACE=%s/trace.%%p", out_dir);
	snprintf(ldpath_env, sizeof ldpath_env, "LD_LIBRARY_PATH=%s", planted);
	snprintf(unknown_env, sizeof unknown_env, "KVTIER_CUPTI_LIB=%s", cupti);
	return 0;
}

static int teardown(void)
{
	char cmd[200];
	if (!dir[0])
		return 0;
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) ? 1 : 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* Empty out/ and the planted markers between runs. */
static void clean(void)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -f %s/* %s/*.loaded", out_dir, planted);
	if (system(cmd))
		fprintf(stderr, "clean: %s failed\n", cmd);
}

/* The probe (prog: set-user-ID or not) as nobody, with env. */
static void run_probe(struct kvt_child *c, const char *prog, const char *const env[],
		      const char *wait_ms)
{
	char marker[400];
	snprintf(marker, sizeof marker, "%s/libcupti.so.13.loaded", planted);
	const char *argv[] = { "/usr/bin/setpriv", "--reuid=" NOBODY, "--regid=" NOBODY,
			       "--clear-groups", "--", prog, lib, cuda, marker, wait_ms, NULL };
	clean();
	CU_ASSERT_EQUAL_FATAL(kvt_run_bounded(c, argv, env, 120), 0);
}

/* The value of a probe line "key=value" ("" when absent). */
static const char *field(const struct kvt_child *c, const char *key)
{
	static char val[520];
	char pat[64];
	snprintf(pat, sizeof pat, "%s=", key);
	val[0] = 0;
	for (const char *p = c->out; (p = strstr(p, pat)); p++) {
		if (p != c->out && p[-1] != '\n')
			continue;
		p += strlen(pat);
		snprintf(val, sizeof val, "%.*s", (int)strcspn(p, "\n"), p);
		break;
	}
	return val;
}

/* Entries in out/ (the first one's path into first). */
static int nr_out_files(char first[600])
{
	int n = 0;
	DIR *d = opendir(out_dir);
	struct dirent *e;
	first[0] = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (!n++)
			snprintf(first, 600, "%s/%s", out_dir, e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

static int marker(const char *soname)
{
	char path[400];
	snprintf(path, sizeof path, "%s/%s.loaded", planted, soname);
	return access(path, F_OK) == 0;
}

struct seen { unsigned mmap_4m, cumem_1m, records; int end, rc; };

static struct seen read_trace(const char *path)
{
	static struct kvt_trace_reader r;
	struct kvt_trace_item it;
	struct seen s = { 0 };
	s.rc = kvt_trace_reader_open(&r, path);
	while (!s.rc && (s.rc = kvt_trace_next(&r, &it)) == 1) {
		s.rc = 0;
		s.records++;
		if (it.type != KVT_REC_EVENT || it.ev->op != KVT_OP_ALLOC)
			continue;
		s.mmap_4m += it.ev->api == KVT_API_mmap && it.ev->size == 4u << 20;
		s.cumem_1m += it.ev->api == KVT_API_cuMemAlloc_v2 && it.ev->size == 1u << 20;
	}
	s.end = r.saw_end;
	kvt_trace_reader_close(&r);
	return s;
}

/* Every kind of variable kvtier reads, plus a path for the loader. */
#define LOUD_ENV(policy)                                                        \
	{ trace_env, "KVTIER_LOG=debug", "KVTIER_VERBOSE=1", "KVTIER_INHERIT=0",   \
	  "KVTIER_EPOCH_MS=10", "KVTIER_POLICY=" policy, unknown_env, ldpath_env, \
	  "KVTIER_STATS=1", NULL }

/* ---- tests -------------------------------------------------------------- */

/* Set-user-ID root, run as nobody: kvtier must do nothing at all. */
static void test_setuid_inert(void)
{
	static struct kvt_child c;
	char first[600];
	if (skip_why) {
		CU_PASS(skip_why);
		return;
	}
	const char *env[] = LOUD_ENV("device => managed:cxl; * => native");
	run_probe(&c, probe_suid, env, "300");
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(field(&c, "secure"), "1");
	CU_ASSERT_STRING_EQUAL(field(&c, "cuda"), "ok");           /* the program worked */
	CU_ASSERT_EQUAL(c.err_len, 0);                             /* not one line */
	CU_ASSERT_EQUAL(nr_out_files(first), 0);                   /* no trace */
	CU_ASSERT_STRING_EQUAL(field(&c, "new_threads"), "0");     /* no migrator */
	CU_ASSERT_STRING_EQUAL(field(&c, "stats"), "0");           /* no /dev/shm segment */
	CU_ASSERT_STRING_EQUAL(field(&c, "ld_preload"), "kept");   /* KVTIER_INHERIT unread */
	CU_ASSERT_STRING_EQUAL(field(&c, "cupti"), "none");
	CU_ASSERT_FALSE(marker("libcupti.so.13"));
	CU_ASSERT_FALSE(marker("libcxl.so.1"));
	if (c.exit_code || c.err_len || first[0])
		fprintf(stderr, "set-user-ID run: exit %d, out:\n%s\nerr:\n%s\nfile: %s\n",
			c.exit_code, c.out, c.err, first);
}

/* The same program and variables without the set-user-ID bit. */
static void test_control_active(void)
{
	static struct kvt_child c;
	char first[600];
	if (skip_why) {
		CU_PASS(skip_why);
		return;
	}
	const char *env[] = LOUD_ENV("device => managed:cxl; * => native");
	run_probe(&c, probe, env, "10000");
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(field(&c, "secure"), "0");
	CU_ASSERT_STRING_EQUAL(field(&c, "cuda"), "ok");
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "]: KVTIER_TRACE "));          /* verbose table */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "unknown variable 'KVTIER_CUPTI_LIB"));
	CU_ASSERT_TRUE(atoi(field(&c, "new_threads")) >= 1);
	CU_ASSERT_STRING_EQUAL(field(&c, "stats"), "1");
	CU_ASSERT_STRING_EQUAL(field(&c, "ld_preload"), "changed");
	/* the profiler loaded CUPTI from LD_LIBRARY_PATH: the planted copy,
	 * which refused service after leaving a destructor on the migration
	 * thread; kvtier keeps it loaded, so that thread exits cleanly */
	CU_ASSERT_STRING_EQUAL(field(&c, "cupti"), "loaded");
	CU_ASSERT_TRUE(marker("libcupti.so.13"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "CUPTI unavailable (cuptiActivityRegisterCallbacks: CUPTI error 999)"));
	CU_ASSERT_EQUAL_FATAL(nr_out_files(first), 1);
	struct seen s = read_trace(first);
	CU_ASSERT_EQUAL(s.rc, 0);
	CU_ASSERT_EQUAL(s.mmap_4m, 1);
	CU_ASSERT_EQUAL(s.cumem_1m, 1);
	CU_ASSERT_TRUE(s.end);
	if (c.exit_code)
		fprintf(stderr, "control run: exit %d, out:\n%s\nerr:\n%s\n", c.exit_code, c.out, c.err);
}

/* KVTIER_STRICT=1 with a policy that does not parse aborts the control;
 * under AT_SECURE neither variable is read. */
static void test_strict_unread(void)
{
	static struct kvt_child c;
	if (skip_why) {
		CU_PASS(skip_why);
		return;
	}
	const char *env[] = { "KVTIER_STRICT=1", "KVTIER_POLICY=device => warp:9", NULL };
	run_probe(&c, probe_suid, env, "0");
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(field(&c, "secure"), "1");
	CU_ASSERT_EQUAL(c.err_len, 0);
	run_probe(&c, probe, env, "0");
	CU_ASSERT_EQUAL(c.exit_code, 128 + SIGABRT);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "KVTIER_STRICT=1, aborting"));
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "set-user-ID as nobody: inert, no trace, no output, nothing planted loaded",
		  test_setuid_inert },
		{ "control without set-user-ID: the same run traces, logs and loads",
		  test_control_active },
		{ "KVTIER_STRICT + bad policy: unread under AT_SECURE (control aborts)",
		  test_strict_unread },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "secure", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
