// SPDX-License-Identifier: MIT
/* The kvtier command as operators meet it: `kvtier run` on the simulated
 * workloads (summary, exit-status passthrough, LD_PRELOAD appended), the
 * --help/usage conventions of every subcommand, `policy suggest` closing
 * the loop profile -> rules -> replay, the man page (groff), make install
 * (into a DESTDIR) with its bash completion, and the HTML report in
 * headless Chromium. Runs $(BUILD)/kvtier as a child process. */
#include <dirent.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <time.h>

#include "kvt_test.h"

static char tmpdir[256];
static struct kvt_child rc;

static const char *tmp_path(const char *name)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ & 7];
	snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
	return b;
}

static int suite_init(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/kvt-cli-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			unlink(tmp_path(e->d_name));
	if (d)
		closedir(d);
	char prof[600];
	snprintf(prof, sizeof prof, "rm -rf '%s'", tmpdir);   /* chromium's profile dir */
	return system(prof) ? -1 : 0;
}

static const char *fakecuda_env(void)
{
	static char env[600];
	snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", kvt_path("fakecuda"));
	return env;
}

/* The first file in tmpdir whose name starts with prefix, or NULL. */
static const char *find_file(const char *prefix)
{
	static char found[512];
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	const char *ret = NULL;
	while (d && !ret && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			snprintf(found, sizeof found, "%s", tmp_path(e->d_name));
			ret = found;
		}
	if (d)
		closedir(d);
	return ret;
}

/* ---- kvtier run ---------------------------------------------------------------- */

static void run_workload(const char *name)
{
	char wl[64], pattern[320], prefix[64];
	snprintf(wl, sizeof wl, "workloads/%s-like", name);
	snprintf(prefix, sizeof prefix, "%s.", name);
	snprintf(pattern, sizeof pattern, "%s/%s.%%p.trace", tmpdir, name);
	const char *argv[] = { kvt_path("kvtier"), "run", "--trace", pattern, "--",
			       kvt_path(wl), "--quiet", NULL };
	const char *env[] = { fakecuda_env(), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	/* the workload's own report on stdout, kvtier's summary on stderr */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "SIMULATED GPU"));
	CU_ASSERT_PTR_NULL(strstr(rc.out, "kvtier summary"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "kvtier summary: 1 trace file"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "\n  device "));
	/* the default policy moved the KV: some bytes are managed:far */
	const char *pl = strstr(rc.err, "placement: ");
	CU_ASSERT_PTR_NOT_NULL(pl);
	CU_ASSERT_PTR_NOT_NULL(pl ? strstr(pl, "managed:far ") : NULL);
	char traces[400];
	snprintf(traces, sizeof traces, "traces: %s/%s.*.trace* (1 file)", tmpdir, name);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, traces));
	CU_ASSERT_PTR_NOT_NULL(find_file(prefix));
}

static void test_run_vllm(void) { run_workload("vllm"); }
static void test_run_sglang(void) { run_workload("sglang"); }
static void test_run_llamacpp(void) { run_workload("llamacpp"); }

static void test_run_exit_status(void)
{
	char pattern[320];
	snprintf(pattern, sizeof pattern, "%s/sh.%%p.trace", tmpdir);
	const char *exit3[] = { kvt_path("kvtier"), "run", "--trace", pattern, "--",
				"/bin/sh", "-c", "exit 3", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, exit3, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 3);
	CU_ASSERT(WIFEXITED(rc.status));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "kvtier summary"));

	const char *killed[] = { kvt_path("kvtier"), "run", "--trace", pattern, "--",
				 "/bin/sh", "-c", "kill -TERM $$", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, killed, NULL) == 0);
	CU_ASSERT(WIFEXITED(rc.status));         /* kvtier itself exits normally ... */
	CU_ASSERT_EQUAL(WEXITSTATUS(rc.status), 128 + 15);   /* ... with 128+SIGTERM */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "killed by signal 15"));

	const char *missing[] = { kvt_path("kvtier"), "run", "--quiet", "--trace", pattern,
				  "--", "/nonexistent/kvt-cli-prog", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, missing, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 127);
}

static void test_run_preload_appended(void)
{
	char pattern[320], want[1200], lib[600];
	const char *san = getenv("SAN");
	if (san && *san) {
		/* a sanitizer runtime must come first in the process (linked into
		 * the executable or preloaded first); an uninstrumented /bin/sh with
		 * another library in front cannot host a sanitizer-built preload */
		CU_PASS("skipped in sanitizer builds: /bin/sh cannot host a sanitizer-built preload");
		return;
	}
	snprintf(pattern, sizeof pattern, "%s/env.%%p.trace", tmpdir);
	if (!realpath(kvt_path("libkvtier.so"), lib)) {
		CU_FAIL("libkvtier.so not built");
		return;
	}
	/* a harmless library already in the preload list stays, in front */
	const char *first = "/lib/x86_64-linux-gnu/libm.so.6";
	if (access(first, R_OK))
		first = "libm.so.6";
	char env0[600];
	snprintf(env0, sizeof env0, "LD_PRELOAD=%s", first);
	const char *env[] = { env0, NULL };
	const char *argv[] = { kvt_path("kvtier"), "run", "--quiet", "--trace", pattern, "--",
			       "/bin/sh", "-c", "echo \"$LD_PRELOAD\"; echo \"$KVTIER_TRACE\"", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	snprintf(want, sizeof want, "%s:%s\n%s\n", first, lib, pattern);
	CU_ASSERT_STRING_EQUAL(rc.out, want);
	CU_ASSERT_EQUAL(rc.err_len, 0);          /* --quiet: no summary */

	/* without a preload list: the library alone */
	const char *env2[] = { "LD_PRELOAD=", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, env2) == 0);
	snprintf(want, sizeof want, "%s\n%s\n", lib, pattern);
	CU_ASSERT_STRING_EQUAL(rc.out, want);
}

/* --policy TEXT|FILE, --budget, --cxl-nodes: checked before anything runs
 * (exit 2, the command never starts), then in the child's environment. */
