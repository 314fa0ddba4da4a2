// SPDX-License-Identifier: MIT
/* `kvtier run [--policy TEXT|FILE] [--budget BYTES] [--cxl-nodes LIST]
 * [--trace PATTERN | --trace-dir DIR] [--] CMD ARGS...`: checks the options
 * (bad ones: exit 2, nothing run), makes the run's directory
 * (DIR/kvtier-<run id>.<program>/, one trace per process, exec'd images
 * included), runs CMD with libkvtier appended to LD_PRELOAD (an existing
 * preload list is kept, in front) and the KVTIER_* variables set, passes
 * its exit status through (128+N when killed by signal N), and prints a
 * one-screen summary of every trace the run wrote, and where, to stderr. */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "runs.h"
#include "summary.h"
#include "../profiler/trace.h"
#include "../profiler/trace_read.h"
#include "kvtier/policy.h"
#include "kvtier/units.h"

/* libkvtier.so next to this binary (build/), or ../lib/kvtier/ when installed. */
static int find_library(char *out, size_t len)
{
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	const char *cands[] = { "%s/libkvtier.so", "%s/../lib/kvtier/libkvtier.so" };
	for (unsigned i = 0; i < 2; i++) {
		int n2 = snprintf(out, len, cands[i], exe);
		if (n2 > 0 && (size_t)n2 < len && !access(out, R_OK))
			return 0;
	}
	return -1;
}

static int set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char buf[8192];
	if (old && *old)
		snprintf(buf, sizeof buf, "%s:%s", old, lib);
	else
		snprintf(buf, sizeof buf, "%s", lib);
	return setenv("LD_PRELOAD", buf, 1);
}

static void run_usage(FILE *f)
{
	fprintf(f, "usage: kvtier run [--policy TEXT|FILE] [--budget BYTES] [--cxl-nodes LIST]\n"
		   "                  [--trace PATTERN | --trace-dir DIR] [--quiet] [--] CMD ARGS...\n"

		   "  --policy TEXT|FILE  placement rules (KVTIER_POLICY), or a file of them\n"
		   "                   (one or more per line, '#' comments); checked first\n"
		   "  --budget BYTES   HBM budget for redirected memory (KVTIER_HBM_BUDGET; K/M/G)\n"
		   "  --cxl-nodes LIST far-tier NUMA nodes (KVTIER_CXL_NODES: 1, 2,3, 2-4)\n"
		   "  --trace-dir DIR  where the run's directory goes (default .): it is\n"
		   "                   DIR/kvtier-<run id>.<program>/, with one trace per\n"
		   "                   process, <program>.<pid>.trace; read it with\n"
		   "                   kvtier report DIR/kvtier-<run id>.<program>\n"
		   "  --trace PATTERN  one trace file per process named by PATTERN instead\n"
		   "                   (%%p = pid, %%e = program name)\n"
		   "  --quiet          no summary at the end\n");
}

/* ---- the options that become KVTIER_* variables ---- */

/* TEXT, or FILE when the argument names a readable regular file. The
 * rules are parsed here: an error names the column, exit 2, nothing runs. */
static int resolve_policy(const char *arg, char *out, size_t len)
{
	static struct kvt_policy pol;
	struct kvt_policy_error err;
	struct stat sb;
	int from_file = !stat(arg, &sb) && S_ISREG(sb.st_mode) && !access(arg, R_OK);
	if (from_file) {
		char why[PATH_MAX + 100];
		if (kvt_rules_file_read(arg, out, len, NULL, why, sizeof why)) {
			fprintf(stderr, "kvtier run: --policy %s\n", why);
			return -1;
		}
	} else if (snprintf(out, len, "%s", arg) >= (int)len) {
		fprintf(stderr, "kvtier run: --policy: longer than %zu characters\n", len - 1);
		return -1;
	}
	if (kvt_policy_parse(out, &pol, &err) == 0)
		return 0;
	fprintf(stderr, "kvtier run: --policy%s%s: invalid rules: %s\n", from_file ? " " : "",
		from_file ? arg : "", err.msg);
	fprintf(stderr, "  %s\n", out);
	if (err.column && err.column <= strlen(out) + 1)
		fprintf(stderr, "  %*s^\n", (int)err.column - 1, "");
	return -1;
}

