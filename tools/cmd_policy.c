// SPDX-License-Identifier: MIT
/* `kvtier policy`: check KVTIER_POLICY text or a rules file, print its
 * canonical form and lint warnings (policy/lint.c, and NUMA nodes that do
 * not exist here); the rules-file reader `kvtier run --policy FILE` shares;
 * `policy suggest` (cmd_suggest.c) proposes rules from traces.
 * Exit status: 0 valid (warnings or not), 2 invalid or usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("cmd.h")
#include "cmd.h"
#endif
#endif
#include "kvtier/policy.h"
#include "../topo/topo.h"

int kvt_cmd_policy(int argc, char **argv);
/* Weak: tests/unit/test_policy.c compiles this file without cmd_suggest.c. */
__attribute__((weak)) int kvt_cmd_suggest(int argc, char **argv);

static void policy_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier policy check ['RULES'|FILE]  parse RULES, or a rules FILE (as\n"
		"                                      'kvtier run --policy FILE' reads it;\n"
		"                                      default: $KVTIER_POLICY, else the\n"
		"                                      built-in default) and print the\n"
		"                                      canonical form; exit 0, or the error\n"
		"                                      and exit 2. Warnings on stderr (exit\n"
		"                                      still 0): a rule earlier rules shadow,\n"
		"                                      a rule no allocation can match, a bad\n"
		"                                      site glob, a NUMA node not on this\n"
		"                                      machine\n"
		"       kvtier policy default           print the built-in default rules\n"
		"       kvtier policy suggest TRACE|DIR|RUNID...\n"
		"                                      propose rules and an HBM budget from\n"
		"                                      profiled runs (see its --help)\n"
		"\n"
		"RULES: 'selector[,selector...] => action; ...', first match wins.\n"
		"  selectors: device async vmm managed host register mmap (kinds, a|b for\n"
		"             either), kv, !kv, size<op>N[K|M|G|T], nth<op>N, after<op>N,\n"
		"             site~GLOB, *   (<op>: < <= > >= == !=)\n"
		"  actions:   native, trace, managed:hbm|cxl|node=N, pinned:cxl|node=N,\n"
		"             bind:cxl|node=N, interleave:dram=W,cxl=W[,node=N]\n"
		"See docs/policy.md.\n");
}

/* ---- rules files ---- */

int kvt_rules_file_read(const char *path, char *out, size_t len, uint32_t *line_at,
			char *err, size_t err_len)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	size_t j = 0;
	uint32_t lineno = 1;
	if (!f) {
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	out[0] = 0;
	for (int nl = 0; fgets(line, sizeof line, f); lineno += nl) {
		nl = strchr(line, '\n') != NULL;      /* a longer line comes in pieces */
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *b = line, *e = line + strlen(line);
		while (*b == ' ' || *b == '\t')
			b++;
		while (e > b && strchr(" \t\r\n;", e[-1]))
			e--;
		if (e == b)
			continue;
		int n = snprintf(out + j, len - j, "%s%.*s", j ? "; " : "", (int)(e - b), b);
		if (n < 0 || (size_t)n >= len - j) {
			snprintf(err, err_len, "%s: the rules are longer than %zu characters", path,
				 len - 1);
			fclose(f);
			return -1;
		}
		for (size_t k = j; line_at && k < j + (size_t)n; k++)
			line_at[k] = lineno;
		j += (size_t)n;
	}
	fclose(f);
	return 0;
}

/* ---- lint ---- */

/* Where the rules came from: line numbers of rule columns. */
struct rules_src {
	const char *origin;        /* "KVTIER_POLICY", "default policy" or the file */
	const char *text;
	const uint32_t *line_at;   /* a file's: line of each character; NULL: text */
};

static unsigned line_of(const struct rules_src *src, const struct kvt_policy_rule *r)
{
	size_t at = r->column ? r->column - 1u : 0;
	if (src->line_at)
		return src->line_at[at];
	unsigned line = 1;
	for (size_t i = 0; i < at && src->text[i]; i++)
		line += src->text[i] == '\n';
	return line;
}

/* "kvtier: ORIGIN:LINE: warning: rule N 'RULE'" then the caller's words. */
static void warn_head(const struct rules_src *src, const struct kvt_policy *p, unsigned i)
{
	char rule[256];
	kvt_policy_format_rule(&p->rule[i], rule, sizeof rule);
	fprintf(stderr, "kvtier: %s:%u: warning: rule %u '%s'", src->origin,
		line_of(src, &p->rule[i]), i + 1, rule);
}

static void warn_lint(const struct rules_src *src, const struct kvt_policy *p,
		      const struct kvt_policy_lint *l)
{
	warn_head(src, p, l->rule);
	if (l->kind != KVT_LINT_SHADOWED) {
		fprintf(stderr, "%s%s\n", l->kind == KVT_LINT_NEVER ? " can never apply: " : ": ",
			l->msg);
		return;
	}
	unsigned nr = (unsigned)__builtin_popcountll(l->by_mask), k = 0;
	fprintf(stderr, " can never apply: earlier rule%s", nr > 1 ? "s" : "");
	for (unsigned j = 0; j < l->rule; j++)
		if (l->by_mask >> j & 1) {
			k++;
			fprintf(stderr, "%s %u (line %u)", k == 1 ? "" : k == nr ? " and" : ",",
				j + 1, line_of(src, &p->rule[j]));
		}
	fprintf(stderr, " match%s every allocation it does\n", nr > 1 ? "" : "es");
}