static void test_run_options(void)
{
	char marker[400], pol[400], cmd[600];
	snprintf(marker, sizeof marker, "%s/ran", tmpdir);
	snprintf(pol, sizeof pol, "%s/rules.txt", tmpdir);
	snprintf(cmd, sizeof cmd, "touch '%s'; echo \"$KVTIER_POLICY|$KVTIER_HBM_BUDGET|"
		 "$KVTIER_CXL_NODES\"", marker);
	const char *san = getenv("SAN");
	int sh_ok = !(san && *san);        /* see test_run_preload_appended */
	/* text */
	char tr[420];                      /* not the default ./kvtier-*.trace: the cwd is the repo */
	snprintf(tr, sizeof tr, "%s/opts.%%p.trace", tmpdir);
	const char *t[] = { kvt_path("kvtier"), "run", "--quiet", "--trace", tr, "--policy",
			    "kv => managed:cxl", "--budget", "40G", "--cxl-nodes", "2-3", "--",
			    "/bin/sh", "-c", cmd, NULL };
	if (sh_ok) {
		CU_ASSERT_FATAL(kvt_run(&rc, t, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(rc.out, "kv => managed:cxl|40G|2-3\n");
	}
	/* file: comments dropped, lines joined with "; " */
	FILE *f = fopen(pol, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("# rules for the test\nkv => managed:cxl   # the KV cache\n\n"
	      "host,size>=1G => pinned:cxl;\n* => native\n", f);
	fclose(f);
	const char *fl[] = { kvt_path("kvtier"), "run", "--quiet", "--trace", tr, "--policy", pol,
			     "--", "/bin/sh", "-c", cmd, NULL };
	if (sh_ok) {
		CU_ASSERT_FATAL(kvt_run(&rc, fl, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(rc.out,
			"kv => managed:cxl; host,size>=1G => pinned:cxl; * => native||\n");
	}
	/* usage errors: status 2, a clear line, nothing run */
	static const char *const bad[][2] = {
		{ "--policy", "kv => bogus" }, { "--policy", "kv managed:cxl" },
		{ "--budget", "12Q" }, { "--budget", "" }, { "--cxl-nodes", "a,b" },
	};
	static const char *const why[] = { "column 7", "column", "--budget '12Q'", "--budget ''",
					   "--cxl-nodes 'a,b'" };
	for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unlink(marker);
		const char *argv[] = { kvt_path("kvtier"), "run", "--quiet", bad[i][0], bad[i][1],
				       "--", "/bin/sh", "-c", cmd, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 2);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, why[i]));
		CU_ASSERT_EQUAL(rc.out_len, 0);
		CU_ASSERT_EQUAL(access(marker, F_OK), -1);      /* never ran */
	}
	/* an invalid rules file names the file and the column */
	f = fopen(pol, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("kv => managed:cxl\nsize>>4 => native\n", f);
	fclose(f);
	CU_ASSERT_FATAL(kvt_run(&rc, fl, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, pol));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "column"));
	CU_ASSERT_EQUAL(access(marker, F_OK), -1);
}

/* The summary says what kvtier placed and migrated (the trace's INFO records). */
static void test_run_summary_counters(void)
{
	char pattern[320];
	snprintf(pattern, sizeof pattern, "%s/sum.%%p.trace", tmpdir);
	const char *argv[] = { kvt_path("kvtier"), "run", "--trace", pattern, "--",
			       kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			       "2", "--quiet", NULL };
	const char *env[] = { fakecuda_env(), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	const char *p = strstr(rc.err, "  kvtier placed: ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	/* 4 KV tensors of 130 MiB: one provisional managed:hbm, then managed:far */
	CU_ASSERT_PTR_NOT_NULL(strstr(p, "managed:far 3 (390.0 MiB)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p, "managed:hbm 1 (130.0 MiB)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p, "re-homed to the far node 1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "\n  fallbacks: none\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "\n  migration: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, " chunks in HBM, "));
}

/* ---- one run, one place ------------------------------------------------------------ */

/* kvtier run's last line, "kvtier run: run ID: N trace files in DIR/ (...)":
 * ID, N and DIR; 0, or -1 when it is not there. */
static int run_where(const char *err, char id[64], char dir[512], int *n)
{
	const char *p = strstr(err, "kvtier run: run ");
	if (!p)
		return -1;
	const char *in = strstr(p, " in ");
	if (sscanf(p, "kvtier run: run %63[^:]: %d trace file", id, n) != 2 || !in ||
	    sscanf(in, " in %511s", dir) != 1)
		return -1;
	size_t l = strlen(dir);
	if (l && dir[l - 1] == '/')
		dir[l - 1] = 0;
	return 0;
}

/* The number of trace files in dir whose first record after the header
 * names run id, and the number of trace files in it. */
static int files_of_run(const char *dir, const char *id, int *all)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	*all = 0;
	static struct kvt_child dump;
	char want[128];
	snprintf(want, sizeof want, "\ninfo kvtier.run=%s\n", id);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		const char *argv[] = { kvt_path("kvtier"), "dump", path, NULL };
		(*all)++;
		if (kvt_run(&dump, argv, NULL) == 0 && dump.exit_code == 0) {
			char *nl = strchr(dump.out, '\n');     /* the header line, then the run */
			n += nl && !strncmp(nl, want, strlen(want));
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* "kvtier report: N trace files, E events": N and E from report's output. */
static int report_counts(const char *out, int *files, unsigned long long *events)
{
	return sscanf(out, "kvtier report: %d trace file%*[s], %llu events", files, events) == 2 ||
	       sscanf(out, "kvtier report: %d trace file, %llu events", files, events) == 2 ? 0 : -1;
}

/* `kvtier run -- WRAPPER... exec rt_calls`: the run's directory holds one
 * trace per image, named <program>.<pid>.trace (an image with the name of
 * the one before it: <that>.<pid>), all of the run; `kvtier report DIR`
 * reads every one, the exec'd program's events included. */
static void test_run_dir_exec_chain(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {            /* see test_run_preload_appended */
		CU_PASS("skipped in sanitizer builds: /bin/sh cannot host a sanitizer-built preload");
		return;
	}
	char runs[400], cmd[3][800];
	snprintf(runs, sizeof runs, "%s/runs", tmpdir);
	CU_ASSERT_FATAL(mkdir(runs, 0700) == 0 || errno == EEXIST);
	const char *rt = kvt_path("tests/progs/rt_calls");
	snprintf(cmd[0], sizeof cmd[0], "exec %s", rt);
	snprintf(cmd[1], sizeof cmd[1], "exec /bin/sh -c 'exec %s'", rt);
	snprintf(cmd[2], sizeof cmd[2], "exec /bin/bash -c 'exec %s'", rt);
	static const struct { const char *shell; int files; const char *names[3]; } cases[] = {
		{ "/bin/bash", 2, { "bash.", "rt_calls." } },
		{ "/bin/bash", 3, { "bash.", "sh.", "rt_calls." } },
		{ "/bin/bash", 3, { "bash.", "bash.", "rt_calls." } },  /* bash.P.trace.P */
	};
	const char *env[] = { fakecuda_env(), NULL };
	char first_dir[512] = "", first_id[64] = "";
	for (unsigned c = 0; c < 3; c++) {
		const char *argv[] = { kvt_path("kvtier"), "run", "--trace-dir", runs, "--",
				       cases[c].shell, "-c", cmd[c], NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		char id[64], dir[512];
		int n = -1;
		CU_ASSERT_FATAL(run_where(rc.err, id, dir, &n) == 0);
		/* the directory is under --trace-dir, named after the run and the program */
		char prefix[600];
		snprintf(prefix, sizeof prefix, "%s/kvtier-%s.bash", runs, id);
		CU_ASSERT_STRING_EQUAL(dir, prefix);
		CU_ASSERT_EQUAL(n, cases[c].files);
		int all = 0;
		CU_ASSERT_EQUAL(files_of_run(dir, id, &all), cases[c].files);
		CU_ASSERT_EQUAL(all, cases[c].files);
		for (int k = 0; k < cases[c].files; k++) {
			char glob_cmd[1200];
			snprintf(glob_cmd, sizeof glob_cmd, "ls '%s' | grep -c '^%s[0-9]*\\.trace'", dir,
				 cases[c].names[k]);
			const char *ls[] = { "/bin/sh", "-c", glob_cmd, NULL };
			CU_ASSERT_FATAL(kvt_run(&rc, ls, NULL) == 0);
			CU_ASSERT(atoi(rc.out) >= 1);
		}
		/* report DIR: every image's trace, the exec'd program's events */
		const char *rep[] = { kvt_path("kvtier"), "report", "-q", dir, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, rep, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		int files = 0;
		unsigned long long events = 0;
		CU_ASSERT_EQUAL(report_counts(rc.out, &files, &events), 0);
		CU_ASSERT_EQUAL(files, cases[c].files);
		CU_ASSERT(events > 0);
		if (!c) {
			snprintf(first_dir, sizeof first_dir, "%s", dir);
			snprintf(first_id, sizeof first_id, "%s", id);
		}
	}
	/* the run id names the run: report ID from the directory's parent */
	char by_id[1200];
	snprintf(by_id, sizeof by_id, "cd '%s' && '%s' report -q %s", runs, kvt_path("kvtier"),
		 first_id);
	char kv[600];
	if (realpath(kvt_path("kvtier"), kv))
		snprintf(by_id, sizeof by_id, "cd '%s' && '%s' report -q %s", runs, kv, first_id);
	const char *sh[] = { "/bin/sh", "-c", by_id, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, sh, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "kvtier report: 2 trace files"));
}

/* Traces of two runs given together are refused, in one message naming
 * both runs, unless --mixed-runs; one run's files given one by one are
 * read; a directory without traces is an error. */
static void test_report_refuses_mixed_runs(void)
{
	char runs[400], d[2][512], id[2][64];
	snprintf(runs, sizeof runs, "%s/mixed", tmpdir);
	CU_ASSERT_FATAL(mkdir(runs, 0700) == 0 || errno == EEXIST);
	const char *env[] = { fakecuda_env(), NULL };
	for (int k = 0; k < 2; k++) {
		const char *argv[] = { kvt_path("kvtier"), "run", "--trace-dir", runs, "--",
				       kvt_path("tests/progs/rt_calls"), NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		int n;
		CU_ASSERT_FATAL(run_where(rc.err, id[k], d[k], &n) == 0);
		CU_ASSERT_EQUAL(n, 1);
		if (k == 0)
			usleep(1100000);            /* run ids differ by second and pid */
	}
	CU_ASSERT_STRING_NOT_EQUAL(id[0], id[1]);
	const char *both[] = { kvt_path("kvtier"), "report", "-q", d[0], d[1], NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, both, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	CU_ASSERT_EQUAL(rc.out_len, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "come from different runs"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "--mixed-runs"));
	for (int k = 0; k < 2; k++) {
		char run[160];
		snprintf(run, sizeof run, "  run %s: 1 file, e.g. ", id[k]);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, run));
	}
	const char *mixed[] = { kvt_path("kvtier"), "report", "-q", "--mixed-runs", d[0], d[1],
				NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, mixed, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "kvtier report: 2 trace files"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "traces of 2 different runs read together"));
	/* files of one run, named one by one */
	char file[800];
	DIR *dd = opendir(d[1]);
	struct dirent *e;
	file[0] = 0;
	while (dd && (e = readdir(dd)))
		if (e->d_name[0] != '.')
			snprintf(file, sizeof file, "%s/%s", d[1], e->d_name);
	if (dd)
		closedir(dd);
	const char *one[] = { kvt_path("kvtier"), "report", "-q", file, file, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, one, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	/* an empty directory */
	char empty[600];
	snprintf(empty, sizeof empty, "%s/empty", runs);
	CU_ASSERT_FATAL(mkdir(empty, 0700) == 0);
	const char *none[] = { kvt_path("kvtier"), "report", empty, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, none, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "no trace files in this directory"));
	/* --trace PATTERN used twice: the second run's summary is of its own file */
	char pat[600];
	snprintf(pat, sizeof pat, "%s/same.%%p.trace", runs);
	for (int k = 0; k < 2; k++) {
		const char *argv[] = { kvt_path("kvtier"), "run", "--trace", pat, "--",
				       kvt_path("tests/progs/rt_calls"), NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "kvtier summary: 1 trace file,"));
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, k ? "(1 file; 1 of other runs left out)\n" :
					      "(1 file)\n"));
	}
	/* --trace with --trace-dir: usage; a --trace-dir that is not there: 1 */
	const char *two[] = { kvt_path("kvtier"), "run", "--trace", "x.%p", "--trace-dir", runs,
			      "--", "/bin/true", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, two, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
	const char *gone[] = { kvt_path("kvtier"), "run", "--trace-dir", "/nonexistent/kvt",
			       "--", "/bin/true", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, gone, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "cannot create the run's directory"));
}

/* Without kvtier run: a traced process makes a run id and exports it, so
 * the image it execs names the same run (KVTIER_RUN_ID given: that one). */
static void test_run_id_without_run(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {            /* see test_run_preload_appended */
		CU_PASS("skipped in sanitizer builds: /bin/sh cannot host a sanitizer-built preload");
		return;
	}
	char lib[512], fakedir[512], ldpath[600], preload[600], trace[600], dir[400], cmd[600];
	CU_ASSERT_FATAL(kvt_preload_env(lib, fakedir, ldpath, preload) == 0);
	for (int given = 0; given < 2; given++) {
		snprintf(dir, sizeof dir, "%s/plain%d", tmpdir, given);
		CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
		snprintf(trace, sizeof trace, "KVTIER_TRACE=%s/%%e.%%p.trace", dir);
		snprintf(cmd, sizeof cmd, "exec %s", kvt_path("tests/progs/rt_calls"));
		const char *argv[] = { "/bin/bash", "-c", cmd, NULL };
		const char *env[] = { ldpath, preload, trace,
				      given ? "KVTIER_RUN_ID=my-run-7" : "KVTIER_RUN_ID=", NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
		/* the id: from the bash trace's dump */
		char bash_trace[700], id[64] = "";
		DIR *d = opendir(dir);
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, "bash.", 5))
				snprintf(bash_trace, sizeof bash_trace, "%s/%s", dir, e->d_name);
		if (d)
			closedir(d);
		const char *dump[] = { kvt_path("kvtier"), "dump", bash_trace, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, dump, NULL) == 0);
		const char *p = strstr(rc.out, "\ninfo kvtier.run=");
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		sscanf(p, "\ninfo kvtier.run=%63s", id);
		if (given)
			CU_ASSERT_STRING_EQUAL(id, "my-run-7");
		regex_t re;
		CU_ASSERT_FATAL(regcomp(&re, "^[0-9]{8}-[0-9]{6}-[0-9]+$", REG_EXTENDED | REG_NOSUB) == 0);
		if (!given)
			CU_ASSERT_EQUAL(regexec(&re, id, 0, NULL, 0), 0);
		regfree(&re);
		int all = 0;
		CU_ASSERT_EQUAL(files_of_run(dir, id, &all), 2);
		CU_ASSERT_EQUAL(all, 2);
		const char *rep[] = { kvt_path("kvtier"), "report", "-q", dir, NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, rep, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 0);
	}
}

