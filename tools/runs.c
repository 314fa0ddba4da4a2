// SPDX-License-Identifier: MIT
/* A run's traces (contract in runs.h): `kvtier run` puts every trace of a
 * run into one directory and gives them one run id (KVTIER_RUN_ID, the
 * INFO record kvtier.run after each header); this file finds them again
 * and tells runs apart. Offline tool code: stdio and malloc are fine. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runs.h"
#include "../profiler/trace_read.h"

int kvt_paths_add(struct kvt_paths *p, const char *path)
{
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 16;
		char **v = realloc(p->v, (size_t)cap * sizeof *v);
		if (!v)
			return -1;
		p->v = v;
		p->cap = cap;
	}
	if (!(p->v[p->n] = strdup(path)))
		return -1;
	p->n++;
	return 0;
}

void kvt_paths_free(struct kvt_paths *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	memset(p, 0, sizeof *p);
}

static int is_trace_name(const char *name)
{
	size_t n = strlen(name);
	return name[0] != '.' && ((n > 6 && !strcmp(name + n - 6, ".trace")) ||
				  strstr(name, ".trace."));
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int kvt_run_dir_traces(const char *dir, struct kvt_paths *p, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	int first = p->n, r = 0;
	size_t dl = strlen(dir);
	const char *sep = dl && dir[dl - 1] == '/' ? "" : "/";
	struct dirent *e;
	while (!r && (e = readdir(d))) {
		if (!is_trace_name(e->d_name))
			continue;
		char path[4096];
		struct stat sb;
		if (snprintf(path, sizeof path, "%s%s%s", dir, sep, e->d_name) >= (int)sizeof path)
			continue;
		if (lstat(path, &sb) || !S_ISREG(sb.st_mode))
			continue;
		if (kvt_paths_add(p, path)) {
			snprintf(err, errlen, "%s: out of memory", dir);
			r = -1;
		}
	}
	closedir(d);
	if (r)
		return r;
	if (p->n > first)                     /* p->v is NULL while nothing was added */
		qsort(p->v + first, (size_t)(p->n - first), sizeof *p->v, by_name);
	return p->n - first;
}

/* ./kvtier-<id>.* when exactly one directory matches: its path in out. */
static int run_dir_of_id(const char *id, char *out, size_t len)
{
	if (!*id || strpbrk(id, "/*?[") || strlen(id) > 64)
		return -1;
	char pat[128];
	snprintf(pat, sizeof pat, "kvtier-%s.*", id);
	glob_t g;
	int r = -1;
	if (glob(pat, GLOB_ONLYDIR, NULL, &g) == 0) {
		if (g.gl_pathc == 1 && strlen(g.gl_pathv[0]) < len) {
			strcpy(out, g.gl_pathv[0]);
			r = 0;
		}
		globfree(&g);
	}
	return r;
}

int kvt_run_arg_traces(const char *arg, struct kvt_paths *p, char *err, size_t errlen)
{
	struct stat sb;
	char dir[4096];
	const char *d = NULL;
	int st = stat(arg, &sb) ? -errno : 0;
	if (!st && S_ISDIR(sb.st_mode))
		d = arg;
	else if (st == -ENOENT && !run_dir_of_id(arg, dir, sizeof dir))
		d = dir;
	if (!d) {
		if (kvt_paths_add(p, arg)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	int n = kvt_run_dir_traces(d, p, err, errlen);
	if (n == 0)
		snprintf(err, errlen, "%s: no trace files in this directory (*.trace)", d);
	return n > 0 ? 0 : -1;
}

int kvt_runs_count(char *const *paths, int n, FILE *f, const char *head, char *err,
		   size_t errlen)
{
	struct run { char id[64]; int files; const char *first; } *runs;
	int nr = 0;
	if (!(runs = calloc((size_t)n + 1, sizeof *runs))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char id[64];
		int r = kvt_trace_read_run(paths[i], id, sizeof id, err, errlen);
		if (r < 0) {
			free(runs);
			return -1;
		}
		if (!r)
			continue;                    /* no run named: an older trace */
		int k = 0;
		while (k < nr && strcmp(runs[k].id, id))
			k++;
		if (k == nr) {
			snprintf(runs[nr].id, sizeof runs[nr].id, "%s", id);
			runs[nr++].first = paths[i];
		}
		runs[k].files++;
	}
	if (nr > 1 && f) {
		fprintf(f, "%s", head);
		for (int k = 0; k < nr; k++)
			fprintf(f, "  run %s: %d file%s, e.g. %s\n", runs[k].id, runs[k].files,
				runs[k].files == 1 ? "" : "s", runs[k].first);
	}
	free(runs);
	return nr;
}