static int check_budget(const char *v)
{
	uint64_t b;
	if (kvt_parse_size(v, &b, NULL, 0) == 0)
		return 0;
	fprintf(stderr, "kvtier run: --budget '%s': expected bytes with an optional K/M/G/T "
		"suffix (e.g. 40G)\n", v);
	return -1;
}

/* numactl node list syntax: digits, ',' and '-' (the library checks the
 * nodes exist). */
static int check_nodes(const char *v)
{
	if (*v && strlen(v) < 256 && strspn(v, "0123456789,-") == strlen(v) &&
	    v[0] != ',' && v[0] != '-')
		return 0;
	fprintf(stderr, "kvtier run: --cxl-nodes '%s': expected a node list such as 1, 2,3 or 2-4\n",
		v);
	return -1;
}

/* The summary of the traces in paths. */
static void summarize(char *const *paths, size_t n)
{
	struct kvt_summary s;
	memset(&s, 0, sizeof s);
	for (size_t i = 0; i < n; i++) {
		char err[512];
		if (kvt_summary_add(&s, paths[i], err, sizeof err))
			fprintf(stderr, "kvtier run: %s\n", err);
	}
	kvt_summary_print(&s, stderr);
}

/* --trace PATTERN: every file this run may have written, PATTERN with %p
 * and %e -> *, plus exec successors (<file>.<pid>); files that name
 * another run (the pattern used before) are left out, and counted. */
static void print_summary_pattern(const char *pattern, const char *run_id)
{
	char g[PATH_MAX];
	size_t j = 0;
	for (const char *p = pattern; *p && j + 2 < sizeof g; p++) {
		if (p[0] == '%' && (p[1] == 'p' || p[1] == 'e')) {
			g[j++] = '*';
			p++;
		} else {
			g[j++] = *p;
		}
	}
	g[j] = 0;
	char g2[PATH_MAX + 4];
	snprintf(g2, sizeof g2, "%s*", g);
	glob_t gl;
	if (glob(g2, 0, NULL, &gl)) {
		fprintf(stderr, "kvtier run: no trace was written (%s)\n", g2);
		return;
	}
	size_t n = 0, other = 0;
	char **mine = calloc(gl.gl_pathc + 1, sizeof *mine);
	if (!mine) {
		fprintf(stderr, "kvtier run: out of memory\n");
		globfree(&gl);
		return;
	}
	for (size_t i = 0; i < gl.gl_pathc; i++) {
		char id[64], err[600];
		if (kvt_trace_read_run(gl.gl_pathv[i], id, sizeof id, err, sizeof err) == 1 &&
		    strcmp(id, run_id))
			other++;
		else
			mine[n++] = gl.gl_pathv[i];
	}
	summarize(mine, n);
	free(mine);
	fprintf(stderr, "  traces: %s (%zu file%s", g2, n, n == 1 ? "" : "s");
	if (other)
		fprintf(stderr, "; %zu of other runs left out", other);
	fprintf(stderr, ")\n");
	globfree(&gl);
}

/* The run's directory: its summary, how the command ended (killed), then
 * one line saying where the traces are. An empty directory (nothing
 * traced: the command did not start) is removed. */
static void finish_dir(const char *dir, const char *run_id, int quiet, const char *killed)
{
	struct kvt_paths p = { 0 };
	char err[600];
	int n = kvt_run_dir_traces(dir, &p, err, sizeof err);
	if (n <= 0)
		rmdir(dir);
	if (!quiet && n > 0)
		summarize(p.v, (size_t)p.n);
	if (!quiet && killed)
		fputs(killed, stderr);
	if (!quiet && n <= 0)
		fprintf(stderr, "kvtier run: no trace was written (%s)\n",
			n < 0 ? err : "the command traced nothing");
	else if (!quiet)
		fprintf(stderr, "kvtier run: run %s: %d trace file%s in %s/ (kvtier report %s)\n",
			run_id, n, n == 1 ? "" : "s", dir, dir);
	kvt_paths_free(&p);
}

/* DIR/kvtier-<run id>.<program>, made 0700; its absolute path (for the
 * pattern: the program may change directory) in abs. 0, or -1 said. */