/* ---- --help and usage errors ------------------------------------------------------ */

struct usage_case {
	const char *args[5];
	int status;          /* 0: usage on stdout; 2: usage on stderr */
};

static void test_usage_conventions(void)
{
	static const struct usage_case cases[] = {
		{ { "--help" }, 0 },            { { NULL }, 2 },
		{ { "bogus" }, 2 },
		{ { "run", "--help" }, 0 },     { { "run", "-h" }, 0 },
		{ { "run" }, 2 },               { { "run", "--bogus" }, 2 },
		{ { "report", "--help" }, 0 },  { { "report" }, 2 },
		{ { "report", "--bogus", "x" }, 2 },
		{ { "dump", "--help" }, 0 },    { { "dump" }, 2 },
		{ { "dump", "a", "b" }, 2 },
		{ { "policy", "--help" }, 0 },  { { "policy" }, 2 },
		{ { "policy", "bogus" }, 2 },   { { "policy", "check", "--help" }, 0 },
		{ { "policy", "suggest", "--help" }, 0 },
		{ { "policy", "suggest" }, 2 }, { { "policy", "suggest", "--bogus", "x" }, 2 },
		{ { "replay", "--help" }, 0 },  { { "replay" }, 2 },
		{ { "replay", "--bogus", "x" }, 2 },
		{ { "topo", "--help" }, 0 },    { { "topo", "--bogus" }, 2 },
		{ { "options", "--help" }, 0 }, { { "options", "extra" }, 2 },
		{ { "stat", "--help" }, 0 },    { { "stat", "--bogus" }, 2 },
		{ { "run", "--policy" }, 2 },   { { "run", "--budget", "x", "--", "true" }, 2 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct usage_case *c = &cases[i];
		const char *argv[8] = { kvt_path("kvtier") };
		char what[128] = "kvtier";
		for (int j = 0; j < 5 && c->args[j]; j++) {
			argv[j + 1] = c->args[j];
			strncat(what, " ", sizeof what - strlen(what) - 1);
			strncat(what, c->args[j], sizeof what - strlen(what) - 1);
		}
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		const char *usage = c->status ? rc.err : rc.out;
		int ok = rc.exit_code == c->status && strstr(usage, "usage: kvtier") &&
			 (c->status ? rc.out_len == 0 : rc.err_len == 0);
		if (!ok)
			fprintf(stderr, "\n  %s: exit %d (want %d), stdout %zu bytes, stderr %zu bytes",
				what, rc.exit_code, c->status, rc.out_len, rc.err_len);
		CU_ASSERT(ok);
	}
}

/* ---- --OPTION=VALUE ----------------------------------------------------------------- */

/* Runs kvtier with args (NULL-ended) into *c; 0 or the kvt_run error. */
static int kvtier_args(struct kvt_child *c, const char *const *args)
{
	const char *argv[16] = { kvt_path("kvtier") };
	for (int i = 0; args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	return kvt_run(c, argv, NULL);
}

/* Every subcommand's valued options also as --OPTION=VALUE: the same
 * output as --OPTION VALUE, and a bad VALUE after '=' is still an error. */
static void test_opt_equals(void)
{
	static struct kvt_child a, b;
	char tr[400], trace[512];
	snprintf(tr, sizeof tr, "--trace=%s/eq.%%p.trace", tmpdir);
	/* run: --trace=, --policy=, --budget=, --cxl-nodes= reach the command */
	const char *r_true[] = { "run", "--quiet", tr, "--", "/bin/true", NULL };
	CU_ASSERT_FATAL(kvtier_args(&a, r_true) == 0);
	CU_ASSERT_EQUAL(a.exit_code, 0);
	const char *t = find_file("eq.");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	snprintf(trace, sizeof trace, "%s", t);
	const char *san = getenv("SAN");
	if (!(san && *san)) {       /* see test_run_preload_appended */
		const char *r_env[] = { "run", "--quiet", tr, "--policy=kv => managed:cxl",
					"--budget=40G", "--cxl-nodes=2-3", "--", "/bin/sh", "-c",
					"echo \"$KVTIER_POLICY|$KVTIER_HBM_BUDGET|$KVTIER_CXL_NODES\"",
					NULL };
		CU_ASSERT_FATAL(kvtier_args(&a, r_env) == 0);
		CU_ASSERT_EQUAL(a.exit_code, 0);
		CU_ASSERT_STRING_EQUAL(a.out, "kv => managed:cxl|40G|2-3\n");
	}
	const char *r_bad[] = { "run", "--quiet", "--budget=12Q", "--", "/bin/true", NULL };
	CU_ASSERT_FATAL(kvtier_args(&a, r_bad) == 0);
	CU_ASSERT_EQUAL(a.exit_code, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.err, "--budget '12Q'"));

	/* pairs: the same command with --OPT VALUE and --OPT=VALUE */
	static const struct { const char *sp[6], *eq[6]; } same[] = {
		{ { "report", "-q", "--format", "json", NULL },
		  { "report", "-q", "--format=json", NULL } },
		{ { "report", "-q", "--debuginfo-path", "/nonexistent", NULL },
		  { "report", "-q", "--debuginfo-path=/nonexistent", NULL } },
		{ { "replay", "--policy", "* => trace", NULL },
		  { "replay", "--policy=* => trace", NULL } },
		{ { "policy", "suggest", "--window", "500", NULL },
		  { "policy", "suggest", "--window=500", NULL } },
		{ { "topo", "--root", "tests/fixtures/topo/onenode", NULL },
		  { "topo", "--root=tests/fixtures/topo/onenode", NULL } },
	};
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
		const char *sp[8] = { 0 }, *eq[8] = { 0 };
		int n = 0, m = 0;
		for (; same[i].sp[n]; n++)
			sp[n] = same[i].sp[n];
		for (; same[i].eq[m]; m++)
			eq[m] = same[i].eq[m];
		if (strcmp(sp[0], "topo")) {        /* the trace last */
			sp[n] = trace;
			eq[m] = trace;
		}
		CU_ASSERT_FATAL(kvtier_args(&a, sp) == 0);
		CU_ASSERT_FATAL(kvtier_args(&b, eq) == 0);
		if (b.exit_code || strcmp(a.out, b.out))
			fprintf(stderr, "\n  %s: '%s' exit %d, '=' exit %d: %.200s", sp[0],
				same[i].eq[m - 1], a.exit_code, b.exit_code, b.err);
		CU_ASSERT_EQUAL(a.exit_code, 0);
		CU_ASSERT_EQUAL(b.exit_code, 0);
		CU_ASSERT(b.out_len > 0);
		CU_ASSERT_STRING_EQUAL(a.out, b.out);
	}
	CU_ASSERT_EQUAL(b.out[0] ? strstr(b.out, "root tests/fixtures/topo/onenode") != NULL : 0, 1);

	/* a bad VALUE after '=' is read as the value (and refused) */
	const char *bad[][5] = {
		{ "replay", "--policy=kv => bogus", trace, NULL },
		{ "policy", "suggest", "--window=0", trace, NULL },
		{ "topo", "--root=", NULL },
		{ "stat", "--count=0", NULL },
		{ "stat", "--watch=abc", NULL },
		{ "report", "--format=yaml", trace, NULL },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CU_ASSERT_FATAL(kvtier_args(&a, bad[i]) == 0);
		if (a.exit_code != 2)
			fprintf(stderr, "\n  %s %s: exit %d", bad[i][0], bad[i][1], a.exit_code);
		CU_ASSERT_EQUAL(a.exit_code, 2);
		CU_ASSERT(a.err_len > 0);
	}
	/* stat: --count=N and --watch=SEC (a list of this user's processes) */
	const char *st[] = { "stat", "--count=2", "--watch=0.05", NULL };
	CU_ASSERT_FATAL(kvtier_args(&a, st) == 0);
	CU_ASSERT_EQUAL(a.exit_code, 0);
	CU_ASSERT_EQUAL(a.err_len, 0);
}

