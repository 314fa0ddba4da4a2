/* SPDX-License-Identifier: MIT */
/* Subcommands of the kvtier tool. Each returns the process exit status:
 * 0 success, 1 failure, 2 usage error (or the child's status for run). */
#ifndef KVT_TOOLS_CMD_H
#define KVT_TOOLS_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int kvt_cmd_run(int argc, char **argv);
int kvt_cmd_report(int argc, char **argv);
int kvt_cmd_dump(int argc, char **argv);
int kvt_cmd_policy(int argc, char **argv);
int kvt_cmd_replay(int argc, char **argv);
int kvt_cmd_topo(int argc, char **argv);
int kvt_cmd_suggest(int argc, char **argv);
int kvt_cmd_stat(int argc, char **argv);

/* Every option that takes a value takes it as --NAME VALUE or --NAME=VALUE.
 * argv[*i] is one of those: the value (*i moved onto VALUE in the first
 * form); else NULL, *i unchanged (another option, or --NAME last). */
static inline const char *kvt_opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n))
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] || *i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* A rules file (`run --policy FILE`, `policy check FILE`, cmd_policy.c):
 * '#' comments dropped, blank lines skipped, lines joined with "; " (a
 * trailing ';' on a line is not doubled). line_at (NULL, or len entries)
 * gets the file's line number of each character of out. 0, or -1 with
 * "PATH: why" in err. */
int kvt_rules_file_read(const char *path, char *out, size_t len, uint32_t *line_at,
			char *err, size_t err_len);

#endif
