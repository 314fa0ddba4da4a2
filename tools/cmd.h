/* SPDX-License-Identifier: MIT */
/* Subcommands of the kvtier tool. Each returns the process exit status:
 * 0 success, 1 failure, 2 usage error (or the child's status for run). */
#ifndef KVT_TOOLS_CMD_H
#define KVT_TOOLS_CMD_H

int kvt_cmd_run(int argc, char **argv);
int kvt_cmd_report(int argc, char **argv);
int kvt_cmd_dump(int argc, char **argv);
int kvt_cmd_policy(int argc, char **argv);
int kvt_cmd_replay(int argc, char **argv);
int kvt_cmd_topo(int argc, char **argv);
int kvt_cmd_suggest(int argc, char **argv);
int kvt_cmd_stat(int argc, char **argv);

#endif
