// SPDX-License-Identifier: MIT
/* Bad input and faults the host process must survive: every KVTIER_*
 * variable given junk (values, lengths, encodings, signs, huge numbers),
 * unknown KVTIER_ names, and the trace's disk filling up. The program
 * always runs on with its own output unchanged; kvtier says one clear line
 * per problem, naming the variable. */
#include <sys/mount.h>
#include <sys/stat.h>

#include "kvt_test.h"
#include "../base/kvt.h"

static char preload[600], mmap_ops[512], rt_stress[512], fakedir[512], workdir[128];

/* Absolute paths, then work in a scratch directory: junk KVTIER_TRACE
 * values name files relative to the current directory. */
static int setup(void)
{
	char lib[512];
	if (!realpath(kvt_path("libkvtier.so"), lib) ||
	    !realpath(kvt_path("tests/progs/mmap_ops"), mmap_ops) ||
	    !realpath(kvt_path("tests/progs/rt_stress"), rt_stress) ||
	    !realpath(kvt_path("fakecuda"), fakedir))
		return 1;
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
	snprintf(workdir, sizeof workdir, "/tmp/kvt-test-faults.%d", (int)getpid());
	return mkdir(workdir, 0700) || chdir(workdir);
}

static int teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", workdir);
	return chdir("/") || system(cmd) ? 1 : 0;
}

static const char *const junk[] = {
	"", "-1", "0x10", "99999999999999999999999", "1e9", "yes please", "12QB",
	"\xff\xfe\x80", "%p%p%n%s", "on;rm -rf /", "2-", "nan", "-9223372036854775808",
};

/* One run of mmap_ops with NAME=VALUE: it must exit 0 with its usual
 * output; anything kvtier prints must name the variable. */
static int run_with(const char *name, const char *value, struct kvt_child *c,
		    const char *expect_out)
{
	static char kv[6000];
	snprintf(kv, sizeof kv, "%s=%s", name, value);
	const char *argv[] = { mmap_ops, NULL };
	const char *env[] = { preload, kv, NULL };
	if (kvt_run(c, argv, env))
		return -1;
	int ok = c->exit_code == 0 && !strcmp(c->out, expect_out);
	for (char *line = c->err; ok && *line;) {
		char *nl = strchr(line, '\n');
		if (kvt_is_log_line(line) && !strstr(line, name) &&
		    !strstr(line, "far tier") && !strstr(line, "KVTIER_"))
			ok = 0;
		line = nl ? nl + 1 : line + strlen(line);
	}
	if (!ok)
		fprintf(stderr, "%s='%s': exit %d, stderr: %s\n", name, value, c->exit_code, c->err);
	return ok ? 0 : 1;
}

static char *baseline_out(void)
{
	static struct kvt_child c;
	const char *argv[] = { mmap_ops, NULL };
	kvt_run(&c, argv, NULL);
	/* the address line differs run to run: keep the first line only */
	static char first[256];
	snprintf(first, sizeof first, "%.*s", (int)strcspn(c.out, "\n") + 1, c.out);
	return first;
}

static void first_line_only(char *s)
{
	s[strcspn(s, "\n") + 1 < strlen(s) ? strcspn(s, "\n") + 1 : strlen(s)] = 0;
}

/* Under ThreadSanitizer each run of mmap_ops costs about 1.5 s of start-up
 * (the TSan runtime), and option parsing runs on one thread before any
 * other starts: there every option gets 3 of the junk values, a different
 * 3 for each option so that every value is still tried (the fuzz-options
 * target and the other builds try them all). */
static int tsan_build(void)
{
	const char *san = getenv("SAN");
	return san && strstr(san, "thread");
}

