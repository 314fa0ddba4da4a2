// SPDX-License-Identifier: MIT
/* The kvtier command: dispatches to subcommands, prints help, the version
 * and the options table (the same table the library reads). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "../preload/kvt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier <command> [args]\n"
		"\n"
		"  run [--trace PATTERN] [--] CMD ARGS...   run CMD with kvtier preloaded,\n"
		"                                           then print a summary\n"
		"  report TRACE...                          summary of trace file(s)\n"
		"  dump TRACE                               every record of a trace, as text\n"
		"  policy check 'RULES'                     parse KVTIER_POLICY rules\n"
		"  replay FILE                              replay an allocation sequence\n"
		"                                           through the classifier and rules\n"
		"  topo [--json] [--root DIR]               NUMA nodes, CXL regions, the far tier\n"
		"  options                                  the KVTIER_* variables\n"
		"  --version, --help\n");
}

static int cmd_options(void)
{
	const char *name, *def, *unit, *help;
	printf("%-22s %-8s %-8s %s\n", "variable", "default", "unit", "meaning");
	for (unsigned i = 0; !kvt_option_info(i, &name, &def, &unit, &help); i++)
		printf("%-22s %-8s %-8s %s\n", name, def[0] ? def : "-", unit, help);
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
	if (!strcmp(c, "options"))
		return cmd_options();
	fprintf(stderr, "kvtier: unknown command '%s'\n", c);
	usage(stderr);
	return 2;
}
