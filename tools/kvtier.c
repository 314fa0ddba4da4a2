// SPDX-License-Identifier: MIT
/* The kvtier command: dispatches to subcommands, prints help, the version
 * and the options table (the same table the library reads). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "../base/kvt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier <command> [args]\n"
		"\n"
		"  run [--policy TEXT|FILE] [--budget BYTES] [--cxl-nodes LIST]\n"
		"      [--trace PATTERN] [--quiet] [--] CMD ARGS...\n"
		"                                 run CMD with kvtier preloaded, then print a summary\n"
		"  report TRACE... [--format text|json|html] [-o FILE] [-q]\n"
		"                                 the offline allocation report of trace file(s)\n"
		"  dump TRACE                     every record of a trace, as text\n"
		"  policy check ['RULES'|FILE]    parse KVTIER_POLICY rules, print the canonical form\n"
		"                                 and warnings (shadowed rules, bad globs, nodes)\n"
		"  policy default                 the built-in default rules\n"
		"  policy suggest TRACE|DIR|RUNID...\n"
		"                                 propose rules and an HBM budget from traces\n"
		"  replay [--policy 'RULES'] FILE replay an allocation sequence or a trace\n"
		"                                 through the classifier and rules\n"
		"  topo [--json] [--root DIR]     NUMA nodes, CXL regions, the far tier\n"
		"  stat [PID] [--watch [SEC]] [--count N] [--prometheus]\n"
		"                                 live counters of processes running under kvtier\n"
		"  options                        the KVTIER_* variables\n"
		"  --version, --help              'kvtier COMMAND --help' for a command's options\n"
		"\n"
		"An option with a value takes it as --OPTION VALUE or --OPTION=VALUE.\n"
		"Exit status: 0 success, 1 failure, 2 usage error; run passes the command's\n"
		"status through (128+N when killed by signal N). See kvtier(1).\n");
}

static int cmd_options(int argc, char **argv)
{
	int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
	if (argc > 1) {
		fprintf(help ? stdout : stderr, "usage: kvtier options\n"
			"  the KVTIER_* variables the library reads: name, default, unit, meaning\n");
		return help ? 0 : 2;
	}
	const char *name, *def, *unit, *help_text;
	printf("%-22s %-8s %-8s %s\n", "variable", "default", "unit", "meaning");
	for (unsigned i = 0; !kvt_option_info(i, &name, &def, &unit, &help_text); i++)
		printf("%-22s %-8s %-8s %s\n", name, def[0] ? def : "-", unit, help_text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *c = argv[1];
	if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(c, "--version")) {
		printf("kvtier %s (trace format %u)\n", KVT_VERSION, KVT_TRACE_VERSION);
		return 0;
	}
	if (!strcmp(c, "run"))
		return kvt_cmd_run(argc - 1, argv + 1);
	if (!strcmp(c, "report"))
		return kvt_cmd_report(argc - 1, argv + 1);
	if (!strcmp(c, "dump"))
		return kvt_cmd_dump(argc - 1, argv + 1);
	if (!strcmp(c, "policy"))
		return kvt_cmd_policy(argc - 1, argv + 1);
	if (!strcmp(c, "replay"))
		return kvt_cmd_replay(argc - 1, argv + 1);
	if (!strcmp(c, "topo"))
		return kvt_cmd_topo(argc - 1, argv + 1);
	if (!strcmp(c, "stat"))
		return kvt_cmd_stat(argc - 1, argv + 1);
	if (!strcmp(c, "options"))
		return cmd_options(argc - 1, argv + 1);
	fprintf(stderr, "kvtier: unknown command '%s'\n", c);
	usage(stderr);
	return 2;
}