/* Rule i names a NUMA node (node=N) this machine does not have online, or
 * one without memory: sysfs through topo/, as the library reads it. *have:
 * -1 not looked yet, 0 unreadable (said once), 1 read into t. */
static void lint_node(const struct rules_src *src, const struct kvt_policy *p, unsigned i,
		      struct kvt_topo *t, int *have)
{
	const struct kvt_policy_action *a = &p->rule[i].action;
	if (a->tier != KVT_TIER_NODE || a->node < 0 || !*have)
		return;
	if (*have < 0 && !(*have = kvt_topo_discover(t, "/", NULL) == 0)) {
		fprintf(stderr, "kvtier: %s: warning: cannot read the NUMA nodes "
			"(/sys/devices/system/node): node=N not checked\n", src->origin);
		return;
	}
	int n = a->node;
	int online = n < KVT_TOPO_MAX_NODES && (t->online_mask >> n & 1);
	if (online && t->node[n].mem_total_bytes)
		return;
	char list[200] = "";
	size_t w = 0;
	for (int k = 0; k < KVT_TOPO_MAX_NODES && w + 8 < sizeof list; k++)
		if (t->online_mask >> k & 1)
			w += (size_t)snprintf(list + w, sizeof list - w, "%s%d", w ? "," : "", k);
	warn_head(src, p, i);
	if (online)
		fprintf(stderr, ": NUMA node %d has no memory\n", n);
	else
		fprintf(stderr, ": NUMA node %d is not online on this machine (online: %s)\n",
			n, list[0] ? list : "none");
}

/* Warnings on stderr, in rule order: policy/lint.c's, then the node's. */
static void policy_lint(const struct rules_src *src, const struct kvt_policy *p)
{
	static struct kvt_topo t;        /* about 30 KiB */
	struct kvt_policy_lint l[2 * KVT_POLICY_MAX_RULES];
	unsigned n = kvt_policy_lint(p, l, 2 * KVT_POLICY_MAX_RULES), k = 0;
	int have = -1;
	for (unsigned i = 0; i < p->nr_rules; i++) {
		for (; k < n && k < 2 * KVT_POLICY_MAX_RULES && l[k].rule == i; k++)
			warn_lint(src, p, &l[k]);
		lint_node(src, p, i, &t, &have);
	}
}

static int policy_check(const struct rules_src *src)
{
	struct kvt_policy *p = malloc(sizeof *p);
	struct kvt_policy_error err;
	char out[KVT_POLICY_MAX_TEXT * 2];
	const char *text = src->text;
	if (!p)
		return 2;
	if (kvt_policy_parse(text, p, &err)) {
		size_t len = strlen(text), at = err.column ? err.column - 1u : 0;
		if (src->line_at && err.column && len)      /* a file: the line, too */
			fprintf(stderr, "kvtier: %s:%u: %s\n", src->origin,
				src->line_at[at < len ? at : len - 1], err.msg);
		else
			fprintf(stderr, "kvtier: %s: %s\n", src->origin, err.msg);
		if (err.column && strlen(text) < 200 && !strchr(text, '\n'))
			fprintf(stderr, "  %s\n  %*s^\n", text, (int)err.column - 1, "");
		free(p);
		return 2;
	}
	kvt_policy_format(p, out, sizeof out);
	printf("%s\n", out);
	fflush(stdout);
	policy_lint(src, p);
	free(p);
	return 0;
}

/* policy check ARG: a readable regular file is a rules file, else text. */
static int policy_check_arg(const char *arg)
{
	static char text[KVT_POLICY_MAX_TEXT + 1];
	static uint32_t line_at[KVT_POLICY_MAX_TEXT + 1];
	struct stat sb;
	if (stat(arg, &sb) || !S_ISREG(sb.st_mode) || access(arg, R_OK)) {
		struct rules_src src = { "KVTIER_POLICY", arg, NULL };
		return policy_check(&src);
	}
	char err[512];
	if (kvt_rules_file_read(arg, text, sizeof text, line_at, err, sizeof err)) {
		fprintf(stderr, "kvtier: %s\n", err);
		return 2;
	}
	struct rules_src src = { arg, text, line_at };
	return policy_check(&src);
}

int kvt_cmd_policy(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		policy_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "suggest") && kvt_cmd_suggest)
		return kvt_cmd_suggest(argc - 1, argv + 1);
	if (!strcmp(argv[1], "default") && argc == 2) {
		printf("%s\n", KVT_POLICY_DEFAULT_TEXT);
		return 0;
	}
	if (!strcmp(argv[1], "check") && argc == 3 &&
	    (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
		policy_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "check") && argc <= 3) {
		if (argc == 3)
			return policy_check_arg(argv[2]);
		const char *env = getenv("KVTIER_POLICY");
		struct rules_src src = { env ? "KVTIER_POLICY" : "default policy",
					 env ? env : KVT_POLICY_DEFAULT_TEXT, NULL };
		return policy_check(&src);
	}
	fprintf(stderr, "kvtier policy: unknown arguments\n");
	policy_usage(stderr);
	return 2;
}