/* ---- policy suggest ------------------------------------------------------------------ */

/* A vllm-like trace made under the preload directly (not through kvtier run). */
static const char *vllm_trace(void)
{
	static char path[512];
	if (path[0])
		return path;
	char pattern[400], preload[600];
	snprintf(pattern, sizeof pattern, "KVTIER_TRACE=%s/pre.%%p.trace", tmpdir);
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", kvt_path("libkvtier.so"));
	const char *env[] = { fakecuda_env(), preload, pattern, NULL };
	const char *argv[] = { kvt_path("workloads/vllm-like"), "--quiet", NULL };
	if (kvt_run(&rc, argv, env) || rc.exit_code)
		return NULL;
	const char *f = find_file("pre.");
	if (f)
		snprintf(path, sizeof path, "%s", f);
	return f ? path : NULL;
}

/* "ordinal kind size ... [kv]" lines of a replay: the ordinals labelled kv
 * into kv[] (1 = kv), and whether every kv ends on the far tier and every
 * other allocation stays native. */
static unsigned replay_labels(const char *out, char *kv, size_t cap, int *placed_right)
{
	unsigned nr = 0;
	*placed_right = 1;
	for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		unsigned long ord;
		if (*l == '#' || sscanf(l, "%lu", &ord) != 1 || ord >= cap)
			continue;
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[512];
		snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), l);
		int is_kv = strstr(line, "[kv") != NULL;
		kv[ord] = (char)is_kv;
		nr++;
		if (is_kv && !strstr(line, "managed:cxl"))
			*placed_right = 0;
		if (!is_kv && !strstr(line, "native"))
			*placed_right = 0;
	}
	return nr;
}

