// SPDX-License-Identifier: MIT
/* `kvtier run [--policy TEXT|FILE] [--budget BYTES] [--cxl-nodes LIST]
 * [--trace PATTERN] [--] CMD ARGS...`: checks the options (bad ones: exit
 * 2, nothing run), runs CMD with libkvtier appended to LD_PRELOAD (an
 * existing preload list is kept, in front) and the KVTIER_* variables set,
 * passes its exit status through (128+N when killed by signal N), and
 * prints a one-screen summary of every trace the run wrote to stderr. */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "summary.h"
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
		   "                  [--trace PATTERN] [--quiet] [--] CMD ARGS...\n"

		   "  --policy TEXT|FILE  placement rules (KVTIER_POLICY), or a file of them\n"
		   "                   (one or more per line, '#' comments); checked first\n"
		   "  --budget BYTES   HBM budget for redirected memory (KVTIER_HBM_BUDGET; K/M/G)\n"
		   "  --cxl-nodes LIST far-tier NUMA nodes (KVTIER_CXL_NODES: 1, 2,3, 2-4)\n"
		   "  --trace PATTERN  trace file pattern (%%p = pid); default\n"
		   "                   ./kvtier-<id>.%%p.trace, one file per process\n"
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

/* Every file the run may have written: PATTERN with %p -> *, plus exec
 * successors (<file>.<pid>). */
static void print_summary(const char *pattern)
{
	char g[PATH_MAX];
	size_t j = 0;
	for (const char *p = pattern; *p && j + 2 < sizeof g; p++) {
		if (p[0] == '%' && p[1] == 'p') {
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
	struct kvt_summary s;
	memset(&s, 0, sizeof s);
	if (glob(g2, 0, NULL, &gl) == 0) {
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			char err[512];
			if (kvt_summary_add(&s, gl.gl_pathv[i], err, sizeof err))
				fprintf(stderr, "kvtier run: %s\n", err);
		}
		kvt_summary_print(&s, stderr);
		fprintf(stderr, "  traces: %s (%zu file%s)\n", g2, gl.gl_pathc,
			gl.gl_pathc == 1 ? "" : "s");
		globfree(&gl);
	} else {
		fprintf(stderr, "kvtier run: no trace was written (%s)\n", g2);
	}
}

int kvt_cmd_run(int argc, char **argv)
{
	static char policy[KVT_POLICY_MAX_TEXT + 1];
	const char *trace = NULL, *policy_arg = NULL, *budget = NULL, *nodes = NULL, *v;
	int quiet = 0, i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--trace"))) {
			trace = v;
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
	char lib[PATH_MAX], deftrace[64];
	if (find_library(lib, sizeof lib)) {
		fprintf(stderr, "kvtier run: cannot find libkvtier.so next to the kvtier binary\n");
		return 1;
	}
	if (!trace) {
		snprintf(deftrace, sizeof deftrace, "kvtier-%d.%%p.trace", (int)getpid());
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
	if (!quiet)
		print_summary(trace);
	if (WIFSIGNALED(st)) {
		if (!quiet)
			fprintf(stderr, "kvtier run: %s killed by signal %d\n", argv[i], WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}
