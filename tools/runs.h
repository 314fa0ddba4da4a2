/* SPDX-License-Identifier: MIT */
/* One run, one place (tools/runs.c): the traces of a run's directory, the
 * run a trace belongs to, and the refusal to read traces of different runs
 * together. Used by `kvtier run` (its summary) and `kvtier report`. */
#ifndef KVT_TOOLS_RUNS_H
#define KVT_TOOLS_RUNS_H

#include <stdio.h>

/* A growing list of paths, each malloc'd. */
struct kvt_paths {
	char **v;
	int n, cap;
};

int kvt_paths_add(struct kvt_paths *p, const char *path);
void kvt_paths_free(struct kvt_paths *p);

/* The trace files in dir (names ending in .trace, or with ".trace." in
 * them: an exec'd image's), sorted by name, appended to p. Their count
 * (0: none), or -1 with "dir: why" in err. */
int kvt_run_dir_traces(const char *dir, struct kvt_paths *p, char *err, size_t errlen);

/* A `kvtier report` argument into paths: a directory gives its traces; a
 * run id that names no file gives the traces of ./kvtier-<id>.* (the
 * directory `kvtier run` made); anything else is a trace file. 0, or -1
 * with the reason in err. */
int kvt_run_arg_traces(const char *arg, struct kvt_paths *p, char *err, size_t errlen);

/* The runs of paths (their kvtier.run records; traces without one are of
 * no known run). How many distinct runs; with more than one, one line per
 * run (its id, file count and first file) to f, under head, when f is not
 * NULL. -1 with "path: why" in err when a trace cannot be read. */
int kvt_runs_count(char *const *paths, int n, FILE *f, const char *head, char *err,
		   size_t errlen);

#endif