static void test_suggest_roundtrip(void)
{
	const char *trace = vllm_trace();
	CU_ASSERT_PTR_NOT_NULL_FATAL(trace);
	const char *full[] = { kvt_path("kvtier"), "policy", "suggest", trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, full, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	/* the rationale: KV found, hot set, budget; exactly one rules line */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "# KV-like: 4 allocations"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "# hot set: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "# export KVTIER_HBM_BUDGET="));
	char rules[1024] = "";
	unsigned nr_rules = 0;
	for (char *l = rc.out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (*l != '#' && *l != '\n' && nr_rules++ == 0)
			snprintf(rules, sizeof rules, "%.*s", (int)strcspn(l, "\n"), l);
	CU_ASSERT_EQUAL(nr_rules, 1);
	CU_ASSERT_STRING_EQUAL(rules, "kv,size>=64M => managed:cxl; * => native");

	/* -q prints the same rules alone */
	const char *quiet[] = { kvt_path("kvtier"), "policy", "suggest", "-q", trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, quiet, NULL) == 0);
	char want[1100];
	snprintf(want, sizeof want, "%s\n", rules);
	CU_ASSERT_STRING_EQUAL(rc.out, want);

	/* a directory holding the trace reads it: the same rules */
	char dir[512], in_dir[600];
	snprintf(dir, sizeof dir, "%s", tmp_path("suggest-dir"));
	snprintf(in_dir, sizeof in_dir, "%s/run.trace", dir);
	CU_ASSERT_FATAL((mkdir(dir, 0700) == 0 || errno == EEXIST) &&
			(link(trace, in_dir) == 0 || errno == EEXIST));
	const char *by_dir[] = { kvt_path("kvtier"), "policy", "suggest", "-q", dir, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, by_dir, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(rc.out, want);
	unlink(in_dir);
	/* an empty one: one message, exit 1 */
	CU_ASSERT_FATAL(kvt_run(&rc, by_dir, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "no trace files in this directory"));
	CU_ASSERT_EQUAL(rc.out_len, 0);
	rmdir(dir);

	/* policy check accepts them and prints them unchanged (canonical) */
	const char *check[] = { kvt_path("kvtier"), "policy", "check", rules, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, check, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(rc.out, want);

	/* replayed, they label the same allocations KV as the classifier on
	 * the default rules, move every one of them and nothing else */
	static char kv_def[4096], kv_sug[4096];
	int right_def, right_sug;
	const char *rp_def[] = { kvt_path("kvtier"), "replay", trace, NULL };
	const char *env[] = { "KVTIER_POLICY=", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, rp_def, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	unsigned n_def = replay_labels(rc.out, kv_def, sizeof kv_def, &right_def);
	const char *rp_sug[] = { kvt_path("kvtier"), "replay", "--policy", rules, trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, rp_sug, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	unsigned n_sug = replay_labels(rc.out, kv_sug, sizeof kv_sug, &right_sug);
	/* 27 of the server's, and the block tables' four: their pinned staging
	 * buffer and three device buffers (tables, lengths, weight ranges) */
	CU_ASSERT_EQUAL(n_def, 27 + 4);
	CU_ASSERT_EQUAL(n_sug, n_def);
	CU_ASSERT_EQUAL(memcmp(kv_def, kv_sug, sizeof kv_def), 0);
	unsigned nr_kv = 0;
	for (size_t i = 0; i < sizeof kv_sug; i++)
		nr_kv += kv_sug[i] == 1;
	CU_ASSERT_EQUAL(nr_kv, 4);
	CU_ASSERT(right_sug);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "4 kv, 0 expect marks"));
}

static void test_suggest_errors(void)
{
	const char *missing[] = { kvt_path("kvtier"), "policy", "suggest", tmp_path("none.trace"), NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, missing, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	const char *named = strstr(rc.err, "none.trace");
	CU_ASSERT_TRUE(named && !strstr(named + 1, "none.trace"));   /* named once */
	CU_ASSERT_EQUAL(rc.out_len, 0);
	/* a trace with no KV: the default rules, said so */
	char pattern[320];
	snprintf(pattern, sizeof pattern, "%s/nokv.%%p.trace", tmpdir);
	const char *sh[] = { kvt_path("kvtier"), "run", "--quiet", "--trace", pattern, "--",
			     "/bin/true", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, sh, NULL) == 0);
	const char *t = find_file("nokv.");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	char path[512];
	snprintf(path, sizeof path, "%s", t);
	const char *argv[] = { kvt_path("kvtier"), "policy", "suggest", path, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "# no KV-like allocation"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "\nkv => managed:cxl; * => native\n"));
}

/* ---- the man page --------------------------------------------------------------------- */

static void test_man_page(void)
{
	if (access("/usr/bin/groff", X_OK)) {
		fprintf(stderr, "\n  SKIP: groff not installed (apt-get install groff-base)\n");
		CU_PASS("groff absent: man page not rendered");
		return;
	}
	const char *argv[] = { "/usr/bin/groff", "-man", "-Tutf8", "-ww", "docs/kvtier.1", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	if (rc.err_len)
		fprintf(stderr, "\n  groff: %s", rc.err);
	CU_ASSERT_EQUAL(rc.err_len, 0);
	/* plain text: drop grotty's overstrikes (c BS c, _ BS c) and SGR escapes */
	size_t j = 0;
	for (size_t i = 0; i < rc.out_len; i++) {
		if (rc.out[i] == '\b' && j) {
			j--;
		} else if (rc.out[i] == 033) {
			while (i < rc.out_len && rc.out[i] != 'm')
				i++;
		} else {
			rc.out[j++] = rc.out[i];
		}
	}
	rc.out[j] = 0;
	/* every subcommand and every KVTIER_* variable is in it */
	static const char *const words[] = { "kvtier run", "kvtier report", "kvtier dump",
		"policy check", "policy suggest", "kvtier replay", "kvtier topo",
		"kvtier options", "kvtier stat", "--prometheus", "--budget", "--cxl-nodes",
		"EXIT STATUS", "EXAMPLES", "FILES", NULL };
	for (int i = 0; words[i]; i++)
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, words[i]));
	const char *opt[] = { kvt_path("kvtier"), "options", NULL };
	static struct kvt_child o;
	CU_ASSERT_FATAL(kvt_run(&o, opt, NULL) == 0);
	unsigned nr = 0;
	for (char *l = strchr(o.out, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		char name[64];
		if (sscanf(l + 1, "%63s", name) != 1)
			continue;
		nr++;
		if (!strstr(rc.out, name)) {
			fprintf(stderr, "\n  %s is not in docs/kvtier.1", name);
			CU_FAIL("an option is missing from the man page");
		}
	}
	CU_ASSERT(nr >= 20);
}

/* ---- make install -------------------------------------------------------------------- */

/* make install DESTDIR=<tmp> PREFIX=/usr from the files already built
 * (make -o: the command and the library are never rebuilt here, whatever
 * their timestamps, so the suite cannot race others over $(BUILD)). */
static int make_install(const char *target, const char *destdir)
{
	char build[600], dest[600], old_bin[600], old_lib[600];
	snprintf(build, sizeof build, "BUILD=%s", kvt_build_dir());
	snprintf(dest, sizeof dest, "DESTDIR=%s", destdir);
	snprintf(old_bin, sizeof old_bin, "--old-file=%s", kvt_path("kvtier"));
	snprintf(old_lib, sizeof old_lib, "--old-file=%s", kvt_path("libkvtier.so"));
	const char *argv[] = { "/usr/bin/make", "--no-print-directory", "-s", old_bin, old_lib,
			       build, dest, "PREFIX=/usr", target, NULL };
	CU_ASSERT_FATAL(kvt_run_bounded(&rc, argv, NULL, 120) == 0);
	if (rc.exit_code)
		fprintf(stderr, "\n  make %s: exit %d: %.600s", target, rc.exit_code, rc.err);
	return rc.exit_code;
}

static void test_install(void)
{
	if (access("/usr/bin/make", X_OK)) {
		CU_PASS("make absent: install not tested");
		return;
	}
	char dest[300], path[600];
	snprintf(dest, sizeof dest, "%s/install", tmpdir);
	CU_ASSERT_EQUAL_FATAL(make_install("install", dest), 0);
	static const struct { const char *rel; mode_t mode; } files[] = {
		{ "usr/bin/kvtier", 0755 }, { "usr/lib/kvtier/libkvtier.so", 0755 },
		{ "usr/share/man/man1/kvtier.1", 0644 },
		{ "usr/share/bash-completion/completions/kvtier", 0644 },
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dest, files[i].rel);
		CU_ASSERT_EQUAL(stat(path, &st), 0);
		CU_ASSERT_EQUAL(st.st_mode & 07777, files[i].mode);
		CU_ASSERT(st.st_size > 0);
	}
	char bin[600], lib[600];
	snprintf(bin, sizeof bin, "%s/usr/bin/kvtier", dest);
	snprintf(lib, sizeof lib, "%s/usr/lib/kvtier/libkvtier.so", dest);

	/* the installed command runs and finds the installed library (no
	 * LD_LIBRARY_PATH, no LD_PRELOAD): a trace is written by /bin/true */
	const char *env[] = { "LD_LIBRARY_PATH=", "LD_PRELOAD=", NULL };
	const char *help[] = { bin, "--help", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, help, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "usage: kvtier"));
	char pattern[320];
	snprintf(pattern, sizeof pattern, "%s/inst.%%p.trace", tmpdir);
	const char *run_true[] = { bin, "run", "--quiet", "--trace", pattern, "--", "/bin/true",
				   NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, run_true, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NULL(strstr(rc.err, "cannot find libkvtier.so"));
	CU_ASSERT_PTR_NOT_NULL(find_file("inst."));
	const char *san = getenv("SAN");
	if (!(san && *san)) {         /* see test_run_preload_appended */
		const char *echo[] = { bin, "run", "--quiet", "--trace", pattern, "--", "/bin/sh",
				       "-c", "echo \"$LD_PRELOAD\"", NULL };
		CU_ASSERT_FATAL(kvt_run(&rc, echo, env) == 0);
		/* <bin's folder>/../lib/kvtier/libkvtier.so: the installed file */
		char want[PATH_MAX], got[PATH_MAX];
		rc.out[strcspn(rc.out, "\n")] = 0;
		CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(lib, want));
		CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(rc.out, got));
		CU_ASSERT_STRING_EQUAL(got, want);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "/lib/kvtier/libkvtier.so"));
	}

	/* the completion script: bash accepts it, and sourcing it registers
	 * _kvtier, which completes subcommands and an option's values */
	snprintf(path, sizeof path, "%s/usr/share/bash-completion/completions/kvtier", dest);
	const char *syntax[] = { "/bin/bash", "-n", path, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, syntax, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(rc.err_len, 0);
	char script[1200];
	snprintf(script, sizeof script,
		 "source '%s' && complete -p kvtier && "
		 "COMP_WORDS=(kvtier re); COMP_CWORD=1; _kvtier; echo \"${COMPREPLY[*]}\"; "
		 "COMP_WORDS=(kvtier report --format j); COMP_CWORD=3; _kvtier; "
		 "echo \"${COMPREPLY[*]}\"; "
		 "COMP_WORDS=(kvtier topo --); COMP_CWORD=2; _kvtier; echo \"${COMPREPLY[*]}\"",
		 path);
	const char *comp[] = { "/bin/bash", "--norc", "--noprofile", "-c", script, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, comp, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(rc.out, "complete -F _kvtier kvtier\nreport replay\njson\n"
				       "--json --root --help\n");

	/* uninstall removes the four files and the library's folder */
	CU_ASSERT_EQUAL(make_install("uninstall", dest), 0);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dest, files[i].rel);
		CU_ASSERT_EQUAL(access(path, F_OK), -1);
	}
	snprintf(path, sizeof path, "%s/usr/lib/kvtier", dest);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	snprintf(path, sizeof path, "rm -rf '%s'", dest);
	CU_ASSERT_EQUAL(system(path), 0);
}

