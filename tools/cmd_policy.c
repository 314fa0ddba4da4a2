// SPDX-License-Identifier: MIT
/* `kvtier policy`: check KVTIER_POLICY text and print its canonical form;
 * `policy suggest` (cmd_suggest.c) proposes rules from traces.
 * Exit status: 0 valid, 2 invalid or usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include("cmd.h")
#include "cmd.h"
#endif
#endif
#include "kvtier/policy.h"

int kvt_cmd_policy(int argc, char **argv);
/* Weak: tests/unit/test_policy.c compiles this file without cmd_suggest.c. */
__attribute__((weak)) int kvt_cmd_suggest(int argc, char **argv);

static void policy_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier policy check ['RULES']   parse RULES (default: $KVTIER_POLICY,\n"
		"                                      else the built-in default) and print\n"
		"                                      the canonical form; exit 0, or the\n"
		"                                      error and exit 2\n"
		"       kvtier policy default           print the built-in default rules\n"
		"       kvtier policy suggest TRACE...   propose rules and an HBM budget from\n"
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

static int policy_check(const char *text, const char *origin)
{
	struct kvt_policy *p = malloc(sizeof *p);
	struct kvt_policy_error err;
	char out[KVT_POLICY_MAX_TEXT * 2];
	if (!p)
		return 2;
	if (kvt_policy_parse(text, p, &err)) {
		fprintf(stderr, "kvtier: %s: %s\n", origin, err.msg);
		if (err.column && strlen(text) < 200 && !strchr(text, '\n'))
			fprintf(stderr, "  %s\n  %*s^\n", text, (int)err.column - 1, "");
		free(p);
		return 2;
	}
	kvt_policy_format(p, out, sizeof out);
	printf("%s\n", out);
	free(p);
	return 0;
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
			return policy_check(argv[2], "KVTIER_POLICY");
		const char *env = getenv("KVTIER_POLICY");
		if (env)
			return policy_check(env, "KVTIER_POLICY");
		return policy_check(KVT_POLICY_DEFAULT_TEXT, "default policy");
	}
	fprintf(stderr, "kvtier policy: unknown arguments\n");
	policy_usage(stderr);
	return 2;
}
