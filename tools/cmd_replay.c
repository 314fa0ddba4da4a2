// SPDX-License-Identifier: MIT
/* `kvtier replay FILE|DIR|RUN-ID`: feed an allocation sequence
 * (docs/replay-format.md) or a kvtier trace through the KV classifier and
 * the rules; one line per allocation. A run's directory or id replays each
 * of its traces (one process each) on its own. Exit status: 0, 1 when
 * --check finds a mismatch with the expect marks, 2 on usage, policy or
 * file errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "runs.h"
#include "kvtier/policy.h"
#include "../profiler/trace_replay.h"


static void replay_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier replay [--policy 'RULES'] [--check] [--quiet] FILE|DIR|RUN-ID\n"
		"  Replays a kvtier trace (KVTIER_TRACE), every trace of a run (its\n"
		"  directory, or the run id `kvtier run` printed; each trace on its own),\n"
		"  or a text allocation sequence (docs/replay-format.md; '-' = stdin)\n"
		"  through the KV classifier and the rules (default: $KVTIER_POLICY, else\n"
		"  '" KVT_POLICY_DEFAULT_TEXT "').\n"
		"  Prints: ordinal kind size decision reason [-> verdict: final] [label]\n"
		"  --check  exit 1 unless every '# expect:' mark agrees with the final label\n"
		"  --quiet  print only mismatches and the summary\n");
}

static int replay_file(FILE *in, const char *name, struct kvt_replay *r)
{
	char line[1024];
	unsigned lineno = 0;
	while (fgets(line, sizeof line, in)) {
		struct kvt_replay_event ev;
		struct kvt_policy_error err;
		lineno++;
		if (!strchr(line, '\n') && !feof(in)) {
			fprintf(stderr, "kvtier: %s:%u: line longer than %zu characters\n",
				name, lineno, sizeof line - 2);
			return 2;
		}
		int rc = kvt_replay_parse_line(line, &ev, &err);
		if (rc < 0) {
			fprintf(stderr, "kvtier: %s:%u: %s\n", name, lineno, err.msg);
			return 2;
		}
		if (rc == 0)
			continue;
		rc = kvt_replay_feed_growing(r, &ev);
		if (rc == -ENOMEM) {
			fprintf(stderr, "kvtier: out of memory\n");
			return 2;
		}
		if (rc == -ENOENT)
			fprintf(stderr, "kvtier: %s:%u: warning: id %#llx is not a live allocation\n",
				name, lineno, (unsigned long long)ev.id);
	}
	return 0;
}

static int replay_trace(const char *path, struct kvt_replay *r)
{
	char err[256];
	int rc = kvt_trace_replay(path, r, err, sizeof err);
	if (rc < 0)
		fprintf(stderr, "kvtier: %s: %s\n", path, err);
	return rc < 0 ? 2 : 0;
}

/* One file through the classifier: its lines (with a "# trace: FILE" line
 * first when named is set) and summary. 0, 1 (a --check mismatch) or 2. */
static int replay_one(const char *file, struct kvt_policy *pol, int check, int quiet, int named)
{
	FILE *in = strcmp(file, "-") ? fopen(file, "r") : stdin;
	if (!in) {
		fprintf(stderr, "kvtier: %s: %s\n", file, strerror(errno));
		return 2;
	}
	char magic[8] = { 0 };
	int is_trace = in != stdin && fread(magic, 1, 8, in) == 8 &&
		       !memcmp(magic, KVT_TRACE_MAGIC, 8);
	if (in != stdin)
		rewind(in);
	static struct kvt_replay r;
	kvt_replay_init(&r, pol, NULL, 0);
	int rc = is_trace ? replay_trace(file, &r) : replay_file(in, file, &r);
	if (in != stdin)
		fclose(in);
	if (rc) {
		free(r.allocs);
		return rc;
	}
	char buf[KVT_POLICY_MAX_TEXT * 2];
	if (named)
		printf("# trace: %s\n", file);
	kvt_policy_format(pol, buf, sizeof buf);
	if (!quiet)
		printf("# policy: %s\n", buf);
	unsigned nr_kv = 0, nr_bad = 0, nr_marked = 0;
	for (size_t i = 0; i < r.nr; i++) {
		const struct kvt_replay_alloc *a = &r.allocs[i];
		int mismatch = a->expect &&
			(a->expect == KVT_EXPECT_KV) != a->kv_final;
		nr_kv += a->kv_final;
		nr_marked += a->expect != 0;
		nr_bad += mismatch;
		if (quiet && !mismatch)
			continue;
		kvt_replay_format(&r, i, buf, sizeof buf);
		printf("%s%s\n", buf, mismatch ?
		       (a->expect == KVT_EXPECT_KV ? "  MISMATCH: expected kv"
						    : "  MISMATCH: expected other") : "");
	}
	printf("# %zu allocations, %u kv, %u expect marks, %u mismatches\n",
	       r.nr, nr_kv, nr_marked, nr_bad);
	free(r.allocs);
	return check && nr_bad ? 1 : 0;
}

int kvt_cmd_replay(int argc, char **argv)
{
	const char *rules = getenv("KVTIER_POLICY"), *file = NULL, *v;
	int check = 0, quiet = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			replay_usage(stdout);
			return 0;
		} else if ((v = kvt_opt_value(argc, argv, &i, "--policy"))) {
			rules = v;
		} else if (!strcmp(argv[i], "--check")) {
			check = 1;
		} else if (!strcmp(argv[i], "--quiet")) {
			quiet = 1;
		} else if (!file && (argv[i][0] != '-' || !strcmp(argv[i], "-"))) {
			file = argv[i];
		} else {
			replay_usage(stderr);
			return 2;
		}
	}
	if (!file) {
		replay_usage(stderr);
		return 2;
	}
	static struct kvt_policy pol;
	struct kvt_policy_error err;
	if (!rules)
		rules = KVT_POLICY_DEFAULT_TEXT;
	if (kvt_policy_parse(rules, &pol, &err)) {
		fprintf(stderr, "kvtier: KVTIER_POLICY: %s\n", err.msg);
		return 2;
	}
	struct kvt_paths paths = { 0 };
	char why[512];
	if (strcmp(file, "-") && kvt_run_arg_traces(file, &paths, why, sizeof why)) {
		fprintf(stderr, "kvtier: %s\n", why);
		kvt_paths_free(&paths);
		return 2;
	}
	if (!paths.n)
		return replay_one(file, &pol, check, quiet, 0);
	int rc = 0;
	for (int i = 0; i < paths.n && rc < 2; i++) {
		int r = replay_one(paths.v[i], &pol, check, quiet, paths.n > 1);
		rc = r > rc ? r : rc;
	}
	kvt_paths_free(&paths);
	return rc;
}