/* ---- the HTML report in a browser ----------------------------------------------------- */

/* Distinct colours of a PNG, through python3's zlib (no imaging library
 * needed): -1 when python3 is missing or the file is not an 8-bit RGB(A) PNG. */
static int png_colours(const char *png)
{
	static const char script[] =
		"import sys,zlib,struct\n"
		"d=open(sys.argv[1],'rb').read()\n"
		"assert d[:8]==b'\\x89PNG\\r\\n\\x1a\\n'\n"
		"p=8;idat=b'';w=h=0\n"
		"while p<len(d):\n"
		" n,t=struct.unpack('>I4s',d[p:p+8]);c=d[p+8:p+8+n];p+=12+n\n"
		" if t==b'IHDR':w,h,bd,ct=struct.unpack('>IIBB',c[:10]);assert bd==8 and ct in(2,6)\n"
		" if t==b'IDAT':idat+=c\n"
		"bpp=3 if ct==2 else 4;raw=zlib.decompress(idat);s=w*bpp;prev=bytearray(s);cols=set();o=0\n"
		"for y in range(h):\n"
		" f=raw[o];line=bytearray(raw[o+1:o+1+s]);o+=1+s\n"
		" for i in range(s):\n"
		"  a=line[i-bpp] if i>=bpp else 0;b=prev[i];cc=prev[i-bpp] if i>=bpp else 0\n"
		"  if f==1:line[i]=(line[i]+a)&255\n"
		"  elif f==2:line[i]=(line[i]+b)&255\n"
		"  elif f==3:line[i]=(line[i]+(a+b)//2)&255\n"
		"  elif f==4:\n"
		"   q=a+b-cc;pa=abs(q-a);pb=abs(q-b);pc=abs(q-cc)\n"
		"   line[i]=(line[i]+(a if pa<=pb and pa<=pc else b if pb<=pc else cc))&255\n"
		" if y%4==0:cols.update(bytes(line[i:i+3]) for i in range(0,s,bpp*2))\n"
		" prev=line\n"
		"print(len(cols))\n";
	const char *py = !access("/usr/bin/python3", X_OK) ? "/usr/bin/python3" : NULL;
	if (!py)
		return -1;
	const char *argv[] = { py, "-c", script, png, NULL };
	static struct kvt_child c;
	if (kvt_run(&c, argv, NULL) || c.exit_code)
		return -1;
	return atoi(c.out);
}