static int make_run_dir(const char *parent, const char *run_id, const char *cmd,
			char *dir, size_t len, char *abs, size_t abs_len)
{
	const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
	char name[16];
	kvt_trace_file_name(base, name);
	int n = !strcmp(parent, ".") ? snprintf(dir, len, "kvtier-%s.%s", run_id, name) :
		snprintf(dir, len, "%s%skvtier-%s.%s", parent,
			 parent[strlen(parent) - 1] == '/' ? "" : "/", run_id, name);
	if (n < 0 || (size_t)n >= len || n + 32 >= (int)abs_len) {
		fprintf(stderr, "kvtier run: --trace-dir %s: path too long\n", parent);
		return -1;
	}
	if (mkdir(dir, 0700)) {
		fprintf(stderr, "kvtier run: cannot create the run's directory %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	if (!realpath(dir, abs) || strlen(abs) + 32 >= abs_len) {
		fprintf(stderr, "kvtier run: %s: %s\n", dir, strerror(errno));
		rmdir(dir);
		return -1;
	}
	strcat(abs, "/%e.%p.trace");
	return 0;
}

int kvt_cmd_run(int argc, char **argv)
{
	static char policy[KVT_POLICY_MAX_TEXT + 1];
	const char *trace = NULL, *trace_dir = NULL, *policy_arg = NULL, *budget = NULL;
	const char *nodes = NULL, *v;
	int quiet = 0, i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--trace"))) {
			trace = v;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--trace-dir"))) {
			trace_dir = v;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--policy"))) {
			policy_arg = v;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--budget"))) {
			budget = v;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--cxl-nodes"))) {
			nodes = v;
		} else if (!strcmp(argv[i], "--quiet")) {
			quiet = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			run_usage(stdout);
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "kvtier run: unknown option '%s'\n", argv[i]);
			run_usage(stderr);
			return 2;
		} else {
			break;
		}
	}
	if (i >= argc) {
		run_usage(stderr);
		return 2;
	}
	if (policy_arg && resolve_policy(policy_arg, policy, sizeof policy))
		return 2;
	if ((budget && check_budget(budget)) || (nodes && check_nodes(nodes))) {
		run_usage(stderr);
		return 2;
	}
	if (trace && trace_dir) {
		fprintf(stderr, "kvtier run: --trace and --trace-dir: give one of them\n");
		run_usage(stderr);
		return 2;
	}
	if (trace_dir && !*trace_dir) {
		fprintf(stderr, "kvtier run: --trace-dir: an empty path\n");
		return 2;
	}
	char lib[PATH_MAX], run_id[64], dir[PATH_MAX], deftrace[PATH_MAX];
	if (find_library(lib, sizeof lib)) {
		fprintf(stderr, "kvtier run: cannot find libkvtier.so next to the kvtier binary\n");
		return 1;
	}
	kvt_trace_run_id(run_id, sizeof run_id, (uint64_t)time(NULL), (int)getpid());
	if (!trace) {
		if (make_run_dir(trace_dir ? trace_dir : ".", run_id, argv[i], dir, sizeof dir,
				 deftrace, sizeof deftrace))
			return 1;
		trace = deftrace;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("kvtier run: fork");
		return 1;
	}
	if (pid == 0) {
		set_preload(lib);
		setenv("KVTIER_TRACE", trace, 1);
		setenv("KVTIER_RUN_ID", run_id, 1);
		if (policy_arg)
			setenv("KVTIER_POLICY", policy, 1);
		if (budget)
			setenv("KVTIER_HBM_BUDGET", budget, 1);
		if (nodes)
			setenv("KVTIER_CXL_NODES", nodes, 1);
		execvp(argv[i], argv + i);
		fprintf(stderr, "kvtier run: %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	signal(SIGINT, SIG_IGN);      /* the child gets the terminal's signals */
	signal(SIGQUIT, SIG_IGN);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	char killed[PATH_MAX + 64] = "";
	if (WIFSIGNALED(st))
		snprintf(killed, sizeof killed, "kvtier run: %s killed by signal %d\n", argv[i],
			 WTERMSIG(st));
	if (trace == deftrace) {
		finish_dir(dir, run_id, quiet, killed[0] ? killed : NULL);
	} else if (!quiet) {
		print_summary_pattern(trace, run_id);
		fputs(killed, stderr);
	}
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}