static void test_every_option_junk(void)
{
	static struct kvt_child c;
	char *want = baseline_out();
	unsigned runs = 0, bad = 0, options = 0;
	const size_t nr_values = sizeof junk / sizeof junk[0] + 1;     /* and long_value */
	const char *name, *def, *unit, *help;
	char long_value[5000];
	memset(long_value, '7', sizeof long_value - 1);
	long_value[sizeof long_value - 1] = 0;
	for (unsigned i = 0; !kvt_option_info(i, &name, &def, &unit, &help); i++) {
		options++;
		for (size_t k = 0; k < nr_values; k++) {
			size_t j = (k + 3 * i) % nr_values;
			if (tsan_build() && k >= 3)
				break;
			const char *v = j < sizeof junk / sizeof junk[0] ? junk[j] : long_value;
			static char kv[6000];
			snprintf(kv, sizeof kv, "%s=%s", name, v);
			const char *argv[] = { mmap_ops, NULL };
			const char *env[] = { preload, kv, NULL };
			CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
			first_line_only(c.out);
			runs++;
			if (c.exit_code != 0 || strcmp(c.out, want)) {
				bad++;
				fprintf(stderr, "%s='%.40s': exit %d out '%s'\n", name, v, c.exit_code, c.out);
			}
			/* at most one line per bad setting, and it names the variable */
			unsigned lines = 0;
			for (char *p = c.err; *p; p++)
				lines += *p == '\n';
			if (lines > 1 || (lines == 1 && !strstr(c.err, name) && !strstr(c.err, "far tier"))) {
				bad++;
				fprintf(stderr, "%s='%.40s': stderr: %s\n", name, v, c.err);
			}
		}
	}
	CU_ASSERT_TRUE(options >= 20);
	CU_ASSERT_EQUAL(runs, options * (tsan_build() ? 3 : nr_values));
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_unknown_names(void)
{
	static struct kvt_child c;
	char *want = baseline_out();
	CU_ASSERT_EQUAL(run_with("KVTIER_TRACEE", "/tmp/x", &c, c.out), 0);
	first_line_only(c.out);
	CU_ASSERT_STRING_EQUAL(c.out, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "unknown variable 'KVTIER_TRACEE"));
	CU_ASSERT_EQUAL(run_with("KVTIER_", "1", &c, c.out), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
}

/* The trace's disk fills up: the program runs on, one warning, the events
 * that could not be written are counted (a 64 KiB tmpfs; needs root). */
static void test_trace_disk_full(void)
{
	static struct kvt_child c, plain;
	char dir[128], tr[200], ld[600], fake[512];
	snprintf(dir, sizeof dir, "/tmp/kvt-test-full.%d", (int)getpid());
	mkdir(dir, 0700);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k")) {
		rmdir(dir);
		CU_PASS("skipped: cannot mount a small tmpfs here (not root?)");
		return;
	}
	snprintf(fake, sizeof fake, "%s", fakedir);
	snprintf(tr, sizeof tr, "KVTIER_TRACE=%s/full.trace", dir);
	snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", fake);
	const char *argv[] = { rt_stress, NULL };
	const char *env[] = { ld, preload, tr, NULL };
	const char *env_plain[] = { ld, NULL };
	CU_ASSERT_EQUAL_FATAL(kvt_run(&c, argv, env), 0);
	CU_ASSERT_EQUAL_FATAL(kvt_run(&plain, argv, env_plain), 0);
	CU_ASSERT_EQUAL(c.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(c.out, plain.out);          /* nothing lost for the program */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "write failed"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.err, "tracing stops, the program runs on"));
	unsigned warnings = 0;
	for (char *p = strstr(c.err, "write failed"); p; p = strstr(p + 1, "write failed"))
		warnings++;
	CU_ASSERT_EQUAL(warnings, 1);

	umount(dir);
	rmdir(dir);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "every KVTIER_* variable x 14 junk values", test_every_option_junk },
		{ "unknown KVTIER_ names: one line, ignored", test_unknown_names },
		{ "trace disk full: one warning, program unaffected", test_trace_disk_full },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "faults", setup, teardown, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