static void test_html_screenshot(void)
{
	const char *chromium = "/usr/bin/chromium";
	if (access(chromium, X_OK)) {
		fprintf(stderr, "\n  SKIP: chromium not installed (apt-get install chromium): "
				"no screenshot of the HTML report\n");
		CU_PASS("chromium absent: HTML report not rendered");
		return;
	}
	const char *trace = vllm_trace();
	CU_ASSERT_PTR_NOT_NULL_FATAL(trace);
	char html[512], png[512], profile[512], shot[600], winsize[] = "--window-size=1200,2000";
	snprintf(html, sizeof html, "%s", tmp_path("report.html"));
	snprintf(png, sizeof png, "%s", tmp_path("report.png"));
	snprintf(profile, sizeof profile, "--user-data-dir=%s", tmp_path("chromium-profile"));
	snprintf(shot, sizeof shot, "--screenshot=%s", png);
	const char *rep[] = { kvt_path("kvtier"), "report", "-q", "--format", "html", "-o", html,
			      trace, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, rep, NULL) == 0);
	CU_ASSERT_EQUAL_FATAL(rc.exit_code, 0);
	char url[600];
	snprintf(url, sizeof url, "file://%s", html);
	const char *argv[] = { chromium, "--headless", "--no-sandbox", "--disable-gpu",
			       "--disable-quic", "--no-first-run", "--disable-background-networking",
			       "--disable-component-update", "--disable-sync", profile, shot,
			       winsize, url, NULL };
	time_t t0 = time(NULL);
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	if (rc.exit_code)
		fprintf(stderr, "\n  chromium exit %d: %.400s", rc.exit_code, rc.err);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	struct stat st;
	CU_ASSERT_FATAL(stat(png, &st) == 0);
	fprintf(stderr, "\n  screenshot %s: %lld bytes in %lds", png, (long long)st.st_size,
		(long)(time(NULL) - t0));
	CU_ASSERT(st.st_size > 20 * 1024);        /* a blank 1200x2000 PNG is ~10 KiB */
	int colours = png_colours(png);
	if (colours < 0) {
		fprintf(stderr, "\n  (python3 absent or odd PNG: colours not counted)");
	} else {
		fprintf(stderr, ", %d distinct colours", colours);
		CU_ASSERT(colours >= 8);          /* text, axes, series, heat cells */
		fprintf(stderr, "\n");
	}
	if (getenv("KVT_KEEP_SCREENSHOT")) {      /* to look at it: copy it out */
		char cmd[1200];
		snprintf(cmd, sizeof cmd, "cp '%s' '%s'", png, getenv("KVT_KEEP_SCREENSHOT"));
		CU_ASSERT_EQUAL(system(cmd), 0);
	}
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "run vllm-like: summary, trace, status 0", test_run_vllm },
		{ "run sglang-like: summary, trace, status 0", test_run_sglang },
		{ "run llamacpp-like: summary, trace, status 0", test_run_llamacpp },
		{ "run: exit 3, SIGTERM -> 143, exec failure -> 127", test_run_exit_status },
		{ "run: LD_PRELOAD appended, KVTIER_TRACE set", test_run_preload_appended },
		{ "run: --policy text/file, --budget, --cxl-nodes; bad -> 2, nothing run",
		  test_run_options },
		{ "run: summary shows placements, fallbacks, migrations", test_run_summary_counters },
		{ "run: one directory per run; exec chains; report DIR and RUN",
		  test_run_dir_exec_chain },
		{ "report: traces of two runs refused unless --mixed-runs", test_report_refuses_mixed_runs },
		{ "traces without kvtier run: one exported run id", test_run_id_without_run },
		{ "every subcommand: --help 0 on stdout, usage errors 2 on stderr",
		  test_usage_conventions },
		{ "every valued option also as --OPTION=VALUE", test_opt_equals },
		{ "policy suggest vllm-like: check accepts, replay agrees", test_suggest_roundtrip },
		{ "policy suggest: missing trace 1, no KV -> default", test_suggest_errors },
		{ "man page renders without warnings, names everything", test_man_page },
		{ "make install DESTDIR PREFIX: four files, kvtier run finds the library, "
		  "completion loads; uninstall", test_install },
		{ "HTML report: headless Chromium screenshot not blank", test_html_screenshot },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "cli", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
